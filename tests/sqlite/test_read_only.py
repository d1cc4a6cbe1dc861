"""Read-only SQLite stores: they create nothing, need no write access, and see every commit.

Permission bits only bind an unprivileged process, and root ignores them, so every check of
what a process may not write runs its reading part in a child process that, when the tests
run as root, drops to the `nobody` user (uid and gid 65534) before touching the files. The
child imports turnstore first: the interpreter's own files may be unreadable to `nobody`.
Without root the child runs as the current user, which the permission bits bind as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint

NOBODY = 65534
IS_ROOT = os.geteuid() == 0

_CHILD = r"""
import json, os, sys
import turnstore
import turnstore.backends.sqlite.engine
uid = int(sys.argv[3])
if os.geteuid() == 0:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
path, read_only = sys.argv[1], sys.argv[2] == "read-only"
try:
    with turnstore.open_blocking(path, read_only=read_only) as store:
        loaded = store.load("session")
        print(json.dumps({"sequence": None if loaded is None else loaded.sequence}))
except turnstore.TurnstoreError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
"""


def open_as_another_user(path: Path, *, read_only: bool) -> dict[str, Any]:
    """Open `path` in a child process that cannot override permissions; load "session"."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(path),
            "read-only" if read_only else "read-write",
            str(NOBODY),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A fresh folder every user can enter; made writable again and removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="turnstore-read-only-"))
    folder.chmod(0o755)
    for parent in folder.parents:
        if not parent.stat().st_mode & stat.S_IXOTH:
            if parent.stat().st_uid != os.geteuid():
                shutil.rmtree(folder)
                pytest.skip(f"{parent} cannot be entered by other users, and is not ours")
            parent.chmod(stat.S_IMODE(parent.stat().st_mode) | stat.S_IXOTH)
    yield folder
    for inner, folders, _ in os.walk(folder):
        for name in folders:
            (Path(inner) / name).chmod(0o755)
    folder.chmod(0o755)
    shutil.rmtree(folder)


def write_database(path: Path, sequence: int = 1) -> None:
    """A closed database at `path` whose session "session" is at `sequence`."""
    with turnstore.open_blocking(path) as store:
        for number in range(sequence + 1):
            store.save(Checkpoint(session_id="session", sequence=number))


def listing(folder: Path) -> list[str]:
    """The names in `folder`, sorted."""
    return sorted(os.listdir(folder))


def digest(path: Path) -> str:
    """A digest of the file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_read_only_folder(folder: Path) -> None:
    """Make the files in `folder` readable by anyone and the folder writable by nobody."""
    for name in os.listdir(folder):
        (folder / name).chmod(0o444)
    folder.chmod(0o555)


# --- nothing left behind ----------------------------------------------------------------------


async def test_a_read_only_store_leaves_no_file_beside_the_database(tmp_path: Path) -> None:
    """Reading a closed database read-only creates no -wal or -shm file, on both faces."""
    path = tmp_path / "store.sqlite3"
    write_database(path, 2)
    before = digest(path)
    assert listing(tmp_path) == ["store.sqlite3"]
    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader.load("session") == Checkpoint(session_id="session", sequence=2)
        assert listing(tmp_path) == ["store.sqlite3"]
    async with turnstore.open(path, read_only=True) as store:
        assert await store.load("session") == Checkpoint(session_id="session", sequence=2)
    assert listing(tmp_path) == ["store.sqlite3"]
    assert digest(path) == before


# --- what this process may not write ----------------------------------------------------------


def test_a_read_only_store_reads_a_folder_it_cannot_write(shared_folder: Path) -> None:
    """A database in a folder the process cannot write (a read-only mount) reads read-only."""
    path = shared_folder / "store.sqlite3"
    write_database(path, 3)
    make_read_only_folder(shared_folder)
    assert open_as_another_user(path, read_only=True) == {"sequence": 3}
    assert listing(shared_folder) == ["store.sqlite3"]


def test_a_read_only_store_reads_a_file_it_cannot_write(shared_folder: Path) -> None:
    """A database file the process cannot write reads read-only, creating nothing beside it,
    even though its folder is writable."""
    path = shared_folder / "store.sqlite3"
    write_database(path, 3)
    path.chmod(0o444)
    shared_folder.chmod(0o777)
    assert open_as_another_user(path, read_only=True) == {"sequence": 3}
    assert listing(shared_folder) == ["store.sqlite3"]


@pytest.mark.parametrize("case", ["another-owners-file", "own-read-only-file", "folder"])
def test_opening_for_writing_what_cannot_be_written_says_to_open_read_only(
    shared_folder: Path, case: str
) -> None:
    """A file or folder the process cannot write is a ConfigError telling it to open read-only,
    and the file stays as it was (its mode included)."""
    path = shared_folder / "store.sqlite3"
    write_database(path, 1)
    if case == "folder":
        make_read_only_folder(shared_folder)
    else:
        path.chmod(0o444)
        shared_folder.chmod(0o777)
        if case == "own-read-only-file" and IS_ROOT:
            os.chown(path, NOBODY, NOBODY)
        elif case == "another-owners-file" and not IS_ROOT:
            pytest.skip("making a file another user's needs root")
    before = (digest(path), stat.S_IMODE(path.stat().st_mode))
    opened = open_as_another_user(path, read_only=False)
    assert opened["error"] == "ConfigError", opened
    assert "read_only=True" in opened["message"], opened
    assert (digest(path), stat.S_IMODE(path.stat().st_mode)) == before
    assert listing(shared_folder) == ["store.sqlite3"]


# --- a live writer ---------------------------------------------------------------------------


def test_a_read_only_store_sees_a_live_writers_commits(tmp_path: Path) -> None:
    """A reader opened while a writer runs sees each commit; it holds nothing between reads,
    so the writer's close still folds its log into the file and deletes it."""
    path = tmp_path / "store.sqlite3"
    writer = turnstore.open_blocking(path)
    writer.save(Checkpoint.empty("session"))
    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader.load("session") == Checkpoint.empty("session")
        writer.save(Checkpoint(session_id="session", sequence=1))
        assert reader.load("session") == Checkpoint(session_id="session", sequence=1)
        writer.close()
        assert listing(tmp_path) == ["store.sqlite3"]
        assert reader.load("session") == Checkpoint(session_id="session", sequence=1)
    assert listing(tmp_path) == ["store.sqlite3"]


