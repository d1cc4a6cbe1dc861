"""Internal: the live tail: a session's events as Server-Sent Events, resumable by `Last-Event-ID`.

The event's journal sequence is the SSE `id`, so a client that reconnects with the last id
it saw receives every stored event after it, once, in order. Deltas that compaction removed
before they were read are not stored any more and so are not sent. The tail waits with
`Store.wait_for_events`: PostgreSQL wakes it by LISTEN/NOTIFY, SQLite by a short poll.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnstore import Store
from turnstore.errors import StoreClosed
from turnstore.server import params
from turnstore.server.api import settings_of, store_of, visible_summary
from turnstore.server.params import ApiError
from turnstore.server.settings import ServeSettings

RETRY_MS = 1000
"""How long a disconnected `EventSource` waits before it reconnects."""

_ENCODER = msgspec.json.Encoder()


def _resume_point(request: Request) -> int | None:
    """Where to start: `Last-Event-ID` (a reconnect) wins over `?after=`; None means now."""
    header = request.headers.get("last-event-id")
    if header is not None and header.strip():
        try:
            value = int(header.strip())
        except ValueError:
            raise ApiError(400, "InvalidInput", "Last-Event-ID must be an integer") from None
        if value < 0:
            raise ApiError(400, "InvalidInput", "Last-Event-ID must not be negative")
        return value
    return params.sequence(request, "after")


async def event_stream(request: Request) -> Response:
    """Stream the session's events after the cursor, then each new one as it is stored."""
    found = await visible_summary(request)
    store = store_of(request)
    after = _resume_point(request)
    if after is None:
        after = (await store.events_after(found.session_id, 0, 1)).latest_sequence
    return StreamingResponse(
        _frames(store, settings_of(request), found.session_id, after),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def _frames(
    store: Store, settings: ServeSettings, session_id: str, after: int
) -> AsyncIterator[bytes]:
    """SSE frames: a `retry`, then every stored event after `after`, then keep-alives."""
    yield f"retry: {RETRY_MS}\n\n".encode()
    try:
        while True:
            page = await store.events_after(session_id, after, settings.stream_batch)
            for event in page.events:
                after = event.sequence
                yield b"id: %d\nevent: event\ndata: %s\n\n" % (after, _ENCODER.encode(event))
            if len(page.events) >= settings.stream_batch:
                continue
            latest = await store.wait_for_events(
                session_id, after, timeout=settings.keepalive_seconds
            )
            if latest <= after:
                # A comment line keeps proxies and the browser from timing the stream out.
                yield b": keep-alive\n\n"
    except StoreClosed:
        # The server is shutting down; the client reconnects with its Last-Event-ID.
        return
