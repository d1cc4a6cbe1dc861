"""What the context rule's check costs a save: a held `Context` against a plain list.

python -m bench.context_check [--points 50,800] [--probes 30]

One session grows by the agent-loop workload's turns (four items of about 3 KB); at each
length, saves of one more turn are timed side by side: with the `Context` that `load` handed
out (the store knows it matches: no comparison), and with the same items as a plain list
(compared by value with the stored context before the save appends).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import turnstore
from bench.workload import make_turn
from turnstore import Checkpoint

SEED = 20_240_601


def main(argv: Sequence[str] | None = None) -> int:
    """Print the median save time of each way at each length, and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.context_check", description=__doc__)
    parser.add_argument("--points", default="50,800")
    parser.add_argument("--probes", type=int, default=30)
    args = parser.parse_args(argv)
    points = sorted({int(part) for part in args.points.split(",") if part.strip()})
    with (
        tempfile.TemporaryDirectory() as scratch,
        turnstore.open_blocking(str(Path(scratch) / "check.sqlite3")) as store,
    ):
        session, turn = "check", 0
        checkpoint = Checkpoint.empty(session)
        print(f"{'turns':>6} {'Context ms':>11} {'plain list ms':>14} {'ratio':>6}")
        for point in points:
            while turn < point:
                checkpoint.context.extend(make_turn(SEED, session, turn).items)
                checkpoint.sequence += 1
                store.save(checkpoint)
                turn += 1
            held, plain = [], []
            for probe in range(args.probes):
                items = make_turn(SEED, session, point + probe).items
                for kind, times in (("held", held), ("plain", plain)):
                    loaded = store.load(session)
                    assert loaded is not None
                    if kind == "plain":
                        loaded.context = list(loaded.context)
                    loaded.context.extend(items)
                    loaded.sequence += 1
                    started = time.perf_counter()
                    store.save(loaded)
                    times.append(time.perf_counter() - started)
                    # Back to the point's length for the next save.
                    store.pop_context(session, len(items))
            checkpoint = store.load(session) or checkpoint
            ms_held, ms_plain = statistics.median(held) * 1e3, statistics.median(plain) * 1e3
            print(f"{point:>6} {ms_held:>11.2f} {ms_plain:>14.2f} {ms_plain / ms_held:>6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
