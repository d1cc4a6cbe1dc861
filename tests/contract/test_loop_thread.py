"""The async face never runs a transaction on the event loop's thread.

Checked by thread, not by time: every transaction script the engine runs (reads and writes)
notes the thread it runs in, and on SQLite so does every statement of the write connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import turnstore
from turnstore import Checkpoint, Event, EventPageRequest, SessionPageRequest, TimestampedEvent
from turnstore.events import TurnCompleteEvent, TurnStartedEvent


def _noting(run: Callable[..., Any], threads: set[int]) -> Callable[..., Any]:
    """`run` (an engine's read or write), with each script noting the thread it runs in."""

    def wrapped(work: Callable[[Any], Any], *args: Any, **kwargs: Any) -> Any:
        def noted(tx: Any) -> Any:
            threads.add(threading.get_ident())
            return work(tx)

        return run(noted, *args, **kwargs)

    return wrapped


async def test_no_transaction_runs_on_the_event_loop_thread(
    backend_name: str, store_url: str
) -> None:
    """Saves (plain, with events), loads and pages run their transactions in other threads."""
    store = turnstore.open(store_url)
    engine = store._driver.engine
    threads: set[int] = set()
    engine.read = _noting(engine.read, threads)
    engine.write = _noting(engine.write, threads)
    if backend_name == "sqlite":
        engine._writer._connection.set_trace_callback(
            lambda _statement: threads.add(threading.get_ident())
        )
    try:
        checkpoint = Checkpoint.empty("loop-thread")
        for sequence in range(1, 4):
            checkpoint.sequence = sequence
            checkpoint.context.append({"n": sequence})
            await store.save(checkpoint, [{"n": sequence}])
        checkpoint.sequence += 1
        events = [
            TimestampedEvent(recorded_at_ms=1, event=Event(msg=TurnStartedEvent(turn_id="t"))),
            TimestampedEvent(recorded_at_ms=2, event=Event(msg=TurnCompleteEvent(turn_id="t"))),
        ]
        await store.save_with_events(checkpoint, [], None, events)
        assert (await store.load("loop-thread")) is not None
        await store.event_page("loop-thread", EventPageRequest(limit=10))
        await store.list_sessions_page(SessionPageRequest(limit=10))
    finally:
        if backend_name == "sqlite":
            engine._writer._connection.set_trace_callback(None)
        await store.close()
    assert threads, "no transaction was seen"
    assert threading.get_ident() not in threads
