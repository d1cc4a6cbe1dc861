"""How a PostgreSQL store hears of events: LISTEN/NOTIFY on a channel of its schema.

Sending: NOTIFY inside a transaction takes a database-wide lock from its COMMIT until the
commit is done, which would serialise every save of every host. So a save's transaction
sends nothing; after its COMMIT the engine hands the session ids to `PostgresWatch`, whose one
sender thread sends what accumulated as one `SELECT pg_notify(...)` statement on a pool
connection (several commits, one notification batch; each payload a JSON list of ids under
PostgreSQL's 8000-byte limit). Listening: one dedicated connection per store, opened by the
first wait, LISTENs and wakes the waiters of each session named. When that connection is lost
it reconnects, and wakes every waiter once it listens again: each re-reads its high-water mark
from the database, so nothing committed while no one listened is missed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from typing import Any

import msgspec
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from turnstore.backends.postgres.options import PostgresOptions
from turnstore.engine.waiters import EventWatch, ReadMarks

logger = logging.getLogger("turnstore.postgres")

PAYLOAD_BYTES = 7900
"""Most bytes of one notification's payload: PostgreSQL refuses 8000 or more."""
WAKE_ALL = "*"
"""The payload that wakes every waiter (a session id too long for any payload)."""
LISTEN_TICK_S = 0.1
"""How often the listener looks up from the socket to see whether the store is closing."""
POLL_INTERVAL_S = 0.5
"""How often waiters re-read their marks when the store has no connection to LISTEN on."""
RECONNECT_DELAY_S = 0.5
"""Pause between attempts to reconnect a lost listener connection."""
SEND_ATTEMPTS = 2
"""Tries of one notification batch (a pooled connection may have broken since its last use)."""
SEND_TIMEOUT_S = 5.0
"""Longest wait for a pool connection to notify on: a server that is down must not hold up
closing the store for the pool's own, longer time-out."""

_CHANNEL_PREFIX = "turnstore_events_"
_NAME_BYTES = 63
"""PostgreSQL truncates longer identifiers, which could give two schemas one channel."""


def channel_name(schema: str) -> str:
    """The notification channel of a schema: stores of other schemas never hear it."""
    name = _CHANNEL_PREFIX + schema
    if len(name.encode()) <= _NAME_BYTES:
        return name
    return _CHANNEL_PREFIX + hashlib.sha256(schema.encode()).hexdigest()[:32]


def payloads(session_ids: list[str]) -> list[str]:
    """Session ids as notification payloads, each a JSON list under `PAYLOAD_BYTES`."""
    found: list[str] = []
    batch: list[str] = []
    size = 2  # the brackets
    for session_id in sorted(session_ids):
        encoded = msgspec.json.encode(session_id).decode()
        width = len(encoded.encode()) + 1  # and a comma
        if width + 2 > PAYLOAD_BYTES:
            found.append(WAKE_ALL)
            continue
        if batch and size + width > PAYLOAD_BYTES:
            found.append("[" + ",".join(batch) + "]")
            batch, size = [], 2
        batch.append(encoded)
        size += width
    if batch:
        found.append("[" + ",".join(batch) + "]")
    return found


class PostgresWatch(EventWatch):
    """The waiters of one PostgreSQL store, its notification sender and its listener."""

    def __init__(self, options: PostgresOptions, pool: ConnectionPool[Any]) -> None:
        super().__init__()
        self.channel = channel_name(options.schema)
        # Behind a transaction pooler a LISTEN would last one transaction: listen past it
        # (`listen_url`), or poll.
        self._conninfo: str | None = options.listen_conninfo or (
            None if options.transaction_pooler else options.conninfo
        )
        self._pool = pool
        self._stopping = threading.Event()
        self._pending: set[str] = set()
        self._sending = threading.Condition()
        self._sender: threading.Thread | None = None
        self._listener: threading.Thread | None = None

    # --- sending -------------------------------------------------------------------------------

    def _publish(self, session_ids: list[str]) -> None:
        with self._sending:
            self._pending.update(session_ids)
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_loop, name="turnstore-postgres-notify", daemon=True
                )
                self._sender.start()
            self._sending.notify()

    def _send_loop(self) -> None:
        while True:
            with self._sending:
                while not self._pending and not self._stopping.is_set():
                    self._sending.wait()
                if not self._pending:
                    return
                # Whatever committed while the last batch was being sent goes out together.
                batch, self._pending = self._pending, set()
            self._send(list(batch))

    def _send(self, session_ids: list[str]) -> None:
        statement = "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload"
        params = (self.channel, payloads(session_ids))
        for _ in range(SEND_ATTEMPTS):
            try:
                with self._pool.connection(timeout=SEND_TIMEOUT_S) as connection:
                    connection.execute(statement, params)
                return
            except Exception:
                # Nothing is lost for good: a waiter elsewhere still ends by its time-out and
                # re-reads the mark; the store's own waiters were woken directly.
                continue

    # --- listening -----------------------------------------------------------------------------

    def _start(self, read_marks: ReadMarks) -> None:
        self._listener = threading.Thread(
            target=self._listen_loop if self._conninfo is not None else self._poll_loop,
            name="turnstore-postgres-listen",
            daemon=True,
        )
        self._listener.start()

    def _poll_loop(self) -> None:
        """With no connection to LISTEN on, wake every waiter each `POLL_INTERVAL_S` to re-read."""
        while not self._stopping.wait(POLL_INTERVAL_S):
            self.wake_all()

    def _listen_loop(self) -> None:
        assert self._conninfo is not None
        connection: psycopg.Connection[Any] | None = None
        lost = False
        while not self._stopping.is_set():
            try:
                if connection is None:
                    connection = psycopg.connect(
                        self._conninfo, autocommit=True, connect_timeout=10
                    )
                    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    # A commit between a waiter's read and this LISTEN sent its notification
                    # to nobody: every waiter reads its mark again.
                    self.wake_all()
                    if lost:
                        logger.info("event listener reconnected; waiters re-read their marks")
                        lost = False
                for notify in connection.notifies(timeout=LISTEN_TICK_S):
                    self._dispatch(notify.payload)
            except psycopg.Error as error:
                if not lost:
                    # Once per loss, not once per attempt while the server is down.
                    logger.warning(
                        "event listener connection lost (%s); reconnecting every %.1f s",
                        type(error).__name__,
                        RECONNECT_DELAY_S,
                    )
                    lost = True
                if connection is not None:
                    with contextlib.suppress(psycopg.Error):
                        connection.close()
                connection = None
                self.wake_all()
                self._stopping.wait(RECONNECT_DELAY_S)
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                connection.close()

    def _dispatch(self, payload: str) -> None:
        try:
            session_ids = msgspec.json.decode(payload, type=list[str])
        except msgspec.DecodeError:
            # `*`, or a payload turnstore did not write: waking everyone is always safe.
            self.wake_all()
            return
        self.wake(session_ids)

    def _stop(self) -> None:
        self._stopping.set()
        with self._sending:
            self._sending.notify()
        for thread in (self._sender, self._listener):
            if thread is not None and thread is not threading.current_thread():
                thread.join()
