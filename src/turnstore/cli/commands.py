"""The `turnstore` command: a thin click layer over the public blocking API."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

import turnstore
from turnstore import (
    BlockingStore,
    TurnstoreError,
)
from turnstore.cli import output, views
from turnstore.cli.demo import FORK_ID, SESSION_ID, run_demo

F = TypeVar("F", bound=Callable[..., Any])

EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
"""A database file that must already exist: inspection never creates one."""


@contextmanager
def open_store(
    path: Path, *, read_only: bool = False, create_dirs: bool = False
) -> Iterator[BlockingStore]:
    """Open the store at `path`, turning any library error into one clean CLI line."""
    try:
        store = turnstore.open_blocking(path, read_only=read_only, create_dirs=create_dirs)
    except TurnstoreError as error:
        raise click.ClickException(f"{path}: {error}") from None
    try:
        with store:
            yield store
    except TurnstoreError as error:
        raise click.ClickException(f"{path}: {error}") from None


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
"""The shared `--json` flag of the inspection commands."""


def count_option(flag: str, help: str) -> Callable[[F], F]:
    """A `--flag N` option: a positive count, 20 unless given."""
    return click.option(
        flag, metavar="N", type=click.IntRange(min=1), default=20, show_default=True, help=help
    )


def echo_json(value: Any) -> None:
    """Print `value` as indented JSON."""
    click.echo(output.json_text(value))


@click.group("turnstore", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(turnstore.__version__, "--version", "-V", prog_name="turnstore")
def main() -> None:
    """turnstore: durable, transactional storage for AI-agent sessions.

    Run `turnstore demo` to watch a scripted agent session being stored, then inspect any
    turnstore SQLite file with the `sessions` commands.
    """


def default_demo_path() -> Path:
    """A fresh database path in a new temporary folder."""
    return Path(tempfile.mkdtemp(prefix="turnstore-demo-")) / "demo.sqlite3"


@main.command()
@click.option(
    "--path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file to write (created, with its folder, if missing). Default: a new file in a"
    " temporary folder.",
)
def demo(path: Path | None) -> None:
    """Run a scripted agent session and show what the store then holds.

    No network and no model are involved. The script stores a user message, a turn whose
    model step streams reasoning and text, a tool call that waits for approval, input queued
    while the turn runs and delivered as a second turn, and a fork of the session at the end
    of the first turn.
    """
    target = path or default_demo_path()
    # The demo writes a new database by design; a folder it names is made for it.
    with open_store(target, create_dirs=True) as store:
        taken = [i for i in (SESSION_ID, FORK_ID) if store.session_summary(i) is not None]
        if taken:
            raise click.ClickException(
                f"{target} already holds {', '.join(taken)}; pass a new --path"
            )
        result = run_demo(store)
        view = views.store_view(store, result.session_id)
    output.render_demo(output.make_console(), view, target)


@main.group()
def sessions() -> None:
    """List, show and delete the sessions in a turnstore SQLite file."""


@sessions.command("list")
@click.argument("path", type=EXISTING_FILE)
@click.option("--owner", metavar="ID", help="Only list sessions owned by this owner id.")
@count_option("--limit", "Most sessions to list, most recently updated first.")
@JSON_OPTION
def list_sessions(path: Path, owner: str | None, limit: int, as_json: bool) -> None:
    """List sessions, most recently updated first.

    PATH is an existing turnstore SQLite file.
    """
    with open_store(path, read_only=True) as store:
        found = views.catalog(store, owner, limit)
    if as_json:
        echo_json(found)
    else:
        output.render_catalog(output.make_console(), found)


@sessions.command("show")
@click.argument("path", type=EXISTING_FILE)
@click.argument("session_id")
@count_option("--events", "How many of the newest journal events to show.")
@count_option(
    "--batches", "How many of the newest transcript batches (one per checkpoint) to show."
)
@JSON_OPTION
def show_session(path: Path, session_id: str, events: int, batches: int, as_json: bool) -> None:
    """Show a session: summary, transcript and recent events.

    PATH is an existing turnstore SQLite file and SESSION_ID a session in it.
    """
    with open_store(path, read_only=True) as store:
        view = views.session_view(store, session_id, batches, events)
    if view is None:
        raise click.ClickException(f"{path}: no session {session_id!r}")
    if as_json:
        echo_json(view.to_builtins())
    else:
        output.render_session(output.make_console(), view)


@sessions.command("delete")
@click.argument("path", type=EXISTING_FILE)
@click.argument("session_ids", metavar="SESSION_ID...", nargs=-1, required=True)
def delete_sessions(path: Path, session_ids: tuple[str, ...]) -> None:
    """Delete sessions, with their forks and session-scoped state.

    Deletes each SESSION_ID from PATH, an existing turnstore SQLite file. All or nothing:
    if any SESSION_ID is absent, nothing is deleted and the command fails.
    """
    with open_store(path) as store:
        if not store.delete_sessions(list(session_ids)):
            missing = [i for i in session_ids if store.session_summary(i) is None]
            names = ", ".join(repr(i) for i in missing) or "a session (deleted meanwhile)"
            raise click.ClickException(f"{path}: nothing deleted; no session {names}")
    click.echo(f"Deleted {len(set(session_ids))} session(s) and their forks from {path}")
