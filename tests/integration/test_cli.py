"""The `turnstore` command line on both backends, through click's runner and a real process.

`cli` runs a command through click's runner, and for the tests in `PROCESS_SMOKE` through a
real process too; `run` through click's runner only; the helpers here are shared with
test_cli_operate.py and test_cli_help.py.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner

import turnstore
from turnstore import (
    Checkpoint,
    EventPageRequest,
    ExecutionPageRequest,
    SessionPageRequest,
)
from turnstore.cli import main
from turnstore.cli.common import PIPED_MOST
from turnstore.cli.demo import run_demo
from turnstore.events import (
    ExecApprovalRequestEvent,
    ModelStepCompletedEvent,
    UserMessageEvent,
)

SECTIONS = (
    "Session catalog",
    "Events of turn-1",
    "Events of turn-2 (the last turn)",
    "Stream metrics",
    "Transcript of demo-session",
    "Execution stats of demo-session",
    "Execution journal of demo-session",
    "A worker killed mid-turn: demo-crash",
    "Database",
)
DEMO_SESSIONS = {"demo-session", "demo-fork", "demo-crash"}
ENTRY_POINT = Path(sys.executable).with_name("turnstore")
"""The installed `turnstore` script of the interpreter running the tests."""


@dataclass(frozen=True)
class Outcome:
    """What one command run printed and returned, however it was run."""

    exit_code: int
    stdout_bytes: bytes
    stderr: str

    @property
    def stdout(self) -> str:
        """Standard output as text."""
        return self.stdout_bytes.decode()

    @property
    def output(self) -> str:
        """Both streams, for assertion messages."""
        return self.stdout + self.stderr

    def json_lines(self) -> list[Any]:
        """Standard output parsed as NDJSON."""
        return [json.loads(line) for line in self.stdout.splitlines() if line]


Cli = Callable[..., Outcome]
"""Runs `turnstore ARGS...` (keywords: env, input) and returns its outcome."""


def run(*args: object, env: dict[str, str] | None = None, input: bytes | None = None) -> Outcome:
    """Invoke the CLI through click's runner as a plain 80-column, colourless pipe would."""
    base: dict[str, str | None] = {
        "COLUMNS": "80",
        "FORCE_COLOR": None,
        "TTY_COMPATIBLE": None,
        "TURNSTORE_URL": None,
    }
    runner = CliRunner(env={**base, **(env or {})})
    result = runner.invoke(main, [str(arg) for arg in args], input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Outcome(result.exit_code, result.stdout_bytes, result.stderr)


def run_process(
    *args: object, env: dict[str, str] | None = None, input: bytes | None = None
) -> Outcome:
    """Run the CLI as `python -m turnstore.cli`, a real process with pipes."""
    environment = {k: v for k, v in os.environ.items() if k != "TURNSTORE_URL"}
    environment.update({"COLUMNS": "80", **(env or {})})
    done = subprocess.run(
        [sys.executable, "-m", "turnstore.cli", *map(str, args)],
        env=environment,
        input=input if input is not None else b"",
        capture_output=True,
        timeout=120,
        check=False,
    )
    return Outcome(done.returncode, done.stdout, done.stderr.decode())


PROCESS_SMOKE = frozenset(
    {
        # Tables, JSON lines and one clean error line through real pipes.
        "test_sessions_list_prints_a_table",
        "test_sessions_show_json_parses",
        "test_sessions_show_of_a_missing_session_is_one_clean_line",
        # The environment, the version, a refusal with stdin not a terminal, secrets.
        "test_turnstore_url_stands_in_for_the_url_argument",
        "test_version_prints_the_package_version",
        "test_sessions_delete_off_a_terminal_needs_yes",
        "test_a_password_in_the_url_is_never_printed",
        "test_inspecting_a_missing_file_creates_nothing",
        "test_inspecting_a_file_that_is_not_a_database_is_one_clean_line",
        # Binary exports on stdout and imports from stdin, exit status 1, migrations.
        "test_export_import_export_is_identical_across_backends",
        "test_doctor_exits_1_on_a_missing_index",
        "test_migrate_lists_then_runs_the_steps",
    }
)
"""Tests that also run the CLI as a real process; every `cli` test runs through the runner."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each `cli` test through click's runner, and the smoke tests as a process too.

    A process costs an interpreter start and turnstore's imports (about 0.5 s); the runner
    invokes the same `main`, so the process runs are kept for what only a process shows.
    """
    if "cli" in metafunc.fixturenames:
        smoke = metafunc.function.__name__ in PROCESS_SMOKE
        metafunc.parametrize("cli", ["runner", "process"] if smoke else ["runner"], indirect=True)


@pytest.fixture
def cli(request: pytest.FixtureRequest) -> Cli:
    """The CLI through click's runner, or through a real subprocess."""
    return run if request.param == "runner" else run_process


def assert_clean_error(result: Outcome, *fragments: str, code: int = 1) -> None:
    """A failed command printed exactly one `Error:` line and no traceback."""
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("Error")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def catalog(url: str) -> list[str]:
    """The session ids of the store at `url`, read through the library."""
    with turnstore.open_blocking(url) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=1000))
    return sorted(summary.session_id for summary in page.sessions)


