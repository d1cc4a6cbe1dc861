"""Smoke runs of the upkeep benchmarks at tiny sizes, so they cannot rot; numbers are not judged.

`python -m bench.prune --smoke` (300 old sessions pruned while 2 writers save, on SQLite and,
when the test server answers, PostgreSQL) and `python -m bench.import_memory --smoke` (a
tiny, a 2 MB and a 6 MB export imported into SQLite) each run once; the tests check what
they measured and printed, not whether the targets were met.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_URL, REQUIRE_POSTGRES, postgres_unavailable

ROOT = Path(__file__).resolve().parents[2]
SMOKE_SESSIONS = 300
"""Old sessions `bench.prune --smoke` creates and prunes."""
RATIO_LINE = re.compile(
    r"^p99 ratio (sqlite|postgres) batch_size=(\d+) prune_from=(process|same):"
    r" ([0-9.]+) ms / ([0-9.]+) ms = ([0-9.]+)x \(<= 3x\) (PASS|MISS)$",
    re.MULTILINE,
)
RSS_LINE = re.compile(
    r"^peak RSS (export|import into sqlite): 6 MB ([0-9.]+) MB vs 2 MB ([0-9.]+) MB"
    r" = ([+-][0-9.]+) MB \(<= 64 MB\) (PASS|MISS)$",
    re.MULTILINE,
)


def _postgres_flags() -> list[str]:
    reason = postgres_unavailable()
    if reason is not None and REQUIRE_POSTGRES:
        pytest.fail(f"TURNSTORE_REQUIRE_POSTGRES=1 but {reason}")
    return ["--no-postgres"] if reason else ["--postgres-url", POSTGRES_URL]


def _run(module: str, where: Path, *extra: str) -> tuple[dict[str, Any], str]:
    out = where / f"{module}.json"
    command = [sys.executable, "-m", f"bench.{module}", "--smoke", "--quiet", "--json", str(out)]
    done = subprocess.run(
        [*command, "--dir", str(where), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


@pytest.fixture(scope="module")
def prune(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """The JSON document and printed report of one prune smoke run."""
    return _run("prune", tmp_path_factory.mktemp("prune"), *_postgres_flags())


@pytest.fixture(scope="module")
def imports(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """The JSON document and printed report of one import-memory smoke run."""
    return _run("import_memory", tmp_path_factory.mktemp("import"))


def test_prune_removes_every_old_session_and_none_of_the_writers(
    prune: tuple[dict[str, Any], str],
) -> None:
    """Each trial pruned exactly the old trees while the writers saved in every phase."""
    doc, _ = prune
    backends = {"sqlite"} if postgres_unavailable() else {"sqlite", "postgres"}
    trials = doc["trials"]
    assert {(t["backend"], t["prune_from"]) for t in trials} == {
        (backend, where) for backend in backends for where in ("process", "same")
    }
    for trial in trials:
        assert trial["batch_size"] == 100
        assert trial["pruned_trees"] == trial["pruned_sessions"] == SMOKE_SESSIONS
        assert trial["sessions_left"] == trial["writer_sessions"] > 0
        assert trial["prune_error"] is None
        assert trial["failed_saves"] == 0
        assert trial["prune_s"] > 0
        assert trial["sessions_per_s"] > 0
        for name in ("baseline", "during", "after"):
            phase = trial["phases"][name]
            assert phase["saves"] > 0, (trial["backend"], trial["prune_from"], name)
            assert 0 < phase["p50_ms"] <= phase["p99_ms"] <= phase["max_ms"]
        base, during = trial["phases"]["baseline"], trial["phases"]["during"]
        assert trial["p99_ratio"] == pytest.approx(during["p99_ms"] / base["p99_ms"])
        assert trial["status"] == ("PASS" if trial["p99_ratio"] <= 3 else "MISS")


def test_prune_prints_one_ratio_line_per_trial(prune: tuple[dict[str, Any], str]) -> None:
    """The printed ratio lines parse and agree with the JSON figures."""
    doc, printed = prune
    lines = RATIO_LINE.findall(printed)
    assert len(lines) == len(doc["trials"])
    for trial, (backend, batch, where, during, base, ratio, status) in zip(
        doc["trials"], lines, strict=True
    ):
        assert (backend, int(batch), where) == (
            trial["backend"],
            trial["batch_size"],
            trial["prune_from"],
        )
        assert float(during) == pytest.approx(trial["phases"]["during"]["p99_ms"], abs=0.01)
        assert float(base) == pytest.approx(trial["phases"]["baseline"]["p99_ms"], abs=0.01)
        assert float(ratio) == pytest.approx(trial["p99_ratio"], abs=0.01)
        assert status == trial["status"]
    assert "SMOKE" in printed


def test_import_memory_round_trips_and_measures_peaks(
    imports: tuple[dict[str, Any], str],
) -> None:
    """Every file was exported and imported whole, and each child's peak RSS was read."""
    doc, _ = imports
    rows = doc["rows"]
    assert [row["label"] for row in rows] == ["tiny", "2 MB", "6 MB"]
    assert rows[0]["export"]["trees"] == 1
    for row in rows:
        exported, imported = row["export"], row["imports"]["sqlite"]
        assert imported["trees"] == exported["trees"] > 0
        assert imported["rows"] == exported["rows"] > 0
        assert imported["file_bytes"] == exported["file_bytes"] == row["file_bytes"]
        for figures in (exported, imported):
            assert figures["peak_rss"] >= figures["start_rss"] > 10_000_000
    # The sized files are about what was asked for, and the later one holds more trees.
    assert 1_000_000 < rows[1]["file_bytes"] < 4_000_000
    assert 4_000_000 < rows[2]["file_bytes"] < 12_000_000
    assert rows[2]["export"]["trees"] > rows[1]["export"]["trees"]
    assert rows[2]["largest_session_item_bytes"] > rows[1]["largest_session_item_bytes"]


def test_import_memory_prints_the_verdicts(imports: tuple[dict[str, Any], str]) -> None:
    """The printed peak-RSS lines parse and agree with the JSON verdicts."""
    doc, printed = imports
    lines = RSS_LINE.findall(printed)
    assert [name for name, *_ in lines] == ["export", "import into sqlite"]
    for verdict, (_, large, small, extra, status) in zip(doc["verdicts"], lines, strict=True):
        assert float(large) == pytest.approx(verdict["large_peak_mb"], abs=0.05)
        assert float(small) == pytest.approx(verdict["small_peak_mb"], abs=0.05)
        assert float(extra) == pytest.approx(verdict["extra_mb"], abs=0.05)
        assert status == verdict["status"]


def test_import_memory_measures_a_long_line(imports: tuple[dict[str, Any], str]) -> None:
    """The long-line file round trips without a limit, and its peaks are printed per line."""
    doc, printed = imports
    (row,) = doc["long_lines"]
    assert 1_900_000 < row["line_bytes"] < 2_200_000
    assert row["imports"]["sqlite"]["rows"] == row["export"]["rows"] > 0
    assert row["imports"]["sqlite"]["refused"] is None
    assert row["limited"]["sqlite"]["refused"] is None  # 2 MB is under the default limit
    assert printed.count("long line 2.0 MB, ") == 3
