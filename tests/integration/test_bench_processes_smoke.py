"""`python -m bench.processes --smoke` runs end to end: the machinery, not the numbers (a full
run's figures are in docs/scaling.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import POSTGRES_URL, require_postgres

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import pgbouncer, processes  # noqa: E402

SESSIONS = 2
"""Sessions per worker process in the smoke run."""


def test_the_processes_bench_runs_every_row_and_writes_its_json(tmp_path: Path) -> None:
    """Every row at 1 and 2 processes, each process saving its sessions before the barrier,
    a summary per process count, and both targets judged or marked n/a."""
    require_postgres()
    out = tmp_path / "processes.json"
    command = [sys.executable, "-m", "bench.processes", "--smoke", "--json", str(out)]
    command += ["--sessions", str(SESSIONS), "--postgres-url", POSTGRES_URL]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    pooled = pgbouncer.binary() is not None and processes.pooler_supported()
    assert (found["config"]["pgbouncer"] == "ran") is pooled
    vias = ["direct", "pgbouncer"] if pooled else ["direct"]
    expected = {(kind, via, n) for kind in ("ceiling", "turnstore") for via in vias for n in (1, 2)}
    rows = found["rows"]
    assert {(row["kind"], row["via"], row["processes"]) for row in rows} == expected
    for row in rows:
        # What a window counts depends on the machine's speed; what happened before the
        # barrier does not: one save per session (or 10 warm-up INSERTs) in every process.
        assert len(row["per_process_ops"]) == row["processes"]
        assert row["ops"] == sum(row["per_process_ops"])
        least = SESSIONS if row["kind"] == "turnstore" else 10
        assert row["total_ops"] >= row["processes"] * least + row["ops"]
        assert row["ops_per_s"] == row["ops"] / row["seconds"]
    assert set(found["summary"]) == {"1", "2"}
    assert [t["status"] in ("PASS", "MISS", "n/a") for t in found["targets"]] == [True, True]
    for section in ("Rows", "Per process count", "Targets"):
        assert section in result.stdout
