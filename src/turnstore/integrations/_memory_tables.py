"""Internal: the tables of LangGraph's `SqliteStore` / `PostgresStore` and of ADK's
`SqliteMemoryService`, read-only: every item or memory, which their APIs cannot list whole."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

BATCH = 500
"""Rows fetched at a time."""

_LANGGRAPH_ROWS = (
    "SELECT prefix, key, value, created_at, updated_at, expires_at, ttl_minutes FROM store"
    " ORDER BY prefix, key"
)
_ADK_ROWS = (
    "SELECT app_name, user_id, session_id, event_id, author, timestamp, content_json"
    " FROM memory_events ORDER BY app_name, user_id, session_id, timestamp, id"
)


def to_ms(moment: Any) -> int:
    """A LangGraph time (SQLite's `YYYY-MM-DD HH:MM:SS` text in UTC, or a datetime) in ms."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if not isinstance(moment, datetime):
        raise ValueError(f"not a time: {moment!r}")
    when: datetime = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return round(when.timestamp() * 1000)


class LangGraphRow(NamedTuple):
    """A row of a LangGraph store's `store` table."""

    prefix: str
    key: str
    value: Any
    created_at: Any
    updated_at: Any
    expires_at: Any
    ttl_minutes: float | None


def _sqlite_file(url: str | Path, what: str) -> sqlite3.Connection:
    path = Path(str(url).removeprefix("sqlite:///"))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {what} database there")
    # mode=ro: the file and its log are never written, not even checkpointed on close.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


class LangGraphSource:
    """The `store` table of a `SqliteStore` file or of a `PostgresStore` database, read-only."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: Any
        if url.startswith(("postgresql://", "postgres://")):
            import psycopg

            self._connection = psycopg.connect(url, autocommit=True, prepare_threshold=0)
            self._connection.execute("SET default_transaction_read_only = on")
        else:
            self._connection = _sqlite_file(url, "SqliteStore")

    def close(self) -> None:
        """Close the source's connection."""
        self._connection.close()

    def rows(self) -> Iterator[LangGraphRow]:
        """Every item row, in key order, a batch at a time (on PostgreSQL through a cursor
        on the server, in a read-only transaction of its own: the table is not fetched
        whole)."""
        if isinstance(self._connection, sqlite3.Connection):
            cursor = self._connection.execute(_LANGGRAPH_ROWS)
            while batch := cursor.fetchmany(BATCH):
                yield from (LangGraphRow(*row) for row in batch)
            return
        with self._connection.transaction(), self._connection.cursor(name="store_rows") as named:
            named.itersize = BATCH
            named.execute(_LANGGRAPH_ROWS)
            while batch := named.fetchmany(BATCH):
                yield from (LangGraphRow(*row) for row in batch)

    def now_ms(self) -> int:
        """The source database's clock, which decides what has expired there."""
        if isinstance(self._connection, sqlite3.Connection):
            found = self._connection.execute("SELECT CURRENT_TIMESTAMP").fetchone()[0]
        else:
            found = self._connection.execute("SELECT now()").fetchone()[0]
        return to_ms(found)


class AdkRow(NamedTuple):
    """A `memory_events` row of ADK's `SqliteMemoryService`."""

    app_name: str
    user_id: str
    session_id: str
    event_id: str
    author: str
    timestamp: float
    content_json: str


def check_adk_source(path: str | Path) -> None:
    """Refuse (FileNotFoundError) a path that holds no SQLite file to read memories from."""
    _sqlite_file(path, "SqliteMemoryService").close()


def adk_rows(path: str | Path) -> Iterator[AdkRow]:
    """Every memory of a `SqliteMemoryService` database, by app, user and session in time
    order, read-only."""
    database = _sqlite_file(path, "SqliteMemoryService")
    try:
        cursor = database.execute(_ADK_ROWS)
        while batch := cursor.fetchmany(BATCH):
            yield from (AdkRow(*row) for row in batch)
    finally:
        database.close()
