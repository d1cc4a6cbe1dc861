"""What the command line says when a store cannot be used: one `Error:` line and its hints.

`serve` checks its store and its port before it announces anything; a store at schema
version 0 names `turnstore migrate`; a missing file or folder is put in a command-line
user's words, and a command that changes a store creates none at a mistyped path; an
error's notes (PEP 678) follow its line.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from test_cli import Cli, assert_clean_error, cli, pytest_generate_tests, run

import turnstore
from turnstore.cli.common import open_store, reported
from turnstore.errors import InvalidInput

# The fixture and the hook that says which tests also run as a process, from test_cli.py.
__all__ = ["cli", "pytest_generate_tests"]


def unmigrated(backend_name: str, store_url: str) -> str:
    """`store_url` as a store at schema version 0: an empty file, or a schema not yet made."""
    if backend_name == "sqlite":
        Path(store_url).touch()
    return store_url


def serve_process(*args: object) -> subprocess.CompletedProcess[str]:
    """Run `python -m turnstore.cli serve ARGS` as a real process; it must stop by itself."""
    return subprocess.run(
        [sys.executable, "-m", "turnstore.cli", "serve", *map(str, args), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_error_line(stderr: str) -> str:
    """The only line a command printed: an `Error:` line, with no traceback and no announcement."""
    assert "Serving" not in stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    return lines[0]


# --- serve -----------------------------------------------------------------------------------


def test_serve_of_a_missing_folder_is_one_error_line_and_serves_nothing(tmp_path: Path) -> None:
    """serve of a path whose folder is missing exits 1 with one line, before `Serving`."""
    missing = tmp_path / "nowhere" / "agents.sqlite3"
    done = serve_process(missing)
    assert done.returncode == 1, done.stderr
    assert str(missing.parent) in one_error_line(done.stderr)
    assert not missing.parent.exists()


def test_serve_of_an_unmigrated_store_says_to_migrate_it(backend_name: str, store_url: str) -> None:
    """serve of a store at schema version 0 (both backends) is one line naming the command."""
    done = serve_process(unmigrated(backend_name, store_url))
    assert done.returncode == 1, done.stderr
    assert "turnstore migrate" in one_error_line(done.stderr)


def test_serve_announces_the_port_it_listens_on(tmp_path: Path) -> None:
    """serve --port 0 says which port the system gave it, not port 0."""
    url = str(tmp_path / "agents.sqlite3")
    turnstore.open_blocking(url).close()
    command = [sys.executable, "-m", "turnstore.cli", "serve", url, "--port", "0"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as child:
        try:
            assert child.stderr is not None
            line = child.stderr.readline()
        finally:
            child.terminate()
            child.wait(timeout=30)
    assert line.startswith(f"Serving {url} on http://127.0.0.1:"), line
    port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
    assert port > 0


def test_serve_on_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    """serve on a port another socket holds exits 1 with one line naming the address."""
    url = str(tmp_path / "agents.sqlite3")
    turnstore.open_blocking(url).close()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "turnstore.cli", "serve", url, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert f"127.0.0.1:{port}" in one_error_line(done.stderr)


# --- migrate hints ---------------------------------------------------------------------------


def test_reading_an_unmigrated_store_names_turnstore_migrate(
    cli: Cli, backend_name: str, store_url: str
) -> None:
    """A read-only command on a store at version 0 says to run `turnstore migrate`, which works."""
    url = unmigrated(backend_name, store_url)
    result = cli("sessions", "list", url)
    assert_clean_error(result, "turnstore migrate", "open it once for writing")
    assert cli("migrate", url).exit_code == 0
    assert cli("sessions", "list", url).exit_code == 0


def test_the_library_names_turnstore_migrate_too(backend_name: str, store_url: str) -> None:
    """open(read_only=True) of a store at version 0 raises a SchemaError naming both fixes."""
    url = unmigrated(backend_name, store_url)
    with pytest.raises(turnstore.errors.SchemaError) as caught:
        turnstore.open_blocking(url, read_only=True)
    assert "turnstore migrate" in str(caught.value)
    assert "for writing" in str(caught.value)


# --- a missing folder ------------------------------------------------------------------------


def test_a_missing_folder_is_said_in_the_command_lines_words(cli: Cli, tmp_path: Path) -> None:
    """A read-only command on a missing folder names the folder and no library argument."""
    missing = tmp_path / "nowhere" / "agents.sqlite3"
    result = cli("sessions", "list", missing)
    assert_clean_error(result, str(missing.parent), "check the path")
    assert "create_dirs" not in result.stderr
    assert "open()" not in result.stderr
    assert not missing.parent.exists()


def test_a_command_that_creates_the_store_says_to_create_its_folder(tmp_path: Path) -> None:
    """import, which creates a missing SQLite file, names the folder to create: no `create_dirs`."""
    missing = tmp_path / "nowhere" / "agents.sqlite3"
    export = tmp_path / "empty.jsonl"
    export.write_bytes(b"")
    result = run("import", missing, export)
    assert_clean_error(result, str(missing.parent), "mkdir -p")
    assert "create_dirs" not in result.stderr
    migrated = run("migrate", missing)
    assert_clean_error(migrated, str(missing.parent), "check the path")
    assert "mkdir" not in migrated.stderr
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "command",
    [
        ("sessions", "delete", "{url}", "s-1", "--yes"),
        ("prune", "{url}", "--older-than", "1d", "--yes"),
        ("gc", "{url}", "--yes"),
        ("vacuum", "{url}", "--yes"),
        ("sweep", "{url}", "--attachments", "{folder}", "--older-than", "1d", "--yes"),
    ],
    ids=lambda command: " ".join(command[:2]).replace(" {url}", ""),
)
def test_a_maintenance_command_on_a_missing_file_creates_no_store(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    """A command that changes an existing store refuses a mistyped path and creates nothing."""
    missing = tmp_path / "agnets.sqlite3"
    args = [part.format(url=missing, folder=tmp_path) for part in command]
    assert_clean_error(run(*args), str(missing), "check the path")
    assert not missing.exists()
    assert_clean_error(run(*[a.replace(str(missing), f"sqlite:///{missing}") for a in args]))
    assert not missing.exists()


def test_a_url_error_other_than_the_folder_keeps_its_words(cli: Cli) -> None:
    """A mistyped sqlite URL keeps the library's own hint."""
    result = cli("sessions", "list", "sqlite:/nowhere/agents.sqlite3")
    assert_clean_error(result, "did you mean sqlite:///")


