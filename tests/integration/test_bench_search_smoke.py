"""`python -m bench.search --smoke` runs end to end on both backends: the machinery, not the
numbers (those are in docs/performance.md, from a full run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import require_postgres

ROOT = Path(__file__).resolve().parents[2]


def test_the_search_bench_prints_every_row_and_writes_its_json(tmp_path: Path) -> None:
    """Save rows with a measured lag, both sizes per backend, and the three ratio lines."""
    require_postgres()
    out = tmp_path / "search.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.search", "--smoke", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    places = [row["place"] for row in found["saves"]]
    assert places == ["sqlite (tmpfs)", "sqlite (disk)", "postgres (server)"]
    for row in found["saves"]:
        assert row["us_per_save_off"] > 0
        assert row["us_per_save_on"] > 0
        assert row["lag_samples"] >= 1
        assert row["lag_ms_max"] < 30_000
    sizes = [(row["backend"], row["sessions"]) for row in found["scale"]]
    assert sizes == [("sqlite", 20), ("sqlite", 40), ("postgres", 20), ("postgres", 40)]
    for row in found["scale"]:
        assert row["newest_ms"] > 0
        assert row["bare_ms"] > 0
        assert row["index_bytes"] > 0
        assert row["bare_bytes"] > 0
    assert result.stdout.count("first page at 40 / at 20 sessions") == 2
