"""The SQLite writer: a lone blocking write runs in its caller's thread, others group-commit.

`GroupCommitWriter.run` runs a write in the calling thread only when no other write is
pending; otherwise it joins the queue and the writer thread commits it with the others. An
interruption in the caller's thread (KeyboardInterrupt) leaves no transaction open.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from turnstore.backends.sqlite.writer import GroupCommitWriter
from turnstore.engine.protocol import DEFERRED
from turnstore.errors import StoreClosed

WRITER_THREAD = "turnstore-sqlite-writer"


class _Interrupting(sqlite3.Connection):
    """A connection whose next COMMIT is interrupted just before or just after SQLite runs it."""

    interrupt_commit = False
    interrupt_after_commit = False
    fail_begin: BaseException | None = None

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql == "BEGIN IMMEDIATE" and self.fail_begin is not None:
            error, self.fail_begin = self.fail_begin, None
            raise error
        if sql == "COMMIT" and self.interrupt_commit:
            self.interrupt_commit = False
            raise KeyboardInterrupt
        cursor = super().execute(sql, *args)
        if sql == "COMMIT" and self.interrupt_after_commit:
            self.interrupt_after_commit = False
            raise KeyboardInterrupt
        return cursor


@pytest.fixture
def writer(tmp_path: Path) -> Any:
    path = tmp_path / "writer.sqlite3"

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, factory=_Interrupting
        )
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
        return connection

    writer = GroupCommitWriter(connect)
    yield writer
    writer.close()


def _insert(value: int) -> Any:
    def work(connection: sqlite3.Connection) -> str:
        connection.execute("INSERT INTO t VALUES (?)", (value,))
        return threading.current_thread().name

    return work


def _values(writer: GroupCommitWriter) -> list[int]:
    rows = writer.run(lambda c: c.execute("SELECT v FROM t ORDER BY v").fetchall()).result()
    return [value for (value,) in rows]


def test_a_lone_write_runs_in_the_callers_thread(writer):
    """With nothing pending, `run` commits in this thread and its future is done on return."""
    future = writer.run(_insert(1))
    assert future.done()
    assert future.result() == threading.current_thread().name
    assert _values(writer) == [1]
    assert writer.stats().transactions == 2


def test_a_write_while_another_is_pending_joins_the_group_commit(writer):
    """A write that finds one pending is queued and committed by the writer thread."""
    started, release = threading.Event(), threading.Event()

    def held(connection: sqlite3.Connection) -> None:
        started.set()
        release.wait(10)

    first = writer.submit(held)
    assert started.wait(10)
    queued = writer.run(_insert(2))
    assert not queued.done()
    also_queued = writer.run(_insert(3))
    release.set()
    assert queued.result(timeout=10) == WRITER_THREAD
    assert also_queued.result(timeout=10) == WRITER_THREAD
    assert first.result(timeout=10) is None
    # Nothing is pending any more: the next write runs here again.
    assert writer.run(_insert(4)).result() == threading.current_thread().name
    assert _values(writer) == [2, 3, 4]


def test_an_interrupted_commit_in_the_callers_thread_leaves_no_transaction(writer):
    """KeyboardInterrupt before COMMIT: the write is rolled back and the next one commits."""
    connection = writer.run(lambda c: c).result()
    connection.interrupt_commit = True
    with pytest.raises(KeyboardInterrupt):
        writer.run(_insert(3))
    assert not connection.in_transaction
    assert writer.run(_insert(4)).result() == threading.current_thread().name
    assert writer.submit(_insert(5)).result(timeout=10) == WRITER_THREAD
    assert _values(writer) == [4, 5]


def test_threads_writing_at_once_still_share_commits(writer):
    """Many threads at once: writes queue behind the pending ones and share transactions."""
    threads_count, per_thread = 8, 25
    start = threading.Barrier(threads_count)

    def loop(base: int) -> None:
        start.wait()
        for offset in range(per_thread):
            writer.run(_insert(base + offset)).result(timeout=30)

    threads = [
        threading.Thread(target=loop, args=(index * per_thread,)) for index in range(threads_count)
    ]
    before = writer.stats()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = writer.stats()
    assert not any(thread.is_alive() for thread in threads)
    total = threads_count * per_thread
    assert after.writes - before.writes == total
    assert after.transactions - before.transactions < total
    assert _values(writer) == list(range(total))


def test_an_interrupt_after_commit_leaves_the_write_committed(writer):
    """KeyboardInterrupt just after COMMIT: the call raises, the write stays, the next runs."""
    connection = writer.run(lambda c: c).result()
    connection.interrupt_after_commit = True
    with pytest.raises(KeyboardInterrupt):
        writer.run(_insert(6))
    assert not connection.in_transaction
    assert writer.run(_insert(7)).result() == threading.current_thread().name
    assert _values(writer) == [6, 7]


def test_an_error_no_write_raised_fails_the_batch_and_the_writer_serves_on(writer):
    """An unexpected error outside any write (here at BEGIN) answers the batch's futures."""
    connection = writer.run(lambda c: c).result()
    connection.fail_begin = MemoryError("no memory for BEGIN")
    failed = writer.submit(_insert(8))
    with pytest.raises(MemoryError):
        failed.result(timeout=10)
    assert writer.submit(_insert(9)).result(timeout=10) == WRITER_THREAD
    assert _values(writer) == [9]


