"""The SQLite writer: a lone blocking write runs in its caller's thread, others group-commit.

`GroupCommitWriter.run` runs a write in the calling thread only when no other write is
pending; otherwise it joins the queue and the writer thread commits it with the others. An
interruption in the caller's thread (KeyboardInterrupt) leaves no transaction open.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from turnstore.backends.sqlite.writer import GroupCommitWriter

WRITER_THREAD = "turnstore-sqlite-writer"


class _Interrupting(sqlite3.Connection):
    """A connection whose next COMMIT is interrupted before it reaches SQLite."""

    interrupt_commit = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql == "COMMIT" and self.interrupt_commit:
            self.interrupt_commit = False
            raise KeyboardInterrupt
        return super().execute(sql, *args)


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
    release.set()
    assert queued.result(timeout=10) == WRITER_THREAD
    assert first.result(timeout=10) is None
    assert _values(writer) == [2]


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
