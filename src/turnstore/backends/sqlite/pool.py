"""Opening configured connections, and the pool of readers."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from turnstore.backends.sqlite.errors import storage_error
from turnstore.backends.sqlite.options import BUSY_TIMEOUT_S, may_access
from turnstore.errors import StorageError
from turnstore.telemetry import StoreTelemetry

T = TypeVar("T")

_READ_ONLY_ATTEMPTS = 5
"""Tries of a read-only read that writers keep changing the file under, before the last one
reads through SQLite's shared memory whatever happens meanwhile."""

logger = logging.getLogger("turnstore.sqlite")


def connect(
    path: Path,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    *,
    read_only: bool = False,
    immutable: bool = False,
) -> sqlite3.Connection:
    """Open a configured connection to an existing database file.

    `immutable` reads the main file alone, with no locks and no `-wal` or `-shm` files: only
    for a read-only reader while no writer has the database open (see `ReaderPool`).
    """
    mode = "ro" if read_only or immutable else "rw"
    # Quoted: `?`, `#` and `%` are URI syntax and would otherwise cut or change the path.
    uri = f"file:{quote(os.fspath(path))}?mode={mode}{'&immutable=1' if immutable else ''}"
    try:
        # isolation_level=None: the store issues BEGIN/COMMIT itself, so transaction
        # boundaries are exactly the ones written in the backend.
        connection = sqlite3.connect(
            uri,
            uri=True,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        # Foreign keys drive the cascading deletes; FULL fsyncs the WAL on every commit so an
        # acknowledged commit survives power loss, not only a process crash.
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = FULL")
        if read_only or immutable:
            connection.execute("PRAGMA query_only = ON")
    except sqlite3.Error as error:
        raise storage_error(error) from None
    return connection


_Stamp = tuple[int, int, int, int, int]


def _stamp(path: Path) -> _Stamp | None:
    """What any write to the file changes: its identity, size and times."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


class _FileChanged(Exception):
    """A read-only read cannot trust what it read: retry it."""


def _in_transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    connection.execute("BEGIN")
    try:
        return work(connection)
    finally:
        if connection.in_transaction:
            connection.execute("COMMIT")


class ReaderPool:
    """Idle read connections, reused across threads; WAL readers never wait for the writer.

    Read-only, the pool creates nothing beside the database and needs no write access to its
    folder. While no write-ahead log (`-wal`) exists beside the file, no writer has it open
    and the file holds every commit, so reads use `immutable` connections, which open no
    `-wal` or `-shm` file. Those take no lock either, so a writer that starts during such a
    read is noticed after it (a log appeared, or the file changed) and the read runs again.
    While a log exists, each read opens a `mode=ro` connection that reads through the log,
    seeing every commit of a live writer, and closes it after the read, so the writer's own
    close can still fold the log in and delete it. Reads run again are counted on
    `telemetry`, its engine's (None: uninstrumented).
    """

    def __init__(
        self,
        path: Path,
        busy_timeout_s: float,
        *,
        read_only: bool = False,
        telemetry: StoreTelemetry | None = None,
    ) -> None:
        self._path = path
        self._log = f"{path}-wal"
        self._journal = f"{path}-journal"
        self._busy_timeout_s = busy_timeout_s
        self._read_only = read_only
        self._telemetry = telemetry
        self._idle: list[sqlite3.Connection] = []
        self._frozen: list[tuple[_Stamp | None, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` inside one read transaction, so every query sees one snapshot."""
        if not self._read_only:
            return self._read_shared(work, may_retry=False)
        for _ in range(_READ_ONLY_ATTEMPTS):
            try:
                if self._in_use():
                    return self._read_shared(work, may_retry=True)
                return self._read_frozen(work)
            except _FileChanged:
                # Routine beside a live writer, so below INFO.
                logger.debug(
                    "a read-only read of %s ran while a writer changed it: again", self._path
                )
                if self._telemetry is not None:
                    self._telemetry.retried("file_changed")
                continue
        return self._read_shared(work, may_retry=False)

    def _read_frozen(self, work: Callable[[sqlite3.Connection], T]) -> T:
        state = _stamp(self._path)
        connection = self._take_frozen(state)
        try:
            value = _in_transaction(connection, work)
        except Exception as error:
            if self._changed(state):
                connection.close()
                raise _FileChanged from None
            if isinstance(error, sqlite3.Error):
                connection.close()
                raise storage_error(error) from None
            self._give_back_frozen(state, connection)
            raise
        except BaseException:
            connection.close()
            raise
        if self._changed(state):
            # What was read may mix two states of the file (a checkpoint ran meanwhile).
            connection.close()
            raise _FileChanged
        self._give_back_frozen(state, connection)
        return value

    def _in_use(self) -> bool:
        # A rollback journal (of a file not in WAL mode) may hold a writer's half-written
        # transaction, which only a locking reader knows to wait for or refuse.
        return os.path.lexists(self._log) or os.path.lexists(self._journal)

    def _changed(self, state: _Stamp | None) -> bool:
        return self._in_use() or _stamp(self._path) != state

    def _read_shared(self, work: Callable[[sqlite3.Connection], T], *, may_retry: bool) -> T:
        try:
            connection = self._take()
        except StorageError:
            failure = self._read_only_failure(may_retry)
            if failure is None:
                raise
            raise failure from None
        try:
            value = _in_transaction(connection, work)
        except sqlite3.Error as error:
            connection.close()
            raise (self._read_only_failure(may_retry) or storage_error(error)) from None
        except BaseException:
            self._give_back(connection)
            raise
        self._give_back(connection)
        return value

    def _read_only_failure(self, may_retry: bool) -> Exception | None:
        """Why a read through the log failed, when a read-only reader can tell."""
        if not self._read_only:
            return None
        if may_retry and not self._in_use():
            # The writer closed and deleted its log between the check and the read.
            return _FileChanged()
        folder = self._path.parent
        if not os.path.lexists(f"{self._path}-shm") and not may_access(folder, os.W_OK | os.X_OK):
            return StorageError(
                f"cannot read {self._path} read-only: its write-ahead log {self._log} may "
                f"hold commits, and reading it needs {self._path}-shm, which is missing and "
                f"cannot be created in {folder}; copy the database together with its -wal "
                "file to a writable folder and open the copy"
            )
        return None

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return connect(self._path, self._busy_timeout_s, read_only=self._read_only)

    def _give_back(self, connection: sqlite3.Connection) -> None:
        # A read-only reader holds no connection between reads: an open one would keep a
        # closing writer from folding its log into the file and deleting it.
        with self._lock:
            if not self._closed and not self._read_only:
                self._idle.append(connection)
                return
        connection.close()

    def _take_frozen(self, state: _Stamp | None) -> sqlite3.Connection:
        # A connection opened on another state of the file has pages of that state cached.
        found: sqlite3.Connection | None = None
        with self._lock:
            stale = [c for opened_on, c in self._frozen if opened_on != state]
            fresh = [c for opened_on, c in self._frozen if opened_on == state]
            if fresh:
                found = fresh.pop()
            self._frozen = [(state, c) for c in fresh]
        for connection in stale:
            connection.close()
        if found is not None:
            return found
        return connect(self._path, self._busy_timeout_s, immutable=True)

    def _give_back_frozen(self, state: _Stamp | None, connection: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._frozen.append((state, connection))
                return
        connection.close()

    def close(self) -> None:
        """Close idle connections; connections in use close when they are given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            idle += [connection for _, connection in self._frozen]
            self._frozen = []
        for connection in idle:
            connection.close()
