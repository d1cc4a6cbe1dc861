"""What a SQL backend supplies (an engine and a dialect), and statements written once for all.

A backend's `Engine` runs transactions: reads in the caller's thread, writes answered by a
future after COMMIT. Its `Dialect` holds the few words of SQL that differ between backends,
and the hooks where more than words differ (its text index, `TextSearch`).
Statements are written once, as class attributes of a `Statements` table with `?` for each
parameter and dialect words in braces, and formatted once per dialect.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from turnstore.records.base import WriterStats

if TYPE_CHECKING:
    from turnstore.engine.waiters import EventWatch
    from turnstore.records.memory import MemoryInsert, MemoryRow, MemoryTextQuery
    from turnstore.records.search import HitRow, IndexedWords, IndexItem
    from turnstore.rules.search import SearchQuery
    from turnstore.telemetry import StoreTelemetry

T = TypeVar("T")
R = TypeVar("R", bound=tuple[Any, ...])
S = TypeVar("S", bound="Statements")

DEFERRED: ContextVar[bool] = ContextVar("turnstore_deferred_durability", default=False)
"""Whether writes begun in this context may be answered before they reach the disk."""


class Query(Generic[R]):
    """A SELECT whose rows come back as the named row type `R`, never as bare tuples."""

    __slots__ = ("make", "sql")

    def __init__(self, sql: str, make: Callable[[Iterable[Any]], R]) -> None:
        self.sql = sql
        self.make = make


def select(row: type[R], rest: str, **expressions: str) -> Query[R]:
    """A SELECT of `row`'s fields, in order, each a column or `expressions[field]`."""
    named = cast(Any, row)
    unknown = set(expressions) - set(named._fields)
    if unknown:
        raise TypeError(f"{row.__name__} has no fields {sorted(unknown)}")
    columns = ", ".join(
        f"{expressions[name]} AS {name}" if name in expressions else name for name in named._fields
    )
    return Query(f"SELECT {columns} {rest}", named._make)


def columns(row: type[tuple[Any, ...]]) -> str:
    """The comma-separated column names of a named row type."""
    return ", ".join(cast(Any, row)._fields)


def marks(count: int) -> str:
    """`count` comma-separated parameter marks."""
    return ", ".join("?" * count)


def insert(
    row: type[tuple[Any, ...]],
    table: str,
    rest: str = "",
    *,
    set_: dict[str, str] | None = None,
    **also: str,
) -> str:
    """An INSERT of `row`'s fields, in order, into `table`: a `row` is its parameters.

    A field is set to its parameter, or to `set_[field]` (an expression holding one `?`);
    `also` names more columns, each set to an expression that takes no parameter.
    """
    fields = cast(Any, row)._fields
    if unknown := sorted(set(set_ or {}) - set(fields)):
        raise TypeError(f"insert() of {row.__name__}: no field to set named {unknown}")
    names = [*fields, *also]
    values = [*((set_ or {}).get(name, "?") for name in fields), *also.values()]
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(values)}){rest}"


def update(row: type[tuple[Any, ...]], table: str, keys: int, also: str = "", **set_: str) -> str:
    """An UPDATE of `table` setting `row`'s fields but its last `keys`, which pick the rows.

    A field is set to its parameter, or to `set_[field]` (an expression holding one `?`);
    `also` adds assignments that take no parameter.
    """
    fields = cast(Any, row)._fields
    if not 0 < keys < len(fields):
        raise TypeError(f"update() of {row.__name__}: keys={keys} leaves nothing to set or pick")
    values, picks = fields[:-keys], fields[-keys:]
    if unknown := sorted(set(set_) - set(values)):
        raise TypeError(f"update() of {row.__name__}: no field to set named {unknown}")
    assigned = [f"{name} = {set_.get(name, '?')}" for name in values]
    where = " AND ".join(f"{name} = ?" for name in picks)
    return f"UPDATE {table} SET {', '.join([*assigned, *filter(None, [also])])} WHERE {where}"


def matching(row: type[tuple[Any, ...]], head: str) -> str:
    """`head` (a DELETE or UPDATE) limited to the rows whose key is a `row`, field by field."""
    return f"{head} WHERE " + " AND ".join(f"{name} = ?" for name in cast(Any, row)._fields)


_CURSOR_NUMBERS = itertools.count()
"""Names server-side cursors apart: a transaction may stream from two at once."""

