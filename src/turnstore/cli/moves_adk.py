"""Internal: `import-from adk` and `export-to adk`: Google ADK sessions in and out.

The commands join the groups of `turnstore.cli.moves`; the other side is a
`DatabaseSessionService` database, named by the async SQLAlchemy URL ADK takes (a bare path
is a SQLite file). The library call under them is `turnstore.integrations.adk_move`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

import turnstore
from turnstore.cli.common import frozen_heap, open_store, reported
from turnstore.cli.moves import (
    MoveWords,
    export_to,
    import_from,
    move_options,
    show_move,
    show_survey,
)
from turnstore.cli.progress import progress_bar
from turnstore.errors import TurnstoreError
from turnstore.records.kinds.adk import KIND

F = TypeVar("F", bound=Callable[..., Any])

EXTRAS = {
    "google": "pip install 'turnstore[adk]'",
    "sqlalchemy": "pip install 'google-adk[db]'",
    "greenlet": "pip install 'google-adk[db]'",
    "aiosqlite": "pip install aiosqlite",
    "asyncpg": "pip install asyncpg",
    "psycopg": "pip install 'turnstore[postgres]'",
}
"""What to install when a module the command needs is missing, by the module's name."""
ADK = MoveWords(
    "sessions",
    "events",
    "unreadable events, skipped",
    ("session_count", "event_count", "present_count", "ahead_count", "state_count"),
    ("session_count", "event_count"),
)
"""The words of the Google ADK move."""
DRIVERS = "sqlite+aiosqlite:///sessions.db, postgresql+asyncpg://… or postgresql+psycopg://…"
"""The async SQLAlchemy URLs a `DatabaseSessionService` database is named by."""


@contextmanager
def needs_adk() -> Iterator[None]:
    """A missing module as one `Error:` line saying what to install; a failing database too."""
    try:
        yield
    except ModuleNotFoundError as error:
        name = error.name or ""
        advice = EXTRAS.get(name.partition(".")[0], EXTRAS["google"])
        raise click.ClickException(
            f"moving Google ADK sessions needs {name or 'ADK'}, which is not installed: {advice}"
        ) from None
    except (TurnstoreError, sqlite3.Error) as error:
        raise click.ClickException(str(error)) from None
    except Exception as error:
        if not type(error).__module__.startswith("sqlalchemy"):
            raise
        raise click.ClickException(str(error).splitlines()[0]) from None


def adk_database(where: str, *, read_only: bool) -> Any:
    """The `DatabaseSessions` of an async URL (or a SQLite file's path); a source read-only."""
    from turnstore.integrations.adk_move import DatabaseSessions

    scheme, separator, _ = where.partition("://")
    if separator and "+" not in scheme:
        raise click.ClickException(
            f"{where}: a DatabaseSessionService database is named by the async SQLAlchemy URL"
            f" ADK takes ({DRIVERS}), or a SQLite file by its path"
        )
    if not separator:
        path = Path(where).expanduser().absolute()
        if read_only and not path.is_file():
            raise click.ClickException(
                f"{path}: no DatabaseSessionService database there; check the path"
            )
        where = f"sqlite+aiosqlite:///{path}"
    return DatabaseSessions(where, read_only=read_only)


def pick_options(command: F) -> F:
    """`--apps NAME` and `--users ID`, repeatable."""
    for flag, what in (("--users", "user"), ("--apps", "app")):
        command = click.option(
            flag,
            f"{what}_names" if what == "app" else "user_ids",
            metavar="NAME" if what == "app" else "ID",
            multiple=True,
            help=f"Move only this {what}'s sessions (repeatable). Default: every {what}.",
        )(command)
    return command


