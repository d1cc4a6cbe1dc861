"""How much of the turnstore phases' peak RSS growth is the agent loop's own memory.

    python -m bench.rss_floor [--sessions 20] [--turns 50] [--scaling 50,200,800]

The benchmark's agent loop holds every session's checkpoint, its context growing with each
turn, as an agent does: a store that kept nothing at all would still see that memory in its
process's peak RSS. This runs the benchmark's phases (`phases.throughput`, `phases.reads`,
`phases.scaling`) twice, each in a fresh process: once on turnstore's two SQLite peers
(`turnstore`, `turnstore+events`, files on tmpfs), once on two peers that build and hold the
same checkpoints and events and store nothing. It prints each one's peak RSS growth over the
process's RSS after imports and setup, and the difference: what the store itself added.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench import phases
from bench.measure import NoBytes, max_rss_bytes
from bench.peers import TurnstorePeer, close_all
from bench.specs import SHM
from bench.turn_events import TurnEvents
from bench.workload import SEED, Turn

KINDS = ("turnstore", "held")
"""The two children: turnstore's SQLite peers, and peers that hold the loop's state only."""


class HeldPeer(TurnstorePeer):
    """The agent loop of a turnstore peer without the store: checkpoints built and held."""

    async def setup(self) -> None:
        return None

    async def save_turn(self, session: str, turn: Turn) -> None:
        checkpoint = self.next_checkpoint(session, turn)
        if self.events:
            TurnEvents(checkpoint, turn).build()

    async def load_latest(self, session: str) -> int | None:
        return len(self._checkpoints[session].context)

    async def catalog_page(self) -> int | None:
        return len(self._checkpoints)

    def size(self) -> int:
        return 0

    async def close(self) -> None:
        return None


async def _phases(kind: str, directory: Path, args: argparse.Namespace) -> dict[str, int]:
    peer_type = HeldPeer if kind == "held" else TurnstorePeer
    peers = [
        peer_type(f"sqlite:///{directory / f'{kind}-{events}.sqlite3'}", events=events)
        for events in (False, True)
    ]
    for peer in peers:
        await peer.setup()
        peer.meter = NoBytes()
    start = max_rss_bytes()
    try:
        await phases.throughput(peers, SEED, args.sessions, args.turns)
        await phases.reads(peers, args.sessions, args.turns)
        await phases.scaling(peers, SEED, args.scaling, phases.SCALING_PROBES)
    finally:
        await close_all(peers)
    return {"start_bytes": start, "growth_bytes": max_rss_bytes() - start}


def _run_child(kind: str, args: argparse.Namespace) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="turnstore-rss-", dir=SHM) as scratch:
        out = Path(scratch) / "out.json"
        command = [sys.executable, "-m", "bench.rss_floor", "--child", kind, "--out", str(out)]
        command += ["--sessions", str(args.sessions), "--turns", str(args.turns)]
        command += ["--scaling", ",".join(map(str, args.scaling)), "--dir", scratch]
        subprocess.run(command, cwd=Path(__file__).parent.parent, check=True)
        found: dict[str, int] = json.loads(out.read_text())
        return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run both children (or, with --child, be one) and print their peak RSS growth."""
    parser = argparse.ArgumentParser(prog="python -m bench.rss_floor")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument(
        "--scaling", type=lambda text: [int(n) for n in text.split(",")], default=[50, 200, 800]
    )
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        found = asyncio.run(_phases(args.child, args.dir, args))
        args.out.write_text(json.dumps(found))
        return 0
    growth = {kind: _run_child(kind, args)["growth_bytes"] / 1e6 for kind in KINDS}
    print(f"peak RSS growth, turnstore's two SQLite peers: {growth['turnstore']:.1f} MB")
    print(f"peak RSS growth, the same loop holding its state only: {growth['held']:.1f} MB")
    print(f"added by the store: {growth['turnstore'] - growth['held']:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
