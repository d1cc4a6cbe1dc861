"""PostgreSQL: a blocking write runs its transaction in the caller's thread, and closing the
store waits for such a write to commit before the pool goes away."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint, StoreClosed


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `store_url` gives a fresh schema."""
    return "postgres"


def _save(store: turnstore.BlockingStore, session_id: str, sequence: int) -> None:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    checkpoint.context.append({"n": sequence})
    store.save(checkpoint, [{"n": sequence}])


def test_a_blocking_save_commits_in_the_callers_thread(store_url: str) -> None:
    """No hop to a writer thread: the save's transaction script runs where `save` was called."""
    store = turnstore.open_blocking(store_url)
    engine = store._driver.engine
    threads: set[int] = set()
    run = engine.write_blocking

    def noting(work: Callable[[Any], Any], *, single: bool = False) -> Any:
        def noted(tx: Any) -> Any:
            threads.add(threading.get_ident())
            return work(tx)

        return run(noted, single=single)

    engine.write_blocking = noting
    try:
        _save(store, "caller-thread", 1)
        worker = threading.Thread(target=_save, args=(store, "other-thread", 1))
        worker.start()
        worker.join()
    finally:
        store.close()
    assert threading.get_ident() in threads
    assert len(threads) == 2, "each save ran in the thread that called it"


def test_close_waits_for_a_blocking_write_in_flight(store_url: str) -> None:
    """A save running when another thread closes the store commits; later calls are refused."""
    store = turnstore.open_blocking(store_url)
    engine = store._driver.engine
    inside, release = threading.Event(), threading.Event()
    run = engine.write_blocking

    def held(work: Callable[[Any], Any], *, single: bool = False) -> Any:
        def wait_inside(tx: Any) -> Any:
            result = work(tx)
            inside.set()
            release.wait(10)
            return result

        return run(wait_inside, single=single)

    engine.write_blocking = held
    failures: list[BaseException] = []

    def save() -> None:
        try:
            _save(store, "in-flight", 1)
        except BaseException as error:
            failures.append(error)

    worker = threading.Thread(target=save)
    worker.start()
    assert inside.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive(), "close() returned while a write was still running"
    release.set()
    closer.join(10)
    worker.join(10)
    assert not closer.is_alive()
    assert not failures
    with pytest.raises(StoreClosed):
        _save(store, "after-close", 1)
    with turnstore.open_blocking(store_url) as reopened:
        loaded = reopened.load("in-flight")
    assert loaded is not None
    assert loaded.sequence == 1


def test_a_write_after_the_engine_closed_is_refused(store_url: str) -> None:
    """The engine itself refuses a blocking write once closed, whoever holds it (a borrower)."""
    store = turnstore.open_blocking(store_url)
    engine = store._driver.engine
    store.close()
    with pytest.raises(StoreClosed):
        engine.write_blocking(lambda tx: None)


def test_a_deferred_write_commits_without_waiting_for_the_wal_flush(store_url: str) -> None:
    """Inside `deferred_durability` a transaction turns `synchronous_commit` off, blocking or
    queued for a writer thread; outside it, and the block's closing flush, keep it on."""
    from turnstore.engine.protocol import DEFERRED

    def setting(tx: Any) -> str:
        return str(tx.value("SHOW synchronous_commit"))

    with turnstore.open_blocking(store_url) as store:
        engine = store._driver.engine
        assert engine.write_blocking(setting) == "on"
        token = DEFERRED.set(True)
        try:
            assert engine.write_blocking(setting) == "off"
            assert engine.write(setting).result() == "off"
        finally:
            DEFERRED.reset(token)
        assert engine.write(setting).result() == "on"
        with store.deferred_durability():
            _save(store, "deferred", 1)
        loaded = store.load("deferred")
        assert loaded is not None
