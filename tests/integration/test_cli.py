"""The `turnstore` command line, driven through click's test runner on real SQLite files."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

import turnstore
from turnstore import (
    ExecutionPageRequest,
    SessionPageRequest,
)
from turnstore.cli import main
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
    "Database",
)


def run(*args: object) -> Result:
    """Invoke the CLI as a plain 80-column, colourless pipe would see it."""
    runner = CliRunner(env={"COLUMNS": "80", "FORCE_COLOR": None, "TTY_COMPATIBLE": None})
    return runner.invoke(main, [str(arg) for arg in args])


def assert_clean_error(result: Result, *fragments: str) -> None:
    """A failed command printed exactly one `Error:` line and no traceback."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def session_ids(path: Path) -> list[str]:
    """The catalog of the file at `path`, as `sessions list --json` reports it."""
    result = run("sessions", "list", path, "--json")
    assert result.exit_code == 0, result.output
    return [session["session_id"] for session in json.loads(result.stdout)]


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    """A database file the demo has written."""
    path = tmp_path / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert result.exit_code == 0, result.output
    return path


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


def test_demo_output_fits_80_plain_columns(tmp_path: Path) -> None:
    """demo output has no colour codes off a terminal and fits 80 columns (bar the path)."""
    path = tmp_path / "demo.sqlite3"
    result = run("demo", "--path", path)
    assert "\x1b[" not in result.stdout
    wide = [line for line in result.stdout.splitlines() if len(line) > 80]
    assert all(str(path) in line for line in wide), wide


def test_demo_file_holds_the_session_and_its_fork(demo_file: Path) -> None:
    """After demo, the catalog holds the session and its fork at an earlier sequence."""
    with turnstore.open_blocking(demo_file) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=10))
        found = {summary.session_id: summary for summary in page.sessions}
        assert set(found) == {"demo-session", "demo-fork"}
        fork = found["demo-fork"]
        assert fork.parent_session_id == "demo-session"
        assert fork.parent_sequence is not None
        assert 0 < fork.parent_sequence < found["demo-session"].sequence
        assert found["demo-session"].execution_stats.run_count == 2


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


def test_sessions_list_prints_a_table(demo_file: Path) -> None:
    """sessions list prints both sessions, the fork with its parent and sequence."""
    result = run("sessions", "list", demo_file)
    assert result.exit_code == 0, result.output
    assert "demo-session" in result.stdout
    assert "demo-fork" in result.stdout
    assert "demo-session@" in result.stdout


def test_sessions_list_json_parses(demo_file: Path) -> None:
    """sessions list --json prints the catalog as a JSON array with the wire names."""
    result = run("sessions", "list", demo_file, "--json")
    assert result.exit_code == 0, result.output
    sessions = json.loads(result.stdout)
    found = {session["session_id"]: session for session in sessions}
    assert set(found) == {"demo-session", "demo-fork"}
    assert found["demo-fork"]["parent_session_id"] == "demo-session"
    assert found["demo-session"]["execution_stats"]["run_count"] == 2


def test_sessions_list_filters_by_owner_and_limit(demo_file: Path) -> None:
    """sessions list honours --owner and --limit."""
    none = run("sessions", "list", demo_file, "--owner", "somebody-else", "--json")
    assert json.loads(none.stdout) == []
    one = run("sessions", "list", demo_file, "--owner", "demo-user", "--limit", 1, "--json")
    # Catalog times have one-second resolution, so either session may be the newest.
    assert len(json.loads(one.stdout)) == 1


def test_sessions_show_prints_summary_transcript_and_events(demo_file: Path) -> None:
    """sessions show prints the summary, the transcript and the recent events."""
    result = run("sessions", "show", demo_file, "demo-session")
    assert result.exit_code == 0, result.output
    for text in ("Session demo-session", "Transcript", "Recent events", "task_complete"):
        assert text in result.stdout
    assert "And what about the weekend?" in result.stdout


def test_sessions_show_json_parses(demo_file: Path) -> None:
    """sessions show --json prints summary, positioned transcript items and journal events."""
    result = run("sessions", "show", demo_file, "demo-session", "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)
    assert shown["summary"]["session_id"] == "demo-session"
    first = shown["transcript"][0]
    assert first["item"]["role"] == "user"
    assert first["position"]["batch_item_count"] == 1
    kinds = [event["event"]["msg"]["type"] for event in shown["events"]]
    assert kinds[-1] == "task_complete"
    metrics = [e["stream_metrics"] for e in shown["events"] if e["stream_metrics"]]
    assert metrics


def test_sessions_show_of_the_fork_starts_from_the_parent_history(demo_file: Path) -> None:
    """sessions show of the fork lists the first turn's items as its first batch."""
    shown = json.loads(run("sessions", "show", demo_file, "demo-fork", "--json").stdout)
    assert shown["summary"]["parent_session_id"] == "demo-session"
    assert {item["position"]["checkpoint_sequence"] for item in shown["transcript"]} == {0}
    assert shown["events"] == []


def test_sessions_show_of_a_missing_session_is_one_clean_line(demo_file: Path) -> None:
    """sessions show of an absent session fails with one clean line and exit 1."""
    assert_clean_error(run("sessions", "show", demo_file, "ghost"), "ghost")


def test_inspecting_a_file_that_is_not_a_database_is_one_clean_line(tmp_path: Path) -> None:
    """A library error (a file that is not a database) becomes one clean line."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    assert_clean_error(run("sessions", "list", text), str(text))


def test_inspecting_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    """sessions list of a missing file fails as a usage error and creates no file."""
    missing = tmp_path / "missing.sqlite3"
    result = run("sessions", "list", missing)
    assert result.exit_code == 2
    assert not missing.exists()


def test_sessions_delete_removes_a_fork(demo_file: Path) -> None:
    """sessions delete of the fork leaves the parent in place."""
    result = run("sessions", "delete", demo_file, "demo-fork")
    assert result.exit_code == 0, result.output
    assert session_ids(demo_file) == ["demo-session"]


def test_sessions_delete_of_a_parent_removes_its_forks(demo_file: Path) -> None:
    """sessions delete of the parent deletes the whole tree."""
    result = run("sessions", "delete", demo_file, "demo-session")
    assert result.exit_code == 0, result.output
    assert session_ids(demo_file) == []


def test_sessions_delete_with_a_missing_id_deletes_nothing(demo_file: Path) -> None:
    """sessions delete with any absent id fails in one clean line and deletes nothing."""
    result = run("sessions", "delete", demo_file, "demo-fork", "ghost")
    assert_clean_error(result, "nothing deleted", "'ghost'")
    assert "demo-fork" not in result.stderr
    assert sorted(session_ids(demo_file)) == ["demo-fork", "demo-session"]


def test_version_prints_the_package_version() -> None:
    """--version prints the installed package version."""
    result = run("--version")
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
