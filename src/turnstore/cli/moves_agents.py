"""Internal: `import-from openai-agents` and `export-to openai-agents`: SDK sessions in and out.

The commands join the groups of `turnstore.cli.moves`; a side is a `SQLiteSession` file (a
path) or a `SQLAlchemySession` database (an async SQLAlchemy URL). The library call under
them is `turnstore.integrations.openai_agents_move`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

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
from turnstore.records.kinds.openai_agents import KIND

EXTRAS = {
    "agents": "pip install 'turnstore[openai-agents]'",
    "sqlalchemy": "pip install 'openai-agents[sqlalchemy]'",
    "greenlet": "pip install 'openai-agents[sqlalchemy]'",
    "aiosqlite": "pip install aiosqlite",
    "asyncpg": "pip install asyncpg",
    "psycopg": "pip install 'turnstore[postgres]'",
}
"""What to install when a module the command needs is missing, by the module's name."""
AGENTS = MoveWords(
    "sessions",
    "items",
    "undecodable items, skipped",
    ("session_count", "item_count", "present_count", "ahead_count"),
    ("session_count", "item_count"),
)
"""The words of the OpenAI Agents SDK move."""
DRIVERS = "sqlite+aiosqlite:///chat.db, postgresql+psycopg://… or postgresql+asyncpg://…"
"""The async SQLAlchemy URLs a `SQLAlchemySession` database is named by."""


@contextmanager
def needs_agents() -> Iterator[None]:
    """A missing module as one `Error:` line saying what to install; a failing database too."""
    try:
        yield
    except ModuleNotFoundError as error:
        name = error.name or ""
        advice = EXTRAS.get(name.partition(".")[0], EXTRAS["agents"])
        raise click.ClickException(
            f"moving OpenAI Agents SDK sessions needs {name or 'the SDK'}, which is not"
            f" installed: {advice}"
        ) from None
    except (TurnstoreError, sqlite3.Error) as error:
        raise click.ClickException(str(error)) from None
    except Exception as error:
        if not type(error).__module__.startswith("sqlalchemy"):
            raise
        raise click.ClickException(str(error).splitlines()[0]) from None


def agents_sessions(where: str, *, read_only: bool) -> Any:
    """The `Sessions` of a `SQLiteSession` file (a path) or a `SQLAlchemySession` database
    (an async SQLAlchemy URL); a source is opened read-only."""
    from turnstore.integrations.openai_agents_move import SQLAlchemySessions, SQLiteSessions

    scheme, separator, _ = where.partition("://")
    if separator and "+" not in scheme:
        raise click.ClickException(
            f"{where}: a SQLiteSession file is named by its path, a SQLAlchemySession database"
            f" by an async SQLAlchemy URL ({DRIVERS})"
        )
    if separator:
        return SQLAlchemySessions(where, read_only=read_only, create_tables=not read_only)
    path = Path(where).expanduser()
    if read_only and not path.is_file():
        raise click.ClickException(f"{path}: no SQLiteSession database there; check the path")
    return SQLiteSessions(path)


@import_from.command(KIND.name)
@click.argument("source", metavar="SOURCE")
@click.argument("url", metavar="STORE")
@click.option("--owner", metavar="ID", help="The catalog owner of the sessions moved in.")
@move_options(AGENTS, "items")
def import_agents(
    source: str,
    url: str,
    owner: str | None,
    session_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy OpenAI Agents SDK sessions into a store: SQLiteSession, SQLAlchemy.

    SOURCE (a SQLiteSession file, or a SQLAlchemySession database's async URL) is read,
    never written; STORE is the turnstore store (a SQLite file is created if missing). Run
    it again at any time: it appends only the items the store lacks, and reports a session
    whose items differ from the source's as a conflict, leaving it as it is.
    """
    with needs_agents():
        from turnstore.integrations.openai_agents_move import TurnstoreSessions

        reading = agents_sessions(source, read_only=True)
        if dry_run:
            _show_survey(reading, session_ids, as_json, None)
            return
        with ExitStack() as stack:
            with reported(url):
                # The search index catches up at the store's first search, or in the
                # background of the next store a worker opens: the copy does not wait for it.
                store = turnstore.open_blocking(url, index_in_background=False)
            stack.enter_context(store)
            writing = TurnstoreSessions(store, owner_id=owner)
            _move(reading, writing, store, session_ids, verify, skip_bad, as_json, "in")


@export_to.command(KIND.name)
@click.argument("url", metavar="STORE")
@click.argument("target", metavar="TARGET")
@move_options(AGENTS, "items")
def export_agents(
    url: str,
    target: str,
    session_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy a store's OpenAI Agents SDK sessions out: SQLiteSession, SQLAlchemy.

    STORE is read, never written; TARGET is created (its tables too) if missing. Run it
    again at any time: it appends only what TARGET lacks, and reports a session whose items
    differ as a conflict, leaving it as it is.
    """
    with needs_agents(), ExitStack() as stack:
        from turnstore.integrations.openai_agents_move import TurnstoreSessions

        store = stack.enter_context(open_store(url, read_only=True, existing=True))
        reading = TurnstoreSessions(store)
        if dry_run:
            _show_survey(reading, session_ids, as_json, store.upkeep.stats().database_bytes)
            return
        writing = agents_sessions(target, read_only=False)
        _move(reading, writing, store, session_ids, verify, skip_bad, as_json, "out")


def _show_survey(
    source: Any, session_ids: tuple[str, ...], as_json: bool, store_bytes: int | None
) -> None:
    from turnstore.integrations.openai_agents_move import asurvey

    async def run() -> Any:
        try:
            return await asurvey(source, list(session_ids) or None)
        finally:
            await source.aclose()

    found = asyncio.run(run())
    size = found.source_bytes if store_bytes is None else store_bytes
    show_survey(found.session_count, found.item_count, size, AGENTS, as_json)


def _move(
    source: Any,
    target: Any,
    store: Any,
    session_ids: tuple[str, ...],
    verify: bool,
    skip_bad: bool,
    as_json: bool,
    direction: str,
) -> None:
    from turnstore.integrations import openai_agents_move as move

    picked = list(session_ids) or None

    async def run() -> tuple[Any, Any, int | None]:
        try:
            with progress_bar("Copying sessions") as advance:
                report = await move.acopy_sessions(
                    source, target, session_ids=picked, skip_bad=skip_bad, progress=advance
                )
            checked = None
            if verify:
                with progress_bar("Verifying sessions") as advance:
                    checked = await move.averify_sessions(
                        source, target, session_ids=picked, progress=advance
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
    parts = [f"{report.item_count:,} items"]
    if report.present_count:
        parts.append(f"{report.present_count:,} already there")
    if report.ahead_count:
        parts.append(f"{report.ahead_count:,} sessions further on the target, kept")
    show_move(report, checked, sizes, as_json, direction, AGENTS, parts)
    if report.conflicts or (checked is not None and checked.difference is not None):
        raise SystemExit(1)


COMMANDS = [import_agents, export_agents]
"""The commands this module adds (to `import-from` and `export-to`, on import)."""
