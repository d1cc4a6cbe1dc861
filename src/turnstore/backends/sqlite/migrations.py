"""Creating, checking and migrating a database file: the schema version in `user_version`."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

from turnstore.backends.sqlite.errors import storage_error
from turnstore.backends.sqlite.options import BUSY_TIMEOUT_S, check_readable, prepare_path
from turnstore.backends.sqlite.pool import ReaderPool, connect
from turnstore.backends.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import SchemaError


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
            f"SQLite schema version {version} needs migrating to {SCHEMA_VERSION}: run "
            f"`turnstore migrate {shlex.quote(str(path))}` (or call turnstore.migrate(path)), "
            "or open it once for writing"
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
            # Not turnstore's: it is left as it is, and the advice loses nothing of it.
            raise SchemaError(
                "this SQLite file holds tables but no turnstore schema version; expected "
                f"version {SCHEMA_VERSION}: is it another program's database? (give turnstore "
                "a path of its own)"
            )
    elif version > SCHEMA_VERSION:
        # Advice that loses data is the worst kind: a newer turnstore wrote it, so upgrade.
        raise SchemaError(
            f"SQLite schema version {version} was written by a newer turnstore; this build "
            f"supports version {SCHEMA_VERSION} (upgrade turnstore)"
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
