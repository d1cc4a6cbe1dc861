"""Opening, configuring and migrating SQLite connections, and the pool of readers."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from turnstore.backends.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import SchemaError, StorageError

BUSY_TIMEOUT_S = 5.0
"""How long a connection waits for another process's lock before failing."""

_RETRYABLE = ("database is locked", "database is busy", "database table is locked")


def storage_error(error: sqlite3.Error) -> StorageError:
    """Wrap a driver error in the public hierarchy; lock timeouts are retryable."""
    text = str(error)
    return StorageError(f"SQLite error: {text}", retryable=any(m in text for m in _RETRYABLE))


def prepare_path(path: Path) -> None:
    """Create the parent folder and, if missing, the database file, readable by its owner only."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Never open and close an existing database file here: closing any descriptor of a
        # file drops every POSIX lock this process holds on it, including the locks of other
        # SQLite connections (another store) in this process, which can corrupt the database.
        # Only a file that did not exist, which nobody can have locked, is created and closed.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        # chmod opens nothing, so it drops no lock; it also tightens a file made elsewhere.
        os.chmod(path, 0o600)
    except OSError as error:
        raise StorageError(
            f"cannot create the database file {path}: {error.strerror or error}"
        ) from None


def connect(
    path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S, *, read_only: bool = False
) -> sqlite3.Connection:
    """Open a configured connection to an existing database file."""
    try:
        # isolation_level=None: the store issues BEGIN/COMMIT itself, so transaction
        # boundaries are exactly the ones written in the backend.
        connection = sqlite3.connect(
            f"file:{path}?mode={'ro' if read_only else 'rw'}",
            uri=True,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        # Foreign keys drive the cascading deletes; FULL fsyncs the WAL on every commit so an
        # acknowledged commit survives power loss, not only a process crash.
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = FULL")
        if read_only:
            connection.execute("PRAGMA query_only = ON")
    except sqlite3.Error as error:
        raise storage_error(error) from None
    return connection


def open_database(path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Create or migrate the database at `path`, refusing files this build cannot use."""
    prepare_path(path)
    connection = connect(path, busy_timeout_s)
    try:
        _migrate(connection)
    except sqlite3.Error as error:
        raise storage_error(error) from None
    finally:
        connection.close()


def check_database(path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Check, without writing, that `path` is a database at this build's schema version."""
    if not path.is_file():
        raise StorageError(f"no database file at {path}")
    connection = connect(path, busy_timeout_s, read_only=True)
    try:
        version = _checked_version(connection)
    except sqlite3.Error as error:
        raise storage_error(error) from None
    finally:
        connection.close()
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"SQLite schema version {version} needs migrating to {SCHEMA_VERSION}; "
            "open the store once for writing to migrate it"
        )


def _migrate(connection: sqlite3.Connection) -> None:
    # Refuse a file this build cannot use before changing anything in it.
    _checked_version(connection)
    # WAL lets readers run beside the one writer; it is a property of the file, set once.
    mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise SchemaError(f"SQLite could not enable WAL mode: {mode}")
    # BEGIN IMMEDIATE: processes opening one new file at once migrate it one after another,
    # and each re-reads the version under the lock.
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = _checked_version(connection)
        for number in range(version, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[number]):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {number + 1}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _checked_version(connection: sqlite3.Connection) -> int:
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version == 0:
        has_tables = connection.execute("SELECT EXISTS (SELECT 1 FROM sqlite_schema)").fetchone()
        if has_tables[0]:
            raise SchemaError(
                "unversioned SQLite database is not empty; expected schema version "
                f"{SCHEMA_VERSION} (start with a fresh database)"
            )
    elif version > SCHEMA_VERSION:
        raise SchemaError(
            f"unsupported SQLite schema version {version}; expected {SCHEMA_VERSION} "
            "(start with a fresh database)"
        )
    return version


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT the open transaction, so statements run one by one.
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return [statement for statement in statements if statement.strip(" ;\n")]


class ReaderPool:
    """Idle read connections, reused across threads; WAL readers never wait for the writer."""

    def __init__(self, path: Path, busy_timeout_s: float, *, read_only: bool = False) -> None:
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._read_only = read_only
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Lend a connection inside one read transaction, so every query sees one snapshot."""
        connection = self._take()
        try:
            connection.execute("BEGIN")
            try:
                yield connection
            finally:
                if connection.in_transaction:
                    connection.execute("COMMIT")
        except sqlite3.Error as error:
            connection.close()
            raise storage_error(error) from None
        except BaseException:
            self._give_back(connection)
            raise
        self._give_back(connection)

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return connect(self._path, self._busy_timeout_s, read_only=self._read_only)

    def _give_back(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close idle connections; connections in use close when they are given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
