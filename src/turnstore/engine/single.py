"""Internal: a call of one statement, run without a transaction of its own.

A read or a write marked `single` (`Read.single`, `Write.single`) may run on a connection
that sends one statement, which the database commits by itself: one round trip instead of
BEGIN's and COMMIT's. The connection refuses a second statement (and a cursor declared in SQL,
which lives in a transaction only) before sending it: a read then runs again in a transaction
(`one_statement_first`); a write cannot, its first statement committed, so that is a bug of
the operation that marked it (`one_statement_only`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")


class _MoreThanOne(Exception):
    """A read run as one statement asked for a second."""


class SecondStatement(RuntimeError):
    """A write run as one statement asked for a second, after its first was committed: the
    operation that marked it `single` is wrong (a bug, never an answer to bad input)."""


def one_statement_only(connection: Any, work: Callable[[Any], T]) -> T:
    """`work` on a connection that runs one statement, committed by itself (no BEGIN, no
    COMMIT: one round trip). For writes whose script is one statement by construction; a
    second raises `SecondStatement` before it is sent."""
    try:
        return work(_OneStatement(connection))
    except _MoreThanOne:
        raise SecondStatement("a write marked single asked for a second statement") from None


class _OneStatement:
    """A connection that runs one statement and refuses any other."""

    __slots__ = ("_connection", "_used")

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._used = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        # A cursor declared in SQL (`Tx.stream` on PostgreSQL) lives in a transaction only.
        if self._used or sql.startswith("DECLARE"):
            raise _MoreThanOne
        self._used = True
        return self._connection.execute(sql, params)

    def cursor(self) -> NoReturn:
        raise _MoreThanOne


def one_statement_first(
    connection: Any, work: Callable[[Any], T], in_transaction: Callable[[], T]
) -> T:
    """`work` on a connection that runs one statement, with no transaction begun or ended
    around it (a statement sees one snapshot by itself; the connection commits each one);
    if `work` asks for a second statement, `in_transaction()` runs it again, whole. For reads
    only: what the first try read is dropped, and running a read twice changes nothing."""
    try:
        return work(_OneStatement(connection))
    except _MoreThanOne:
        return in_transaction()