_WORDS = frozenset(
    {"lock", "lock_skip", "key_share", "now", "now_ms", "ids", "children", "memory_searched"}
)
"""The dialect words a statement template may name in braces."""


class _InIds:
    def __init__(self, pattern: str) -> None:
        self._pattern = pattern

    def __format__(self, column: str) -> str:
        return self._pattern.format(column=column)


class TextAdding(Protocol):
    """One transaction's additions to the text index: rows of `search_items` and their words."""

    def add(self, items: Sequence[IndexItem]) -> None:
        """Write these items' rows (their words reach the index by `done` at the latest)."""

    def done(self) -> None:
        """Put every word added into the text index; once, before the transaction ends."""


class TextSearch(Protocol):
    """A database's text index over `search_items`: what differs in adding text and searching it.

    The scripts read and delete `search_items` rows and read pages of hits the same way on
    every database; each database keeps its own index, and its own SQL for it, behind these
    calls. Neither keeps the text: SQLite's FTS5 table has no content, so a row leaving
    `search_items` must hand it the words it was indexed by (`removes_by_words`).
    """

    removes_by_words: bool
    """Whether the index must be handed a row's words to forget it (`remove`)."""

    def adding(self, tx: Tx) -> TextAdding:
        """Before `tx` adds rows to `search_items`: what adds them and their words."""

    def remove(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """Take these rows' words out of the index (before or after their rows are deleted)."""

    def rebuild(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """Empty the index and index these rows' words again (when some row's are unknown)."""

    def hits(self, tx: Tx, query: SearchQuery) -> list[HitRow]:
        """The hit rows of `query`'s page in its order, one more when another page follows."""


class MemoryText(Protocol):
    """A database's text index of memory items: the writes that keep it, and its query.

    A put, a delete and a sweep of `memory_items` go through here, so each database keeps
    its index: what is removed leaves it in the same transaction (SQLite's FTS5 table is
    handed an item's words again to forget them, PostgreSQL's vector column goes with its
    row); what is put goes in with the put or, where that costs more, by `index_pending`.
    """

    searched: str
    """A condition on a `memory_items` row: whether its words are searched (put with `text`),
    indexed yet or not."""

    def put(self, tx: Tx, row: MemoryInsert, text: bool) -> None:
        """Create or replace an item, searched by its words if `text` (indexed in the put,
        or left pending for `index_pending`: the database's choice), else not. An item it
        replaces that had expired is created anew: its vectors go. One statement on a
        database that can (a put without vectors is a `single` write)."""

    def delete(self, tx: Tx, namespace: str, key: str) -> None:
        """Delete an item (its vectors with it); an item that is not there is no error."""

    def sweep(self, tx: Tx) -> int:
        """Delete every expired item; how many there were."""

    def index_pending(self, tx: Tx, limit: int) -> int:
        """Index the words of up to `limit` items a put left pending; how many it took."""

    def has_pending(self, tx: Tx) -> bool:
        """Whether some item's words wait for `index_pending`."""

    def page(self, tx: Tx, query: MemoryTextQuery) -> list[MemoryRow]:
        """A page of the indexed items whose words match, best match first."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of SQL that differ between backends, and the hooks where more differs."""

    placeholder: str
    """The positional parameter marker: `?` or `%s`."""
    lock: str
    """Suffix taking a row lock for update (empty where one writer serialises everything)."""
    lock_skip: str
    """`lock`, passing over a row another transaction holds instead of waiting for it."""
    key_share: str
    """Suffix keeping a row from being deleted while a child row is inserted."""
    now: str
    """Expression of the current time in Unix seconds."""
    now_ms: str
    """Expression of the current time in Unix milliseconds (leases, attachment stamps)."""
    in_ids: str
    """`IN`-style predicate of `{column}` against one list parameter; `{ids:column}` in SQL."""
    id_list: Callable[[list[str]], object]
    """Turns a list of ids into the parameter `in_ids` expects."""
    children: str
    """FROM clause of a tree walk's step: the CTE `tree` joined to each row's forks, `child`."""
    blob_read_lock: str
    """Statement a commit runs so that garbage collection cannot delete blobs under it."""
    blob_write_lock: str
    """Statement garbage collection runs to exclude commits while it decides what to delete."""
    uri_lock: str
    """Statement of one parameter, an attachment's canonical URI, that makes intents naming one
    URI take turns, where concurrent writers would each miss the other's uncommitted row
    (empty where one writer serialises everything)."""
    text_search: TextSearch
    """The text index: FTS5 (SQLite), a `tsvector` column's GIN index (PostgreSQL)."""
    memory_text: MemoryText
    """Memory items' writes and their text index, the same two kinds of index."""
    server_cursors: bool = False
    """Whether `Tx.stream` reads through a cursor declared on the server (rows stay there)."""
    pipelined: bool = False
    """Whether write transactions run in pipeline mode: statements are sent without waiting,
    and only a read of rows (or the commit) waits for the server."""
    json_equals: Callable[[int], str] | None = None
    """A condition on `value_json` of `n` (JSON path, text) parameter pairs that holds for a
    row whose value has each text at each path, and for any row it cannot read as JSON (the
    exact test comes after it); None where the database cannot read a stored value safely."""
    _tables: dict[type, object] = field(default_factory=dict, compare=False, repr=False)

    def format(self, template: str) -> str:
        """Fill a statement template's dialect words and placeholders."""
        words = {
            "lock": self.lock,
            "lock_skip": self.lock_skip,
            "key_share": self.key_share,
            "now": self.now,
            "now_ms": self.now_ms,
            "ids": _InIds(self.in_ids),
            "children": self.children,
            "memory_searched": self.memory_text.searched,
        }
        return template.format_map(words).replace("?", self.placeholder)

    def statements(self, table: type[S]) -> S:
        """The statements of `table` in this dialect, formatted once and kept."""
        found = self._tables.get(table)
        if found is None:
            # Two threads may both format a table on first use; either result is the same.
            found = self._tables[table] = table(self)
        return cast(S, found)


class Statements:
    """A table of statements: class attributes (`str` or `Query`) formatted for one dialect."""

    def __init_subclass__(cls) -> None:
        # A template naming anything but a dialect word fails when its module is imported,
        # not in the first transaction that formats it.
        for name, statement in _statements(cls).items():
            template = statement.sql if isinstance(statement, Query) else statement
            words = {field for _, field, _, _ in string.Formatter().parse(template) if field}
            if not words <= _WORDS:
                raise TypeError(f"{cls.__name__}.{name} names {sorted(words - _WORDS)}")

    def __init__(self, dialect: Dialect) -> None:
        for name, statement in _statements(type(self)).items():
            if isinstance(statement, Query):
                statement = Query(dialect.format(statement.sql), statement.make)
            else:
                statement = dialect.format(statement)
            setattr(self, name, statement)


def _statements(cls: type) -> dict[str, str | Query[Any]]:
    """The public class attributes of a table that are statements, a subclass's winning."""
    merged: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass))
    return {
        name: value
        for name, value in merged.items()
        if not name.startswith("_") and isinstance(value, str | Query)
    }


