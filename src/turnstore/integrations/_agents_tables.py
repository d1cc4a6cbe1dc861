"""The OpenAI Agents SDK's own session tables, read beside its `Session` API for a move.

The `Session` protocol cannot list its sessions and reads a session whole: for the SDK's
`SQLiteSession` files and `SQLAlchemySession` databases the move reads their tables instead
(`agent_sessions` lists the sessions, `agent_messages` holds one JSON item a row), read-only,
a page at a time, in the order the SDK's `get_items` gives (`SQLiteSession`: by row id;
`SQLAlchemySession`: by `created_at`, then row id), decoding each row as it does
(`json.loads`). Writes go through the SDK's own session classes.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

from turnstore.errors import CorruptRecord, InvalidInput
from turnstore.seam import json_loads

PAGE = 1000
"""Items read (and written) at a time."""
ID_PAGE = 500
"""Session ids listed at a time."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Place(NamedTuple):
    """Where in a source a difference or a bad row is: a session, and an item's index in it
    (None: the session as a whole)."""

    session_id: str
    item: int | None = None

    def __str__(self) -> str:
        return self.session_id if self.item is None else f"{self.session_id} item {self.item}"


class Problem(NamedTuple):
    """A session the copy did not copy whole, and why: a conflict or an unreadable row."""

    place: Place
    reason: str


def table_name(name: str) -> str:
    """A table name fit to be written into a statement (the SDK takes any; we take plain)."""
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"table name {name!r}: letters, digits and underscores only")
    return name


def decoded(rows: list[tuple[int, str]], place: Place, skipped: list[Problem] | None) -> list[Any]:
    """Rows (row id, JSON text) as the SDK decodes them; one it cannot decode stops the move,
    or with `skipped` is reported there and left out, as the SDK's `get_items` leaves it out."""
    items: list[Any] = []
    for row_id, data in rows:
        try:
            items.append(json_loads(data))
        except (json.JSONDecodeError, TypeError) as error:
            where = Place(place.session_id, (place.item or 0) + len(items))
            reason = f"message row {row_id} cannot be decoded: {error}"
            if skipped is None:
                raise CorruptRecord(f"{where}: {reason} (pass skip_bad to skip it)") from error
            skipped.append(Problem(where, reason))
    return items


