"""A smoke run of the benchmark at tiny sizes, so `bench/` cannot rot; numbers are not judged.

One `python -m bench.agent_loop --smoke` run (2 sessions x 3 turns, scaling 2,4, 4 concurrent
sessions) feeds every test here. Peers whose packages are missing are skipped by name with
the install command; PostgreSQL rows run when the test server answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_URL, REQUIRE_POSTGRES, postgres_unavailable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.measure import proc_io_available  # noqa: E402
from bench.phases import GROUPED  # noqa: E402
from bench.specs import TMPFS, PeerSpec, importable, peer_specs  # noqa: E402

pytestmark = pytest.mark.peers

SMOKE_TURNS = 2 * 3
"""Turns of the throughput phase at --smoke sizes."""


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """The JSON document and printed report of one smoke run."""
    where = tmp_path_factory.mktemp("bench")
    out = where / "bench.json"
    reason = postgres_unavailable()
    if reason is not None and REQUIRE_POSTGRES:
        pytest.fail(f"TURNSTORE_REQUIRE_POSTGRES=1 but {reason}")
    postgres = ["--no-postgres"] if reason else ["--postgres-url", POSTGRES_URL]
    command = [sys.executable, "-m", "bench.agent_loop", "--smoke", "--json", str(out)]
    done = subprocess.run(
        [*command, "--dir", str(where), *postgres],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def _runnable(spec: PeerSpec) -> None:
    missing = [module for module in spec.requires if not importable(module)]
    if missing:
        pytest.skip(f"{spec.name}: {', '.join(missing)} not installed (pip install -e '.[bench]')")
    if spec.backend == "postgres" and (reason := postgres_unavailable()) is not None:
        pytest.skip(f"{spec.name}: {reason}")


@pytest.mark.parametrize("spec", peer_specs(), ids=lambda spec: spec.name)
def test_every_available_peer_reports_positive_numbers(
    smoke: tuple[dict[str, Any], str], spec: PeerSpec
) -> None:
    """A peer that can run here saved every turn and measured time, bytes and size."""
    _runnable(spec)
    doc, _ = smoke
    assert doc["peers"][spec.name]["status"] == "ran"
    row = doc["throughput"][spec.name]
    assert row["turns"] == SMOKE_TURNS
    for key in ("turns_per_s", "save_p50_ms", "save_p99_ms", "store_bytes", "store_vs_payload"):
        assert row[key] > 0, key
    if proc_io_available() or spec.backend == "postgres":
        assert row["bytes_written_per_turn"] > 0
    for key in ("load_latest_ms", "catalog_page_ms"):
        assert row[key] is None or row[key] > 0, key
    if spec.scaling:
        points = doc["scaling"][spec.name]
        assert [point["turns"] for point in points] == [2, 4]
        assert all(point["save_s"] > 0 and point["bytes_written"] >= 0 for point in points)


def test_turnstore_reads_and_catalog_are_measured(smoke: tuple[dict[str, Any], str]) -> None:
    """turnstore's rows carry load-latest and catalog latency, and scaling loads."""
    doc, _ = smoke
    row = doc["throughput"]["turnstore"]
    assert row["load_latest_ms"] > 0
    assert row["catalog_page_ms"] > 0
    assert all(point["load_s"] > 0 for point in doc["scaling"]["turnstore"])


def test_skipped_peers_say_why(smoke: tuple[dict[str, Any], str]) -> None:
    """Every known peer either ran or names the reason it could not."""
    doc, _ = smoke
    twins = {f"{spec.name}{TMPFS}" for spec in peer_specs() if spec.tmpfs}
    assert set(doc["peers"]) == {spec.name for spec in peer_specs()} | twins
    for name, peer in doc["peers"].items():
        assert peer["status"] in ("ran", "skipped"), name
        if peer["status"] == "skipped":
            assert peer["reason"], name