def write_demo(url: str) -> str:
    """Write the demo's sessions (not its crash) into the store at `url`; return the URL."""
    with turnstore.open_blocking(url) as store:
        run_demo(store)
    return url


@pytest.fixture
def demo_url(store_url: str) -> str:
    """A store of the backend under test holding the demo session and its fork."""
    return write_demo(store_url)


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    """A SQLite file the `demo` command has written (crash included)."""
    path = tmp_path / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert result.exit_code == 0, result.output
    return path


def save_session(url: str, session_id: str, first_message: str, items: list[Any]) -> None:
    """Save one session with a transcript batch of `items`."""
    with turnstore.open_blocking(url) as store:
        checkpoint = Checkpoint(session_id=session_id, first_user_message=first_message)
        checkpoint.sequence = 1
        store.save(checkpoint, items)


# --- demo ------------------------------------------------------------------------------------


def test_demo_prints_every_section(tmp_path: Path) -> None:
    """demo --path exits 0 and prints every section, ending with the database path."""
    path = tmp_path / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert result.exit_code == 0, result.output
    for section in SECTIONS:
        assert section in result.stdout
    assert "model_step_completed" in result.stdout
    assert "exec_approval_request" in result.stdout
    assert str(path) in result.stdout
    assert path.is_file()


def test_demo_output_fits_80_plain_columns_but_a_piped_table_keeps_whole_values(
    tmp_path: Path,
) -> None:
    """demo output has no colour codes off a terminal and its prose fits 80 columns (bar the
    path); a table's row is as wide as its values, never cut, with no trailing blanks."""
    path = tmp_path / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert "\x1b[" not in result.stdout
    lines = result.stdout.splitlines()
    # The catalog: its header, its rule, and a row per session, named first.
    start = lines.index(next(line for line in lines if line.startswith("session ")))
    table = lines[start : start + 2 + len(DEMO_SESSIONS)]
    assert set(table[1]) == {"─"}
    rows = table[2:]
    assert {row.split()[0] for row in rows} == DEMO_SESSIONS
    assert all(line == line.rstrip() for line in table)
    # Prose wraps at 80; only a table's rows (columns apart by blanks) and rules are wider.
    wide = [line for line in lines if len(line) > 80 and str(path) not in line]
    assert all("   " in line.strip() or set(line) == {"─"} for line in wide), wide
    with turnstore.open_blocking(path) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=10))
        firsts = [summary.first_user_message or "" for summary in page.sessions]
    assert all(any(first in row for row in rows) for first in firsts), "a first message was cut"


def test_demo_file_holds_the_session_its_fork_and_the_crashed_one(demo_file: Path) -> None:
    """After demo, the catalog holds the session, its fork at an earlier sequence, the crash."""
    with turnstore.open_blocking(demo_file) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=10))
        found = {summary.session_id: summary for summary in page.sessions}
        assert set(found) == DEMO_SESSIONS
        fork = found["demo-fork"]
        assert fork.parent_session_id == "demo-session"
        assert fork.parent_sequence is not None
        assert 0 < fork.parent_sequence < found["demo-session"].sequence
        assert found["demo-session"].execution_stats.run_count == 2


