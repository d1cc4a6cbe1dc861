"""What a SQL backend supplies (an engine and a dialect), and statements written once for all.

A backend's `Engine` runs transactions: reads in the caller's thread, writes answered by a
future after COMMIT. Its `Dialect` holds the few words of SQL that differ between backends.
Statements are written once, as class attributes of a `Statements` table with `?` for each
parameter and dialect words in braces, and formatted once per dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from turnstore.records.base import WriterStats

T = TypeVar("T")
R = TypeVar("R", bound=tuple[Any, ...])
S = TypeVar("S", bound="Statements")


class Query(Generic[R]):
    """A SELECT whose rows come back as the named row type `R`, never as bare tuples."""

    __slots__ = ("make", "sql")

    def __init__(self, sql: str, make: Callable[[Iterable[Any]], R]) -> None:
        self.sql = sql
        self.make = make


def select(row: type[R], rest: str, **expressions: str) -> Query[R]:
    """A SELECT of `row`'s fields, in order, each a column or `expressions[field]`."""
    named = cast(Any, row)
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


class _InIds:
    def __init__(self, pattern: str) -> None:
        self._pattern = pattern

    def __format__(self, column: str) -> str:
        return self._pattern.format(column=column)


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of SQL that differ between backends."""

    placeholder: str
    """The positional parameter marker: `?` or `%s`."""
    lock: str
    """Suffix taking a row lock for update (empty where one writer serialises everything)."""
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
    blob_read_lock: str
    """Statement a commit runs so that garbage collection cannot delete blobs under it."""
    blob_write_lock: str
    """Statement garbage collection runs to exclude commits while it decides what to delete."""
    _tables: dict[type, object] = field(default_factory=dict, compare=False, repr=False)

    def format(self, template: str) -> str:
        """Fill a statement template's dialect words and placeholders."""
        words = {
            "lock": self.lock,
            "key_share": self.key_share,
            "now": self.now,
            "now_ms": self.now_ms,
            "ids": _InIds(self.in_ids),
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

    def __init__(self, dialect: Dialect) -> None:
        for klass in reversed(type(self).__mro__):
            for name, value in vars(klass).items():
                if name.startswith("_"):
                    continue
                if isinstance(value, str):
                    setattr(self, name, dialect.format(value))
                elif isinstance(value, Query):
                    setattr(self, name, Query(dialect.format(value.sql), value.make))


class Tx:
    """One open transaction on a DB-API connection (sqlite3 or psycopg)."""

    __slots__ = ("_connection", "dialect")

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self._connection = connection
        self.dialect = dialect

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

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a one-column query and return its first value, or None when no row came back."""
        found = self._connection.execute(sql, params).fetchone()
        return None if found is None else found[0]

    def values(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a one-column query and return the value of every row."""
        return [found[0] for found in self._connection.execute(sql, params)]

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement that returns no rows."""
        self._connection.execute(sql, params)


class Engine(Protocol):
    """How a backend runs transactions: reads in the caller's thread, writes via futures."""

    def read(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in a read-only transaction that sees one snapshot."""

    def write(self, work: Callable[[Tx], T]) -> Future[T]:
        """Run `work` in a write transaction; the future resolves after COMMIT."""

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""

    def close(self) -> None:
        """Finish queued writes and release every connection."""
