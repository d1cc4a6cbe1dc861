"""`TurnstoreSaver.from_conn_string`, the way LangGraph users open a saver, on both backends.

LangGraph's `SqliteSaver.from_conn_string` is a context manager for `with`, and
`AsyncSqliteSaver.from_conn_string` one for `async with`; ours is one object that serves
both, opens the saver on entering (off the event loop for `async with`) and closes it on
leaving, however the block ends.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from _langgraph_graph import build, config, user

from turnstore.errors import StoreClosed

pytestmark = pytest.mark.peers


def test_with_runs_a_graph_and_closes_the_saver(store_url: str) -> None:
    """A graph runs on the saver of a `with` block; the saver is closed after it, and a new
    block on the same URL sees the thread."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver.from_conn_string(store_url) as saver:
        assert isinstance(saver, TurnstoreSaver)
        build(saver).invoke(user("w", 0), config("w"))
    with pytest.raises(StoreClosed):
        saver.get_tuple(config("w"))
    with TurnstoreSaver.from_conn_string(store_url) as again:
        assert len(build(again).get_state(config("w")).values["messages"]) == 4


async def test_async_with_runs_a_graph_and_closes_the_saver(store_url: str) -> None:
    """The same with `async with` and the graph's async API."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    async with TurnstoreSaver.from_conn_string(store_url) as saver:
        await build(saver).ainvoke(user("a", 0), config("a"), durability="sync")
    with pytest.raises(StoreClosed):
        await saver.aget_tuple(config("a"))
    async with TurnstoreSaver.from_conn_string(store_url) as again:
        state = await build(again).aget_state(config("a"))
        assert len(state.values["messages"]) == 4


async def test_the_saver_closes_when_the_block_fails(store_url: str) -> None:
    """An exception leaving the block closes the saver and goes on, for both statements."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    with pytest.raises(KeyError), TurnstoreSaver.from_conn_string(store_url) as saver:
        raise KeyError("inside")
    with pytest.raises(StoreClosed):
        saver.get_tuple(config("x"))
    with pytest.raises(KeyError):
        async with TurnstoreSaver.from_conn_string(store_url) as asaver:
            raise KeyError("inside")
    with pytest.raises(StoreClosed):
        await asaver.aget_tuple(config("x"))


def test_the_serializer_is_passed_on_and_the_opener_is_used_once(store_url: str) -> None:
    """`serde=` reaches the saver, as with LangGraph's savers; entering twice is refused."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from turnstore.integrations.langgraph import TurnstoreSaver

    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    opening = TurnstoreSaver.from_conn_string(store_url, serde=strict)
    with opening as saver:
        assert saver.serde is strict
    with pytest.raises(RuntimeError, match="call it again"), opening:
        pass


async def test_a_cancelled_async_open_closes_the_saver_it_finishes_opening(
    store_url: str,
) -> None:
    """Cancelled while its worker thread opens the store, `async with` raises CancelledError
    and closes the saver once the thread has opened it: nothing is left open."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    release = threading.Event()
    opened: list[Any] = []

    class SlowSaver(TurnstoreSaver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            release.wait(10)
            super().__init__(*args, **kwargs)
            opened.append(self)

    async def enter() -> None:
        async with SlowSaver.from_conn_string(store_url):
            pytest.fail("the block ran although its opening was cancelled")

    task = asyncio.create_task(enter())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    for _ in range(200):
        if opened and opened[0]._shared.closed:
            break
        await asyncio.sleep(0.05)
    assert opened
    with pytest.raises(StoreClosed):
        await opened[0].aget_tuple(config("c"))
