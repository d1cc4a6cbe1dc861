"""The async face's writes: what cancelling a caller does.

A write still queued when its caller is cancelled never runs; one already running commits or
fails whole.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint


def _writers(engine: Any) -> int:
    """How many writes the engine runs at once: SQLite one, PostgreSQL its writer threads."""
    options = getattr(engine, "options", None)
    return 1 if options is None else int(options.pool_max_size)


async def _hold_writers(engine: Any) -> tuple[threading.Event, list[Any]]:
    """Occupy every writer with a write that waits for the returned gate."""
    gate = threading.Event()
    started = threading.Semaphore(0)

    def held(_tx: Any) -> None:
        started.release()
        gate.wait(30)

    count = _writers(engine)
    futures = [engine.write(held) for _ in range(count)]
    for _ in range(count):
        assert await asyncio.to_thread(started.acquire, True, 30)
    return gate, futures


def _checkpoint(session_id: str) -> Checkpoint:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = 1
    checkpoint.context.append({"n": 1})
    return checkpoint


async def test_a_queued_write_is_dropped_with_its_cancelled_caller(store_url: str) -> None:
    """A save cancelled while its write waits in the queue never commits."""
    store = turnstore.open(store_url)
    try:
        gate, held = await _hold_writers(store._driver.engine)
        save = asyncio.create_task(store.save(_checkpoint("queued"), [{"n": 1}]))
        await asyncio.sleep(0.05)  # the save is validated and its write is queued
        save.cancel()
        with pytest.raises(asyncio.CancelledError):
            await save
        gate.set()
        for future in held:
            await asyncio.wrap_future(future)
        assert await store.load("queued") is None
        await store.save(_checkpoint("after"), [{"n": 1}])
        assert await store.load("after") is not None
    finally:
        await store.close()


async def test_a_running_write_commits_whole_after_its_caller_is_cancelled(
    store_url: str, database: Any
) -> None:
    """A save cancelled while its transaction runs (blocked on a lock) still commits whole."""
    store = turnstore.open(store_url)
    try:
        await store.save(_checkpoint("running"), [{"n": 1}])
        release: Callable[[], None] = database.hold_write_lock()
        checkpoint = _checkpoint("running")
        checkpoint.sequence = 2
        checkpoint.context.append({"n": 2})
        save = asyncio.create_task(store.save(checkpoint, [{"n": 2}]))
        await asyncio.sleep(0.3)  # the write began and waits for the lock
        save.cancel()
        with pytest.raises(asyncio.CancelledError):
            await save
        await asyncio.to_thread(release)
        for _ in range(100):
            loaded = await store.load("running")
            if loaded is not None and loaded.sequence == 2:
                break
            await asyncio.sleep(0.05)
        assert loaded is not None
        assert loaded.sequence == 2
        assert list(loaded.context) == [{"n": 1}, {"n": 2}]
    finally:
        await store.close()
