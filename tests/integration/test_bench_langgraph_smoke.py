"""`python -m bench.langgraph_saver --smoke` runs end to end: the machinery, not the numbers
(a full run's figures are in docs/performance.md)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import POSTGRES_URL, require_postgres

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.peers

SAVERS = {"memory", "sqlite", "sqlite-delta", "lean", "postgres", "turnstore", "turnstore-pg"}


def test_every_saver_runs_both_workloads_and_every_target_is_judged(tmp_path: Path) -> None:
    if importlib.util.find_spec("langgraph.checkpoint.sqlite") is None:
        pytest.skip("langgraph-checkpoint-sqlite is not installed (pip install -e '.[bench]')")
    require_postgres()
    out = tmp_path / "langgraph.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.langgraph_saver", "--smoke", "--quiet",
         "--postgres-url", POSTGRES_URL, "--json", str(out), "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    assert set(found["savers"]) == SAVERS
    assert set(found["round_robin"]["savers"]) == SAVERS
    assert set(found["open"]) == {"sqlite", "postgres", "turnstore", "turnstore-pg"}
    for name in ("turnstore", "turnstore-pg", "memory"):
        loads = found["savers"][name]["load_ms"]
        assert set(loads) == {"3", "6"}
        assert all(value > 0 for value in loads.values())
    lean = found["savers"]["lean"]
    assert lean["messages"] == 4 * lean["size_turns"], "the ceiling saver keeps every message"
    judged = [target for target in found["targets"] if target["passed"] is not None]
    assert len(judged) == len(found["targets"]) == 17, found["targets"]
    assert "lean saver (ceiling, SQLite)" in result.stdout
