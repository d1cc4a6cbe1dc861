"""Internal: the tables beside a LangGraph saver's API, for moving its threads.

A saver cannot list its threads, and `get_tuple` gives pending writes without their
`task_path`: for `SqliteSaver`, `PostgresSaver`, their async twins (queried on their own
event loop), `InMemorySaver` and `TurnstoreSaver` both are read from the saver's own tables
(SQL of LangGraph's schema, never turnstore's); for any other saver the caller names the
threads (`GivenThreads`). And the values a checkpoint copied shares with its parent
(`shared_values`).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from turnstore.errors import InvalidInput
from turnstore.integrations import requires_extra

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointTuple,
    )
    from langgraph.checkpoint.memory import InMemorySaver

    from turnstore.integrations.langgraph import TurnstoreSaver

PAGE = 500
"""Ids or threads read from a saver's tables at a time."""


class Place(NamedTuple):
    """Where something was found: a thread, a namespace and a checkpoint."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str

    def __str__(self) -> str:
        ns = f" namespace {self.checkpoint_ns!r}" if self.checkpoint_ns else ""
        return f"thread {self.thread_id!r}{ns} checkpoint {self.checkpoint_id}"


class SaverTables(Protocol):
    """What the copy reads around a saver's API: its threads, ids, task paths and size."""

    def thread_ids(self) -> Iterator[str]:
        """Every thread, a page at a time."""
        ...

    def checkpoint_ids(self, thread_id: str) -> Iterator[tuple[str, str]]:
        """(namespace, id) of a thread's checkpoints, oldest first."""
        ...

    def task_paths(self, place: Place) -> dict[str, str]:
        """task id -> task path of the writes stored on one checkpoint."""
        ...

    def size(self) -> int | None:
        """Bytes the saver's data takes, when known."""
        ...