def test_demo_reloads_the_killed_worker_at_its_last_commit(demo_file: Path) -> None:
    """The killed worker's session is at the commit that started turn-2, nothing later."""
    result = run("sessions", "show", demo_file, "demo-crash", "--json")
    shown = json.loads(result.stdout)
    assert shown["summary"]["execution_stats"]["run_count"] == 1
    with turnstore.open_blocking(demo_file, read_only=True) as store:
        checkpoint = store.load("demo-crash")
    assert checkpoint is not None
    assert checkpoint.active_execution is not None
    assert checkpoint.active_execution.turn_id == "turn-2"
    assert checkpoint.active_model_step is not None
    assert [item["position"]["checkpoint_sequence"] for item in shown["transcript"]] == [2] * 3
    assert checkpoint.sequence == 3


def test_demo_prints_its_crash_and_reload(tmp_path: Path) -> None:
    """The crash section says the worker was killed and the reload found its last commit."""
    result = run("demo", "--path", tmp_path / "demo.sqlite3")
    assert "killed with SIGKILL" in result.stdout
    assert "exactly its last commit" in result.stdout
    assert "turn-2 (to resume or abort)" in result.stdout


def test_demo_next_steps_work_exactly_as_printed(tmp_path: Path) -> None:
    """Every command the installed `turnstore demo` prints runs as printed, from a shell."""
    path = tmp_path / "demo folder" / "demo.sqlite3"
    done = subprocess.run(
        [str(ENTRY_POINT), "demo", "--path", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "TURNSTORE_URL"},
    )
    printed = done.stdout.split("Inspect it with:\n", 1)[1].split("\nOr browse", 1)[0]
    assert len(printed.splitlines()) == 3
    for line in printed.splitlines():
        shown = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, (line, shown.stderr)
        assert "demo-" in shown.stdout


def test_demo_ends_with_the_serve_command_that_shows_it(tmp_path: Path) -> None:
    """The demo's last lines name the viewer's address and a `serve` command that serves it."""
    path = tmp_path / "demo folder" / "demo.sqlite3"
    done = subprocess.run(
        [str(ENTRY_POINT), "demo", "--path", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "TURNSTORE_URL"},
    )
    *_, browse, line = done.stdout.strip().splitlines()
    assert browse == "Or browse it in the web viewer at http://127.0.0.1:8765/ with:"
    assert " serve " in line
    # As printed, but on a free port: the default one may be taken on a test machine.
    port = free_port()
    with subprocess.Popen(f"exec {line} --port {port}", shell=True) as server:
        try:
            catalog = wait_for(f"http://127.0.0.1:{port}/api/sessions")
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert {s["session_id"] for s in catalog["sessions"]} == DEMO_SESSIONS


def test_show_of_a_bare_framework_id_suggests_the_stored_one(tmp_path: Path) -> None:
    """`sessions show DB lg-tides` when `langgraph/lg-tides` is stored names it."""
    url = str(tmp_path / "framework.sqlite3")
    save_session(url, "langgraph/lg-tides", "when is high tide?", [])
    shown = run("sessions", "show", url, "lg-tides")
    assert shown.exit_code == 1
    assert "no session 'lg-tides'; did you mean 'langgraph/lg-tides'?" in shown.stderr
    assert "did you mean" not in run("sessions", "show", url, "other").stderr


