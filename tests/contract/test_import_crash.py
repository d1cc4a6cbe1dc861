"""Crash safety of imports: a process killed at any instant of an import leaves every tree of
the file either wholly present (exactly as exported) or wholly absent, and a second import
of the same file completes the store."""

from __future__ import annotations

import io
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint

TREES = 150
IMPORTER = (
    "import sys, turnstore\n"
    "with turnstore.open_blocking(sys.argv[1]) as store, open(sys.argv[2], 'rb') as source:\n"
    "    store.upkeep.import_trees(source)\n"
)


def build_export(path: Path, out: Path) -> dict[str, bytes]:
    """An export of TREES sessions (each with a fork) and each tree's own export, by root."""
    with turnstore.open_blocking(path) as store:
        for number in range(TREES):
            checkpoint = Checkpoint.empty(f"tree-{number:02}")
            for _ in range(10):
                item = {"role": "user", "content": f"{number} " + "x" * 2_000}
                checkpoint.context += [item]
                checkpoint.sequence += 1
                store.save(checkpoint, transcript_delta=[item])
            store.fork(checkpoint.session_id, 10, Checkpoint.empty(f"tree-{number:02}-fork"))
        with out.open("wb") as file:
            store.upkeep.export_trees(file)
        return {root: tree_bytes(store, root) for root in roots()}


def roots() -> list[str]:
    """The root ids of the file."""
    return [f"tree-{number:02}" for number in range(TREES)]


def tree_bytes(store: Any, root: str) -> bytes:
    """The export of one tree."""
    out = io.BytesIO()
    store.upkeep.export_trees(out, session_ids=[root])
    return out.getvalue()


@pytest.mark.parametrize("seed", range(6))
def test_a_killed_import_leaves_whole_trees_only(tmp_path: Path, seed: int) -> None:
    """SIGKILL at a random instant: each tree is absent or byte-identical to its export."""
    export = tmp_path / "export.jsonl"
    expected = build_export(tmp_path / "source.sqlite3", export)
    target = tmp_path / "target.sqlite3"
    turnstore.open_blocking(target).close()
    child = subprocess.Popen([sys.executable, "-c", IMPORTER, str(target), str(export)])
    time.sleep(random.Random(seed).uniform(0.3, 1.1))
    child.send_signal(signal.SIGKILL)
    child.wait()
    with turnstore.open_blocking(target) as store:
        present = [root for root in roots() if store.session_summary(root) is not None]
        print(f"killed with {len(present)} of {TREES} trees imported")
        for root in roots():
            if root in present:
                assert tree_bytes(store, root) == expected[root], root
            else:
                assert store.session_summary(f"{root}-fork") is None
        with export.open("rb") as source:
            report = store.upkeep.import_trees(source)
        assert sorted(report.skipped_session_ids) == sorted(
            i for root in present for i in (root, f"{root}-fork")
        )
        assert all(tree_bytes(store, root) == expected[root] for root in roots())