@import_from.command(KIND.name)
@click.argument("source", metavar="SOURCE")
@click.argument("url", metavar="STORE")
@click.option(
    "--owner",
    metavar="ID",
    help="The catalog owner of the sessions moved in. Default: each session's ADK user id.",
)
@pick_options
@move_options(ADK, "events")
def import_adk(
    source: str,
    url: str,
    owner: str | None,
    app_names: tuple[str, ...],
    user_ids: tuple[str, ...],
    session_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy Google ADK sessions into a store from DatabaseSessionService.

    SOURCE (a DatabaseSessionService database's async URL, or a SQLite file's path) is read,
    never written; STORE is the turnstore store (a SQLite file is created if missing). Every
    app, user and session is copied with its events, state and times, exact. Run it again at
    any time: it appends only the events the store lacks, and reports a session whose events
    differ from the source's as a conflict, leaving it as it is.
    """
    picked = _picked(app_names, user_ids, session_ids)
    with needs_adk():
        from turnstore.integrations.adk_move import TurnstoreSessions

        reading = adk_database(source, read_only=True)
        if dry_run:
            _show_survey(reading, picked, as_json, None)
            return
        with ExitStack() as stack:
            with reported(url):
                # The search index catches up at the store's first search, or in the
                # background of the next store a worker opens: the copy does not wait for it.
                store = turnstore.open_blocking(url, index_in_background=False)
            stack.enter_context(store)
            writing = TurnstoreSessions(store, owner_id=owner)
            _move(reading, writing, store, picked, verify, skip_bad, as_json, "in")


@export_to.command(KIND.name)
@click.argument("url", metavar="STORE")
@click.argument("target", metavar="TARGET")
@pick_options
@move_options(ADK, "events")
def export_adk(
    url: str,
    target: str,
    app_names: tuple[str, ...],
    user_ids: tuple[str, ...],
    session_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy a store's Google ADK sessions out to a DatabaseSessionService.

    STORE is read, never written; TARGET (an async URL, or a SQLite file's path) is created
    with ADK's tables if missing, and written through DatabaseSessionService itself: its
    create_session stamps the current time, and append_event applies each event's state
    delta again. Run it again at any time: it appends only what TARGET lacks, and reports a
    session whose events differ as a conflict, leaving it as it is.
    """
    picked = _picked(app_names, user_ids, session_ids)
    with needs_adk(), ExitStack() as stack:
        from turnstore.integrations.adk_move import TurnstoreSessions

        store = stack.enter_context(open_store(url, read_only=True, existing=True))
        reading = TurnstoreSessions(store)
        if dry_run:
            _show_survey(reading, picked, as_json, store.upkeep.stats().database_bytes)
            return
        writing = adk_database(target, read_only=False)
        _move(reading, writing, store, picked, verify, skip_bad, as_json, "out")


def _picked(*names: tuple[str, ...]) -> dict[str, list[str] | None]:
    """The filters as the library takes them: None for each left out."""
    return dict(
        zip(("apps", "users", "session_ids"), (list(n) or None for n in names), strict=True)
    )


def _show_survey(
    source: Any, picked: dict[str, Any], as_json: bool, store_bytes: int | None
) -> None:
    from turnstore.integrations.adk_move import asurvey

    async def run() -> Any:
        try:
            return await asurvey(source, **picked)
        finally:
            await source.aclose()

    found = asyncio.run(run())
    size = found.source_bytes if store_bytes is None else store_bytes
    show_survey(found.session_count, found.event_count, size, ADK, as_json)


def _move(
    source: Any,
    target: Any,
    store: Any,
    picked: dict[str, Any],
    verify: bool,
    skip_bad: bool,
    as_json: bool,
    direction: str,
) -> None:
    from turnstore.integrations import adk_move as move

    async def run() -> tuple[Any, Any, int | None]:
        try:
            with progress_bar("Copying sessions") as advance:
                report = await move.acopy_sessions(
                    source, target, skip_bad=skip_bad, progress=advance, **picked
                )
            checked = None
            if verify:
                with progress_bar("Verifying sessions") as advance:
                    checked = await move.averify_sessions(
                        source, target, progress=advance, **picked
                    )
            return report, checked, await (target if direction == "out" else source).size()
        finally:
            await source.aclose()
            await target.aclose()

    with frozen_heap():
        report, checked, outside = asyncio.run(run())
    ours = store.upkeep.stats().database_bytes
    sizes = {"source_bytes": outside, "turnstore_bytes": ours}
    if direction == "out":
        sizes = {"source_bytes": ours, "target_bytes": outside}
    parts = [f"{report.event_count:,} events"]
    if report.present_count:
        parts.append(f"{report.present_count:,} already there")
    if report.ahead_count:
        parts.append(f"{report.ahead_count:,} sessions further on the target, kept")
    if report.state_count:
        parts.append(f"{report.state_count:,} app and user state values")
    show_move(report, checked, sizes, as_json, direction, ADK, parts)
    if report.conflicts or (checked is not None and checked.difference is not None):
        raise SystemExit(1)


COMMANDS = [import_adk, export_adk]
"""The commands this module adds (to `import-from` and `export-to`, on import)."""