def test_a_framework_session_shows_what_it_records_and_says_what_it_does_not(
    tmp_path: Path,
) -> None:
    """`sessions show` of an OpenAI Agents SDK session: its runs and tool calls, and the
    figures the SDK keeps nowhere in the session read as not recorded, never `0`; the
    catalog's turns of a session of plain items are a dash."""
    url = str(tmp_path / "framework.sqlite3")
    with turnstore.open_blocking(url) as store:
        items = [
            {"role": "user", "content": "add two and two"},
            {"type": "function_call", "call_id": "c", "name": "add", "arguments": "{}"},
        ]
        store.append_context("chat", items, kind="openai-agents")
        store.append_context("notes", [{"role": "user", "content": "a note"}])
        store.search(turnstore.records.SearchRequest(query="note"))  # derives the figures
    shown = run("sessions", "show", url, "chat")
    assert shown.exit_code == 0, shown.output
    lines = {line.split(maxsplit=1)[0]: line for line in shown.stdout.splitlines() if line}
    assert lines["turns"].split() == ["turns", "1"]
    assert lines["model"].split() == ["model", "calls", "not", "recorded"]
    assert lines["tool"].split() == ["tool", "calls", "1"]
    assert lines["tokens"].split() == ["tokens", "not", "recorded"]
    as_json = json.loads(run("sessions", "show", url, "chat", "--json").stdout)
    assert as_json["summary"]["measured"] == ["runs", "tool_calls"]
    listed = run("sessions", "list", url).stdout
    rows = {line.split()[0]: line.split() for line in listed.splitlines() if line[:1] in "cn"}
    assert (rows["chat"][1:3], rows["notes"][1:3]) == (["1", "1"], ["1", "-"])  # seq, turns


def test_demo_in_a_bare_install_names_the_extra_with_its_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the serve extra the demo says what to install, `[serve]` and all (not markup)."""
    import importlib.util

    real = importlib.util.find_spec
    # A bare install: the serve extra's packages cannot be found.
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name in ("uvicorn", "starlette") else real(name, *args),
    )
    done = run("demo", "--path", tmp_path / "demo.sqlite3")
    assert done.exit_code == 0, done.stderr
    assert (
        "Or browse it in the web viewer (pip install 'turnstore[serve]' first) at "
        "http://127.0.0.1:8765/ with:"
    ) in " ".join(done.stdout.split())  # as one line, however the terminal wrapped it


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str) -> Any:
    """The JSON at `url`, once a server starting up answers it."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=2).json()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_demo_file_holds_two_finished_turns_and_stream_metrics(demo_file: Path) -> None:
    """After demo, the journal has 2 records and the last turn's completed step has metrics."""
    with turnstore.open_blocking(demo_file) as store:
        journal = store.execution_page("demo-session", ExecutionPageRequest(limit=10))
        assert [record.turn_id for record in journal.executions] == ["turn-2", "turn-1"]
        assert all(record.outcome == "completed" for record in journal.executions)
        turn = store.event_turn_page("demo-session")
        msgs = [event.event.msg for event in turn.events]
        completed = [e for e in turn.events if isinstance(e.event.msg, ModelStepCompletedEvent)]
        assert completed
        phases = {metrics.phase for metrics in completed[0].stream_metrics}
        assert phases == {"reasoning", "final_answer"}
        assert all(metrics.chunk_count > 1 for metrics in completed[0].stream_metrics)
        delivered = [m.message.delivery for m in msgs if isinstance(m, UserMessageEvent)]
        assert delivered == ["queue"]


def test_demo_leaves_an_idle_checkpoint_after_the_approved_tool_call(demo_file: Path) -> None:
    """After demo, the approval was journaled and the checkpoint holds no pending work."""
    with turnstore.open_blocking(demo_file) as store:
        checkpoint = store.load("demo-session")
        earlier = store.event_turn_page("demo-session")
        assert earlier.next_before_sequence is not None
        first_turn = store.event_turn_page("demo-session", earlier.next_before_sequence)
    assert checkpoint is not None
    assert checkpoint.active_execution is None
    assert checkpoint.pending_approval is None
    assert checkpoint.pending_messages == []
    msgs = [event.event.msg for event in first_turn.events]
    assert any(isinstance(msg, ExecApprovalRequestEvent) for msg in msgs)


def test_demo_refuses_a_file_that_already_holds_it(demo_file: Path) -> None:
    """demo on a file that already holds the demo sessions fails with one clean line."""
    assert_clean_error(run("demo", "--path", demo_file), "already holds demo-session")


