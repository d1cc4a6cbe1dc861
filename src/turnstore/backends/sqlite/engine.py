"""The SQLite engine: a group-commit writer, a pool of WAL readers, and SQLite's dialect."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from turnstore import telemetry
from turnstore.backends.sqlite.memory_text import Fts5MemoryText
from turnstore.backends.sqlite.migrations import check_database, open_database
from turnstore.backends.sqlite.options import BUSY_TIMEOUT_S
from turnstore.backends.sqlite.pool import ReaderPool, connect
from turnstore.backends.sqlite.search import Fts5Search
from turnstore.backends.sqlite.upkeep import SqliteUpkeep
from turnstore.backends.sqlite.watch import SqliteWatch
from turnstore.backends.sqlite.writer import GroupCommitWriter
from turnstore.engine.protocol import Dialect, Tx
from turnstore.errors import ReadOnlyStore
from turnstore.records.base import WriterStats, encode_json

T = TypeVar("T")

SQLITE = Dialect(
    placeholder="?",
    # One write connection serialises every write, so no row locks are needed.
    lock="",
    lock_skip="",
    key_share="",
    now="unixepoch()",
    now_ms="CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    in_ids="{column} IN (SELECT value FROM json_each(?))",
    id_list=lambda ids: encode_json(ids).decode(),
    children="tree JOIN sessions AS child ON child.parent_session_id = tree.session_id",
    blob_read_lock="",
    blob_write_lock="",
    uri_lock="",
    text_search=Fts5Search(),
    memory_text=Fts5MemoryText(),
    # A value SQLite's JSON cannot read (a NaN or an infinity, which JSON lacks and a memory
    # value may hold) is left to the exact test.
    json_equals=lambda count: (
        "(json_valid(value_json) = 0 OR ("
        + " AND ".join(["json_extract(value_json, ?) = ?"] * count)
        + "))"
    ),
)


class SqliteEngine:
    """One SQLite file: a group-commit writer thread and a pool of readers.

    Read-only, the file is neither created nor migrated, no writer thread runs, every write
    raises `ReadOnlyStore`, and reads create no file beside the database (see `ReaderPool`).
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
        read_only: bool = False,
        create_dirs: bool = False,
        any_version: bool = False,
    ) -> None:
        self.path = path
        # Bound once: the writer and readers count on it without naming their backend.
        self.telemetry = telemetry.bind("sqlite", "sqlite")
        self._readers = ReaderPool(
            path, busy_timeout_s, read_only=read_only, telemetry=self.telemetry
        )
        self._writer: GroupCommitWriter | None = None
        self._watch = SqliteWatch()
        if read_only:
            try:
                check_database(path, self._readers, any_version=any_version)
            except BaseException:
                self._readers.close()
                raise
        else:
            open_database(path, busy_timeout_s, create_dirs=create_dirs)
            self._writer = GroupCommitWriter(
                lambda: connect(path, busy_timeout_s), telemetry=self.telemetry
            )

    def upkeep(self) -> SqliteUpkeep:
        """The maintenance calls of this file."""
        return SqliteUpkeep(self.path, self._readers, read_only=self._writer is None)

    def read(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in a read transaction on a pooled connection (`single` changes nothing
        here: SQLite's BEGIN and COMMIT cost no round trip, and measured as much as none)."""
        return self._readers.read(lambda connection: work(Tx(connection, SQLITE)))

    def write(self, work: Callable[[Tx], T], *, single: bool = False) -> Future[T]:
        """Queue `work` for the writer's next group commit (`single` changes nothing here: a
        write joins the group commit's transaction)."""
        return self._write(work, queued=True)

    def write_blocking(self, work: Callable[[Tx], T], *, single: bool = False) -> T:
        """Run `work` in this thread when no other write is pending, else in the group commit
        (`single` changes nothing here)."""
        return self._write(work, queued=False).result()

    def _write(self, work: Callable[[Tx], T], *, queued: bool) -> Future[T]:
        if self._writer is None:
            raise ReadOnlyStore("the store was opened read-only")
        # The transaction of the job's last run: a job the group commit runs again after
        # another job aborted the batch gets a new one.
        ran: list[Tx] = []

        def job(connection: sqlite3.Connection) -> T:
            tx = Tx(connection, SQLITE)
            ran[:] = (tx,)
            return work(tx)

        future = self._writer.submit(job) if queued else self._writer.run(job)
        # Done callbacks run as the future is resolved, after COMMIT returned.
        future.add_done_callback(lambda done: self._committed(done, ran))
        return future

    def sync(self) -> None:
        """fsync the log and the file: what a full commit does for the deferred ones before it."""
        if self._writer is None:
            return
        for name in (Path(f"{self.path}-wal"), self.path):
            try:
                descriptor = os.open(name, os.O_RDONLY)
            except FileNotFoundError:
                # No log: every commit was checkpointed into the file, which follows.
                continue
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)

    def _committed(self, done: Future[Any], ran: list[Tx]) -> None:
        """Wake the waiters of the sessions a committed write journaled events of."""
        if done.cancelled() or done.exception() is not None or not ran:
            return
        wrote = ran[0].event_sessions
        if wrote:
            self._watch.committed(wrote)

    def watch(self) -> SqliteWatch:
        """The store's waiters and their poll loop."""
        return self._watch

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return self._writer is None

    def writer_stats(self) -> WriterStats:
        """Return how many transactions committed and how many writes they carried."""
        return WriterStats(0, 0) if self._writer is None else self._writer.stats()

    def close(self) -> None:
        """Commit queued writes, then close every connection."""
        if self._writer is not None:
            self._writer.close()
        self._watch.close()
        self._readers.close()
