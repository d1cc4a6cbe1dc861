"""`python -m bench.memory --smoke` runs every side it names, so the memory benchmark cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.peers


@pytest.mark.timeout(300)
def test_the_memory_benchmark_runs(tmp_path: Path) -> None:
    """Every measurement gives a number for every side that can run it, and a verdict per
    target it can judge."""
    out = tmp_path / "memory.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory", "--smoke", "--no-postgres", "--json", str(out)],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert set(doc["mix"]["sides"]) == {
        "memory",
        "sqlite",
        "turnstore",
        "turnstore-words",
        "ceiling-sqlite",
    }, doc["mix"]
    assert all(row["ops_per_s"] > 0 for row in doc["mix"]["sides"].values())
    for name, row in doc["mix"]["sides"].items():
        drawn = [kind for kind, count in doc["mix"]["counts"].items() if count]
        assert all(row["median_us"][kind] > 0 for kind in drawn), name
    assert set(doc["mix"]["api_floor_us"]) == {"get", "search", "list"}
    assert all(us > 0 for us in doc["mix"]["api_floor_us"].values())
    (ceiling,) = doc["ceilings"]
    assert (ceiling["peer"], ceiling["ceiling"], ceiling["target"]) == (
        "sqlite",
        "ceiling-sqlite",
        1.5,
    )
    assert ceiling["ratio"] > 0
    assert ceiling["with_floor_ratio"] > 0
    for name, row in doc["scale"]["sides"].items():
        assert row["small_ms"] > 0, name
        assert row["large_ms"] > 0, name
    assert doc["scale"]["sides"]["turnstore"]["settled"] is True
    assert doc["scale"]["sides"]["sqlite"]["settled"] is True
    assert doc["scale"]["sides"]["turnstore"]["size_vs_payload"] > 0
    for size in doc["vectors"]["sizes"].values():
        assert size["ceiling_ms"] > 0
        assert size["sides"]["turnstore"]["query_ms"] > 0
        assert size["sides"]["memory"]["query_ms"] > 0
    judged = [target for target in doc["targets"] if target["passed"] is not None]
    assert {target["target"] for target in judged} >= {
        "mix ops/s: turnstore / sqlite",
        "mix ops/s: turnstore-words / sqlite",
        "store / payload: turnstore",
    }
    assert "TurnstoreStore (SQLite)" in done.stdout
    assert "ceiling: plain SQL (SQLite)" in done.stdout
    assert "API floor (BaseStore API" in done.stdout
