"""`python -m bench.move_sessions --smoke` runs end to end: the machinery, not the numbers (a
full run's figures are in docs/performance.md)."""

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

PARTS = {"agents", "adk_sqlite", "adk_postgres", "adk_reads"}
STEPS = {"read", "copy_in", "read_turnstore", "verify"}


def test_the_sessions_move_bench_prints_its_table_and_writes_its_json(tmp_path: Path) -> None:
    """Every step of each move reads or moves every item (event) of its source, each target is
    judged, ADK's reads are timed on both services, and the scratch directory is removed."""
    for module in ("agents", "google.adk", "aiosqlite"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[bench]')")
    require_postgres()
    out = tmp_path / "move_sessions.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.move_sessions",
            "--smoke",
            "--quiet",
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
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    config = found["config"]
    assert config["smoke"] is True
    assert set(found["parts"]) == PARTS
    for name in PARTS - {"adk_reads"}:
        part = found["parts"][name]
        assert set(part["steps"]) == STEPS
        per_session = config["items"] if name == "agents" else config["events"]
        for step in part["steps"].values():
            assert step["count"] == config["sessions"] * per_session, (name, part["steps"])
            assert step["seconds"] > 0
            assert step["peak_rss"] > 0
        assert set(part["ratios"]) == {"copy", "rss_mb", "verify"}
        for mark in part["ratios"].values():
            assert mark["measured"] > 0
            assert isinstance(mark["passed"], bool)
    reads = found["parts"]["adk_reads"]
    assert reads["copy_in"]["count"] == config["long_events"] + 4 * config["listed"]
    assert reads["reads"]["get_session"]["size"] == config["long_events"]
    assert 0 < reads["reads"]["get_session"]["built"] < reads["reads"]["get_session"]["theirs"]
    assert reads["ratios"]["get_session"]["ceiling"] > 0
    assert reads["reads"]["list_user"]["size"] == config["listed"]
    assert reads["reads"]["list_app"]["size"] == config["listed"]
    for mark in reads["ratios"].values():
        assert mark["measured"] > 0
        assert mark["target"] == 5.0
    assert "SQLiteSession.get_items (ceiling)" in result.stdout
    assert "DatabaseSessionService (PostgreSQL) -> turnstore PostgreSQL" in result.stdout
    assert "list_sessions(app, user)" in result.stdout
    assert "its Event objects built alone (a ceiling)" in result.stdout
    assert not list(tmp_path.glob("bench-move-sessions-*")), "the scratch dir was left behind"
