"""The SQLite database file — schema version, refusal of foreign files, WAL, mode.

Ports the seed-003 test `open_rejects_a_nonempty_unversioned_database` (the Python schema is
version 1). These rules are about the SQLite file, so they run on SQLite only.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import turnstore
from turnstore import (
    Checkpoint,
)
from turnstore.backends.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

UNVERSIONED = (
    "this SQLite file holds tables but no turnstore schema version; expected version "
    f"{SCHEMA_VERSION}: is it another program's database? (give turnstore a path of its own)"
)
NEWER = (
    "SQLite schema version 99 was written by a newer turnstore; this build supports version "
    f"{SCHEMA_VERSION} (upgrade turnstore)"
)


@pytest.fixture
def backend_name() -> str:
    """Only SQLite: `store_url` and `database` give a fresh database file."""
    return "sqlite"


def sqlite_value(path: Path, sql: str) -> object:
    """The first column of the first row of `sql` on a fresh connection to `path`."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql).fetchone()[0]
    finally:
        connection.close()


async def replace_with_legacy_database(store, store_url: str) -> Path:
    """Close the store and put a non-empty unversioned SQLite file at its path."""
    await store.close()
    path = Path(store_url)
    write_legacy_database(path)
    return path


def write_legacy_database(path: Path) -> None:
    """Replace the database files at `path` with a one-table SQLite file without a version."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE legacy_state (value TEXT)")
    connection.execute("INSERT INTO legacy_state VALUES ('kept')")
    connection.commit()
    connection.close()


def file_mode(path: Path) -> int:
    """The permission bits of the file at `path`."""
    return stat.S_IMODE(path.stat().st_mode)


async def test_open_rejects_a_nonempty_unversioned_database(store, store_url):
    """open refuses a non-empty SQLite file that has no schema version."""
    await replace_with_legacy_database(store, store_url)
    with pytest.raises(turnstore.errors.SchemaError) as caught:
        turnstore.open(store_url)
    assert str(caught.value) == UNVERSIONED
    assert isinstance(caught.value, turnstore.TurnstoreError)
    with pytest.raises(turnstore.errors.SchemaError) as blocking:
        turnstore.open_blocking(store_url)
    assert str(blocking.value) == UNVERSIONED


async def test_open_leaves_a_refused_unversioned_database_untouched(store, store_url):
    """A refused unversioned database keeps its tables, version and journal mode."""
    path = await replace_with_legacy_database(store, store_url)
    with pytest.raises(turnstore.errors.SchemaError):
        turnstore.open(store_url)
    assert sqlite_value(path, "PRAGMA user_version") == 0
    assert sqlite_value(path, "PRAGMA journal_mode") == "delete"
    assert sqlite_value(path, "SELECT group_concat(name) FROM sqlite_schema") == "legacy_state"
    assert sqlite_value(path, "SELECT value FROM legacy_state") == "kept"


async def test_open_rejects_a_newer_schema_version(store, store_url, database):
    """open refuses a database whose schema version this build does not know."""
    await store.save(Checkpoint.empty("session"))
    database.query("PRAGMA user_version = 99")
    with pytest.raises(turnstore.errors.SchemaError) as caught:
        turnstore.open(store_url)
    assert str(caught.value) == NEWER
    with pytest.raises(turnstore.errors.SchemaError) as blocking:
        turnstore.open_blocking(store_url)
    assert str(blocking.value) == NEWER
    assert database.query("PRAGMA user_version") == [(99,)]
    assert database.count("sessions") == 1


async def test_a_new_database_is_versioned_in_wal_mode_and_private(store, store_url):
    """A new database has the current schema version, WAL journaling and owner-only mode."""
    await store.save(Checkpoint.empty("session"))
    path = Path(store_url)
    assert sqlite_value(path, "PRAGMA user_version") == SCHEMA_VERSION
    assert sqlite_value(path, "PRAGMA journal_mode") == "wal"
    assert file_mode(path) == 0o600


def test_opening_an_existing_file_makes_it_private(tmp_path: Path) -> None:
    """A database file created elsewhere with a wider mode is owner-only once a store opens it."""
    path = tmp_path / "shared.sqlite3"
    path.touch(mode=0o644)
    path.chmod(0o644)
    with turnstore.open_blocking(path) as opened:
        opened.save(Checkpoint.empty("session"))
    assert file_mode(path) == 0o600


async def test_reopening_a_database_keeps_its_sessions(store, store_url):
    """A second store opened on the same database sees every committed session."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.context = [{"role": "user", "content": "hello"}]
    await store.save(checkpoint, [{"role": "user", "content": "hello"}])
    second = turnstore.open(store_url)
    try:
        assert await second.load("session") == checkpoint
        assert (await second.session_summary("session")).sequence == 0
    finally:
        await second.close()
    await store.close()
    third = turnstore.open(store_url)
    try:
        assert await third.load("session") == checkpoint
    finally:
        await third.close()


def test_a_version_1_database_is_migrated_to_the_current_version(tmp_path):
    """Opening a file at an older schema version applies the later migrations in order."""
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path, isolation_level=None)
    connection.executescript(MIGRATIONS[0])
    connection.execute("PRAGMA user_version = 1")
    connection.execute(
        "INSERT INTO middleware_state (scope, key, value_json) VALUES ('global', 'k', '1')"
    )
    connection.close()
    with turnstore.open_blocking(path) as store:
        assert store.load_state("global", "k") == 1
    assert sqlite_value(path, "PRAGMA user_version") == SCHEMA_VERSION
    assert sqlite_value(path, "SELECT count(*) FROM runtime_heads") == 0


_SWITCH_TO_DELETE_MODE = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], timeout=0.1)
try:
    print(connection.execute("PRAGMA journal_mode = DELETE").fetchone()[0])
except sqlite3.OperationalError as error:
    print(error)
"""


def test_opening_a_second_store_keeps_the_first_ones_file_locks(store_url: str) -> None:
    """Opening a store on a file this process already has open drops none of its locks.

    Closing any descriptor of a file drops every POSIX lock the process holds on it, the
    locks of open SQLite connections included; with those gone, another process could take
    the file from under the open store (here: switch it out of WAL mode), which corrupts it.
    """
    with turnstore.open_blocking(store_url) as first:
        first.save(Checkpoint.empty("a"))
        with turnstore.open_blocking(store_url) as second:
            second.save(Checkpoint(session_id="a", sequence=1))
            other = subprocess.run(
                [sys.executable, "-c", _SWITCH_TO_DELETE_MODE, store_url],
                capture_output=True,
                text=True,
                check=True,
            )
            assert other.stdout.strip() == "database is locked"
            assert first.load("a") == Checkpoint(session_id="a", sequence=1)
    assert sqlite_value(Path(store_url), "PRAGMA integrity_check") == "ok"
    assert sqlite_value(Path(store_url), "PRAGMA journal_mode") == "wal"


def test_create_dirs_makes_private_folders_whatever_the_umask(tmp_path: Path) -> None:
    """Folders `create_dirs=True` makes are 0700 like the file's 0600, even under umask 000;
    a folder that already existed keeps its mode."""
    tmp_path.chmod(0o755)
    path = tmp_path / "a" / "b" / "store.sqlite3"
    previous = os.umask(0)
    try:
        with turnstore.open_blocking(path, create_dirs=True) as opened:
            opened.save(Checkpoint.empty("session"))
    finally:
        os.umask(previous)
    assert file_mode(tmp_path / "a") == 0o700
    assert file_mode(tmp_path / "a" / "b") == 0o700
    assert file_mode(path) == 0o600
    assert file_mode(tmp_path) == 0o755
