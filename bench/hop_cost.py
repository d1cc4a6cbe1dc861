"""What a save costs on each face, timed per save in one process, the rows interleaved.

    python -m bench.hop_cost [--dir /dev/shm] [--sessions 20] [--turns 50] [--gc on|off]
        [--ballast 0] [--events] [--idle-ms 0]

Rows: `turnstore` (async), `turnstore-blocking`, `same-work` and `same-work-async` (the same
SQL through `asyncio.to_thread`), the benchmark's own adapters on the benchmark's workload,
every turn saved by every row before the next, in rotating order. For each row it prints the
wall time of a save (median and mean), the process's CPU time per save (every thread; nothing
else runs meanwhile), the event loop thread's share of it, and the garbage collector's time
spent inside that row's saves. `--ballast N` keeps N small containers alive beside the stores,
as the benchmark's one process keeps every peer's objects; `--gc off` disables the collector;
`--idle-ms` sleeps before each save, as the benchmark's process waits on a disk row's fsync.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers import Peer, TurnstoreBlockingPeer, TurnstorePeer
from bench.phases import rotated
from bench.same_work import SameWorkPeer
from bench.workload import Turn, make_turn, session_id

SEED = 7


@dataclass
class Row:
    """One row's per-save figures, in seconds."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    loop_cpu: list[float] = field(default_factory=list)
    gc_s: float = 0.0
    collections: int = 0


class GcClock:
    """Time the collector spends, charged to whichever row is saving."""

    def __init__(self) -> None:
        self.row: Row | None = None
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.row is not None:
            self.row.gc_s += time.perf_counter() - self._started
            self.row.collections += 1 if info["generation"] == 2 else 0


def build_peers(directory: Path, events: bool) -> list[Peer]:
    """The four rows, each on its own file in `directory`."""
    suffix = "e" if events else ""
    return [
        TurnstorePeer(f"sqlite:///{directory / f'ts{suffix}.db'}", events=events),
        TurnstoreBlockingPeer(f"sqlite:///{directory / f'tsb{suffix}.db'}", events=events),
        SameWorkPeer(directory / f"same{suffix}.db", events=events),
        SameWorkPeer(directory / f"same-async{suffix}.db", events=events, hop=True),
    ]


async def timed_save(
    peer: Peer, session: str, turn: Turn, row: Row, clock: GcClock, idle_s: float = 0.0
) -> None:
    """Save one turn, recording its wall, process CPU and loop-thread CPU time."""
    if idle_s:
        # Blocking on purpose: the whole process idles, as it does in a disk row's fsync.
        time.sleep(idle_s)  # noqa: ASYNC251
    clock.row = row
    wall, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    await peer.save_turn(session, turn)
    row.loop_cpu.append(time.thread_time() - loop_cpu)
    row.cpu.append(time.process_time() - cpu)
    row.wall.append(time.perf_counter() - wall)
    clock.row = None


async def run(args: argparse.Namespace) -> dict[str, Row]:
    """Open the rows, save every turn on each, interleaved, and close them."""
    ballast = [[index] for index in range(args.ballast)]
    turns = {
        (number, index): make_turn(SEED, session_id(number), index)
        for index in range(args.turns)
        for number in range(args.sessions)
    }
    clock = GcClock()
    gc.callbacks.append(clock)
    if args.gc == "off":
        gc.disable()
    with tempfile.TemporaryDirectory(prefix="turnstore-hop-", dir=args.dir) as scratch:
        peers = build_peers(Path(scratch), args.events)
        for peer in peers:
            await peer.setup()
        rows = {peer.name: Row() for peer in peers}
        try:
            for (number, index), turn in turns.items():
                for peer in rotated(peers, index * args.sessions + number):
                    await timed_save(
                        peer, session_id(number), turn, rows[peer.name], clock, args.idle_ms / 1e3
                    )
        finally:
            for peer in peers:
                await peer.close()
    gc.callbacks.remove(clock)
    gc.enable()
    del ballast
    return rows


def report(rows: dict[str, Row]) -> str:
    """One line per row, in microseconds per save."""
    lines = [
        f"{'row':<28}{'wall p50':>10}{'wall mean':>11}{'cpu mean':>10}"
        f"{'loop cpu':>10}{'gc/save':>9}{'full gc':>9}"
    ]
    for name, row in rows.items():
        count = len(row.wall)
        lines.append(
            f"{name:<28}{_us(statistics.median(row.wall)):>10}{_us(statistics.fmean(row.wall)):>11}"
            f"{_us(statistics.fmean(row.cpu)):>10}{_us(statistics.fmean(row.loop_cpu)):>10}"
            f"{_us(row.gc_s / count):>9}{row.collections:>9}"
        )
    return "\n".join(lines)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def main() -> None:
    """Parse the arguments, run, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/dev/shm", help="where the files go")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--gc", choices=("on", "off"), default="on")
    parser.add_argument("--ballast", type=int, default=0, help="small containers kept alive")
    parser.add_argument("--events", action="store_true", help="journal each turn's events")
    parser.add_argument(
        "--idle-ms", type=float, default=0.0, help="sleep this long before each save (untimed)"
    )
    args = parser.parse_args()
    print(report(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
