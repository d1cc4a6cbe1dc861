"""A sequential save loop to profile with py-spy (`--threads --idle`, `-m bench.profile_save`).

20 sessions x 150 turns of the agent-loop workload (four items of ~3 KB per turn plus ~500 B
of loop state), saved one at a time on the blocking store, into a fresh temporary file or,
with `--url`, a scratch PostgreSQL database dropped at the end. `--events` journals each
turn's events and execution record in the same save, as the benchmark's `turnstore+events`
rows do.

    py-spy record --threads --idle -o save.svg -- python -m bench.profile_save --events
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import turnstore
from bench.postgres import ScratchDatabase
from bench.turn_events import TurnEvents
from bench.workload import make_turn
from turnstore import BlockingStore, Checkpoint


def main(
    url: str | None, events: bool, sessions: int = 20, turns: int = 150, where: str | None = None
) -> None:
    """Save `sessions` x `turns` growing checkpoints one after another."""
    if url is None:
        path = Path(tempfile.mkdtemp(prefix="turnstore-profile-", dir=where)) / "profile.sqlite3"
        _run(str(path), events, sessions, turns)
        return
    database = ScratchDatabase(url)
    try:
        _run(database.turnstore_url(database.schema("profile")), events, sessions, turns)
    finally:
        database.drop()


def save_turn(store: BlockingStore, checkpoint: Checkpoint, index: int, events: bool) -> None:
    """Grow `checkpoint` by turn `index` of the workload and save it (with its events)."""
    turn = make_turn(1, checkpoint.session_id, index)
    checkpoint.sequence += 1
    checkpoint.context.extend(turn.items)
    checkpoint.metadata["loop"] = turn.state
    if events:
        journal, execution = TurnEvents(checkpoint, turn).build()
        store.save_with_events(checkpoint, turn.items, execution, journal)
    else:
        store.save(checkpoint, turn.items)


def _run(url: str, events: bool, sessions: int, turns: int) -> None:
    with turnstore.open_blocking(url) as store:
        checkpoints = [Checkpoint.empty(f"s{index}") for index in range(sessions)]
        started = time.perf_counter()
        for index in range(turns):
            for checkpoint in checkpoints:
                save_turn(store, checkpoint, index, events)
        seconds = time.perf_counter() - started
    print(f"{sessions * turns / seconds:,.0f} saves/s ({url.split('?')[0]})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL URL (default: a temporary SQLite file)")
    parser.add_argument("--events", action="store_true", help="journal each turn's events too")
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--dir", help="where the SQLite file goes (/dev/shm: CPU only)")
    args = parser.parse_args()
    main(args.url, args.events, turns=args.turns, where=args.dir)