def test_demo_defaults_to_a_fresh_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """demo without --path writes a new file in a new temporary folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run("demo")
    assert result.exit_code == 0, result.output
    written = list(tmp_path.glob("turnstore-demo-*/demo.sqlite3"))
    assert len(written) == 1
    assert str(written[0]) in result.stdout


def test_demo_makes_the_folder_it_is_given(tmp_path: Path) -> None:
    """demo --path in a folder that does not exist yet creates the folder and the file."""
    path = tmp_path / "new" / "folder" / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert result.exit_code == 0, result.output
    assert path.is_file()


def test_demo_reports_an_unusable_path_in_one_line(tmp_path: Path) -> None:
    """demo --path under a regular file fails with one clean line."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    assert_clean_error(run("demo", "--path", blocker / "demo.sqlite3"), str(blocker))


# --- sessions list ---------------------------------------------------------------------------


def test_sessions_list_prints_a_table(cli: Cli, demo_url: str) -> None:
    """sessions list prints both sessions, the fork with its parent and sequence."""
    result = cli("sessions", "list", demo_url)
    assert result.exit_code == 0, result.output
    assert "demo-session" in result.stdout
    assert "demo-fork" in result.stdout
    assert "demo-session@" in result.stdout
    assert "More sessions exist" not in result.stdout


def test_sessions_list_json_is_one_session_per_line(cli: Cli, demo_url: str) -> None:
    """sessions list --json prints NDJSON with the wire names and no next line at the end."""
    result = cli("sessions", "list", demo_url, "--json")
    assert result.exit_code == 0, result.output
    found = {session["session_id"]: session for session in result.json_lines()}
    assert set(found) == {"demo-session", "demo-fork"}
    assert found["demo-fork"]["parent_session_id"] == "demo-session"
    assert found["demo-session"]["execution_stats"]["run_count"] == 2


def test_sessions_list_filters_by_owner(cli: Cli, demo_url: str) -> None:
    """sessions list --owner lists only that owner's sessions."""
    assert cli("sessions", "list", demo_url, "--owner", "somebody", "--json").json_lines() == []
    mine = cli("sessions", "list", demo_url, "--owner", "demo-user", "--json").json_lines()
    assert {session["session_id"] for session in mine} == {"demo-session", "demo-fork"}


def last_line(result: Outcome) -> str:
    """The last line printed: where a command prints the command to run next."""
    return result.stdout.strip().splitlines()[-1].strip()


def run_printed(line: str) -> Outcome:
    """Run a command line exactly as printed, through a shell."""
    done = subprocess.run(line, shell=True, capture_output=True, timeout=120, check=False)
    return Outcome(done.returncode, done.stdout, done.stderr.decode())


def test_sessions_list_says_when_more_exist_and_prints_the_next_page_command(
    demo_url: str,
) -> None:
    """A full page ends with the exact command that prints the next page; it runs as printed."""
    first = run_process("sessions", "list", demo_url, "--limit", 1)
    assert first.exit_code == 0, first.output
    assert "More sessions exist. Next page:" in first.stdout
    command = last_line(first)
    assert "-m turnstore.cli sessions list" in command
    assert "--after" in command
    second = run_printed(command)
    assert second.exit_code == 0, second.output
    shown = {i for i in ("demo-session", "demo-fork") if i in first.stdout + second.stdout}
    assert shown == {"demo-session", "demo-fork"}
    assert "More sessions exist" not in second.stdout
    through_runner = shlex.split(last_line(run("sessions", "list", demo_url, "--limit", 1)))
    assert through_runner[:3] == ["turnstore", "sessions", "list"]


def test_sessions_list_json_pages_with_a_next_cursor(cli: Cli, demo_url: str) -> None:
    """--json --limit 1 ends with {"next": cursor}; --after it walks every session once."""
    seen: list[str] = []
    after: list[str] = []
    for _ in range(5):
        lines = cli("sessions", "list", demo_url, "--limit", 1, "--json", *after).json_lines()
        seen += [line["session_id"] for line in lines if "session_id" in line]
        if "next" not in lines[-1]:
            break
        after = ["--after", lines[-1]["next"]]
    assert sorted(seen) == ["demo-fork", "demo-session"]


