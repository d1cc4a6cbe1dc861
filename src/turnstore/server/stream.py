"""Internal: the live tail: a session's events as Server-Sent Events, resumable by `Last-Event-ID`.

The event's journal sequence is the SSE `id`, so a client that reconnects with the last id
it saw receives every stored event after it, once, in order. Deltas that compaction removed
before they were read are not stored any more and so are not sent. The tail waits with
`Store.wait_for_events`: PostgreSQL wakes it by LISTEN/NOTIFY, SQLite by a short poll.
With `?wait=1` a session that does not exist yet is waited for rather than answered 404: the
stream announces the session with one `session` message once it is visible, then tails it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnstore import Store
from turnstore.errors import StoreClosed
from turnstore.records import SessionSummary
from turnstore.server import params
from turnstore.server.api import Param, in_scope, settings_of, store_of, visible_summary
from turnstore.server.params import ApiError
from turnstore.server.settings import ServeSettings

RETRY_MS = 1000
"""How long a disconnected `EventSource` waits before it reconnects."""

WAIT_POLL_SECONDS = 0.5
"""How often a tail with `?wait=1` looks for its session when no event wakes it sooner."""

STREAM_QUERY = (
    Param("after", "integer", "Start after this sequence (0 replays the whole journal)."),
    Param(
        "wait",
        "boolean",
        "1 or true: wait for a session that does not exist yet instead of answering 404.",
    ),
)
"""The live tail's query parameters, as OpenAPI lists them."""

_ENCODER = msgspec.json.Encoder()
_FLAGS = {"1": True, "true": True, "0": False, "false": False, "": False}


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


def _wait_flag(request: Request) -> bool:
    """The `wait` parameter: 1/true waits for an absent session, 0/false (the default) 404s."""
    raw = request.query_params.get("wait", "").strip().lower()
    if raw not in _FLAGS:
        raise ApiError(400, "InvalidInput", "wait must be 1, true, 0 or false")
    return _FLAGS[raw]


async def _visible(request: Request, session_id: str) -> SessionSummary | None:
    """The session's summary if it exists and the owner scope shows it; None looks the same."""
    found = await store_of(request).session_summary(session_id)
    return found if found is not None and in_scope(settings_of(request), found) else None


async def event_stream(request: Request) -> Response:
    """Stream the session's events after the cursor, then each new one as it is stored."""
    store = store_of(request)
    after = _resume_point(request)
    wait = _wait_flag(request)
    if wait:
        session_id = params.session_id(request)
        found = await _visible(request, session_id)
    else:
        found = await visible_summary(request)
        session_id = found.session_id
    if after is None:
        # A session that appears after this request has no event older than the request.
        after = 0 if found is None else await _latest(store, session_id)
    announce = _announce(request, session_id, found) if wait else None
    return StreamingResponse(
        _frames(store, settings_of(request), session_id, after, announce),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def _latest(store: Store, session_id: str) -> int:
    """The session's event high-water mark."""
    return (await store.events_after(session_id, 0, 1)).latest_sequence


async def _announce(
    request: Request, session_id: str, found: SessionSummary | None
) -> AsyncIterator[bytes]:
    """Comments until the session is visible, then one `session` message with its summary."""
    store, settings = store_of(request), settings_of(request)
    seen = 0
    quiet_since = time.monotonic()
    if found is None:
        yield b": waiting for the session\n\n"
    while found is None:
        # Events wake this at once; a first save without events is found by the next look.
        seen = await store.wait_for_events(session_id, seen, timeout=WAIT_POLL_SECONDS)
        found = await _visible(request, session_id)
        if found is None and time.monotonic() - quiet_since >= settings.keepalive_seconds:
            quiet_since = time.monotonic()
            yield b": keep-alive\n\n"
    yield b"event: session\ndata: %s\n\n" % _ENCODER.encode(found)


async def _frames(
    store: Store,
    settings: ServeSettings,
    session_id: str,
    after: int,
    announce: AsyncIterator[bytes] | None = None,
) -> AsyncIterator[bytes]:
    """SSE frames: a `retry`, the announcement if any, every event after `after`, keep-alives."""
    yield f"retry: {RETRY_MS}\n\n".encode()
    try:
        if announce is not None:
            async for frame in announce:
                yield frame
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
