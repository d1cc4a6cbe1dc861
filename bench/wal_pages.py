"""Which b-trees a SQLite save writes: the WAL frames of a few saves, counted by table or index.

Grows 20 sessions by `--turns` turns of the agent-loop workload (as `bench/profile_save.py`
does), checkpoints the WAL, then saves one more turn of `--saves` sessions and maps every
page those commits appended to the WAL to the b-tree that owns it (SQLite's `dbstat`).
Each page is 4 kB in the WAL and again in the file when the WAL is checkpointed, so a page
less per save is about 8 kB less written per turn.

    python -m bench.wal_pages [--events]
"""

from __future__ import annotations

import argparse
import sqlite3
import struct
import tempfile
from collections import Counter
from pathlib import Path

import turnstore
from bench.profile_save import save_turn
from turnstore import Checkpoint

WAL_HEADER = 32
FRAME_HEADER = 24


def _frames(wal: Path) -> list[int]:
    """The page number of every frame in a WAL file."""
    data = wal.read_bytes()
    (page_size,) = struct.unpack(">I", data[8:12])
    return [
        struct.unpack(">I", data[offset : offset + 4])[0]
        for offset in range(WAL_HEADER, len(data) - FRAME_HEADER + 1, FRAME_HEADER + page_size)
    ]


def main(events: bool, turns: int, saves: int) -> None:
    """Print the pages per save that each b-tree contributed to the WAL."""
    path = Path(tempfile.mkdtemp(prefix="turnstore-wal-")) / "wal.sqlite3"
    with turnstore.open_blocking(str(path)) as store:
        checkpoints = [Checkpoint.empty(f"s{index}") for index in range(20)]
        for index in range(turns):
            for checkpoint in checkpoints:
                save_turn(store, checkpoint, index, events)
        inspector = sqlite3.connect(path)
        inspector.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        for checkpoint in checkpoints[:saves]:
            save_turn(store, checkpoint, turns, events)
        owners = dict(inspector.execute("SELECT pageno, name FROM dbstat"))
        counts = Counter(owners.get(page, "(new page)") for page in _frames(Path(f"{path}-wal")))
        inspector.close()
    total = sum(counts.values())
    kind = "saves with events" if events else "plain saves"
    print(f"{total / saves:.1f} pages per save over {saves} {kind} after {turns} turns")
    for name, count in counts.most_common():
        print(f"  {count / saves:5.1f}  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", action="store_true", help="journal each turn's events too")
    parser.add_argument("--turns", type=int, default=30, help="turns before the counted saves")
    parser.add_argument("--saves", type=int, default=10, help="saves counted (one per session)")
    args = parser.parse_args()
    main(args.events, args.turns, args.saves)
