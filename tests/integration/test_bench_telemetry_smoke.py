"""`python -m bench.telemetry --smoke` runs end to end on both backends and faces: the
machinery, not the numbers (those are in docs/monitoring.md, from a full run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import POSTGRES_URL, require_postgres

ROOT = Path(__file__).resolve().parents[2]


def test_the_telemetry_bench_prints_every_row_and_writes_its_json(tmp_path: Path) -> None:
    """Four modes per backend and face, positive times, ratios against the off row, the SDK
    rows' spans exported (all saves, or some at 1%) and none from the others."""
    require_postgres()
    out = tmp_path / "telemetry.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.telemetry",
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
    saves = found["config"]["saves"] * found["config"]["rounds"]
    places = [(row["backend"], row["face"]) for row in found["rows"]]
    assert places == [
        ("sqlite", "blocking"),
        ("sqlite", "async"),
        ("postgres", "blocking"),
        ("postgres", "async"),
    ]
    for row in found["rows"]:
        assert set(row["ms_per_save"]) == {"off", "default", "sdk", "sampled"}
        assert all(ms > 0 for ms in row["ms_per_save"].values())
        assert set(row["ratios"]) == {"default", "sdk", "sampled"}
        assert set(row["targets"]) == {"default", "sdk"}
        assert all(isinstance(t["passed"], bool) for t in row["targets"].values())
        assert row["spans"]["sdk"] == saves
        assert row["spans"]["off"] == row["spans"]["default"] == 0
        assert row["spans"]["sampled"] < saves
    assert result.stdout.count("default/off ") == 4
    assert not list(tmp_path.glob("bench-telemetry-*")), "the SQLite scratch dir was left behind"
