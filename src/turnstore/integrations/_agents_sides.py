"""Internal: the sides of an OpenAI Agents SDK session move: where sessions live.

A `Sessions` opens the SDK `Session` of an id and reads sessions a page at a time; its
subclasses list and read their stores' own tables (`_agents_tables`) and write through the
SDK's session classes (`turnstore.integrations.openai_agents_move` is the public face).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from agents.memory import Session, SQLiteSession

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput
from turnstore.integrations._agents_tables import (
    Problem,
    SQLAlchemyTables,
    SQLiteTables,
    read_only_engine,
)
from turnstore.integrations._opening import Closes
from turnstore.integrations.openai_agents import TurnstoreSession
from turnstore.records import SessionCursor, SessionPageRequest
from turnstore.records.kinds.openai_agents import KIND
from turnstore.seam import borrow

Opener = Callable[[str], Session]
"""Any other session store: a callable that opens the SDK `Session` of an id."""


class Sessions(Closes):
    """Where SDK sessions live, for a move: opens the `Session` of an id, and reads sessions.

    This base serves any session store through the `Session` API: `opener` opens a session
    by id, which is read whole through `get_items()`; it cannot list its sessions, so a move
    needs the caller's session ids. The subclasses read their own tables instead.
    """

    def __init__(self, opener: Opener) -> None:
        self._opener = opener

    def session(self, session_id: str) -> Session:
        """The SDK session of `session_id`, to write (and `verify` to read) through."""
        return self._opener(session_id)

    async def release(self, session: Session) -> None:
        """Done with a session `session()` opened (what the caller's opener made stays open)."""

    async def add(self, session_id: str, items: list[Any]) -> None:
        """Append items to a session through its `add_items`."""
        session = self.session(session_id)
        try:
            await session.add_items(items)
        finally:
            await self.release(session)

    async def prepare(self) -> None:
        """Made ready to be written to (tables created); called once, on the target."""

    def deferred(self) -> AbstractContextManager[None]:
        """Around a whole copy into this side: its commits durable at the end (a store's
        `deferred_durability`), where the side can; else nothing."""
        return nullcontext()

    def session_ids(self) -> AsyncIterator[str]:
        """Every session, a page at a time; a store the base serves cannot list them."""
        raise InvalidInput("a session store of the Session protocol cannot list: pass session_ids")

    async def pages(
        self, session_id: str, skipped: list[Problem] | None
    ) -> AsyncIterator[list[Any]]:
        """A session's items, oldest first, a page at a time from one consistent read.

        `skipped` None: a row the SDK cannot decode stops the move (`CorruptRecord`); else it
        is reported there and left out. The base reads through `get_items()`, which leaves
        such rows out itself."""
        items = await self.items(session_id)
        if items:
            yield items

    async def items(self, session_id: str) -> list[Any]:
        """A session's items through its `get_items()`: all of them, or an error when its
        settings would read only the newest few."""
        session = self.session(session_id)
        try:
            limit = getattr(session.session_settings, "limit", None)
            if limit is not None:
                raise InvalidInput(
                    f"session {session_id!r} reads only its newest {limit} items"
                    " (session_settings.limit): open the sessions without a limit"
                )
            return await session.get_items()
        finally:
            await self.release(session)

    async def count(self, session_id: str) -> int:
        """How many items the session holds."""
        return sum([len(page) async for page in self.pages(session_id, [])])

    async def size(self) -> int | None:
        """The store's bytes, when known."""
        return None

    async def settle(self) -> None:
        """Release pooled connections bound to the running event loop (before it ends)."""

    async def aclose(self) -> None:
        """Close what this opened."""

    def close(self) -> None:
        """Close what this opened, blocking (not from async code)."""
        asyncio.run(self.aclose())


class SQLiteSessions(Sessions):
    """The sessions of a `SQLiteSession` file: read from its tables, opened read-only (never
    written, as a source), and written through `SQLiteSession` (as a target)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
    ) -> None:
        self.path = Path(path)
        self.tables = SQLiteTables(self.path, sessions_table, messages_table)
        super().__init__(self._open)

    def _open(self, session_id: str) -> Session:
        return SQLiteSession(session_id, self.path, self.tables.sessions, self.tables.messages)

    async def release(self, session: Session) -> None:
        if isinstance(session, SQLiteSession):
            session.close()

    async def prepare(self) -> None:
        """The file and its tables, made by `SQLiteSession` itself."""
        await self.release(await asyncio.to_thread(self._open, ""))

    def session_ids(self) -> AsyncIterator[str]:
        return self.tables.session_ids()

    def pages(self, session_id: str, skipped: list[Problem] | None) -> AsyncIterator[list[Any]]:
        return self.tables.pages(session_id, skipped)

    async def count(self, session_id: str) -> int:
        return await self.tables.count(session_id)

    async def size(self) -> int | None:
        return self.tables.size()

    async def aclose(self) -> None:
        self.tables.close()


class SQLAlchemySessions(Sessions):
    """The sessions of a `SQLAlchemySession` database: read from its tables, written through
    `SQLAlchemySession`.

    `engine` is an `AsyncEngine` (the caller's, left open) or an async URL
    (`postgresql+psycopg://…`, `postgresql+asyncpg://…`, `sqlite+aiosqlite:///…`) whose
    engine `aclose()` disposes; `read_only` makes that engine unable to write (a SQLite file
    opened `mode=ro`, PostgreSQL transactions read-only), for a source. `create_tables` lets
    the SDK create its tables on a target that lacks them.
    """

    def __init__(
        self,
        engine: Any,
        *,
        read_only: bool = False,
        create_tables: bool = False,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
    ) -> None:
        self.owned = isinstance(engine, str)
        if isinstance(engine, str):
            from sqlalchemy.ext.asyncio import create_async_engine

            engine = read_only_engine(engine) if read_only else create_async_engine(engine)
        self.engine = engine
        self.create_tables = create_tables
        self.tables = SQLAlchemyTables(engine, sessions_table, messages_table)
        super().__init__(self._open)

    def _open(self, session_id: str, *, create_tables: bool = False) -> Session:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        return SQLAlchemySession(
            session_id,
            engine=self.engine,
            create_tables=create_tables,
            sessions_table=self.tables.sessions.name,
            messages_table=self.tables.messages.name,
        )

    async def prepare(self) -> None:
        """The SDK's tables, created once by `SQLAlchemySession` itself when asked."""
        if self.create_tables:
            await self._open("", create_tables=True).get_items(limit=0)

    def session_ids(self) -> AsyncIterator[str]:
        return self.tables.session_ids()

    def pages(self, session_id: str, skipped: list[Problem] | None) -> AsyncIterator[list[Any]]:
        return self.tables.pages(session_id, skipped)

    async def count(self, session_id: str) -> int:
        return await self.tables.count(session_id)

    async def size(self) -> int | None:
        return await self.tables.size()

    async def settle(self) -> None:
        await self.engine.dispose()

    async def aclose(self) -> None:
        if self.owned:
            await self.engine.dispose()


class TurnstoreSessions(Sessions):
    """`TurnstoreSession`s in a store: listed from its catalog (sessions of the SDK's kind),
    read from their context, written through `TurnstoreSession` (owned by `owner_id` when the
    copy creates them). `store` is an open store (left open) or a URL (closed by `close()`)."""

    def __init__(
        self, store: Store | BlockingStore | str | os.PathLike[str], *, owner_id: str | None = None
    ) -> None:
        self._shared = borrow(store)
        self.store = self._shared.store
        self.owner_id = owner_id
        super().__init__(self._open)

    def _open(self, session_id: str) -> Session:
        return TurnstoreSession(session_id, self.store, owner_id=self.owner_id)

    async def release(self, session: Session) -> None:
        if isinstance(session, TurnstoreSession):
            await session.aclose()

    async def add(self, session_id: str, items: list[Any]) -> None:
        """The commit `TurnstoreSession.add_items` makes, on this side's store (without a
        session's own faces opened and closed for each)."""
        await self.store.append_context(session_id, items, self.owner_id, kind=KIND.name)

    def deferred(self) -> AbstractContextManager[None]:
        """The store's `deferred_durability`: one fsync (or WAL flush) for the copy."""
        return self.store.deferred_durability()

    async def session_ids(self) -> AsyncIterator[str]:
        """The catalog's SDK sessions, a page at a time."""
        cursor: SessionCursor | None = None
        while True:
            request = SessionPageRequest(cursor=cursor, limit=500)
            page = await self.store.list_sessions_page(request)
            for summary in page.sessions:
                if summary.kind == KIND.name:
                    yield summary.session_id
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def pages(
        self, session_id: str, skipped: list[Problem] | None
    ) -> AsyncIterator[list[Any]]:
        items = await self.store.context_tail(session_id)
        if items:
            yield items

    async def count(self, session_id: str) -> int:
        return (await self.store.context_window(session_id, None, 0)).length

    async def aclose(self) -> None:
        await self._shared.aclose()

    def close(self) -> None:
        self._shared.close()


def sessions_of(side: Sessions | Opener) -> Sessions:
    """A side as given: a `Sessions`, or a callable that opens sessions by id."""
    if isinstance(side, Sessions):
        return side
    if callable(side):
        return Sessions(side)
    raise InvalidInput(f"a side of a move is a Sessions or a callable, not {type(side).__name__}")


async def listed(side: Sessions, session_ids: Sequence[str] | None) -> AsyncIterator[str]:
    if session_ids is not None:
        for session_id in session_ids:
            yield session_id
        return
    async for session_id in side.session_ids():
        yield session_id
