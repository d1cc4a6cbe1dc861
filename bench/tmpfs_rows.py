"""The tmpfs rows: each peer alone, in a process of its own, with its files on /dev/shm.

On tmpfs an fsync costs nothing, so what a row measures is CPU. The disk rows run every peer
interleaved turn by turn in one process, so that the disk's drifting speed is shared out
fairly; on tmpfs there is no such drift to share, and one process per peer keeps each row
clear of the other peers' objects, threads and caches (the LangGraph peers alone cost the
async rows 110-250 µs a save when they shared the process: docs/performance.md). Each peer
runs `ROUNDS` times, the peers in rotated order, and its row is the round with the median
turns per second. A child runs the same phases on its one peer as the shared process runs on
all of them: `phases.throughput`, then `phases.reads`.

    python -m bench.tmpfs_rows NAME [NAME...]   one round of these peers on /dev/shm, µs a save
    python -m bench.tmpfs_rows NAME DIRECTORY SEED SESSIONS TURNS OUT.json PAYLOAD  (a child)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import phases, report
from bench.peers import close_all
from bench.specs import TMPFS, PeerSpec, Places, open_peer, peer_specs
from bench.workload import SEED

ROUNDS = 3
"""Runs of every tmpfs peer; the median one is reported."""


def tmpfs_rows(
    specs: Sequence[PeerSpec],
    shm: Path,
    workload: tuple[int, int, int],
    payload: dict[str, Any],
    rounds: int = ROUNDS,
) -> dict[str, dict[str, Any]]:
    """Every tmpfs peer's throughput row (`<peer>@tmpfs`), each from its median round.

    `workload` is the disk rows' (seed, sessions, turns): the tmpfs rows write the same bytes.
    """
    chosen = [spec.name for spec in specs if spec.tmpfs]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
    for round_ in range(rounds):
        for name in phases.rotated(chosen, round_):
            runs[name].append(_child(name, shm, workload, payload))
    return {f"{name}{TMPFS}": _median_run(rows) for name, rows in runs.items()}


def _median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(rows, key=lambda row: float(row["turns_per_s"]))
    chosen = dict(ordered[len(ordered) // 2])
    chosen["rounds_turns_per_s"] = [row["turns_per_s"] for row in rows]
    return chosen


def _child(
    name: str, shm: Path, workload: tuple[int, int, int], payload: dict[str, Any]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="turnstore-bench-cpu-", dir=shm) as scratch:
        out = Path(scratch) / "row.json"
        directory = Path(scratch) / "stores"
        directory.mkdir()
        command = [
            sys.executable,
            "-m",
            "bench.tmpfs_rows",
            name,
            str(directory),
            *map(str, workload),
            str(out),
            json.dumps(payload),
        ]
        subprocess.run(command, cwd=Path(__file__).parent.parent, check=True)
        row: dict[str, Any] = json.loads(out.read_text())
        return row


async def _run_one(
    name: str, directory: Path, workload: tuple[int, int, int], payload: dict[str, Any]
) -> dict[str, Any]:
    """The child's work: one peer, its throughput and reads, its row as the report has it."""
    seed, sessions, turns = workload
    spec = next(spec for spec in peer_specs() if spec.name == name)
    peer = await open_peer(spec, Places(directory, None), "cpu", suffix=TMPFS)
    try:
        series = await phases.throughput([peer], seed, sessions, turns)
        loads, pages = await phases.reads([peer], sessions, turns)
    finally:
        await close_all([peer])
    row = report.throughput_row(
        peer, series[peer.name], loads[peer.name], pages[peer.name], payload
    )
    row["label"], row["note"] = peer.label, peer.note
    return row


SHOW_WORKLOAD = (SEED, 20, 50)
"""What `python -m bench.tmpfs_rows NAME...` runs: the benchmark's seed and default sizes."""


def main(argv: Sequence[str]) -> int:
    """Run one child (`NAME DIRECTORY SEED SESSIONS TURNS OUT PAYLOAD_JSON`) or show peers."""
    if len(argv) != 7:
        for name in argv:
            row = _child(name, Path("/dev/shm"), SHOW_WORKLOAD, {"raw_bytes": 1})
            print(f"{name}@tmpfs: {1e6 / row['turns_per_s']:.0f} µs a save")
        return 0
    name, directory, seed, sessions, turns, out, payload = argv
    workload = (int(seed), int(sessions), int(turns))
    row = asyncio.run(_run_one(name, Path(directory), workload, json.loads(payload)))
    Path(out).write_text(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
