"""`python -m bench.memory_adk --smoke` runs, so the ADK memory benchmark cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.peers


@pytest.mark.timeout(300)
def test_the_adk_memory_benchmark_runs() -> None:
    """Both SQLite sides give a search time at both sizes, the erasure leaves nothing to find,
    and each target gets a verdict."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory_adk", "--smoke", "--no-postgres", "--quiet"],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("adk-sqlite ") for line in lines), done.stdout
    assert any(line.startswith("turnstore ") for line in lines), done.stdout
    assert "found afterwards: 0" in done.stdout
    verdicts = [line for line in lines if line.startswith("search @")]
    assert len(verdicts) == 2
    assert all(line.split()[-1] in {"PASS", "MISS"} for line in verdicts), verdicts
