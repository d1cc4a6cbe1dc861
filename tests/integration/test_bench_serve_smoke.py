"""A smoke run of `bench.serve` at tiny sizes, so it cannot rot; its numbers are not judged.

`python -m bench.serve --smoke` builds a 60- and a 240-session store per backend, times every
endpoint of two real `turnstore serve` processes, tails with 6 SSE clients while a writer saves,
and on PostgreSQL runs the writers beside NOTIFY. The tests check what it measured and printed
(that every endpoint was timed, every client got every stored event), not the targets.
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
FLAT_LINE = re.compile(
    r"^flat (sqlite|postgres) ([a-z0-9 ,]+): p50 ([0-9.]+) -> ([0-9.]+) ms = ([0-9.]+)x, p99"
    r" ([0-9.]+) -> ([0-9.]+) ms = ([0-9.]+)x \(<= 1.5x\) (PASS|MISS)$",
    re.MULTILINE,
)
ENDPOINTS = 15
"""Endpoints `bench.serve` times per backend."""

pytest.importorskip("uvicorn", reason="the serve extra is not installed")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """The JSON document and printed report of one smoke run."""
    where = tmp_path_factory.mktemp("serve")
    reason = postgres_unavailable()
    if reason is not None and REQUIRE_POSTGRES:
        pytest.fail(f"TURNSTORE_REQUIRE_POSTGRES=1 but {reason}")
    flags = ["--no-postgres"] if reason else ["--postgres-url", POSTGRES_URL]
    out = where / "serve.json"
    command = [sys.executable, "-m", "bench.serve", "--smoke", "--quiet", "--json", str(out)]
    done = subprocess.run(
        [*command, "--dir", str(where), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def test_every_endpoint_is_timed_on_both_sizes(smoke: tuple[dict[str, Any], str]) -> None:
    """Each backend's rows name every endpoint once, with sizes that grew as asked."""
    doc, printed = smoke
    backends = {"sqlite"} if postgres_unavailable() else {"sqlite", "postgres"}
    assert {result["backend"] for result in doc["results"]} == backends
    for result in doc["results"]:
        small, large = result["sizes"]["small"], result["sizes"]["large"]
        assert (small["sessions"], large["sessions"]) == (60, 240)
        assert small["events"] >= 60
        assert large["events"] >= 240
        rows = result["flat"]
        assert len({row["endpoint"] for row in rows}) == len(rows) == ENDPOINTS
        for row in rows:
            for q in ("p50", "p99"):
                ratio = row[f"large_{q}_ms"] / row[f"small_{q}_ms"]
                assert row[f"{q}_ratio"] == pytest.approx(ratio)
            assert row["pass"] == (row["p50_ratio"] <= 1.5 and row["p99_ratio"] <= 1.5)
    lines = FLAT_LINE.findall(printed)
    assert len(lines) == ENDPOINTS * len(backends)
    assert {line[8] for line in lines} <= {"PASS", "MISS"}


def test_every_tail_client_got_each_save(smoke: tuple[dict[str, Any], str]) -> None:
    """Six clients on two sessions, six saves: each client saw its session's three saves."""
    doc, _ = smoke
    for result in doc["results"]:
        tail = result["tail"]
        assert (tail["clients"], tail["sessions"], tail["saves"]) == (6, 2, 6)
        assert tail["deliveries"] == 6 * 3
        assert tail["p50_ms"] <= tail["p99_ms"] <= tail["max_ms"]
        assert tail["max_ms"] > 0


def test_writers_beside_notify_ran_on_postgres(smoke: tuple[dict[str, Any], str]) -> None:
    """The PostgreSQL row has all four rates and the ratio they give."""
    doc, _ = smoke
    found = {result["backend"]: result for result in doc["results"]}
    assert "notify" not in found["sqlite"]
    if "postgres" not in found:
        pytest.skip("no PostgreSQL server for the smoke run")
    notify = found["postgres"]["notify"]
    rates = notify["turns_per_s"]
    assert set(rates) == {
        f"{mode}, {count} writer(s)" for mode in ("notify", "no notify") for count in (1, 2)
    }
    assert all(rate > 0 for rate in rates.values())
    assert notify["notify_ratio"] == pytest.approx(
        rates["notify, 2 writer(s)"] / rates["no notify, 2 writer(s)"]
    )