class Tx:
    """One open transaction on a DB-API connection (sqlite3 or psycopg)."""

    __slots__ = ("_connection", "dialect", "event_sessions")

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self._connection = connection
        self.dialect = dialect
        self.event_sessions: set[str] | None = None
        """Sessions whose event journal this transaction wrote; the engine wakes their
        watchers after COMMIT (None, not an empty set, so a save without events allocates
        nothing)."""

    def wrote_events(self, session_id: str) -> None:
        """Note that this transaction journaled events of `session_id`."""
        if self.event_sessions is None:
            self.event_sessions = set()
        self.event_sessions.add(session_id)

    def sql(self, table: type[S]) -> S:
        """The statements of `table` in this transaction's dialect."""
        return self.dialect.statements(table)

    def row(self, query: Query[R], params: Sequence[Any] = ()) -> R | None:
        """Run a query and return its first row, named, or None."""
        found = self._connection.execute(query.sql, params).fetchone()
        return None if found is None else query.make(found)

    def rows(self, query: Query[R], params: Sequence[Any] = ()) -> list[R]:
        """Run a query and return all its rows, named."""
        return [query.make(found) for found in self._connection.execute(query.sql, params)]

    def later(self, query: Query[R], params: Sequence[Any] = ()) -> Callable[[], list[R]]:
        """Send a query now; the returned call reads its rows, named.

        In pipeline mode the queries sent before a read share that read's round trip. Without
        it the rows are read at once, before any later statement can change them.
        """
        cursor = self._connection.execute(query.sql, params)
        if not self.dialect.pipelined:
            rows = [query.make(found) for found in cursor.fetchall()]
            return lambda: rows
        return lambda: [query.make(found) for found in cursor.fetchall()]

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a one-column query and return its first value, or None when no row came back.

        A NULL value reads as None too, so statements used to test presence select a NOT NULL
        column or a constant.
        """
        found = self._connection.execute(sql, params).fetchone()
        return None if found is None else found[0]

    def values(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a one-column query and return the value of every row."""
        return [found[0] for found in self._connection.execute(sql, params)]

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement that returns no rows."""
        self._connection.execute(sql, params)

    def stream(self, sql: str, params: Sequence[Any] = (), size: int = 16) -> Iterator[Any]:
        """Run a query and yield its rows as they arrive, holding at most `size` at a time.

        Rows may be large (a context chunk of a long save): a few at a time keeps memory
        flat however big a session is.
        """
        if self.dialect.server_cursors:
            yield from self._declared(sql, params, size)
            return
        cursor = self._connection.cursor()
        try:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(size):
                yield from rows
        finally:
            cursor.close()

    def _declared(self, sql: str, params: Sequence[Any], size: int) -> Iterator[Any]:
        # A cursor declared in SQL rather than the driver's named cursor: its statements run
        # in pipeline mode too (a pipelined write may stream what it compares). One left
        # unread closes with its transaction; closing it later could reach a connection
        # already back in the pool.
        name = f"turnstore_stream_{next(_CURSOR_NUMBERS)}"
        self._connection.execute(f"DECLARE {name} NO SCROLL CURSOR FOR {sql}", params)
        while rows := self._connection.execute(f"FETCH {size} FROM {name}").fetchall():
            yield from rows
        self._connection.execute(f"CLOSE {name}")

    def many(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement that returns no rows once per parameter tuple, in one call."""
        self._connection.cursor().executemany(sql, params)