def test_sessions_list_all_pages_through_everything(cli: Cli, store_url: str) -> None:
    """--all --limit 2 lists all 5 sessions, in tables and as NDJSON without a next line."""
    for number in range(5):
        save_session(store_url, f"s-{number}", f"hello {number}", [])
    lines = cli("sessions", "list", store_url, "--all", "--limit", 2, "--json").json_lines()
    assert sorted(line["session_id"] for line in lines) == [f"s-{n}" for n in range(5)]
    table = cli("sessions", "list", store_url, "--all", "--limit", 2)
    assert all(f"s-{number}" in table.stdout for number in range(5))
    assert "More sessions exist" not in table.stdout


def test_sessions_list_refuses_a_cursor_it_did_not_print(cli: Cli, demo_url: str) -> None:
    """--after with a token that is not a cursor is a usage error."""
    result = cli("sessions", "list", demo_url, "--after", "not-a-cursor")
    assert_clean_error(result, "--after", code=2)


# --- sessions show ---------------------------------------------------------------------------


def test_sessions_show_prints_summary_transcript_and_events(cli: Cli, demo_url: str) -> None:
    """sessions show prints the summary, the conversation and the recent events."""
    result = cli("sessions", "show", demo_url, "demo-session")
    assert result.exit_code == 0, result.output
    for text in (
        "Session demo-session",
        "Conversation (turnstore",
        "Recent events",
        "task_complete",
    ):
        assert text in result.stdout
    assert "And what about the weekend?" in result.stdout