# --- an error's notes ------------------------------------------------------------------------


def noted(message: str, *notes: str) -> InvalidInput:
    """A library error carrying `notes`, as a rule adds them (PEP 678)."""
    error = InvalidInput(message)
    for note in notes:
        error.add_note(note)
    return error


def test_an_errors_notes_follow_its_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI prints one `Error:` line, then each of the error's notes on a line of its own."""
    error = noted("checkpoint sequence did not advance", "session: s-1", "hint: sequence += 1")
    with pytest.raises(click.ClickException) as caught, reported("agents.sqlite3"):
        raise error
    caught.value.show()
    printed = capsys.readouterr().err.splitlines()
    assert printed == [
        "Error: agents.sqlite3: checkpoint sequence did not advance",
        "  session: s-1",
        "  hint: sequence += 1",
    ]


def test_notes_are_escaped_and_kept_off_the_error_line(tmp_path: Path) -> None:
    """A note with a terminal escape prints it as text; an error without notes is one line."""
    url = str(tmp_path / "agents.sqlite3")

    def fail_inside_open_store() -> None:
        with open_store(url) as store:
            store.load("s-1")
            raise noted("bad", "id: \x1b[31mred\nsecond")

    with pytest.raises(click.ClickException) as caught:
        fail_inside_open_store()
    assert caught.value.format_message() == f"{url}: bad\n  id: \\x1b[31mred\n  second"
    with pytest.raises(click.ClickException) as plain, reported(url):
        raise InvalidInput("bad")
    assert plain.value.format_message() == f"{url}: bad"
