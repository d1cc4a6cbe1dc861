"""Opening, configuring and migrating SQLite connections, and the pool of readers."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from turnstore.backends.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import ConfigError, SchemaError, StorageError

T = TypeVar("T")

BUSY_TIMEOUT_S = 5.0
"""How long a connection waits for another process's lock before failing."""

_RETRYABLE = ("database is locked", "database is busy", "database table is locked")
_READ_ONLY_ATTEMPTS = 5
"""Tries of a read-only read that writers keep changing the file under, before the last one
reads through SQLite's shared memory whatever happens meanwhile."""
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


def storage_error(error: sqlite3.Error) -> StorageError:
    """Wrap a driver error in the public hierarchy; lock timeouts are retryable."""
    text = str(error)
    return StorageError(f"SQLite error: {text}", retryable=any(m in text for m in _RETRYABLE))


def _may(path: Path, mode: int) -> bool:
    return os.access(path, mode, effective_ids=_EFFECTIVE_IDS)


def _stat(path: Path) -> os.stat_result | None:
    """The status of `path`, None when it does not exist; unreachable is a ConfigError."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise ConfigError(f"cannot reach {path}: permission denied") from None


def _check_folder(path: Path, *, create_dirs: bool) -> None:
    """Refuse a database whose folder is missing, unless told to create it."""
    folder = path.parent
    found = _stat(folder)
    if found is None:
        if not create_dirs:
            # A misspelt folder must not become a new, empty store beside the real one.
            raise ConfigError(
                f"the folder {folder} does not exist; create it, or pass create_dirs=True "
                "to open() to have it created"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(
                f"cannot create the folder {folder}: {error.strerror or error}"
            ) from None
    elif not stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{folder} is not a folder, so it cannot hold the database {path.name}")


def _check_file(path: Path) -> os.stat_result | None:
    """The status of the database file, None when missing; a folder there is a ConfigError."""
    found = _stat(path)
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{path} is a folder; name a database file inside it")
    return found


def prepare_path(path: Path, *, create_dirs: bool = False) -> None:
    """Check the folder, and create the database file if missing, readable by its owner only.

    A file or folder this process cannot write is a `ConfigError` that says to open the store
    read-only: SQLite writes the file and keeps its `-wal` and `-shm` files beside it.
    """
    _check_folder(path, create_dirs=create_dirs)
    found = _check_file(path)
    if found is not None and not _may(path, os.R_OK):
        raise ConfigError(f"the database file {path} is not readable by this process")
    if found is not None and not _may(path, os.W_OK):
        raise ConfigError(
            f"the database file {path} is not writable by this process; "
            "open it with read_only=True to read it"
        )
    if not _may(path.parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the folder {path.parent} is not writable by this process, and a writer keeps "
            "its -wal and -shm files beside the database; open it with read_only=True to read it"
        )
    try:
        if found is None:
            # Never open and close an existing database file here: closing any descriptor of
            # a file drops every POSIX lock this process holds on it, including the locks of
            # other SQLite connections (another store) in this process, which can corrupt the
            # database. Only a file that did not exist, which nobody can have locked, is
            # created and closed.
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        else:
            mode = stat.S_IMODE(found.st_mode)
            # chmod opens nothing, so it drops no lock; it tightens a file made elsewhere, and
            # only a file this process owns (another owner's choice of mode is theirs).
            if mode & 0o077 and found.st_uid == os.geteuid():
                os.chmod(path, mode & 0o700)
    except OSError as error:
        raise StorageError(
            f"cannot create the database file {path}: {error.strerror or error}"
        ) from None


def check_readable(path: Path) -> None:
    """Check that `path` is a database file this process can read, creating nothing."""
    _check_folder(path, create_dirs=False)
    if _check_file(path) is None:
        raise StorageError(f"no database file at {path}")
    if not _may(path, os.R_OK):
        raise ConfigError(f"the database file {path} is not readable by this process")


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


def open_database(
    path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S, *, create_dirs: bool = False
) -> None:
    """Create or migrate the database at `path`, refusing files this build cannot use."""
    prepare_path(path, create_dirs=create_dirs)
    connection = connect(path, busy_timeout_s)
    try:
        _migrate(connection)
    except sqlite3.Error as error:
        raise storage_error(error) from None
    finally:
        connection.close()


def check_database(path: Path, readers: ReaderPool, *, any_version: bool = False) -> None:
    """Check, without writing, that `path` is a database at this build's schema version."""
    check_readable(path)
    version = readers.read(_checked_version)
    if version != SCHEMA_VERSION and not any_version:
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
    close can still fold the log in and delete it.
    """

    def __init__(self, path: Path, busy_timeout_s: float, *, read_only: bool = False) -> None:
        self._path = path
        self._log = f"{path}-wal"
        self._journal = f"{path}-journal"
        self._busy_timeout_s = busy_timeout_s
        self._read_only = read_only
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
        if not os.path.lexists(f"{self._path}-shm") and not _may(folder, os.W_OK | os.X_OK):
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