def test_sessions_show_json_parses(cli: Cli, demo_url: str) -> None:
    """sessions show --json prints summary, positioned transcript items and journal events."""
    result = cli("sessions", "show", demo_url, "demo-session", "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)
    assert shown["summary"]["session_id"] == "demo-session"
    first = shown["transcript"][0]
    assert first["item"]["role"] == "user"
    assert first["position"]["batch_item_count"] == 1
    kinds = [event["event"]["msg"]["type"] for event in shown["events"]]
    assert kinds[-1] == "task_complete"
    assert [e["stream_metrics"] for e in shown["events"] if e["stream_metrics"]]


def test_sessions_show_pages_older_events_to_the_first(cli: Cli, demo_url: str) -> None:
    """Following --before from page to page visits every journal event once, newest first."""
    with turnstore.open_blocking(demo_url) as store:
        every = store.event_page("demo-session", EventPageRequest(limit=1000)).events
    seen: list[int] = []
    before: list[object] = []
    while True:
        args = ("sessions", "show", demo_url, "demo-session", "--events", 7, "--json", *before)
        shown = json.loads(cli(*args).stdout)
        seen = [event["sequence"] for event in shown["events"]] + seen
        if shown["next_before_sequence"] is None:
            break
        before = ["--before", shown["next_before_sequence"]]
    assert seen == sorted(event.sequence for event in every)


def test_sessions_show_prints_the_older_page_command(demo_url: str) -> None:
    """The table ends with the command for the next older page; it runs as printed."""
    result = run_process("sessions", "show", demo_url, "demo-session", "--events", 3)
    assert "Older events:" in result.stdout
    command = last_line(result)
    assert "sessions show" in command
    assert "--before" in command
    older = run_printed(command)
    assert older.exit_code == 0, older.output
    assert "Events before seq" in older.stdout


def test_sessions_show_of_the_fork_starts_from_the_parent_history(cli: Cli, demo_url: str) -> None:
    """sessions show of the fork lists the first turn's items as its first batch."""
    shown = json.loads(cli("sessions", "show", demo_url, "demo-fork", "--json").stdout)
    assert shown["summary"]["parent_session_id"] == "demo-session"
    assert {item["position"]["checkpoint_sequence"] for item in shown["transcript"]} == {0}
    assert shown["events"] == []


def test_sessions_show_of_a_missing_session_is_one_clean_line(cli: Cli, demo_url: str) -> None:
    """sessions show of an absent session fails with one clean line and exit 1."""
    assert_clean_error(cli("sessions", "show", demo_url, "ghost"), "ghost")


# --- what a table shows ----------------------------------------------------------------------


def test_control_characters_are_escaped_in_tables_and_exact_in_json(
    cli: Cli, store_url: str
) -> None:
    """An id and a message holding tabs, newlines and ESC print as escapes; JSON is exact."""
    session_id = "tab\there\nnewline\x1b[31mred"
    save_session(store_url, session_id, "hi\x1b]0;title\x07\nthere", [{"role": "user"}])
    listed = cli("sessions", "list", store_url)
    assert "tab\\there\\nnewline\\x1b[31mred" in listed.stdout
    assert "\x1b" not in listed.stdout
    assert "\t" not in listed.stdout
    shown = cli("sessions", "show", store_url, session_id)
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout
    assert "\x07" not in shown.stdout
    exact = cli("sessions", "list", store_url, "--json").json_lines()
    assert exact[0]["session_id"] == session_id


def test_a_50_mb_value_is_cut_in_the_table(store_url: str) -> None:
    """sessions show of a 50 MB transcript item prints a bounded line, not the value: piped,
    each value is cut at `PIPED_MOST` characters."""
    huge = "x" * (50 * 1024 * 1024)
    save_session(store_url, "big", "big", [{"role": "user", "content": huge}])
    result = run("sessions", "show", store_url, "big")
    assert result.exit_code == 0, result.output
    assert len(result.stdout) < 5 * PIPED_MOST
    assert "xxx…" in result.stdout


def test_a_long_value_is_full_in_json(cli: Cli, store_url: str) -> None:
    """sessions show --json prints a 1 MB item whole."""
    long = "é" * (1024 * 1024)
    save_session(store_url, "long", "long", [{"role": "user", "content": long}])
    shown = json.loads(cli("sessions", "show", store_url, "long", "--json").stdout)
    assert shown["transcript"][0]["item"]["content"] == long


# --- the store URL ---------------------------------------------------------------------------


def test_turnstore_url_stands_in_for_the_url_argument(cli: Cli, demo_url: str) -> None:
    """With TURNSTORE_URL set, the URL may be left out, before options and their values."""
    env = {"TURNSTORE_URL": demo_url}
    listed = cli("sessions", "list", "--owner", "demo-user", "--json", env=env).json_lines()
    assert {line["session_id"] for line in listed} == {"demo-session", "demo-fork"}
    shown = cli("sessions", "show", "demo-fork", "--json", env=env)
    assert json.loads(shown.stdout)["summary"]["session_id"] == "demo-fork"


def test_an_explicit_url_wins_over_turnstore_url(demo_url: str, tmp_path: Path) -> None:
    """A URL on the command line is used even when TURNSTORE_URL names another store."""
    other = tmp_path / "other.sqlite3"
    save_session(str(other), "elsewhere", "hi", [])
    env = {"TURNSTORE_URL": demo_url}
    listed = run("sessions", "list", other, "--json", env=env).json_lines()
    assert [line["session_id"] for line in listed] == ["elsewhere"]


def test_inspecting_a_missing_file_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    """sessions list of a missing SQLite file fails in one clean line and creates no file."""
    missing = tmp_path / "missing.sqlite3"
    assert_clean_error(cli("sessions", "list", missing), str(missing))
    assert not missing.exists()


def test_inspecting_a_file_that_is_not_a_database_is_one_clean_line(
    cli: Cli, tmp_path: Path
) -> None:
    """A library error (a file that is not a database) becomes one clean line."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    assert_clean_error(cli("sessions", "list", text), str(text))


def test_a_password_in_the_url_is_never_printed(cli: Cli) -> None:
    """An unreachable PostgreSQL URL fails in one line that hides its password."""
    url = "postgresql://someone:s3cret@127.0.0.1:1/nowhere?connect_timeout=2"
    result = cli("sessions", "list", url)
    assert_clean_error(result, "someone:***@")
    assert "s3cret" not in result.output


# --- sessions delete -------------------------------------------------------------------------


def test_sessions_delete_of_a_parent_lists_and_removes_its_forks(cli: Cli, demo_url: str) -> None:
    """delete --yes of the parent removes the fork too and names both."""
    result = cli("sessions", "delete", demo_url, "demo-session", "--yes")
    assert result.exit_code == 0, result.output
    assert "Deleted 2 session(s)" in result.stdout
    assert "demo-fork  (fork of demo-session@" in result.stdout
    assert catalog(demo_url) == []


def test_sessions_delete_of_a_fork_leaves_the_parent(cli: Cli, demo_url: str) -> None:
    """delete --yes of the fork leaves the parent in place; --json lists what went."""
    result = cli("sessions", "delete", demo_url, "demo-fork", "--yes", "--json")
    assert json.loads(result.stdout) == {"session_ids": ["demo-fork"], "dry_run": False}
    assert catalog(demo_url) == ["demo-session"]


def test_sessions_delete_dry_run_deletes_nothing(cli: Cli, demo_url: str) -> None:
    """delete --dry-run reports the whole tree and leaves it."""
    result = cli("sessions", "delete", demo_url, "demo-session", "--dry-run", "--json")
    assert json.loads(result.stdout) == {
        "session_ids": ["demo-fork", "demo-session"],
        "dry_run": True,
    }
    table = cli("sessions", "delete", demo_url, "demo-session", "--dry-run")
    assert "Would delete (dry run, nothing deleted) 2 session(s)" in table.stdout
    assert catalog(demo_url) == ["demo-fork", "demo-session"]


def test_sessions_delete_off_a_terminal_needs_yes(cli: Cli, demo_url: str) -> None:
    """delete without --yes and without a terminal refuses (exit 2), listing what would go."""
    result = cli("sessions", "delete", demo_url, "demo-session")
    assert_clean_error(result, "--yes", code=2)
    assert "demo-fork" in result.stderr
    assert catalog(demo_url) == ["demo-fork", "demo-session"]


def test_sessions_delete_with_a_missing_id_deletes_nothing(cli: Cli, demo_url: str) -> None:
    """sessions delete with any absent id fails in one clean line and deletes nothing."""
    result = cli("sessions", "delete", demo_url, "demo-fork", "ghost", "--yes")
    assert_clean_error(result, "nothing deleted", "'ghost'")
    assert "demo-fork" not in result.stderr
    assert catalog(demo_url) == ["demo-fork", "demo-session"]


# --- the group -------------------------------------------------------------------------------


def test_version_prints_the_package_version(cli: Cli) -> None:
    """--version prints the installed package version."""
    result = cli("--version")
    assert result.exit_code == 0
    assert turnstore.__version__ in result.stdout


def walk(group: click.Group, prefix: str = "turnstore") -> Iterator[tuple[str, click.Command]]:
    """Every command under `group`, with its full name, the group itself first."""
    yield prefix, group
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from walk(command, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", command


def undocumented(name: str, command: click.Command) -> list[str]:
    """What a command leaves undocumented: itself, an option, or an argument its help skips."""
    text = (command.help or "").strip()
    gaps = [] if text else [f"{name}: no help"]
    for param in command.get_params(click.Context(command, info_name=name)):
        if isinstance(param, click.Option) and not (param.help or "").strip():
            gaps.append(f"{name} {param.opts[0]}: no help")
        if isinstance(param, click.Argument):
            metavar = (param.human_readable_name or "").rstrip(".")
            if metavar not in text:
                gaps.append(f"{name} {metavar}: not described in the help")
    return gaps


def test_every_command_option_and_argument_has_help() -> None:
    """Every command and option has help text, and every argument is named in its help."""
    gaps = [gap for name, command in walk(main) for gap in undocumented(name, command)]
    assert gaps == []
    assert len(list(walk(main))) >= 6


def test_every_command_renders_its_help() -> None:
    """--help of every command exits 0 and shows its usage."""
    for name, _ in walk(main):
        result = run(*name.split()[1:], "--help")
        assert result.exit_code == 0, (name, result.output)
        assert f"Usage: {name}" in result.stdout