class SQLiteTables:
    """A `SQLiteSession` file, opened read-only (`mode=ro`): never written, not even its log."""

    def __init__(self, path: Path, sessions_table: str, messages_table: str) -> None:
        self.path = path
        self.sessions, self.messages = table_name(sessions_table), table_name(messages_table)
        self._connection: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection | None:
        """The read-only connection; None while there is no file or no tables (a new target)."""
        if self._connection is None:
            if not self.path.is_file():
                return None
            uri = f"{self.path.absolute().as_uri()}?mode=ro"
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
            listed = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.messages,)
            ).fetchone()
            if listed is None:
                connection.close()
                return None
            self._connection = connection
        return self._connection

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        connection = self._connect()
        return [] if connection is None else connection.execute(sql, params).fetchall()

    async def session_ids(self) -> AsyncIterator[str]:
        """Every session of `agent_sessions`, by id, a page at a time."""
        after: str | None = ""
        sql = (
            f"SELECT session_id FROM {self.sessions} WHERE session_id > ?"
            f" ORDER BY session_id LIMIT {ID_PAGE}"
        )
        while after is not None:
            page = await asyncio.to_thread(self._rows, sql, (after,))
            for (session_id,) in page:
                yield session_id
            after = page[-1][0] if len(page) == ID_PAGE else None

    async def pages(
        self, session_id: str, skipped: list[Problem] | None
    ) -> AsyncIterator[list[Any]]:
        """A session's items oldest first, a page at a time, from one statement (one
        consistent read of the file, however long the session)."""
        connection = await asyncio.to_thread(self._connect)
        if connection is None:
            return
        sql = f"SELECT id, message_data FROM {self.messages} WHERE session_id = ? ORDER BY id"
        cursor = await asyncio.to_thread(connection.execute, sql, (session_id,))
        try:
            index = 0
            while rows := await asyncio.to_thread(cursor.fetchmany, PAGE):
                items = decoded(rows, Place(session_id, index), skipped)
                index += len(items)
                yield items
        finally:
            cursor.close()

    async def count(self, session_id: str) -> int:
        """How many rows the session has."""
        sql = f"SELECT COUNT(*) FROM {self.messages} WHERE session_id = ?"
        rows = await asyncio.to_thread(self._rows, sql, (session_id,))
        return int(rows[0][0]) if rows else 0

    def size(self) -> int:
        """The file's bytes and its log's."""
        return sum(_size(self.path.with_name(self.path.name + end)) for end in ("", "-wal"))

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class SQLAlchemyTables:
    """A `SQLAlchemySession` database, through an async engine (read-only when the caller
    made it so: `read_only_engine`)."""

    def __init__(self, engine: Any, sessions_table: str, messages_table: str) -> None:
        from sqlalchemy import TIMESTAMP, Column, Integer, MetaData, String, Table, Text

        self.engine = engine
        metadata = MetaData()
        self.sessions = Table(
            table_name(sessions_table), metadata, Column("session_id", String, primary_key=True)
        )
        self.messages = Table(
            table_name(messages_table),
            metadata,
            Column("id", Integer, primary_key=True),
            Column("session_id", String),
            Column("message_data", Text),
            Column("created_at", TIMESTAMP(timezone=False)),
        )

    async def session_ids(self) -> AsyncIterator[str]:
        """Every session of `agent_sessions`, by id, a page at a time."""
        from sqlalchemy import select

        column = self.sessions.c.session_id
        after: str | None = ""
        while after is not None:
            query = select(column).where(column > after).order_by(column).limit(ID_PAGE)
            async with self.engine.connect() as connection:
                page = [row[0] for row in await connection.execute(query)]
            for session_id in page:
                yield session_id
            after = page[-1] if len(page) == ID_PAGE else None

    async def pages(
        self, session_id: str, skipped: list[Problem] | None
    ) -> AsyncIterator[list[Any]]:
        """A session's items in `get_items`' order, a page at a time, from one statement."""
        from sqlalchemy import select

        messages = self.messages.c
        query = (
            select(messages.id, messages.message_data)
            .where(messages.session_id == session_id)
            .order_by(messages.created_at, messages.id)
        )
        async with self.engine.connect() as connection:
            result = await connection.stream(query)
            index = 0
            async for rows in result.partitions(PAGE):
                items = decoded([tuple(row) for row in rows], Place(session_id, index), skipped)
                index += len(items)
                yield items

    async def count(self, session_id: str) -> int:
        from sqlalchemy import func, select

        query = select(func.count()).where(self.messages.c.session_id == session_id)
        async with self.engine.connect() as connection:
            return int((await connection.execute(query)).scalar_one())

    async def size(self) -> int | None:
        """The tables' bytes on PostgreSQL, the file's on SQLite; None on other databases."""
        from sqlalchemy import text

        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(url.database.removeprefix("file:").partition("?")[0])
            return sum(_size(path.with_name(path.name + end)) for end in ("", "-wal"))
        if url.get_backend_name() != "postgresql":
            return None
        query = text(
            "SELECT COALESCE(pg_total_relation_size(to_regclass(:a)), 0)"
            " + COALESCE(pg_total_relation_size(to_regclass(:b)), 0)"
        )
        names = {"a": self.sessions.name, "b": self.messages.name}
        async with self.engine.connect() as connection:
            return int((await connection.execute(query, names)).scalar_one())


def read_only_engine(url: str) -> Any:
    """An async engine over a `SQLAlchemySession` database that cannot write: a SQLite file
    opened `mode=ro`, PostgreSQL transactions read-only (psycopg and asyncpg)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    parsed = make_url(url)
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    connect_args: dict[str, Any] = {}
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database or "").absolute()
        if not path.is_file():
            raise InvalidInput(f"{path}: no SQLAlchemySession database there; check the path")
        parsed = parsed.set(database=f"file:{path}?mode=ro").update_query_dict({"uri": "true"})
    elif backend == "postgresql" and driver == "psycopg":
        options = " ".join(filter(None, [_first(parsed.query.get("options")), _READ_ONLY]))
        parsed = parsed.difference_update_query(["options"])
        connect_args["options"] = options
    elif backend == "postgresql" and driver == "asyncpg":
        connect_args["server_settings"] = {"default_transaction_read_only": "on"}
    return create_async_engine(parsed, connect_args=connect_args)


_READ_ONLY = "-c default_transaction_read_only=on"


def _first(value: str | tuple[str, ...] | None) -> str | None:
    return value[0] if isinstance(value, tuple) else value
