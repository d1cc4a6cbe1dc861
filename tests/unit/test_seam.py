"""`turnstore.seam`: a borrow shares one engine and closes only what it opened."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint, StoreClosed
from turnstore.faces.aio_langgraph import LangGraphTables
from turnstore.faces.blocking_langgraph import BlockingLangGraphTables
from turnstore.seam import Shared, borrow


def _checkpoint(session_id: str, sequence: int = 1) -> Checkpoint:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    checkpoint.context.append({"role": "user", "content": "hello"})
    return checkpoint


def _engine(face: Any) -> Any:
    return face._driver.engine


def _count_closes(engine: Any) -> list[int]:
    """Record each `engine.close()` call, still closing the engine."""
    calls: list[int] = []
    close: Callable[[], None] = engine.close

    def counted() -> None:
        calls.append(1)
        close()

    engine.close = counted
    return calls


async def test_both_faces_share_the_store_s_one_engine(store_url: str) -> None:
    """Borrowed faces run on the store's engine: a blocking write is an async read."""
    async with turnstore.open(store_url) as store:
        shared: Shared
        with borrow(store) as shared:
            assert _engine(shared.store) is _engine(store)
            assert _engine(shared.blocking) is _engine(store)
            assert _engine(shared.store.langgraph) is _engine(store)
            shared.blocking.save(_checkpoint("seam-one"))
            loaded = await shared.store.load("seam-one")
            assert loaded is not None
            assert loaded.sequence == 1


async def test_closing_a_borrow_leaves_the_async_store_open(store_url: str) -> None:
    """`aclose` ends the borrow's faces (StoreClosed) but not the store or its engine."""
    async with turnstore.open(store_url) as store:
        closes = _count_closes(_engine(store))
        shared = borrow(store)
        await shared.aclose()
        assert shared.closed
        assert not shared.owns_engine
        with pytest.raises(StoreClosed):
            await shared.store.load("seam-two")
        with pytest.raises(StoreClosed):
            shared.blocking.load("seam-two")
        assert closes == []
        await store.save(_checkpoint("seam-two"))
        loaded = await store.load("seam-two")
        assert loaded is not None
        assert loaded.sequence == 1
    assert closes == [1]


def test_closing_a_borrow_leaves_the_blocking_store_open(store_url: str) -> None:
    """`close` (and `with`) end the borrow only; the blocking store still writes and reads."""
    with turnstore.open_blocking(store_url) as store:
        closes = _count_closes(_engine(store))
        with borrow(store) as shared:
            shared.blocking.save(_checkpoint("seam-three"))
        shared.close()  # idempotent
        assert closes == []
        with pytest.raises(StoreClosed):
            shared.blocking.load("seam-three")
        store.save(_checkpoint("seam-three", 2))
        loaded = store.load("seam-three")
        assert loaded is not None
        assert loaded.sequence == 2


def test_a_borrow_from_a_url_closes_its_engine(store_url: str) -> None:
    """A borrow opened from a URL owns its engine: `close` closes it, once."""
    shared = borrow(store_url)
    assert shared.owns_engine
    assert _engine(shared.store) is _engine(shared.blocking)
    closes = _count_closes(_engine(shared.store))
    shared.blocking.save(_checkpoint("seam-four"))
    shared.close()
    shared.close()
    assert closes == [1]
    with turnstore.open_blocking(store_url) as store:
        loaded = store.load("seam-four")
        assert loaded is not None
        assert loaded.sequence == 1


async def test_a_borrow_from_a_url_closes_its_engine_async(store_url: str) -> None:
    """`async with` on a borrow opened from a URL closes its engine without blocking."""
    async with borrow(store_url) as shared:
        closes = _count_closes(_engine(shared.store))
        await shared.store.save(_checkpoint("seam-five"))
    assert closes == [1]
    assert shared.closed
    with pytest.raises(StoreClosed):
        await shared.store.load("seam-five")


async def test_borrowing_a_closed_store_is_refused(store_url: str) -> None:
    """A closed store lends nothing: `borrow` raises `StoreClosed` at once."""
    store = turnstore.open(store_url)
    await store.close()
    with pytest.raises(StoreClosed):
        borrow(store)


def test_the_langgraph_faces_offer_the_same_operations() -> None:
    """`store.langgraph` has every operation on both faces, awaited only on the async one."""

    def operations(cls: type) -> dict[str, inspect.Signature]:
        members = inspect.getmembers(cls, inspect.isfunction)
        return {name: inspect.signature(f) for name, f in members if not name.startswith("_")}

    async_ops, blocking_ops = operations(LangGraphTables), operations(BlockingLangGraphTables)
    assert async_ops.keys() == blocking_ops.keys()
    assert len(async_ops) == 10
    for name, signature in async_ops.items():
        assert signature.parameters == blocking_ops[name].parameters, name
        assert inspect.iscoroutinefunction(getattr(LangGraphTables, name)), name
        assert not inspect.iscoroutinefunction(getattr(BlockingLangGraphTables, name)), name
