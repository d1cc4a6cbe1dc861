"""The PostgreSQL engine: a psycopg connection pool, row locks, and PostgreSQL's dialect."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from turnstore import telemetry
from turnstore.backends.postgres import migrations
from turnstore.backends.postgres.errors import storage_error, translated
from turnstore.backends.postgres.memory_text import TsvectorMemoryText
from turnstore.backends.postgres.options import PostgresOptions
from turnstore.backends.postgres.pool import open_pool, prelude
from turnstore.backends.postgres.search import TsvectorSearch
from turnstore.backends.postgres.upkeep import PostgresUpkeep
from turnstore.backends.postgres.watch import PostgresWatch
from turnstore.engine.protocol import DEFERRED, Dialect, Tx
from turnstore.engine.single import one_statement_first, one_statement_only
from turnstore.errors import (
    OutcomeUnknown,
    ReadOnlyStore,
    StoreClosed,
    TurnstoreError,
)
from turnstore.records.base import WriterStats

T = TypeVar("T")

logger = logging.getLogger("turnstore.postgres")

_BLOB_LOCK_KEY = "hashtextextended(current_schema() || ':blobs', 0)"
POSTGRES = Dialect(
    placeholder="%s",
    # Row locks stand in for SQLite's single writer: a session row is locked for the whole
    # save, so sequences of checkpoints and events advance one writer at a time per session.
    lock=" FOR UPDATE",
    # The search indexer passes over a session a writer holds, and comes back to it.
    lock_skip=" FOR UPDATE SKIP LOCKED",
    # A fork keeps its parent from being deleted until the child row exists.
    key_share=" FOR KEY SHARE",
    now="CAST(FLOOR(EXTRACT(EPOCH FROM now())) AS BIGINT)",
    now_ms="CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
    in_ids="{column} = ANY(?)",
    id_list=lambda ids: ids,
    # A lateral subquery behind OFFSET 0 is planned on its own, once per tree row, so each
    # step is a lookup of sessions_parent_idx even without statistics; as a plain join, a
    # planner that has none (no ANALYZE since a bulk load) hashes a scan of every session.
    children=(
        "tree CROSS JOIN LATERAL (SELECT session_id FROM sessions"
        " WHERE parent_session_id = tree.session_id OFFSET 0) AS child"
    ),
    # Commits share this lock and garbage collection takes it alone, so a blob a commit is
    # about to reference is never deleted between the commit's insert and its head update.
    blob_read_lock=f"SELECT pg_advisory_xact_lock_shared({_BLOB_LOCK_KEY})",
    blob_write_lock=f"SELECT pg_advisory_xact_lock({_BLOB_LOCK_KEY})",
    uri_lock="SELECT pg_advisory_xact_lock("
    "hashtextextended(current_schema() || ':attachment:' || %s, 0))",
    text_search=TsvectorSearch(),
    memory_text=TsvectorMemoryText(),
    server_cursors=True,
    # Pipeline mode needs libpq 14 or newer (psycopg's binary wheels bundle one).
    pipelined=psycopg.Pipeline.is_supported(),
)


_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""How a read transaction begins: one snapshot for all its statements."""


def _alone(connection: psycopg.Connection[Any], work: Callable[[Tx], T]) -> tuple[T, Tx]:
    """Run `work`, one statement, autocommitted; its result and transaction. A connection lost
    meanwhile raises `_Lost`: the statement may have committed, and running it again leaves
    what running it once does (what `single` promises)."""
    ran: list[Tx] = []

    def one(proxy: Any) -> T:
        ran.append(Tx(proxy, POSTGRES))
        return work(ran[0])

    try:
        return one_statement_only(connection, one), ran[0]
    except psycopg.OperationalError as error:
        if connection.broken:
            raise _Lost(error) from None
        raise


