"""Following a session's event journal: the forward page and the wait for new events."""

from __future__ import annotations

import time
from functools import partial
from typing import cast

from turnstore.drivers.steps import Steps, origin, pause, read
from turnstore.engine.protocol import Engine
from turnstore.errors import StoreClosed
from turnstore.records.checkpoint import EventPage
from turnstore.rules.validation import validate_session_id
from turnstore.rules.watch import after_query, event_cursor, wait_timeout
from turnstore.scripts import watch


def events_after(session_id: str, after_sequence: int, limit: int) -> Steps[EventPage]:
    """Load the events after a sequence, oldest first, at most `limit` of them."""
    query = after_query(session_id, after_sequence, limit)
    return (yield from read(lambda tx: watch.events_after(tx, query)))


def wait_for_events(session_id: str, after_sequence: int, timeout: float) -> Steps[int]:
    """Wait until a session's event high-water mark passes a sequence; return the mark."""
    session_id = validate_session_id(session_id)
    after = event_cursor(after_sequence)
    deadline = time.monotonic() + wait_timeout(timeout)
    engine = cast(Engine, (yield from origin()))
    hub = engine.watch()
    # Registered before the first read: a commit after that read wakes this waiter, so no
    # event falls between the read and the sleep.
    waiter = hub.register(
        session_id, after, lambda ids: engine.read(lambda tx: watch.latest_marks(tx, ids))
    )
    try:
        while True:
            waiter.clear()
            latest = yield from read(lambda tx: watch.latest_event(tx, session_id))
            remaining = deadline - time.monotonic()
            if latest > after or remaining <= 0:
                return latest
            yield from pause(partial(waiter.block, remaining), partial(waiter.pause, remaining))
            if waiter.closed:
                raise StoreClosed("the store is closed")
    finally:
        hub.unregister(waiter)