def test_a_read_only_store_opened_first_sees_a_writer_that_comes_later(tmp_path: Path) -> None:
    """A reader of a closed database sees the commits of a writer that opens after it, both
    while that writer runs and after it closes (its commits then moved into the file)."""
    path = tmp_path / "store.sqlite3"
    write_database(path, 1)
    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader.load("session") == Checkpoint(session_id="session", sequence=1)
        with turnstore.open_blocking(path) as writer:
            writer.save(Checkpoint(session_id="session", sequence=2))
            assert reader.load("session") == Checkpoint(session_id="session", sequence=2)
            writer.save(Checkpoint(session_id="session", sequence=3))
        assert listing(tmp_path) == ["store.sqlite3"]
        assert reader.load("session") == Checkpoint(session_id="session", sequence=3)
    assert listing(tmp_path) == ["store.sqlite3"]


def test_a_read_only_read_that_a_writer_overlapped_runs_again(tmp_path: Path) -> None:
    """A writer that commits and closes during a read-only read (changing the file under it)
    makes the read run again, so it never returns what it read of two states of the file."""
    path = tmp_path / "store.sqlite3"
    write_database(path, 1)
    # The file's times tick coarsely: the overlapping write must land in a later tick.
    time.sleep(0.05)
    calls: list[int] = []

    def work(tx: Any) -> Any:
        first = tx.value("SELECT latest_sequence FROM sessions WHERE session_id = 'session'")
        calls.append(first)
        if len(calls) == 1:
            with turnstore.open_blocking(path) as writer:
                writer.save(Checkpoint(session_id="session", sequence=2))
        return first

    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader._driver.engine.read(work) == 2
    assert calls == [1, 2]
    assert listing(tmp_path) == ["store.sqlite3"]


# --- a copy with its log ---------------------------------------------------------------------


def copy_of_a_live_database(source: Path, target: Path, suffixes: tuple[str, ...]) -> None:
    """Copy a database at `source`, with these of its files, while a writer has commits in
    its write-ahead log (as a file-level backup of a running store would)."""
    with turnstore.open_blocking(source) as writer:
        for number in range(4):
            writer.save(Checkpoint(session_id="session", sequence=number))
        assert Path(f"{source}-wal").stat().st_size > 0
        for suffix in suffixes:
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    # The copy's commits are in its log only: reading the file alone would miss them.
    with turnstore.open_blocking(source, read_only=True):
        pass


def test_a_read_only_store_reads_a_copy_with_its_log_in_a_folder_it_cannot_write(
    tmp_path: Path, shared_folder: Path
) -> None:
    """A database copied with its -wal and -shm files onto a read-only folder reads with the
    commits that were still in the log."""
    target = shared_folder / "store.sqlite3"
    copy_of_a_live_database(tmp_path / "live.sqlite3", target, ("", "-wal", "-shm"))
    make_read_only_folder(shared_folder)
    assert open_as_another_user(target, read_only=True) == {"sequence": 3}
    assert listing(shared_folder) == ["store.sqlite3", "store.sqlite3-shm", "store.sqlite3-wal"]


def test_a_log_without_its_shm_file_in_a_folder_it_cannot_write_is_explained(
    tmp_path: Path, shared_folder: Path
) -> None:
    """A -wal file whose -shm is missing and cannot be created fails with a StorageError that
    names the missing file and the way out."""
    target = shared_folder / "store.sqlite3"
    copy_of_a_live_database(tmp_path / "live.sqlite3", target, ("", "-wal"))
    make_read_only_folder(shared_folder)
    opened = open_as_another_user(target, read_only=True)
    assert opened["error"] == "StorageError", opened
    assert f"{target}-shm" in opened["message"], opened
    assert "copy the database together with its -wal file" in opened["message"], opened
    assert listing(shared_folder) == ["store.sqlite3", "store.sqlite3-wal"]


# --- a file outside WAL mode -----------------------------------------------------------------

_CRASH_MID_TRANSACTION = r"""
import os, sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA cache_size = 1")
connection.execute("BEGIN IMMEDIATE")
for number in range(2000):
    connection.execute(
        "INSERT INTO middleware_state (scope, key, value_json) VALUES ('torn', ?, '1')",
        (str(number),),
    )
os._exit(0)
"""


def test_a_rollback_journal_left_by_a_crash_is_not_read_around(tmp_path: Path) -> None:
    """A file switched out of WAL mode whose writer died mid-transaction (its rollback journal
    left, the file half-written) is refused read-only, never read as it lies; opening it for
    writing rolls the half-written transaction back."""
    path = tmp_path / "store.sqlite3"
    write_database(path, 1)
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    connection.close()
    subprocess.run([sys.executable, "-c", _CRASH_MID_TRANSACTION, str(path)], check=True)
    assert Path(f"{path}-journal").exists()
    with pytest.raises(turnstore.StorageError):
        turnstore.open_blocking(path, read_only=True)
    with turnstore.open_blocking(path) as writer:
        assert writer.load("session") == Checkpoint(session_id="session", sequence=1)
        assert writer.load_state("torn", "0") is None