def config_of(thread_id: str, ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    """The config naming a thread's namespace, or one checkpoint of it."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def place_of(item: CheckpointTuple) -> Place:
    """Where a checkpoint tuple is: its thread, namespace and id."""
    configurable = item.config["configurable"]
    return Place(
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns") or "",
        configurable["checkpoint_id"],
    )


# --- the tables of the savers we know -------------------------------------------------------


class SqliteTables:
    """`SqliteSaver`'s `checkpoints` and `writes` tables, read on its own connection."""

    THREADS = (
        "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > ? ORDER BY thread_id LIMIT ?"
    )
    IDS = (
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?"
        " AND (checkpoint_id, checkpoint_ns) > (?, ?)"
        " ORDER BY checkpoint_id, checkpoint_ns LIMIT ?"
    )
    PATHS = (
        "SELECT DISTINCT task_id, task_path FROM writes"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    )

    def __init__(self, saver: Any) -> None:
        self._conn: sqlite3.Connection = saver.conn
        self._lock = saver.lock

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        # The saver's lock: its connection is shared with the saver's own calls.
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def thread_ids(self) -> Iterator[str]:
        """Every thread of the `checkpoints` table, in id order."""
        last = ""
        while rows := self._rows(self.THREADS, (last, PAGE)):
            yield from (str(row[0]) for row in rows)
            last = rows[-1][0]

    def checkpoint_ids(self, thread_id: str) -> Iterator[tuple[str, str]]:
        """A thread's checkpoints oldest first (LangGraph's ids increase with time)."""
        last = ("", "")
        while rows := self._rows(self.IDS, (thread_id, last[1], last[0], PAGE)):
            yield from ((str(ns), str(cid)) for ns, cid in rows)
            last = rows[-1][0], rows[-1][1]

    def task_paths(self, place: Place) -> dict[str, str]:
        """The task paths of one checkpoint's writes ({} on a table older than the column)."""
        try:
            return {str(t): str(p) for t, p in self._rows(self.PATHS, tuple(place))}
        except sqlite3.OperationalError:
            return {}

    def size(self) -> int | None:
        """The database file and its write-ahead log."""
        listed = self._rows("PRAGMA database_list", ())
        path = next((str(row[2]) for row in listed if row[1] == "main"), "")
        if not path:
            return None
        return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


class PostgresTables(SqliteTables):
    """`PostgresSaver`'s `checkpoints` and `checkpoint_writes` tables, on its connection."""

    THREADS = (
        "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s"
        " ORDER BY thread_id LIMIT %s"
    )
    IDS = (
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s"
        " AND (checkpoint_id, checkpoint_ns) > (%s, %s)"
        " ORDER BY checkpoint_id, checkpoint_ns LIMIT %s"
    )
    PATHS = (
        "SELECT DISTINCT task_id, task_path FROM checkpoint_writes"
        " WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
    )
    SIZE = (
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " WHERE c.relname IN ('checkpoints', 'checkpoint_blobs', 'checkpoint_writes')"
        " AND c.relkind = 'r' AND pg_table_is_visible(c.oid)"
    )

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self._lock = saver.lock

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        from psycopg.rows import tuple_row
        from psycopg_pool import ConnectionPool

        conn = self._saver.conn
        with self._lock:
            if isinstance(conn, ConnectionPool):
                with conn.connection() as pooled, pooled.cursor(row_factory=tuple_row) as cur:
                    rows: list[tuple[Any, ...]] = cur.execute(sql, params).fetchall()
                    return rows
            with conn.cursor(row_factory=tuple_row) as cur:
                rows = cur.execute(sql, params).fetchall()
                return rows

    def task_paths(self, place: Place) -> dict[str, str]:
        """The task paths of one checkpoint's writes."""
        return {str(t): str(p) for t, p in self._rows(self.PATHS, tuple(place))}

    def size(self) -> int | None:
        """The three tables with their indexes and TOAST."""
        return int(self._rows(self.SIZE, ())[0][0])


def _on_loop(saver: Any, work: Coroutine[Any, Any, list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """An async saver's query, run on its event loop and awaited from the copy's thread (as
    the async savers' own blocking methods do)."""
    return asyncio.run_coroutine_threadsafe(work, saver.loop).result()


class AsyncSqliteTables(SqliteTables):
    """`AsyncSqliteSaver`'s tables, read on its own connection and event loop."""

    def __init__(self, saver: Any) -> None:
        self._saver = saver

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return _on_loop(self._saver, self._fetch(sql, params))

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._saver.lock, self._saver.conn.execute(sql, params) as cursor:
            return [tuple(row) for row in await cursor.fetchall()]


class AsyncPostgresTables(PostgresTables):
    """`AsyncPostgresSaver`'s tables, read on its connection (or pool) and event loop."""

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return _on_loop(self._saver, self._fetch(sql, params))

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        from psycopg.rows import tuple_row
        from psycopg_pool import AsyncConnectionPool

        conn = self._saver.conn
        async with self._saver.lock:
            if isinstance(conn, AsyncConnectionPool):
                async with conn.connection() as pooled, pooled.cursor(row_factory=tuple_row) as cur:
                    await cur.execute(sql, params)
                    rows: list[tuple[Any, ...]] = await cur.fetchall()
                    return rows
            async with conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(sql, params)
                rows = await cur.fetchall()
                return rows


class MemoryTables:
    """`InMemorySaver`'s dictionaries (`storage`, `writes`)."""

    def __init__(self, saver: InMemorySaver) -> None:
        self._saver = saver

    def thread_ids(self) -> Iterator[str]:
        """Every thread it holds."""
        yield from sorted(map(str, self._saver.storage))

    def checkpoint_ids(self, thread_id: str) -> Iterator[tuple[str, str]]:
        """A thread's checkpoints oldest first."""
        spaces = self._saver.storage.get(thread_id, {})
        found = [(cid, ns) for ns, saved in spaces.items() for cid in saved]
        yield from ((ns, cid) for cid, ns in sorted(found))

    def task_paths(self, place: Place) -> dict[str, str]:
        """The task paths of one checkpoint's writes (the fourth item of each)."""
        writes = self._saver.writes.get((place[0], place[1], place[2]), {})
        return {str(w[0]): str(w[3]) for w in writes.values() if len(w) > 3}

    def size(self) -> int | None:
        """Not known."""
        return None


class TurnstoreTables:
    """`TurnstoreSaver`'s threads from the catalog; ids and task paths through the saver."""

    def __init__(self, saver: TurnstoreSaver) -> None:
        self._saver = saver

    def thread_ids(self) -> Iterator[str]:
        """Every LangGraph thread of the catalog."""
        return self._saver.thread_ids()

    def checkpoint_ids(self, thread_id: str) -> Iterator[tuple[str, str]]:
        """A thread's checkpoints oldest first, from its listing's rows, none decoded."""
        return iter(self._saver.checkpoint_ids(thread_id))

    def task_paths(self, place: Place) -> dict[str, str]:
        """The task paths of one checkpoint's writes."""
        return self._saver.task_paths(config_of(*place))

    def size(self) -> int | None:
        """Not measured here (the store's `upkeep.stats()` has it)."""
        return None


class GivenThreads:
    """Any other saver: the threads the caller names; writes keep no task path."""

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_ids: Sequence[str]) -> None:
        self._saver, self._threads = saver, list(thread_ids)

    def thread_ids(self) -> Iterator[str]:
        """The threads named."""
        return iter(self._threads)

    def checkpoint_ids(self, thread_id: str) -> Iterator[tuple[str, str]]:
        """A thread's checkpoints oldest first (its listing reversed)."""
        return _listed_ids(self._saver, thread_id)

    def task_paths(self, place: Place) -> dict[str, str]:
        """Not known: `get_tuple` does not give them."""
        return {}

    def size(self) -> int | None:
        """Not known."""
        return None


def _listed_ids(saver: BaseCheckpointSaver[Any], thread_id: str) -> Iterator[tuple[str, str]]:
    # The saver's API lists newest first only: the ids (not the checkpoints) are kept and
    # reversed, so memory grows with one thread's checkpoint count, a few dozen bytes each.
    ids = [place_of(item)[1:] for item in saver.list({"configurable": {"thread_id": thread_id}})]
    return iter(sorted(ids, key=lambda pair: (pair[1], pair[0])))


def tables_of(
    saver: BaseCheckpointSaver[Any], thread_ids: Sequence[str] | None = None
) -> SaverTables:
    """The tables beside a saver's API; `thread_ids` (required for other savers) picks threads."""
    name = type(saver).__name__
    tables: SaverTables
    if isinstance(saver, TurnstoreSaver):
        tables = TurnstoreTables(saver)
    elif isinstance(saver, InMemorySaver):
        tables = MemoryTables(saver)
    elif name == "SqliteSaver":
        tables = SqliteTables(saver)
    elif name == "PostgresSaver":
        tables = PostgresTables(saver)
    elif name == "AsyncSqliteSaver":
        tables = AsyncSqliteTables(saver)
    elif name == "AsyncPostgresSaver":
        tables = AsyncPostgresTables(saver)
    elif thread_ids is None:
        raise InvalidInput(f"a {name} cannot list its threads: pass thread_ids")
    else:
        return GivenThreads(saver, thread_ids)
    return tables if thread_ids is None else _Picked(tables, thread_ids)


class _Picked:
    """A saver's tables with the threads the caller picked."""

    def __init__(self, tables: SaverTables, thread_ids: Sequence[str]) -> None:
        self._tables, self._threads = tables, list(thread_ids)
        self.checkpoint_ids = tables.checkpoint_ids
        self.task_paths = tables.task_paths
        self.size = tables.size

    def thread_ids(self) -> Iterator[str]:
        """The threads picked."""
        return iter(self._threads)


# --- values shared with a parent ------------------------------------------------------------


def new_versions(checkpoint: Checkpoint, parent: Checkpoint | None) -> ChannelVersions:
    """The channel versions a checkpoint introduces over its parent (all, parent unknown)."""
    versions = checkpoint["channel_versions"]
    if parent is None:
        return dict(versions)
    before = parent["channel_versions"]
    return {channel: v for channel, v in versions.items() if before.get(channel) != v}


def shared_values(checkpoint: Checkpoint, parent: Checkpoint | None) -> Checkpoint:
    """The checkpoint with its parent's objects wherever its values begin with them.

    A turnstore target stores a list that extends one it stored, found by identity, as its
    new items only; values read back from the source are new objects every time, so a list
    whose first items equal (same type, `==`) its parent's gets the parent's objects for them.
    Other savers store the same bytes either way.
    """
    if parent is None:
        return checkpoint
    old = parent["channel_values"]
    versions, old_versions = checkpoint["channel_versions"], parent["channel_versions"]
    values = dict(checkpoint["channel_values"])
    for channel, value in values.items():
        if channel not in old:
            continue
        if versions.get(channel) == old_versions.get(channel) and equal_item(value, old[channel]):
            values[channel] = old[channel]
        elif isinstance(value, list) and isinstance(old[channel], list):
            values[channel] = extended_list(value, old[channel])
    return {**checkpoint, "channel_values": values}


def extended_list(items: list[Any], prefix: list[Any]) -> list[Any]:
    """`items` with `prefix`'s objects in its place when it begins with equal ones."""
    size = len(prefix)
    if size == 0 or size > len(items):
        return items
    # The last item first: a list that was not extended is refused after one comparison.
    if not equal_item(items[size - 1], prefix[-1]):
        return items
    head = items[:size]
    # `equal_item` pair by pair, in C: the types, then the items (`==` after identity).
    if list(map(type, head)) == list(map(type, prefix)) and bool(head == prefix):
        return [*prefix, *items[size:]]
    return items


def equal_item(a: Any, b: Any) -> bool:
    """Equal and of one type (a 1 and a True, equal by `==`, are not the same value)."""
    return a is b or (type(a) is type(b) and bool(a == b))
