"""The store through PgBouncer in transaction mode: set-up, the live tail, dropped connections.

`./dev test-pgbouncer` runs the PostgreSQL contract suite through PgBouncer as well; these
tests cover what only a pooler does: refusing start-up `options`, routing each transaction to
any server connection, and dropping server connections (its admin console's KILL and
RECONNECT) while writers save.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _pg_worker import warning

import turnstore
from conftest import pgbouncer, postgres_connection, postgres_store_url
from turnstore import Checkpoint, EventPageRequest
from turnstore.errors import ConfigError, StorageError

WRITERS = 3
"""Writers saving at once while PgBouncer drops connections (one of them async)."""
DROPS = 6
"""Rounds of KILL and RECONNECT on the admin console during the saves."""


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema, dropped afterwards."""
    name = f"test_{uuid.uuid4().hex}"
    yield name
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _checkpoint(session_id: str, sequence: int) -> Checkpoint:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    return checkpoint


def test_without_the_pooler_option_the_refusal_names_it(schema):
    """PgBouncer refuses the start-up `options` a direct connection sends: the error says why."""
    pgbouncer()
    url = postgres_store_url(schema, through_pgbouncer=True).replace("&pooler=transaction", "")
    with pytest.raises(ConfigError, match="pooler=transaction"):
        turnstore.open_blocking(url)


def test_transactions_take_any_server_connection(schema):
    """Settings hold in every transaction, whichever server connection PgBouncer lends it.

    Two stores on two schemas share PgBouncer's few server connections; a statement run more
    often than psycopg's prepare threshold must not be prepared on one of them.
    """
    pgbouncer()
    other = f"{schema}_b"
    try:
        with (
            turnstore.open_blocking(postgres_store_url(schema, through_pgbouncer=True)) as first,
            turnstore.open_blocking(postgres_store_url(other, through_pgbouncer=True)) as second,
        ):
            for sequence in range(1, 21):
                first.save(_checkpoint("a", sequence))
                second.save(_checkpoint("b", sequence))
            loaded_a, loaded_b = first.load("a"), second.load("b")
            assert loaded_a is not None
            assert loaded_b is not None
            assert (loaded_a.sequence, loaded_b.sequence) == (20, 20)
            # Each schema holds only its own session: no search_path leaked across.
            assert (first.load("b"), second.load("a")) == (None, None)
            with postgres_connection() as connection:
                plans = connection.execute(
                    "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE '_pg3_%'"
                ).fetchone()
            assert plans == (0,)
    finally:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {other} CASCADE")


async def test_the_live_tail_polls_without_a_listen_url(schema):
    """With no connection to LISTEN on, a waiter still hears another store's commit."""
    pgbouncer()
    url = postgres_store_url(schema, through_pgbouncer=True)
    polling = url.split("&listen_url=")[0]
    async with turnstore.open(polling) as waiter, turnstore.open(polling) as writer:
        await writer.save(_checkpoint("s", 1))
        waiting = asyncio.ensure_future(waiter.wait_for_events("s", 0, 30.0))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await writer.save_with_events(_checkpoint("s", 2), events=[warning("x", 1)])
        assert await waiting == 1
        # Woken by the next poll (every half second), not by the time-out.
        assert time.monotonic() - started < 10


NAMES = [*(f"w{index}" for index in range(WRITERS - 1)), "async"]
"""The writers: blocking threads, then the async one."""


def _blocking_writer(
    url: str, name: str, stop: threading.Event, outcome: dict[str, Any], acks: dict[str, int]
) -> None:
    acked: list[str] = []
    unknown: list[str] = []
    with turnstore.open_blocking(url) as store:
        sequence = 0
        while not stop.is_set():
            sequence += 1
            label = f"{name}-{sequence}"
            try:
                store.save_with_events(
                    _checkpoint(name, sequence), events=[warning(label, sequence)]
                )
            except StorageError:
                unknown.append(label)
                continue
            acked.append(label)
            acks[name] = len(acked)
    outcome[name] = (acked, unknown)


async def _async_writer(
    url: str, name: str, stop: threading.Event, acks: dict[str, int]
) -> tuple[list[str], list[str]]:
    acked: list[str] = []
    unknown: list[str] = []
    async with turnstore.open(url) as store:
        sequence = 0
        while not stop.is_set():
            sequence += 1
            label = f"{name}-{sequence}"
            try:
                await store.save_with_events(
                    _checkpoint(name, sequence), events=[warning(label, sequence)]
                )
            except StorageError:
                unknown.append(label)
                continue
            acked.append(label)
            acks[name] = len(acked)
    return acked, unknown


def _until_each_writer_saved(acks: dict[str, int], more_than: int) -> None:
    """Wait (a minute at most) until each writer has acknowledged more than `more_than` saves:
    on a slow or loaded machine a writer whose pool was reconnecting through the drops may
    have saved too few to test anything when they end."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(acks.get(name, 0) > more_than for name in NAMES):
            return
        time.sleep(0.01)
    # Past the minute the test's own check says which writer saved too little.


def _drop_connections(bouncer: Any, stop: threading.Event, acks: dict[str, int]) -> None:
    try:
        for _ in range(DROPS):
            time.sleep(0.25)
            # KILL drops every client and server connection of the database at once, in the
            # middle of whatever transaction each was running; RESUME lets new ones in.
            bouncer.admin("KILL test")
            bouncer.admin("RESUME test")
            time.sleep(0.25)
            # RECONNECT closes each server connection as soon as it is released.
            bouncer.admin("RECONNECT test")
        _until_each_writer_saved(acks, DROPS)
    finally:
        stop.set()


async def test_dropped_connections_lose_and_double_no_acknowledged_save(schema):
    """Saves go on while PgBouncer drops connections: each acknowledged save is there once.

    A save that raised may or may not have committed (its connection was lost with the COMMIT
    sent), but it too is there at most once: the store retries only what it knows did not
    commit.
    """
    bouncer = pgbouncer()
    url = postgres_store_url(schema, through_pgbouncer=True)
    turnstore.open_blocking(url).close()  # the schema, before the first drop
    stop = threading.Event()
    outcome: dict[str, Any] = {}
    acks: dict[str, int] = {}
    threads = [
        threading.Thread(target=_blocking_writer, args=(url, name, stop, outcome, acks))
        for name in NAMES[:-1]
    ]
    dropper = threading.Thread(target=_drop_connections, args=(bouncer, stop, acks))
    for thread in [*threads, dropper]:
        thread.start()
    outcome["async"] = await _async_writer(url, NAMES[-1], stop, acks)
    for thread in [*threads, dropper]:
        thread.join()
    with turnstore.open_blocking(url) as store:
        for name, (acked, unknown) in outcome.items():
            assert len(acked) > DROPS, f"{name} saved too little to test anything: {acked}"
            page = store.event_page(name, EventPageRequest(limit=100_000))
            stored = [event.event.msg.message for event in page.events]  # type: ignore[union-attr]
            assert len(stored) == len(set(stored)), f"{name}: a save was applied twice"
            assert set(acked) <= set(stored), f"{name}: acknowledged saves lost"
            assert set(stored) <= set(acked) | set(unknown), f"{name}: a save never made"
            checkpoint = store.load(name)
            assert checkpoint is not None
            assert checkpoint.sequence >= len(acked)