class EngineUpkeep(Protocol):
    """What only a backend can do for an operator: sizes, checks, VACUUM and backups."""

    backend: str
    """`sqlite` or `postgres`."""
    supported_version: int
    """The schema version this build creates and reads."""
    single_writer: bool
    """Whether one writer holds the whole database at a time, a lock that writers in other
    processes wait for by retrying (SQLite's): long maintenance rests between its batches."""

    def schema_version(self) -> int:
        """The schema version the database is at."""

    def database_bytes(self) -> int:
        """Bytes the database takes on disk."""

    def wal_bytes(self) -> int | None:
        """The write-ahead log's size where the store has one of its own (SQLite)."""

    def integrity(self) -> list[str]:
        """What the backend's integrity check found; empty when sound."""

    def missing_indexes(self) -> list[str]:
        """Indexes the schema defines that the database lacks."""

    def bloated_tables(self) -> list[str]:
        """Tables whose dead rows call for a VACUUM."""

    def vacuum(self) -> None:
        """Reclaim free space (SQLite VACUUM; PostgreSQL VACUUM ANALYZE of each table)."""

    def backup(self, destination: str) -> int:
        """Write a consistent copy of the database to a new file; its size in bytes."""


class Engine(Protocol):
    """How a backend runs transactions: reads in the caller's thread, writes via futures."""

    def upkeep(self) -> EngineUpkeep:
        """The backend's own maintenance calls."""

    def read(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in a read-only transaction that sees one snapshot; with `single`, a
        backend may first run it as one statement without a transaction
        (`engine.single.one_statement_first`)."""

    def write(self, work: Callable[[Tx], T], *, single: bool = False) -> Future[T]:
        """Run `work` in a write transaction; the future resolves after COMMIT. With `single`
        (one idempotent statement), a backend may run it as one statement without a
        transaction of its own (`engine.single.one_statement_only`)."""

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (every write raises `ReadOnlyStore`)."""

    def write_blocking(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in a write transaction, in this thread where the backend can; after COMMIT
        (`single` as for `write`)."""

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""

    def sync(self) -> None:
        """Make every write answered so far durable, deferred ones included."""

    def watch(self) -> EventWatch:
        """The engine's one hub of event waiters (`wait_for_events`)."""

    @property
    def telemetry(self) -> StoreTelemetry | None:
        """Its telemetry, bound to its backend when it opened; None when off."""

    def close(self) -> None:
        """Finish queued writes and release every connection."""
