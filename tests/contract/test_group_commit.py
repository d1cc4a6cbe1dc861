"""Group commit: concurrent writes share transactions, and a bad write fails alone."""

from __future__ import annotations

import asyncio
import threading

import pytest

import turnstore
from turnstore import (
    Checkpoint,
    ExecutionRecord,
    InvalidInput,
    SequenceConflict,
    StorageError,
    TranscriptPageRequest,
)
from turnstore.records import (
    WriterStats,
)

SESSIONS = 50
STALE_SEQUENCE = 5


def _checkpoint(session_id: str, sequence: int, text: str) -> Checkpoint:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    checkpoint.context.append({"role": "user", "content": text})
    return checkpoint


def _valid_saves() -> list[tuple[Checkpoint, list[dict[str, str]]]]:
    return [
        (_checkpoint(f"group-{index:02}", 1, f"hello {index}"), [{"text": f"turn {index}"}])
        for index in range(SESSIONS)
    ]


def _invalid_save(kind: str) -> tuple[Checkpoint, type[Exception]]:
    """The one save of the batch that must fail, and the typed error it must raise."""
    if kind == "stale_sequence":
        # The session was saved at STALE_SEQUENCE beforehand: this save does not advance.
        return _checkpoint("stale", STALE_SEQUENCE, "stale overwrite"), SequenceConflict
    checkpoint = _checkpoint("bad-version", 1, "wrong version")
    checkpoint.version = 16
    return checkpoint, InvalidInput


STALE_ORIGINAL = _checkpoint("stale", STALE_SEQUENCE, "original")


def _assert_grouped(backend_name: str, before: WriterStats, after: WriterStats) -> None:
    """SQLite shares transactions between concurrent saves; PostgreSQL runs them in parallel."""
    assert after.writes - before.writes == SESSIONS
    transactions = after.transactions - before.transactions
    if backend_name == "sqlite":
        # Fewer transactions than committed saves: at least half of the saves shared one.
        assert transactions <= SESSIONS // 2
    else:
        assert transactions == SESSIONS


@pytest.mark.parametrize("invalid", ["stale_sequence", "version_16"])
async def test_concurrent_async_saves_commit_together_and_a_bad_one_fails_alone(
    store_url, backend_name, invalid
):
    """Concurrent async saves share transactions; only the invalid save fails, with its error."""
    store = turnstore.open(store_url, index_in_background=False)  # counts commits
    try:
        await store.save(STALE_ORIGINAL)
        saves = _valid_saves()
        bad, error_type = _invalid_save(invalid)
        calls = [store.save(checkpoint, delta) for checkpoint, delta in saves]
        calls.insert(SESSIONS // 2, store.save(bad, [{"text": "never stored"}]))
        before = store.writer_stats()
        results = await asyncio.gather(*calls, return_exceptions=True)
        after = store.writer_stats()

        failures = [result for result in results if result is not None]
        assert len(failures) == 1
        assert type(failures[0]) is error_type
        assert results[SESSIONS // 2] is failures[0]
        for checkpoint, _ in saves:
            assert await store.load(checkpoint.session_id) == checkpoint
        assert await store.load("stale") == STALE_ORIGINAL
        assert await store.load("bad-version") is None
        _assert_grouped(backend_name, before, after)
    finally:
        await store.close()


@pytest.mark.parametrize("invalid", ["stale_sequence", "version_16"])
def test_concurrent_thread_saves_commit_together_and_a_bad_one_fails_alone(
    store_url, backend_name, invalid
):
    """Saves from many threads share transactions; only the invalid save fails, with its error."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.save(STALE_ORIGINAL)
        saves = _valid_saves()
        bad, error_type = _invalid_save(invalid)
        jobs = [(checkpoint, delta) for checkpoint, delta in saves]
        jobs.insert(SESSIONS // 2, (bad, [{"text": "never stored"}]))
        outcomes: list[BaseException | None] = [None] * len(jobs)
        start = threading.Barrier(len(jobs))

        def run(position: int) -> None:
            checkpoint, delta = jobs[position]
            start.wait()
            try:
                store.save(checkpoint, delta)
            except Exception as error:
                outcomes[position] = error

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
        before = store.writer_stats()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        after = store.writer_stats()

        assert not any(thread.is_alive() for thread in threads)
        failures = [(i, outcome) for i, outcome in enumerate(outcomes) if outcome is not None]
        assert len(failures) == 1
        assert failures[0][0] == SESSIONS // 2
        assert type(failures[0][1]) is error_type
        for checkpoint, _ in saves:
            assert store.load(checkpoint.session_id) == checkpoint
        assert store.load("stale") == STALE_ORIGINAL
        assert store.load("bad-version") is None
        _assert_grouped(backend_name, before, after)


async def test_a_write_failing_inside_its_savepoint_does_not_undo_its_batch(
    store_url, backend_name, database
):
    """A write that fails in its SAVEPOINT is rolled back alone; its batch still commits."""
    store = turnstore.open(store_url, index_in_background=False)  # counts commits
    try:
        await store.save(STALE_ORIGINAL, [{"text": "original"}])
        victim = _checkpoint("victim", 1, "before")
        await store.save(victim, [{"text": "before"}])
        # Every execution record insert fails: a save carrying one has already written its
        # session row, context chunk and transcript batch when its last part fails.
        database.fail_inserts_into("execution_journal")
        victim_next = _checkpoint("victim", 2, "before")
        victim_next.context.append({"role": "assistant", "content": "after"})
        execution = ExecutionRecord(
            session_id="victim",
            submission_id="submission",
            turn_id="turn",
            started_at_ms=1_000,
            finished_at_ms=1_500,
            elapsed_ms=500,
            outcome="completed",
        )
        saves = _valid_saves()[:10]
        stale = _checkpoint("stale", STALE_SEQUENCE, "stale overwrite")

        # While another connection holds the write lock, the writer waits on its first
        # transaction and every other save queues behind it: at most two transactions carry
        # the whole batch, and each failing save sits between valid ones, so it shares its
        # transaction with saves that commit.
        release = database.hold_write_lock()
        try:
            calls = [store.save(checkpoint, delta) for checkpoint, delta in saves]
            calls.insert(3, store.save(stale, [{"text": "never stored"}]))
            calls.insert(7, store.save(victim_next, [{"text": "never stored"}], execution))
            before = store.writer_stats()
            tasks = [asyncio.ensure_future(call) for call in calls]
            await asyncio.sleep(0.3)
            assert not any(task.done() for task in tasks)
        finally:
            release()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        after = store.writer_stats()

        assert type(results[3]) is SequenceConflict
        assert isinstance(results[7], StorageError)
        assert [i for i, result in enumerate(results) if result is not None] == [3, 7]
        assert after.writes - before.writes == len(saves)
        if backend_name == "sqlite":
            assert after.transactions - before.transactions <= 2
        for checkpoint, _ in saves:
            assert await store.load(checkpoint.session_id) == checkpoint
        assert await store.load("stale") == STALE_ORIGINAL
        assert await store.load("victim") == victim
        assert database.query(
            "SELECT start, items_json FROM context_chunks WHERE session_id = 'victim'"
        ) == [(0, '[{"role":"user","content":"before"}]')]
        page = await store.transcript_page("victim", TranscriptPageRequest(max_batches=10))
        assert [(batch.sequence, batch.items) for batch in page.batches] == [
            (1, [{"text": "before"}])
        ]
        assert database.count("execution_journal") == 0
    finally:
        await store.close()
