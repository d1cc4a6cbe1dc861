"""Internal: the `turnstore` command: a thin click layer over the public blocking API.

Exit codes: 0 success, 1 an error reported on one `Error:` line, 2 a usage error (see
`turnstore.cli.common`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

import turnstore
from turnstore import BlockingStore
from turnstore.cli import (
    moves,
    moves_adk,  # noqa: F401  (adds `adk` to moves' groups)
    moves_agents,  # noqa: F401  (adds `openai-agents` to moves' groups)
    moves_memory,  # noqa: F401  (adds `langgraph-store` and `adk-memory` to `import-from`)
    operate,
    output,
    paging,
    views,
)
from turnstore.cli.common import (
    DRY_RUN_OPTION,
    JSON_OPTION,
    URL_ARGUMENT,
    YES_OPTION,
    StoreCommand,
    again,
    configure_logging,
    confirm,
    display_url,
    echo_json,
    echo_ndjson,
    open_store,
)
from turnstore.cli.crash import crash_and_reload
from turnstore.cli.demo import CRASH_ID, FORK_ID, SESSION_ID, run_demo
from turnstore.cli.memory import memory
from turnstore.cli.search import reindex, search
from turnstore.cli.serve import serve
from turnstore.records import SessionCursor, SessionPage

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LIMIT = 20
"""Sessions on one `sessions list` page unless `--limit` says otherwise."""


def count_option(flag: str, help: str, default: int = 20) -> Callable[[F], F]:
    """A `--flag N` option: a positive count, `default` unless given."""
    return click.option(
        flag, metavar="N", type=click.IntRange(min=1), default=default, show_default=True, help=help
    )


@click.group("turnstore", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(turnstore.__version__, "--version", "-V", prog_name="turnstore")
def main() -> None:
    """turnstore: durable, transactional storage for AI-agent sessions.

    Run `turnstore demo` to watch a scripted agent session being stored, then inspect and
    operate any store (a SQLite path or a postgresql:// URL, or TURNSTORE_URL) with the
    other commands. Exit codes: 0 ok, 1 error, 2 usage error. TURNSTORE_LOG_LEVEL=info
    (or debug, warning, ...) prints the library's log lines to stderr.
    """
    configure_logging()


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
    of the first turn. Then a worker process is killed with SIGKILL in the middle of a turn,
    and its session is reloaded exactly at its last commit.
    """
    target = path or default_demo_path()
    # The demo writes a new database by design; a folder it names is made for it.
    with open_store(str(target), create_dirs=True) as store:
        ours = (SESSION_ID, FORK_ID, CRASH_ID)
        taken = [i for i in ours if store.session_summary(i) is not None]
        if taken:
            raise click.ClickException(
                f"{target} already holds {', '.join(taken)}; pass a new --path"
            )
        result = run_demo(store)
    crash = crash_and_reload(target)
    with open_store(str(target), read_only=True) as store:
        view = views.store_view(store, result.session_id)
    output.render_demo(output.make_console(), view, target, crash)


@main.group()
def sessions() -> None:
    """List, show and delete the sessions of a store."""


@sessions.command("list", cls=StoreCommand)
@URL_ARGUMENT
@click.option("--owner", metavar="ID", help="Only list sessions owned by this owner id.")
@click.option(
    "--limit",
    metavar="N",
    type=click.IntRange(min=1),
    help=f"Sessions per page [default: {DEFAULT_LIMIT}; {paging.ALL_PAGE_SIZE} with --all].",
)
@click.option(
    "--after",
    metavar="CURSOR",
    type=paging.CURSOR,
    help="Start after the page that printed this cursor (its next-page command has it).",
)
@click.option("--all", "every", is_flag=True, help="List every session, a page at a time.")
@JSON_OPTION
def list_sessions(
    url: str,
    owner: str | None,
    limit: int | None,
    after: SessionCursor | None,
    every: bool,
    as_json: bool,
) -> None:
    """List sessions, most recently updated first, a page at a time.

    URL is the store: a SQLite path, sqlite:///path or postgresql://... (or TURNSTORE_URL).
    When more sessions exist, the table ends with the command printing the next page, and
    --json (one session per line) with a last line {"next": CURSOR}.
    """
    size = limit or (paging.ALL_PAGE_SIZE if every else DEFAULT_LIMIT)
    with open_store(url, read_only=True) as store:
        pages = paging.session_pages(store, owner, size, after)
        if every:
            _show_every_page(pages, as_json)
        else:
            _show_one_page(next(pages), as_json, url, owner, size)


def _show_every_page(pages: Any, as_json: bool) -> None:
    """Print each page as it arrives: only one page is ever held."""
    console = output.make_console()
    for number, page in enumerate(pages):
        if as_json:
            echo_ndjson(paging.page_lines(page, last=False))
        elif page.sessions or number == 0:
            output.render_catalog(console, page.sessions)


def _show_one_page(
    page: SessionPage, as_json: bool, url: str, owner: str | None, size: int
) -> None:
    """Print one page and, when more follow, how to get them."""
    if as_json:
        echo_ndjson(paging.page_lines(page, last=True))
        return
    console = output.make_console()
    output.render_catalog(console, page.sessions)
    if page.next_cursor is None:
        return
    owned = () if owner is None else ("--owner", owner)
    token = page.next_cursor.to_token()
    output.render_more(
        console,
        "More sessions exist. Next page:",
        again("sessions list", url, *owned, "--limit", size, "--after", token),
    )


@sessions.command("show", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("session_id")
@count_option("--events", "How many journal events to show: the newest, or those before --before.")
@click.option(
    "--before",
    metavar="SEQ",
    type=click.IntRange(min=1),
    help="Show the events with a sequence below SEQ: the next older page.",
)
@count_option(
    "--batches", "How many of the newest transcript batches (one per checkpoint) to show."
)
@count_option(
    "--messages",
    "How many of the newest messages of a framework session (not batched) to show.",
    default=50,
)
@JSON_OPTION
def show_session(
    url: str,
    session_id: str,
    events: int,
    before: int | None,
    batches: int,
    messages: int,
    as_json: bool,
) -> None:
    """Show a session of any kind: summary, conversation and a page of its events.

    URL is the store and SESSION_ID a session in it. The conversation is read the same way
    for every kind: a native session's transcript, the items of an OpenAI Agents SDK or ADK
    session, a LangGraph thread's messages. When older events exist, the output ends with
    the command showing the next older page (--json: next_before_sequence).
    """
    with open_store(url, read_only=True) as store:
        view = views.session_view(store, session_id, (batches, messages, events), before)
        meant = [] if view is not None else views.meant(store, session_id)
    if view is None:
        hint = f"; did you mean {' or '.join(map(repr, meant))}?" if meant else ""
        raise click.ClickException(f"{display_url(url)}: no session {session_id!r}{hint}")
    if as_json:
        echo_json(view.to_builtins())
        return
    older = view.next_before_sequence
    older_command = None
    if older is not None:
        older_command = again(
            "sessions show", url, session_id, "--events", events, "--before", older
        )
    output.render_session(output.make_console(), view, older_command)


def doomed_sessions(store: BlockingStore, url: str, session_ids: tuple[str, ...]) -> list[str]:
    """Every session deleting `session_ids` removes; fails, deleting nothing, if one is absent."""
    trees = {session_id: store.upkeep.tree(session_id) for session_id in session_ids}
    missing = [session_id for session_id, tree in trees.items() if not tree]
    if missing:
        names = ", ".join(repr(session_id) for session_id in missing)
        raise click.ClickException(f"{display_url(url)}: nothing deleted; no session {names}")
    return sorted({member for tree in trees.values() for member in tree})


@sessions.command("delete", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("session_ids", metavar="SESSION_ID...", nargs=-1, required=True)
@YES_OPTION
@DRY_RUN_OPTION
@JSON_OPTION
def delete_sessions(
    url: str, session_ids: tuple[str, ...], yes: bool, dry_run: bool, as_json: bool
) -> None:
    """Delete sessions with every fork below them and their session-scoped state.

    Deletes each SESSION_ID from the store at URL. It lists every session that goes, asks
    on a terminal (--yes off one) and reports them all. All or nothing: if any SESSION_ID
    is absent, nothing is deleted and the command fails.
    """
    with open_store(url, read_only=dry_run, existing=True) as store:
        doomed = paging.summaries(store, doomed_sessions(store, url, session_ids))
        if not dry_run and not yes:
            output.render_removed(output.make_console(stderr=True), "Will delete", doomed)
            confirm(f"Delete these {len(doomed)} session(s)", yes=yes)
        if not dry_run and not store.delete_sessions(list(session_ids)):
            raise click.ClickException(f"{display_url(url)}: nothing deleted; deleted meanwhile")
    if as_json:
        echo_json({"session_ids": [s.session_id for s in doomed], "dry_run": dry_run})
        return
    verb = "Would delete (dry run, nothing deleted)" if dry_run else "Deleted"
    output.render_removed(output.make_console(), verb, doomed)


for command in [*operate.COMMANDS, *moves.COMMANDS, memory, search, reindex, serve]:
    main.add_command(command)
