"""What only SQLite can do for an operator: file sizes, integrity_check, VACUUM, backups."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from turnstore.backends.sqlite.errors import storage_error
from turnstore.backends.sqlite.options import BUSY_TIMEOUT_S
from turnstore.backends.sqlite.pool import ReaderPool, connect
from turnstore.backends.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import ConfigError, ReadOnlyStore
from turnstore.schema.indexes import defined_indexes


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class SqliteUpkeep:
    """Maintenance of one SQLite file, each call on a connection of its own."""

    backend = "sqlite"
    supported_version = SCHEMA_VERSION
    single_writer = True

    def __init__(self, path: Path, readers: ReaderPool, *, read_only: bool) -> None:
        self.path = path
        self._readers = readers
        self._read_only = read_only

    def _writer(self) -> sqlite3.Connection:
        if self._read_only:
            raise ReadOnlyStore("the store was opened read-only")
        return connect(self.path, BUSY_TIMEOUT_S)

    def _query(self, sql: str) -> list[tuple[object, ...]]:
        return self._readers.read(lambda connection: list(connection.execute(sql)))

    def schema_version(self) -> int:
        """The file's `user_version`."""
        ((version,),) = self._query("PRAGMA user_version")
        return int(str(version))

    def database_bytes(self) -> int:
        """The file and its write-ahead log."""
        return _size(self.path) + (self.wal_bytes() or 0)

    def wal_bytes(self) -> int | None:
        """The `-wal` file's size."""
        return _size(self.path.with_name(self.path.name + "-wal"))

    def integrity(self) -> list[str]:
        """`PRAGMA integrity_check` and `foreign_key_check` findings."""
        found = [str(message) for (message,) in self._query("PRAGMA integrity_check")]
        found = [message for message in found if message != "ok"]
        for table, rowid, parent, _ in self._query("PRAGMA foreign_key_check"):
            found.append(f"{table} row {rowid} names a missing {parent} row")
        return found

    def missing_indexes(self) -> list[str]:
        """Indexes the migrations create that the file lacks."""
        present = {
            str(name)
            for (name,) in self._query("SELECT name FROM sqlite_schema WHERE type = 'index'")
        }
        return sorted(defined_indexes(MIGRATIONS) - present)

    def bloated_tables(self) -> list[str]:
        """SQLite reuses free pages; `vacuum` returns them to the file system."""
        return []

    def vacuum(self) -> None:
        """Merge the search index's segments (dropping what deletions left behind), VACUUM
        the file (waiting for the writer like any write), then truncate the WAL."""
        try:
            with contextlib.closing(self._writer()) as connection:
                with connection:
                    connection.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
                connection.execute("VACUUM")
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as error:
            raise storage_error(error) from None

    def backup(self, destination: str) -> int:
        """Copy the database through SQLite's online backup API into a new `0600` file."""
        target = Path(os.path.expanduser(destination)).absolute()
        try:
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise ConfigError(f"{target} exists; a backup writes a new file") from None
        except OSError as error:
            raise ConfigError(f"cannot create {target}: {error.strerror}") from None
        os.close(descriptor)
        try:
            with contextlib.closing(sqlite3.connect(target, isolation_level=None)) as copy:
                # One step (pages=-1): the whole copy is read in one snapshot, so writers that
                # commit meanwhile neither restart it nor show in it.
                self._readers.read(lambda source: source.backup(copy, pages=-1))
                copy.execute("PRAGMA journal_mode = DELETE")
            with open(target, "rb+") as written:
                os.fsync(written.fileno())
        except (sqlite3.Error, OSError) as error:
            target.unlink(missing_ok=True)
            if isinstance(error, sqlite3.Error):
                raise storage_error(error) from None
            raise ConfigError(f"cannot write {target}: {error}") from None
        return _size(target)
