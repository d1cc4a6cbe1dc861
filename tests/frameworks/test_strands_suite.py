"""Strands Agents' own session tests, run against `TurnstoreSessionRepository` on both backends.

The tests come from the installed (pinned) `strands-agents` release's source distribution,
downloaded by pip at test time (`sdists.py`), and run in a pytest process of their own inside
it, with `strands_plugin` putting turnstore's repository where they take theirs: the
repository fixture's `MockedSessionRepository` (every test of the session manager's module),
and `FileSessionManager`, which is a manager that is its own repository (the file manager's
module, whose tests of the repository contract then run on turnstore).

Deselected, by name, are only the file manager's tests of its own files; each group below says
what it inspects. Not run at all: `test_s3_session_manager.py` (S3 buckets, through moto),
`test_snapshot_session_manager.py` (the `Storage` protocol's snapshot manager, which takes no
repository) and `test_file_session_manager_symlink_protection.py` (the file manager's
symlink checks): none of them takes a repository. Every deselected name must still exist.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("strands")

from sdists import unpacked

pytestmark = pytest.mark.peers

HERE = Path(__file__).parent

MANAGER = "tests/strands/session/test_repository_session_manager.py"
FILES = "tests/strands/session/test_file_session_manager.py"
SUITES = [MANAGER, FILES]
FILE = FILES + "::"

DESELECTED: dict[str, list[str]] = {
    "the file manager's paths and JSON files (_get_*_path, _read_file, files read with open)": [
        FILE + "test_create_session",
        FILE + "test_create_agent",
        FILE + "test_create_message",
        FILE + "test_message_durable_id_persists",
        FILE + "test_corrupted_json_file",
        FILE + "test_create_multi_agent",
        FILE + "test_create_session_multi_agent_directory_structure",
    ],
    "the file manager's refusal of path separators in its paths (_get_*_path)": [
        FILE + "test__get_session_path_invalid_session_id",
        FILE + "test__get_agent_path_invalid_agent_id",
        FILE + "test__get_message_path_invalid_message_id",
    ],
    "builtins.open patched to fail: the file manager's file access": [
        FILE + "test_permission_error_handling",
    ],
    # A SessionRepository has no delete; turnstore's own `delete_sessions` erases a session.
    "FileSessionManager.delete_session, which is the file manager's own": [
        FILE + "test_delete_session",
        FILE + "test_delete_nonexistent_session",
    ],
}
RUN_BY_STRANDS = 91
"""Tests the two modules hold (Strands' own run, nothing substituted, passes them all);
each run checks the names above against what it collected."""
DESELECTED_TESTS = 21
"""Tests the names above deselect (three of them name parametrized tests)."""


def _run(root: Path, backend: str, args: list[str], tmp_path: Path) -> tuple[int, str, Path]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    # boto3 (Strands' default model builds a Bedrock client) asks no metadata service.
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_DEFAULT_REGION="us-west-2")
    report = tmp_path / f"built-{backend}.txt"
    env["TURNSTORE_STRANDS_REPORT"] = str(report)
    env["TURNSTORE_STRANDS_COLLECTED"] = str(tmp_path / "collected.txt")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "strands_plugin",
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "-o",
        "addopts=",
        "--turnstore-backend",
        backend,
        *args,
    ]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr, report


@pytest.fixture(scope="module")
def strands_root() -> Path:
    return unpacked("strands-agents")


@pytest.mark.timeout(600)
@pytest.mark.framework_suite
class _OnABackend:
    backend = ""

    def test_strands_session_tests_pass_on_turnstore(
        self, strands_root: Path, tmp_path: Path
    ) -> None:
        _passes(strands_root, tmp_path, self.backend)


class TestOnSqlite(_OnABackend):
    backend = "sqlite"


class TestOnPostgres(_OnABackend):
    backend = "postgres"


def _passes(root: Path, tmp_path: Path, backend: str) -> None:
    if backend == "postgres":
        from conftest import require_postgres

        require_postgres()
    junit = tmp_path / "junit.xml"
    names = [name for group in DESELECTED.values() for name in group]
    deselect = [arg for name in names for arg in ("--deselect", name)]
    code, output, report = _run(
        root, backend, ["-q", f"--junitxml={junit}", *deselect, *SUITES], tmp_path
    )
    assert code == 0, output[-6000:]
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {
        "tests": RUN_BY_STRANDS - DESELECTED_TESTS,
        "failures": 0,
        "errors": 0,
        "skipped": 0,
    }, output[-6000:]
    # The substitution happened: every test built at least one turnstore repository.
    assert int(report.read_text()) >= RUN_BY_STRANDS - DESELECTED_TESTS
    _deselected_as_named((tmp_path / "collected.txt").read_text().splitlines(), names)


def _deselected_as_named(collected: list[str], names: list[str]) -> None:
    """Every deselected name is still in the suite, and names only the tests meant (a name
    deselects every test it prefixes)."""
    assert len(collected) == RUN_BY_STRANDS, collected
    for name in names:
        assert any(line.startswith(name) for line in collected), f"{name} is not in the suite"
    deselected = [line for line in collected if any(line.startswith(name) for name in names)]
    assert len(deselected) == DESELECTED_TESTS, deselected
