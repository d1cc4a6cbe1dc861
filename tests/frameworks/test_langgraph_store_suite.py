"""LangGraph's own store tests, run against `TurnstoreStore` on both backends.

The tests come from the installed (pinned) releases' source distributions, downloaded by pip
at test time (`sdists.py`): `langgraph-checkpoint-sqlite`'s `test_store.py`,
`test_async_store.py` and `test_ttl.py`, and `langgraph-checkpoint-postgres`'s `test_store.py`
and `test_async_store.py`. Each runs in a pytest process of its own inside its sdist, with
`langgraph_store_plugin` putting turnstore's store wherever they build `SqliteStore`,
`AsyncSqliteStore`, `PostgresStore` or `AsyncPostgresStore` (their fixtures included), on
SQLite or on PostgreSQL. Deselected (listed in the plugin, each with its reason): the tests
that inspect LangGraph's stores' own machinery, and the `halfvec` variants of the vector tests.
They run on the default store (`words=False`), which ignores a query without an index as
LangGraph's stores do; `tests/frameworks/test_langgraph_store_words.py` tests `words=True`.

`./dev test-peers` runs a sample (each store fixture's first variant; the four TTL tests that
sleep 6 to 17 s left out), and so does CI: the whole run takes about 210 s of a worker's time
against the sample's 105 (two cores), more than CI's budget for one issue. All of them run
with `TURNSTORE_LANGGRAPH_STORE_FULL=1`.

The peer run: the same files, the same deselection, with `--store-impl langgraph` (LangGraph's
own stores, the other package's standing in on the other backend), is `PEER_RUN`.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from sdists import unpacked

FULL = os.environ.get("TURNSTORE_LANGGRAPH_STORE_FULL") == "1"
"""Whether to run every selected test, not the sample."""

pytestmark = pytest.mark.peers

HERE = Path(__file__).parent

FILES = {
    "langgraph-checkpoint-sqlite": [
        "tests/test_store.py",
        "tests/test_async_store.py",
        "tests/test_ttl.py",
    ],
    "langgraph-checkpoint-postgres": ["tests/test_store.py", "tests/test_async_store.py"],
}
"""The store test files of each distribution."""

SELECTED = {
    ("langgraph-checkpoint-sqlite", False): 148,
    ("langgraph-checkpoint-sqlite", True): 87,
    ("langgraph-checkpoint-postgres", False): 202,
    ("langgraph-checkpoint-postgres", True): 106,
}
"""Tests left to run after the deselection, per distribution and sample (True) or not."""

PEER_RUN = {
    ("langgraph-checkpoint-sqlite", "sqlite"): (111, 37),
    ("langgraph-checkpoint-sqlite", "postgres"): (102, 46),
    ("langgraph-checkpoint-postgres", "sqlite"): (138, 64),
    ("langgraph-checkpoint-postgres", "postgres"): (141, 61),
}
"""(passed, failed) of the full run on LangGraph's own stores (`--store-impl langgraph`),
LangGraph 1.2.24, langgraph-checkpoint-sqlite 3.1.2 and -postgres 3.2.0, on this project's
test machine. `SqliteStore` fails every vector test (this Python cannot load SQLite
extensions), test_async_asearch_refresh_ttl (its refreshed item outlives the refreshed TTL)
and, in the PostgreSQL package's tests, test_basic_store_ops (timestamps in whole seconds).
`PostgresStore` (no pgvector here) fails every vector test and, in the SQLite package's tests,
a NUL and a NaN in a filter value, filter keys with hyphens or leading digits, an invalid
filter key not refused, and refresh on read (test_ttl_refresh,
test_async_asearch_refresh_ttl: its `ttl_minutes` column is an INT)."""


def _run(root: Path, backend: str, files: list[str], tmp_path: Path) -> tuple[int, str, Path, Path]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env["PYTHONPATH"] = str(HERE)
    report = tmp_path / f"opened-{backend}.txt"
    env["TURNSTORE_LANGGRAPH_STORE_REPORT"] = str(report)
    env["TURNSTORE_LANGGRAPH_STORE_SCRATCH"] = str(tmp_path)
    env["TURNSTORE_LANGGRAPH_STORE_RUN"] = run = secrets.token_hex(4)
    junit = tmp_path / "junit.xml"
    command = [
        *(sys.executable, "-m", "pytest", "-p", "langgraph_store_plugin"),
        *("-p", "no:cacheprovider", "--store-backend", backend, "-q"),
        # Their own addopts add -vv and --durations; strict markers and config stay.
        *("-o", "addopts=--strict-markers --strict-config", "--timeout=120"),
        *("-o", "asyncio_default_fixture_loop_scope=function"),
        # The TTL tests mostly sleep: three processes overlap the sleeps.
        *("-n", "3", f"--junitxml={junit}"),
        *([] if FULL else ["--store-sample"]),
        *files,
    ]
    try:
        done = subprocess.run(
            command, cwd=root, env=env, capture_output=True, text=True, timeout=900
        )
    finally:
        _drop_schemas(run)
    return done.returncode, done.stdout + done.stderr, junit, report


def _drop_schemas(run: str) -> None:
    """Drop the run's schemas a test process left behind (one that died before its end)."""
    from conftest import POSTGRES_URL, postgres_unavailable

    if postgres_unavailable() is not None:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        left = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"lgstore_{run}_%",)
        ).fetchall()
        for (schema,) in left:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _not_passed(suite: ElementTree.Element) -> list[str]:
    """Each test that failed, erred or skipped, with the first line of why."""
    found = []
    for case in suite.iter("testcase"):
        for tag in ("failure", "error", "skipped"):
            if (why := case.find(tag)) is not None:
                message = (why.get("message") or "").strip().splitlines()[:1]
                found.append(f"{tag}: {case.get('classname')}::{case.get('name')} {message}")
    return found


def _passes(distribution: str, backend: str, tmp_path: Path) -> None:
    if backend == "postgres" or distribution.endswith("postgres"):
        # The PostgreSQL package's conftest connects to a server before every test.
        from conftest import require_postgres

        require_postgres()
    root = unpacked(distribution)
    code, output, junit, report = _run(root, backend, FILES[distribution], tmp_path)
    assert junit.exists(), output[-6000:]
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert not _not_passed(suite), "\n".join(_not_passed(suite))
    assert code == 0, output[-6000:]
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] == SELECTED[distribution, not FULL], counts
    # The substitution happened: the tests opened turnstore stores, not LangGraph's.
    assert sum(map(int, report.read_text().split())) >= counts["tests"]


# Each run is a pytest process of its own, 20 s to a few minutes long: well past the default
# per-test timeout. One class per distribution and backend, so that `--dist loadscope` can
# spread the four over `./dev test-peers`'s processes.
@pytest.mark.timeout(900)
@pytest.mark.framework_suite
class _OnABackend:
    distribution = ""
    backend = ""

    def test_langgraphs_store_tests_pass_on_turnstore(self, tmp_path: Path) -> None:
        _passes(self.distribution, self.backend, tmp_path)


class TestSqliteStoreTestsOnSqlite(_OnABackend):
    distribution, backend = "langgraph-checkpoint-sqlite", "sqlite"


class TestSqliteStoreTestsOnPostgres(_OnABackend):
    distribution, backend = "langgraph-checkpoint-sqlite", "postgres"


class TestPostgresStoreTestsOnSqlite(_OnABackend):
    distribution, backend = "langgraph-checkpoint-postgres", "sqlite"


class TestPostgresStoreTestsOnPostgres(_OnABackend):
    distribution, backend = "langgraph-checkpoint-postgres", "postgres"