class _Lost(Exception):
    """The connection broke before COMMIT was sent: the server rolled the transaction back."""

    def __init__(self, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.error = error


Prelude = tuple[str, tuple[str]] | None
"""A statement each transaction begins with (settings behind a transaction pooler), or None."""


def _pipelined(
    connection: psycopg.Connection[Any],
    begin: str,
    prelude: Prelude,
    work: Callable[[], T],
    *,
    deferred: bool = False,
) -> T:
    """Run `work` in one transaction in pipeline mode, begun with `begin`, and commit.

    BEGIN, every statement whose rows are not read, and COMMIT are sent without waiting, so
    a save waits for the server only where it reads rows and at the commit. BEGIN and COMMIT
    are sent as statements: psycopg's transaction blocks sync the pipeline at both ends.
    A statement that fails raises at the next read or at the commit, the transaction
    aborted; whatever fails, the connection goes back to the pool outside any transaction (or
    closed, after a database error, for the pool to replace). A connection lost before the
    COMMIT was sent raises `_Lost`: nothing was committed, so the caller may run it again.
    """
    committing = False
    try:
        with connection.pipeline() if POSTGRES.pipelined else contextlib.nullcontext():
            connection.execute(begin)
            if prelude is not None:
                connection.execute(*prelude)
            if deferred:
                # Answered before the WAL is flushed; `sync` (or any later commit) flushes it.
                connection.execute("SET LOCAL synchronous_commit TO OFF")
            result = work()
            committing = True
            connection.execute("COMMIT")
    except BaseException as error:
        # Before the close below, which would hide whether the connection broke by itself.
        lost = error if isinstance(error, psycopg.OperationalError) and connection.broken else None
        if connection.info.transaction_status != TransactionStatus.IDLE and not connection.closed:
            with contextlib.suppress(psycopg.Error):
                connection.execute("ROLLBACK")
        if POSTGRES.pipelined and isinstance(error, psycopg.Error):
            # A statement psycopg prepared in the aborted pipeline may be one it believes
            # exists and the server never kept ("prepared statement _pg3_1 does not exist" on
            # the connection's next use): the pool replaces this connection instead.
            connection.close()
        if lost is not None and not committing:
            raise _Lost(lost) from None
        raise
    return result


_RETRIES = 5
"""Attempts of a transaction that lost a deadlock or serialization race, or its connection
before COMMIT."""


class PostgresEngine:
    """A connection pool: reads and blocking writes in the caller's thread, async writes on threads.

    Nothing here is process-local state that correctness depends on: every ordering rule is
    enforced by row locks in the database, so any number of processes on any number of hosts
    can share one schema.
    """

    def __init__(self, url: str, *, read_only: bool = False, any_version: bool = False) -> None:
        self.options = options = PostgresOptions.from_url(url)
        self._prelude = prelude(options)
        self.telemetry = telemetry.bind("postgres", "postgresql")
        self._read_only = read_only
        self._any_version = any_version and read_only
        self._pool = self._open_pool()
        self._transactions = 0
        self._counter = threading.Lock()
        # Blocking writes run in their callers' threads; close() waits for them to end.
        self._callers = threading.Condition(self._counter)
        self._in_callers = 0
        self._closing = False
        try:
            self._prepare_schema()
        except BaseException:
            self._pool.close()
            raise
        self._writes = ThreadPoolExecutor(
            options.pool_max_size, thread_name_prefix="turnstore-postgres-write"
        )
        self._watch = PostgresWatch(options, self._pool)

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        return open_pool(self.options, read_only=self._read_only)

    def _prepare_schema(self) -> None:
        translated(self.options, self._migrate)

    def _migrate(self) -> None:
        with self.connection() as connection:
            migrations.migrate(
                connection,
                self.options.schema,
                read_only=self._read_only,
                any_version=self._any_version,
            )

    @property
    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """The engine's connection pool (autocommit connections, for statements that need no
        schema: behind a transaction pooler each runs on whichever server connection is free)."""
        return self._pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pool connection inside one transaction on the store's schema and settings."""
        with self._pool.connection() as connection, connection.transaction():
            if self._prelude is not None:
                connection.execute(*self._prelude)
            yield connection

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return self._read_only

    @property
    def schema(self) -> str:
        """The store's schema."""
        return self.options.schema

    def run_translated(self, call: Callable[[], T]) -> T:
        """Run `call`, turning driver errors into turnstore errors without the password."""
        return translated(self.options, call)

    def schema_version(self) -> int:
        """The schema version the store's schema is at."""

        def run() -> int:
            with self.connection() as connection:
                return migrations.stored_version(connection, self.options.schema)

        return translated(self.options, run)

    def upkeep(self) -> PostgresUpkeep:
        """The maintenance calls of this schema."""
        return PostgresUpkeep(self)

    def read(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in one repeatable-read, read-only transaction; with `single`, first as
        one autocommitted statement, which saves the transaction's round trip, unless every
        transaction must begin with the store's prelude (behind a transaction pooler)."""
        alone = single and self._prelude is None

        def transaction() -> T:
            with self._pool.connection() as connection:

                def begun() -> T:
                    tx = Tx(connection, POSTGRES)
                    return _pipelined(connection, _READ, self._prelude, lambda: work(tx))

                if not alone:
                    return begun()
                try:
                    return one_statement_first(connection, lambda c: work(Tx(c, POSTGRES)), begun)
                except psycopg.OperationalError as error:
                    if connection.broken:  # before any commit: nothing to lose, so again
                        raise _Lost(error) from None
                    raise

        return translated(self.options, lambda: self._again_when_lost(transaction))

    def _again_when_lost(self, transaction: Callable[[], T]) -> T:
        """Run `transaction`, again on a fresh connection while one breaks before its COMMIT.

        A pooler that drops its server connections (PgBouncer's KILL or RECONNECT, a server
        restart behind it) leaves every idle connection of the pool dead: after the first
        loss the pool checks them all, so the next attempt gets a live one.
        """
        for attempt in range(1, _RETRIES + 1):
            try:
                return transaction()
            except _Lost as lost:
                if attempt == _RETRIES:
                    failure = storage_error(lost.error, self.options)
                    break
                logger.warning(
                    "connection lost before commit (%s); retrying, attempt %d of %d",
                    type(lost.error).__name__,
                    attempt + 1,
                    _RETRIES,
                )
                self._retried("connection_lost")
                self._pool.check()
        # Raised outside the `except` block, so the driver's error is not its context.
        raise failure

    def write(self, work: Callable[[Tx], T], *, single: bool = False) -> Future[T]:
        """Run `work` in its own transaction on a writer thread (`single`: see `_write_now`)."""
        if self._read_only:
            raise ReadOnlyStore("the store was opened read-only")
        try:
            # Read here: the writer thread does not run in the caller's context.
            return self._writes.submit(self._write_now, work, DEFERRED.get(), single)
        except RuntimeError:
            # The writer pool shuts down in close(); a call that raced it sees a closed store.
            raise StoreClosed("the store is closed") from None

    def write_blocking(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in its own transaction in this thread; return after its COMMIT.

        No thread hop: a blocking caller waits for the server either way, and handing the
        write to a writer thread cost two thread wake-ups a save. An interrupt before
        COMMIT rolls the transaction back; one just after it leaves the write committed.
        """
        if self._read_only:
            raise ReadOnlyStore("the store was opened read-only")
        with self._counter:
            if self._closing:
                raise StoreClosed("the store is closed")
            self._in_callers += 1
        try:
            return self._write_now(work, DEFERRED.get(), single)
        finally:
            with self._counter:
                self._in_callers -= 1
                if self._in_callers == 0:
                    self._callers.notify_all()

    def _write_now(
        self, work: Callable[[Tx], T], deferred: bool = False, single: bool = False
    ) -> T:
        """Run `work` in a transaction; with `single` (one idempotent statement), as that
        statement alone, committed by itself: one round trip instead of two. Not behind a
        transaction pooler (each transaction begins with the prelude) nor for a deferred
        write (its transaction sets `synchronous_commit`)."""
        alone = single and self._prelude is None and not deferred

        def transaction() -> T:
            with self._pool.connection() as connection:
                if alone:
                    result, tx = _alone(connection, work)
                else:
                    tx = Tx(connection, POSTGRES)
                    result = _pipelined(
                        connection, "BEGIN", self._prelude, lambda: work(tx), deferred=deferred
                    )
            # COMMIT returned. The notification goes out from another connection (see
            # `watch`), never inside the transaction.
            if tx.event_sessions:
                self._watch.committed(tx.event_sessions)
            return result

        failure: TurnstoreError | None = None
        for attempt in range(1, _RETRIES + 1):
            try:
                result = self._again_when_lost(transaction)
            except (errors.DeadlockDetected, errors.SerializationFailure) as error:
                # The transaction was rolled back whole; running it again is safe.
                failure = storage_error(error, self.options)
                logger.warning(
                    "write lost a %s race; retrying, attempt %d of %d",
                    type(error).__name__,
                    attempt + 1,
                    _RETRIES,
                )
                self._retried(
                    "deadlock" if isinstance(error, errors.DeadlockDetected) else "serialization"
                )
                continue
            except TurnstoreError:
                raise
            except PoolClosed:
                failure = StoreClosed("the store is closed")
                break
            except (psycopg.Error, PoolTimeout) as error:
                failure = storage_error(error, self.options)
                if isinstance(error, psycopg.OperationalError):
                    # Lost with the COMMIT sent: it may have committed. Running it again
                    # could apply it twice, so the caller hears that the outcome is unknown.
                    failure = OutcomeUnknown(
                        f"{failure.message} (the connection was lost while the write was "
                        "committing: it may or may not have been committed)",
                        retryable=False,
                        sqlstate=failure.sqlstate,
                    )
                break
            with self._counter:
                self._transactions += 1
            if self.telemetry is not None:
                self.telemetry.committed(1)
            return result
        # Raised outside the `except` blocks, so the driver's error is not its context.
        assert failure is not None
        raise failure

    def _retried(self, reason: str) -> None:
        if self.telemetry is not None:
            self.telemetry.retried(reason)

    def writer_stats(self) -> WriterStats:
        """Return how many write transactions committed (one write each)."""
        return WriterStats(self._transactions, self._transactions)

    def sync(self) -> None:
        """Commit a transaction that takes an id, with `synchronous_commit` on: the server
        answers once the WAL is flushed past it, so past every deferred commit before it."""
        if self._read_only:
            return
        self._write_now(lambda tx: tx.value("SELECT pg_current_xact_id()"))

    def watch(self) -> PostgresWatch:
        """The store's waiters, notification sender and listener."""
        return self._watch

    def close(self) -> None:
        """Finish running writes, then close the pool."""
        with self._counter:
            self._closing = True
            self._callers.wait_for(lambda: self._in_callers == 0)
        if hasattr(self, "_writes"):
            self._writes.shutdown(wait=True)
        if hasattr(self, "_watch"):
            # After the writes, so their notifications are sent; before the pool closes.
            self._watch.close()
        self._pool.close()
