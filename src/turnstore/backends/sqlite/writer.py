"""The single SQLite writer: group commit of concurrent writes, one SAVEPOINT each."""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from turnstore.backends.sqlite.errors import storage_error
from turnstore.engine.protocol import DEFERRED
from turnstore.errors import StoreClosed, TurnstoreError
from turnstore.records.base import WriterStats
from turnstore.telemetry import StoreTelemetry

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]

MAX_BATCH = 512
"""Most writes one transaction carries; bounds a batch's latency and memory."""

logger = logging.getLogger("turnstore.sqlite")


@dataclass(slots=True)
class _Job:
    work: Work
    future: Future[Any] = field(default_factory=Future)
    # Read where the write is begun: the caller's thread or task decides, not the writer's.
    deferred: bool = field(default_factory=DEFERRED.get)


class GroupCommitWriter:
    """Owns the one write connection of a database and drains queued writes in batches.

    Every write submitted while a transaction is being committed waits in the queue and joins
    the next transaction, so N concurrent writers share one fsync. Each write runs inside its
    own SAVEPOINT: a write that raises is rolled back alone and the others still commit. A
    future is resolved only after COMMIT has returned, so no caller hears of a write that is
    not durable (on disk), unless every write of the transaction was begun as deferred
    (`DEFERRED`): then COMMIT does not fsync, and `sync` (or any later full commit) makes it
    durable. A caller that may block can `run` its write in its own thread when no other
    write is pending, which spares the lone writer two thread switches per write. Commits
    and reruns are counted on `telemetry`, its engine's (None: uninstrumented).
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        telemetry: StoreTelemetry | None = None,
    ) -> None:
        self._connect = connect
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        # Held by whichever thread runs a transaction: the writer thread, or a caller in `run`.
        self._busy = threading.Lock()
        self._pending = 0
        self._connection: sqlite3.Connection | None = None
        self._synced = True
        """Whether the connection fsyncs at COMMIT (`PRAGMA synchronous` FULL, not NORMAL)."""
        self._transactions = 0
        self._writes = 0
        self._ready: Future[None] = Future()
        # Decided when the engine opened: an uninstrumented writer calls nothing per commit.
        self._telemetry = telemetry
        self._thread = threading.Thread(
            target=self._run, name="turnstore-sqlite-writer", daemon=True
        )
        self._thread.start()
        self._ready.result()

    def submit(self, work: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Queue `work` for the next transaction; its future resolves after COMMIT."""
        job = _Job(work)
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is closed")
            self._pending += 1
            self._queue.put(job)
        return job.future

    def run(self, work: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Run `work` in this thread if no other write is pending, else queue it as `submit`.

        Its future is done when this returns, unless the write was queued. While any write is
        pending the call queues, so concurrent writes still share one commit.
        """
        job = _Job(work)
        owned = False
        try:
            with self._lock:
                if self._closed:
                    raise StoreClosed("the store is closed")
                if self._pending == 0:
                    owned = self._busy.acquire(blocking=False)
                self._pending += 1
                if not owned:
                    self._queue.put(job)
                    return job.future
            assert self._connection is not None
            job.future.set_running_or_notify_cancel()
            self._commit_guarded(self._connection, [job], caller=True)
            return job.future
        finally:
            if owned:
                # Released first: an interrupt in what follows can only leave `_pending` too
                # high, which sends later calls through the queue, never a writer stuck.
                self._busy.release()
                with self._lock:
                    self._pending -= 1

    def stats(self) -> WriterStats:
        """Return how many transactions committed and how many writes they carried."""
        return WriterStats(self._transactions, self._writes)

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close the connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        try:
            connection = self._connect()
        except BaseException as error:
            self._ready.set_exception(error)
            return
        self._connection = connection
        self._ready.set_result(None)
        try:
            while (first := self._queue.get()) is not None:
                with self._busy:
                    # Gathered under the lock: writes queued while a caller's own
                    # transaction ran join this batch.
                    batch = self._batch_after(first)
                    live = [job for job in batch if job.future.set_running_or_notify_cancel()]
                    self._commit_guarded(connection, live)
                with self._lock:
                    self._pending -= len(batch)
        finally:
            with self._busy:
                connection_close(connection)

    def _commit_guarded(
        self, connection: sqlite3.Connection, jobs: list[_Job], *, caller: bool = False
    ) -> None:
        try:
            self._commit(connection, jobs)
        except sqlite3.Error as error:
            # The connection failed outside any one write (a SAVEPOINT or ROLLBACK
            # statement): fail what is unanswered and keep serving later writes.
            self._fail_unanswered(connection, jobs, storage_error(error))
        except BaseException as error:
            # Interrupted in a caller's thread (KeyboardInterrupt in `run`), or an error no
            # write raised: whatever did not commit is rolled back, and no future is left
            # unanswered. A write interrupted after its COMMIT stays committed.
            self._fail_unanswered(connection, jobs, error)
            if caller:
                raise

    @staticmethod
    def _fail_unanswered(
        connection: sqlite3.Connection, jobs: list[_Job], error: BaseException
    ) -> None:
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(error)
        with contextlib.suppress(sqlite3.Error):
            if connection.in_transaction:
                connection.execute("ROLLBACK")

    def _batch_after(self, first: _Job) -> list[_Job]:
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                # Put the stop sentinel back so the loop ends after this batch commits.
                self._queue.put(None)
                break
            batch.append(job)
        return batch

    def _commit(self, connection: sqlite3.Connection, jobs: list[_Job]) -> None:
        # Retry until a transaction carries every surviving job: a write whose error aborted
        # the whole transaction (SQLite does that for some I/O and memory errors) fails alone,
        # and the writes that ran before it are run again in a fresh transaction.
        while jobs:
            done, failed, rerun = self._run_transaction(connection, jobs)
            for job, error in failed:
                job.future.set_exception(error)
            for job, value in done:
                job.future.set_result(value)
            # Recorded once the callers are answered: a waiting task need not wait for it.
            if done and self._telemetry is not None:
                self._telemetry.committed(len(done))
            if rerun:
                self._retrying(len(rerun))
            jobs = rerun

    def _retrying(self, count: int) -> None:
        logger.warning(
            "a write's error aborted its group commit; %d other write(s) run again", count
        )
        if self._telemetry is not None:
            self._telemetry.retried("transaction_aborted", count)

    def _run_transaction(
        self, connection: sqlite3.Connection, jobs: list[_Job]
    ) -> tuple[list[tuple[_Job, Any]], list[tuple[_Job, BaseException]], list[_Job]]:
        done: list[tuple[_Job, Any]] = []
        failed: list[tuple[_Job, BaseException]] = []
        if connection.in_transaction:
            # Left open by an interrupt during an earlier rollback: begin clean.
            connection.execute("ROLLBACK")
        try:
            self._sync_level(connection, all(job.deferred for job in jobs))
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            return [], [(job, storage_error(error)) for job in jobs], []
        # A lone write needs no savepoint: if it fails, the whole transaction is rolled back.
        isolate = len(jobs) > 1
        for position, job in enumerate(jobs):
            if isolate:
                connection.execute("SAVEPOINT job")
            try:
                value = job.work(connection)
            except BaseException as error:
                failed.append((job, _public(error)))
                if not connection.in_transaction or not isolate:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    return [], failed, [queued for queued, _ in done] + jobs[position + 1 :]
                connection.execute("ROLLBACK TO job")
                connection.execute("RELEASE job")
            else:
                if isolate:
                    connection.execute("RELEASE job")
                done.append((job, value))
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            failure = storage_error(error)
            return [], failed + [(job, failure) for job, _ in done], []
        self._transactions += 1
        self._writes += len(done)
        return done, failed, []

    def _sync_level(self, connection: sqlite3.Connection, deferred: bool) -> None:
        """FULL unless every write of the coming transaction is deferred (set outside one)."""
        if self._synced == deferred:
            # NORMAL in WAL mode: commits stay atomic and ordered, a power cut may lose the
            # newest; the WAL is fsynced at the next full commit, checkpoint or `sync`.
            connection.execute(f"PRAGMA synchronous = {'NORMAL' if deferred else 'FULL'}")
            self._synced = not deferred


def _public(error: BaseException) -> BaseException:
    if isinstance(error, TurnstoreError) or not isinstance(error, sqlite3.Error):
        return error
    return storage_error(error)


def connection_close(connection: sqlite3.Connection) -> None:
    """Close a connection, ignoring errors of one that is already broken."""
    with contextlib.suppress(sqlite3.Error):
        connection.close()