def test_close_waits_for_a_write_running_in_a_callers_thread(tmp_path: Path):
    """close() from another thread lets a caller's own transaction commit, then closes."""
    path = tmp_path / "close.sqlite3"

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        connection.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
        return connection

    writer = GroupCommitWriter(connect)
    inside, close_called = threading.Event(), threading.Event()

    def close_when_inside() -> None:
        assert inside.wait(10)
        close_called.set()
        writer.close()

    def slow(connection: sqlite3.Connection) -> bool:
        connection.execute("INSERT INTO t VALUES (10)")
        inside.set()
        assert close_called.wait(10)
        time.sleep(0.2)
        # close() was called and is still waiting for this transaction to end.
        return closer.is_alive()

    closer = threading.Thread(target=close_when_inside)
    closer.start()
    future = writer.run(slow)
    assert future.result() is True
    closer.join(timeout=10)
    assert not closer.is_alive()
    with pytest.raises(StoreClosed):
        writer.run(_insert(11))
    with contextlib.closing(sqlite3.connect(path)) as check:
        assert check.execute("SELECT v FROM t").fetchall() == [(10,)]


def _level(connection: sqlite3.Connection) -> int:
    """The connection's `PRAGMA synchronous` as the transaction runs: 2 FULL, 1 NORMAL."""
    return int(connection.execute("PRAGMA synchronous").fetchone()[0])


@contextlib.contextmanager
def _deferred() -> Any:
    token = DEFERRED.set(True)
    try:
        yield
    finally:
        DEFERRED.reset(token)


def test_a_deferred_write_commits_without_fsync_and_the_next_one_fsyncs_again(writer):
    assert writer.run(_level).result() == 2
    with _deferred():
        assert writer.run(_level).result() == 1
        assert writer.submit(_level).result() == 1
    assert writer.run(_level).result() == 2


def test_a_batch_holding_one_full_write_commits_in_full(writer):
    started, release = threading.Event(), threading.Event()

    def hold(connection: sqlite3.Connection) -> int:
        started.set()
        release.wait(5)
        return _level(connection)

    first = writer.submit(hold)
    assert started.wait(5)
    # Queued behind `hold`, the next two share one transaction: the full one decides it.
    with _deferred():
        deferred = writer.submit(_level)
    full = writer.submit(_level)
    release.set()
    assert (first.result(), deferred.result(), full.result()) == (2, 2, 2)
    assert writer.stats().transactions == 2


def test_threads_started_in_a_deferred_block_write_in_full(writer):
    with _deferred():
        found: list[int] = []
        thread = threading.Thread(target=lambda: found.append(writer.run(_level).result()))
        thread.start()
        thread.join()
    # A new thread begins with a fresh context: the indexer's writes are never deferred.
    assert found == [2]
