"""`python -m bench.move --smoke` runs end to end: the machinery, not the numbers (a full
run's figures are in docs/performance.md)."""

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

STEPS = {"get_tuple", "list", "copy_in", "list_turnstore", "verify", "accept", "copy_out"}


def test_the_move_bench_prints_its_table_and_writes_its_json(tmp_path: Path) -> None:
    """Every step moves every checkpoint of the source, each target is judged, and the
    scratch directory is removed."""
    if importlib.util.find_spec("langgraph.checkpoint.sqlite") is None:
        pytest.skip("langgraph-checkpoint-sqlite is not installed (pip install -e '.[bench]')")
    require_postgres()
    out = tmp_path / "move.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.move",
            "--smoke",
            "--postgres",
            POSTGRES_URL,
            "--json",
            str(out),
            "--dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    assert found["config"]["smoke"] is True
    assert set(found["parts"]) == {"sqlite", "postgres"}
    for part in found["parts"].values():
        assert set(part["steps"]) == STEPS
        counts = {step["checkpoints"] for step in part["steps"].values()}
        assert len(counts) == 1, part["steps"]
        assert counts.pop() > 0
        for step in part["steps"].values():
            assert step["seconds"] > 0
            assert step["peak_rss"] > 0
        assert part["bytes"]["source"] > 0
        assert part["bytes"]["turnstore"] > 0
        assert set(part["ratios"]) == {"copy", "rss_mb", "bytes", "verify", "export"}
        for mark in part["ratios"].values():
            assert mark["measured"] > 0
            assert isinstance(mark["passed"], bool)
    assert found["parts"]["postgres"]["ratios"]["bytes"]["target"] == 0.2
    assert "copy SqliteSaver -> turnstore" in result.stdout
    assert "copy turnstore -> PostgresSaver" in result.stdout
    assert not list(tmp_path.glob("bench-move-*")), "the scratch dir was left behind"
