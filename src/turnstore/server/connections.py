"""Internal: `turnstore serve`'s guard on uvicorn's HTTP/1.1 protocol: a deadline on request
heads and a cap on open connections, both enforced before any request reaches the app.

uvicorn has no deadline for a request head (its keep-alive timer stops at the first byte), so
a client that sends a header line every few seconds holds its connection forever; and its
`limit_concurrency` answers 503 to everyone once such clients fill it. Here a connection
waits for a request (a new one, an idle kept-alive one, or one whose response went out
before its request was read) or serves one. A waiting connection that has received any byte
must complete its request head within `header_timeout` seconds of that byte (a new one: of
being accepted), else it is closed (`408` if part of a head arrived). At `max_connections`
open, a new connection closes the connection that has waited longest; if every one is
serving a request (live tails hold theirs for hours), the new one is answered `503` and
closed. A request already being served is never cut.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("turnstore.server")

RESERVED_DESCRIPTORS = 64
"""Descriptors kept beside the connections: the store's files and sockets, the log, the files
the viewer serves (a serving process holds about 10 at rest)."""

LARGEST_BACKLOG = 2048
"""uvicorn's own backlog, kept wherever the descriptor limit leaves room for it."""

NOTE_EVERY_SECONDS = 60.0
"""How often at most the log says how many connections were closed: a flood of slow clients
must not become a flood of log lines."""


def _plain(status: bytes, text: bytes, *extra: bytes) -> bytes:
    """A whole HTTP/1.1 response with a text body, after which the connection closes."""
    head = [
        b"HTTP/1.1 " + status,
        b"content-type: text/plain; charset=utf-8",
        b"x-content-type-options: nosniff",
        b"connection: close",
        *extra,
        b"content-length: " + str(len(text)).encode(),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + text


REQUEST_TIMEOUT = _plain(b"408 Request Timeout", b"The request head did not arrive in time.\n")
"""What a connection whose head was cut short by the deadline reads before the close."""

TOO_MANY_CONNECTIONS = _plain(
    b"503 Service Unavailable", b"Too many connections; try again.\n", b"retry-after: 1"
)
"""What a connection over the cap reads when no open connection is waiting to be closed."""


def fit_to_descriptors(max_connections: int, descriptors: int | None) -> tuple[int, int]:
    """The connection cap and uvicorn's backlog that a limit of `descriptors` has room for.

    asyncio accepts up to `backlog` connections in one turn of its loop, and a protocol first
    sees them a turn later, so up to about three turns' worth are open beyond the cap before
    it closes any. Running out is worse than refusing: on Python 3.11 an accept that fails
    with EMFILE logs a traceback and reschedules itself once for each slot left in the turn
    (233,433 tracebacks in 20 s with 300 slow clients and 256 descriptors, measured), and no
    request is answered until a descriptor frees.
    """
    if descriptors is None:
        return max_connections, LARGEST_BACKLOG
    room = max(descriptors - RESERVED_DESCRIPTORS, 8)
    return max(1, min(max_connections, room // 2)), max(1, min(LARGEST_BACKLOG, room // 6))


class ConnectionGuard:
    """One server's open connections, and those waiting for a request, longest waiting first."""

    def __init__(self, header_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self._open: set[GuardedH11Protocol] = set()
        # A dict keeps insertion order: its first key has waited longest.
        self._waiting: dict[GuardedH11Protocol, None] = {}
        self._closed: Counter[str] = Counter()
        self._noted_at = -NOTE_EVERY_SECONDS

    def admit(self, connection: GuardedH11Protocol) -> bool:
        """Count a new connection, making room at the cap; False if there is none to make."""
        if len(self._open) >= self.max_connections:
            if not self._waiting:
                self.note("refused at the cap")
                return False
            oldest = next(iter(self._waiting))
            self.busy(oldest)
            oldest.transport.close()
            self.note("waiting at the cap")
        self._open.add(connection)
        return True

    def waiting(self, connection: GuardedH11Protocol) -> None:
        """Mark `connection` as waiting for a request; one waiting already keeps its place."""
        self._waiting.setdefault(connection, None)

    def busy(self, connection: GuardedH11Protocol) -> None:
        """Mark `connection` as serving a request (or closing): never closed to make room."""
        self._waiting.pop(connection, None)

    def lost(self, connection: GuardedH11Protocol) -> None:
        """Forget a closed connection."""
        self.busy(connection)
        self._open.discard(connection)

    def note(self, reason: str) -> None:
        """Count a connection closed for `reason`; log the counts at most once a minute."""
        self._closed[reason] += 1
        now = time.monotonic()
        if now - self._noted_at < NOTE_EVERY_SECONDS:
            return
        counts = ", ".join(f"{count} {reason}" for reason, count in sorted(self._closed.items()))
        logger.warning(
            "connections closed before a request: %s (head bound %g s, cap %d; counted since "
            "the last such line)",
            counts,
            self.header_timeout,
            self.max_connections,
        )
        self._closed.clear()
        self._noted_at = now


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard`: the head deadline and the cap."""

    guard: ClassVar[ConnectionGuard]
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection (or refuse it at the cap) and start its head's deadline."""
        super().connection_made(transport)
        if not self.guard.admit(self):
            transport.write(TOO_MANY_CONNECTIONS)
            transport.close()
            return
        self.guard.waiting(self)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Parse as uvicorn does; a waiting connection's first byte starts its deadline."""
        super().data_received(data)
        self._follow(arm=True)

    def on_response_complete(self) -> None:
        """Finish as uvicorn does; the connection then waits (uvicorn's keep-alive timer runs)."""
        super().on_response_complete()
        self._follow(arm=False)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its deadline."""
        self._disarm()
        self.guard.lost(self)
        super().connection_lost(exc)

    def _follow(self, *, arm: bool) -> None:
        """Track whether the connection now waits for a request or serves one."""
        if self.transport.is_closing():
            self._disarm()
            self.guard.busy(self)
        elif self.cycle is None or self.cycle.response_complete:
            self.guard.waiting(self)
            if arm and self._deadline is None:
                self._arm()
        else:
            self._disarm()
            self.guard.busy(self)

    def _arm(self) -> None:
        self._deadline = self.loop.call_later(self.guard.header_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.guard.busy(self)
        self.guard.note("late request head")
        # A 408 only where part of a head arrived: a client that sent nothing (a browser's
        # preconnect) would read it as the answer to a request it has not made yet.
        received, _ = self.conn.trailing_data
        if received and self.conn.their_state is h11.IDLE:
            self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()


def guarded_http(header_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """A protocol class for `uvicorn.Config(http=…)` with its own deadline, cap and count."""

    class Guarded(GuardedH11Protocol):
        guard = ConnectionGuard(header_timeout, max_connections)

    return Guarded