def test_tmpfs_and_same_work_rows(smoke: tuple[dict[str, Any], str]) -> None:
    """Each tmpfs twin ran; the same-work rows store exactly what turnstore's rows store with
    the search indexer off."""
    doc, printed = smoke
    rows = doc["throughput"]
    for spec in peer_specs():
        if spec.tmpfs:
            assert rows[f"{spec.name}{TMPFS}"]["turns_per_s"] > 0, spec.name
    # Same-work sends a save's rows, not the search index's: its twins are the `-noindex` rows.
    for same, ours in (
        ("same-work", "turnstore-noindex"),
        ("same-work-async", "turnstore-noindex"),
        ("same-work+events", "turnstore+events-noindex"),
        ("same-work-async+events", "turnstore+events-noindex"),
    ):
        assert rows[same]["store_bytes"] == rows[ours]["store_bytes"], same
    # Each tmpfs row ran in a process of its own, `rounds` times (one in a smoke run).
    assert rows[f"sqlite3-plain{TMPFS}"]["rounds_turns_per_s"], rows[f"sqlite3-plain{TMPFS}"]
    assert "CPU per save on tmpfs" in printed


def test_concurrency_rows(smoke: tuple[dict[str, Any], str]) -> None:
    """The SQLite concurrency phase ran every mode between measured disk-ceiling blocks."""
    doc, _ = smoke
    sqlite = doc["concurrency"]["sqlite"]
    assert sqlite["ceiling_commits_per_s"] > 0
    assert len(sqlite["ceiling_blocks"]) == len(sqlite["rows"]) + 1
    assert set(sqlite["modes"]) == {"asyncio tasks", "threads", "asyncio, 1 task", GROUPED}
    assert sqlite["modes"]["asyncio tasks"]["writers"] == 4
    for row in sqlite["rows"]:
        assert row["turns"] == 4 * 3
        assert row["turns_per_s"] > 0
        assert row["transactions"] > 0
        assert row["vs_ceiling"] > 0
    # The grouped same-work reference commits once a round: 3 turns of each of 4 writers.
    assert sqlite["modes"][GROUPED]["writes_per_transaction"] == 4
    grouped = [t for t in doc["targets"] if "concurrent sessions" in t["name"]]
    assert grouped
    assert all(t["ceiling_bound"] is not None for t in grouped)
    if postgres_unavailable() is None:
        postgres = doc["concurrency"]["postgres"]
        assert postgres["lone_commits_per_s"] > 0
        assert postgres["one_writer_turns_per_s"] > 0
        assert postgres["many_writers_turns_per_s"] > 0


def test_targets_and_table(smoke: tuple[dict[str, Any], str]) -> None:
    """Every target is judged or marked n/a, and the printed report shows the tables."""
    doc, printed = smoke
    assert doc["targets"]
    for target in doc["targets"]:
        assert target["status"] in ("PASS", "MISS", "n/a"), target
        assert target["op"] in (">=", "<=")
    for section in ("Throughput phase", "Scaling phase", "Concurrency phase", "Targets"):
        assert section in printed
    assert doc["rss"]["peak_bytes"] >= doc["rss"]["start_bytes"] > 0
    assert doc["payload"]["raw_bytes"] > 0
    assert doc["config"]["smoke"] is True


@pytest.mark.parametrize("events", [False, True], ids=["plain", "events"])
def test_wal_pages_names_the_btrees_a_save_writes(events: bool) -> None:
    """`bench.wal_pages` counts each counted save's pages and names the b-trees they belong to."""
    flags = ["--events"] if events else []
    command = [sys.executable, "-m", "bench.wal_pages", "--turns", "2", "--saves", "2", *flags]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stderr
    first, *rows = done.stdout.splitlines()
    assert float(first.split()[0]) > 0, first
    names = {row.split()[1] for row in rows}
    assert {"sessions", "context_chunks"} <= names
    # The workload's events are stored with their save's batch; none is a row of its own.
    assert ("event_batches" in names) is events
    assert "event_journal" not in names


def test_rss_floor_prints_both_children_and_their_difference() -> None:
    """`bench.rss_floor` runs turnstore's peers and the state-holding peers, each in a child."""
    command = [sys.executable, "-m", "bench.rss_floor", "--sessions", "2", "--turns", "2"]
    command += ["--scaling", "2,3"]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stderr
    figures = [float(line.rsplit(" ", 2)[-2]) for line in done.stdout.splitlines()]
    assert len(figures) == 3, done.stdout
    turnstore, held, added = figures
    assert turnstore >= 0
    assert held >= 0
    assert added == pytest.approx(turnstore - held, abs=0.11)
