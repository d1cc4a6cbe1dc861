"""LangGraph's own graph tests, run with `TurnstoreSaver` as their checkpointer on both backends.

The tests come from the installed (pinned) `langgraph` release's source distribution,
downloaded by pip at test time (`sdists.py`), and run in a pytest process of their own inside
it, with `langgraph_plugin` putting turnstore's saver where LangGraph's fixtures build its
SQLite savers (the `sqlite` variants of `sync_checkpointer`, the `sqlite_aio` variants of
`async_checkpointer`), and deselecting every other variant. Deselected by name, on top of
that, would be only tests that inspect the SQLite savers' own machinery (their connection,
their tables), each group under what it inspects; with LangGraph 1.2.24 none does. Every
deselected name must still exist in the suite.

The baseline, the same variants on LangGraph's own `SqliteSaver` / `AsyncSqliteSaver`, is
measured with the plugin's `--turnstore-backend langgraph`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest
from sdists import unpacked

pytestmark = pytest.mark.peers

HERE = Path(__file__).parent

SUITES = ["tests"]
"""All of LangGraph's tests: the plugin keeps the SQLite checkpointer variants among them."""

BASELINE = {"sync": 386, "async": 262}
"""What LangGraph 1.2.24's tests pass on its own SqliteSaver (sync) and AsyncSqliteSaver."""

DESELECTED: dict[str, list[str]] = {}
"""Reason -> test ids (with their parameters) that cannot run on any saver but SQLite's."""


def _run(root: Path, backend: str, args: list[str], tmp_path: Path) -> tuple[int, str, Path]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env["PYTHONPATH"] = str(HERE)
    # LangGraph's switch that keeps its fixtures off the services it starts with Docker
    # (Redis caches, PostgreSQL stores and savers): without it every test that takes one
    # of those fixtures has variants that need them.
    env["NO_DOCKER"] = "true"
    report = tmp_path / f"built-{backend}.txt"
    env["TURNSTORE_LANGGRAPH_REPORT"] = str(report)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "langgraph_plugin",
        "-p",
        "no:cacheprovider",
        "--turnstore-backend",
        backend,
        # One hung test fails alone instead of stopping the run at the subprocess timeout.
        "--timeout=120",
        *args,
    ]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout + done.stderr, report


def _kind(name: str) -> str:
    """Which checkpointer fixture a test id ran on: sync (`sqlite`) or async (`sqlite_aio`)."""
    ids = re.search(r"\[(.*)\]$", name)
    params = ids.group(1).split("-") if ids else []
    if "sqlite_aio" in params:
        return "async"
    return "sync" if "sqlite" in params else "other"


@pytest.fixture(scope="module")
def langgraph_root() -> Path:
    return unpacked("langgraph")


def test_every_deselected_test_exists(langgraph_root: Path, tmp_path: Path) -> None:
    code, output, _ = _run(langgraph_root, "sqlite", ["--collect-only", "-q", *SUITES], tmp_path)
    assert code == 0, output[-3000:]
    collected = [line for line in output.splitlines() if "::" in line]
    for name in (name for names in DESELECTED.values() for name in names):
        assert any(line.startswith(name) for line in collected), f"{name} is not in the suite"


# The run takes a minute and a half on SQLite, over two on PostgreSQL (a fresh schema for
# each of 648 tests): well past the project's default timeout. One class per backend, so
# that `--dist loadscope` can run the two on different workers.
@pytest.mark.timeout(900)
@pytest.mark.framework_suite
class _OnABackend:
    backend = ""

    def test_langgraphs_graph_tests_pass_on_turnstore(
        self, langgraph_root: Path, tmp_path: Path
    ) -> None:
        _passes(langgraph_root, tmp_path, self.backend)


class TestOnSqlite(_OnABackend):
    backend = "sqlite"


class TestOnPostgres(_OnABackend):
    backend = "postgres"


def _passes(langgraph_root: Path, tmp_path: Path, backend: str) -> None:
    if backend == "postgres":
        from conftest import require_postgres

        require_postgres()
    junit = tmp_path / "junit.xml"
    names = [name for group in DESELECTED.values() for name in group]
    deselect = [arg for name in names for arg in ("--deselect", name)]
    code, output, report = _run(
        langgraph_root, backend, ["-q", f"--junitxml={junit}", *deselect, *SUITES], tmp_path
    )
    assert code == 0, output[-6000:]
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == 0, output[-6000:]
    # The one skip is test_remote_graph.py skipping itself whole under NO_DOCKER; none of
    # the SQLite variants skips on LangGraph's own savers.
    assert counts["skipped"] <= 1, output[-6000:]
    passed: Counter[str] = Counter(
        _kind(case.get("name", ""))
        for case in suite.iter("testcase")
        if not any(case.find(tag) is not None for tag in ("skipped", "failure", "error"))
    )
    deselected = Counter(_kind(name) for name in names)
    for kind, baseline in BASELINE.items():
        assert passed[kind] >= baseline - deselected[kind], (kind, passed)
    # The substitution happened: every test that passed built a turnstore saver.
    assert int(report.read_text()) >= sum(passed.values())
