"""`python -m bench.reading --smoke` runs end to end on both backends: the machinery, not the
numbers (a full run's figures are the benchmark's to report)."""

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


def test_the_reading_bench_prints_its_table_and_writes_its_json(tmp_path: Path) -> None:
    """Both reads at both sizes per store (PostgreSQL's twice: as written and analyzed),
    positive medians and ratios, one verdict each."""
    if importlib.util.find_spec("langgraph") is None:
        pytest.skip("langgraph is not installed (pip install -e '.[bench]')")
    require_postgres()
    out = tmp_path / "reading.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.reading",
            "--smoke",
            "--json",
            str(out),
            "--dir",
            str(tmp_path),
            "--postgres-url",
            POSTGRES_URL,
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
    assert found["skipped"] == {}
    small, large = found["config"]["small"], found["config"]["large"]
    places = [row["place"] for row in found["rows"]]
    assert places == ["sqlite (disk)", "postgres (not analyzed)", "postgres (analyzed)"]
    for row in found["rows"]:
        assert set(row["reads"]) == {"conversation", "get_state"}
        for read in row["reads"].values():
            assert read["small"]["turns"] == small
            assert read["large"]["turns"] == large
            assert read["large"]["messages"] == 4 * large
            for size in ("small", "large"):
                assert isinstance(read[size]["median_ms"], float)
                assert read[size]["median_ms"] > 0
            assert isinstance(read["ratio"], float)
            assert read["ratio"] > 0
        assert row["target"]["measured"] == row["reads"]["conversation"]["ratio"]
        assert isinstance(row["target"]["passed"], bool)
        assert row["write_seconds"]["small"] > 0
        assert row["write_seconds"]["large"] > 0
    assert result.stdout.count("store.conversation(limit=") == 3
    assert result.stdout.count("<= 1.3: ") == 3
    assert not list(tmp_path.glob("bench-reading-*")), "the SQLite scratch dir was left behind"
