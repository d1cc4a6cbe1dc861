"""Contract: following a session's events — `events_after` and `wait_for_events`.

`events_after` reads the journal oldest first from a cursor (compacted deltas are gaps);
`wait_for_events` returns the high-water mark as soon as it passes the cursor, woken by a
commit of the same store, of a second store on the same database (SQLite: the poll;
PostgreSQL: NOTIFY, sent after COMMIT, on a channel of the store's schema), or by its
time-out. Bounds on elapsed time here are generous: they tell a wake-up from a time-out of
30 s, they do not measure speed.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_events import (
    message_delta,
    new_session,
    reasoning_delta,
    stamped,
    step_completed,
    step_started,
    warning,
)

import turnstore
from conftest import postgres_connection, postgres_store_url, require_postgres
from turnstore import Checkpoint, EventPageRequest
from turnstore.backends.postgres.watch import PAYLOAD_BYTES, channel_name, payloads
from turnstore.events import ModelStepCompleted, TokenUsage

LONG = 30.0
"""A time-out no passing test waits out: a wake-up returns long before it."""
WOKEN = 10.0
"""Elapsed seconds under which a wait counts as woken (or as returning at once)."""
SETTLE = 0.3
"""Time given to a waiter to read the mark and fall asleep before the write that wakes it."""


async def save_events(store: Any, session_id: str, sequence: int, count: int) -> list[int]:
    """Save checkpoint `sequence` of a session with `count` warnings; their sequences."""
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    events = [stamped(index, warning(f"w{index}")) for index in range(count)]
    stored = await store.save_with_events(checkpoint, events=events)
    return [event.sequence for event in stored]


async def timed(call: Any) -> tuple[Any, float]:
    """Await `call` and return its result and the seconds it took."""
    started = time.monotonic()
    result = await call
    return result, time.monotonic() - started


# --- events_after ----------------------------------------------------------------------------


async def test_events_after_pages_oldest_first_from_the_cursor(store):
    """Events after a cursor come oldest first, at most `limit`, with the high-water mark."""
    await save_events(store, "session", 1, 5)
    page = await store.events_after("session", 0, 10)
    assert [event.sequence for event in page.events] == [1, 2, 3, 4, 5]
    assert page.latest_sequence == 5
    assert page.next_before_sequence is None
    page = await store.events_after("session", 2, 2)
    assert [event.sequence for event in page.events] == [3, 4]
    assert [event.event.msg.message for event in page.events] == ["w2", "w3"]
    assert page.latest_sequence == 5
    assert (await store.events_after("session", 5, 10)).events == []
    beyond = await store.events_after("session", 100, 10)
    assert (beyond.events, beyond.latest_sequence) == ([], 5)


async def test_events_after_follows_a_growing_journal(store):
    """Reading from the last sequence seen picks up exactly what was appended since."""
    await new_session(store)
    seen: list[int] = []
    cursor = 0
    for round_ in range(3):
        for index in range(2):
            await store.append_event("session", round_ * 10 + index, warning(f"r{round_}"))
        page = await store.events_after("session", cursor, 1000)
        seen += [event.sequence for event in page.events]
        cursor = page.events[-1].sequence
    assert seen == [1, 2, 3, 4, 5, 6]


async def test_events_after_skips_deltas_removed_by_compaction(store):
    """A completed model step's streamed deltas are gone: their sequences are gaps."""
    await new_session(store)
    events = [
        step_started("step"),
        reasoning_delta("step", "Plan"),
        message_delta("step", "Done"),
        step_completed("step", ModelStepCompleted(end_turn=True, usage=TokenUsage())),
        warning("after"),
    ]
    for index, event in enumerate(events):
        await store.append_event("session", index, event)
    page = await store.events_after("session", 0, 10)
    assert [event.sequence for event in page.events] == [1, 4, 5]
    assert page.latest_sequence == 5
    assert [event.sequence for event in (await store.events_after("session", 1, 1)).events] == [4]


async def test_events_after_of_a_session_without_events(store):
    """A session with no events gives an empty page at latest_sequence 0."""
    await new_session(store)
    page = await store.events_after("session", 0, 5)
    assert (page.events, page.latest_sequence, page.next_before_sequence) == ([], 0, None)


async def test_events_after_refuses_an_absent_session_as_event_page_does(store):
    """An absent session is SessionNotFound, with event_page's message."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.events_after("missing", 0, 10)
    assert str(caught.value) == "event journal session does not exist"
    with pytest.raises(turnstore.SessionNotFound):
        await store.event_page("missing", EventPageRequest(limit=10))


@pytest.mark.parametrize(
    ("session_id", "after", "limit", "message"),
    [
        ("session", 0, 0, "event journal page limit must be positive"),
        ("session", 0, -1, "event journal page limit must be positive"),
        ("session", 0, True, "event journal page limit must be positive"),
        ("session", 0, "5", "event journal page limit must be positive"),
        ("session", 0, 2**63 - 1, "event journal page limit is too large"),
        ("session", -1, 5, "event journal cursor exceeds SQLite INTEGER"),
        ("session", 2**63, 5, "event journal cursor exceeds SQLite INTEGER"),
        ("session", None, 5, "event journal cursor exceeds SQLite INTEGER"),
        ("session", 1.0, 5, "event journal cursor exceeds SQLite INTEGER"),
        ("", 0, 5, "session ID cannot be empty"),
        (7, 0, 5, "session ID must be a string"),
    ],
)
async def test_events_after_refuses_bad_input(store, session_id, after, limit, message):
    """Bad cursors, limits and ids are InvalidInput, checked before any read."""
    await new_session(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.events_after(session_id, after, limit)
    assert str(caught.value) == message


# --- wait_for_events: one store ----------------------------------------------------------------


async def test_wait_returns_at_once_when_events_are_past_the_cursor(store):
    """A waiter behind the journal returns the latest sequence without waiting."""
    await save_events(store, "session", 1, 3)
    latest, elapsed = await timed(store.wait_for_events("session", 1, LONG))
    assert latest == 3
    assert elapsed < WOKEN


async def test_wait_times_out_with_the_current_latest(store):
    """At its time-out a wait returns the current latest, at or below the cursor."""
    await save_events(store, "session", 1, 2)
    assert await store.wait_for_events("session", 2, 0.2) == 2
    assert await store.wait_for_events("session", 10, 0.1) == 2
    assert await store.wait_for_events("session", 2, 0) == 2
    await new_session(store, "quiet")
    assert await store.wait_for_events("quiet", 0, 0.1) == 0


async def test_wait_on_an_absent_session_counts_it_as_zero(store):
    """An absent session is at 0, and a waiter wakes when it is created with events."""
    assert await store.wait_for_events("later", 0, 0.05) == 0
    waiter = asyncio.ensure_future(timed(store.wait_for_events("later", 0, LONG)))
    await asyncio.sleep(SETTLE)
    await save_events(store, "later", 1, 2)
    latest, elapsed = await waiter
    assert latest == 2
    assert elapsed < WOKEN


async def test_wait_wakes_on_save_with_events(store):
    """A save that journals events wakes a waiter on the same store."""
    await save_events(store, "session", 1, 1)
    waiter = asyncio.ensure_future(timed(store.wait_for_events("session", 1, LONG)))
    await asyncio.sleep(SETTLE)
    assert not waiter.done()
    await save_events(store, "session", 2, 2)
    latest, elapsed = await waiter
    assert latest == 3
    assert elapsed < WOKEN


async def test_wait_wakes_on_append_event(store):
    """append_event wakes a waiter on the same store."""
    await new_session(store)
    waiter = asyncio.ensure_future(timed(store.wait_for_events("session", 0, LONG)))
    await asyncio.sleep(SETTLE)
    assert not waiter.done()
    await store.append_event("session", 1, warning("hello"))
    latest, elapsed = await waiter
    assert latest == 1
    assert elapsed < WOKEN


async def test_a_save_without_events_does_not_end_the_wait(store):
    """A checkpoint save that journals no event leaves the mark, so the wait times out."""
    await save_events(store, "session", 1, 1)
    waiter = asyncio.ensure_future(store.wait_for_events("session", 1, 1.0))
    await asyncio.sleep(SETTLE)
    checkpoint = Checkpoint.empty("session")
    checkpoint.sequence = 2
    await store.save(checkpoint)
    assert await waiter == 1


async def test_wait_refuses_bad_input(store):
    """Bad time-outs, cursors and ids are InvalidInput."""
    await new_session(store)
    message = "wait timeout must be a number of seconds from 0 to 3600"
    for timeout in (-1, -0.5, float("nan"), float("inf"), 3601, 10**400, "1", None, True):
        with pytest.raises(turnstore.InvalidInput) as caught:
            await store.wait_for_events("session", 0, timeout)
        assert str(caught.value) == message
    for after in (-1, 2**63, "0", None):
        with pytest.raises(turnstore.InvalidInput):
            await store.wait_for_events("session", after, 0)
    with pytest.raises(turnstore.InvalidInput):
        await store.wait_for_events("", 0, 0)


# --- wait_for_events: a second store on the same database ---------------------------------------


async def test_wait_wakes_on_a_write_from_a_second_store(store, store_url):
    """A commit through another store object wakes the waiter (SQLite: poll; PG: NOTIFY)."""
    await save_events(store, "session", 1, 1)
    other = turnstore.open(store_url)
    try:
        waiter = asyncio.ensure_future(timed(store.wait_for_events("session", 1, LONG)))
        await asyncio.sleep(SETTLE)
        assert not waiter.done()
        await other.append_event("session", 5, warning("from elsewhere"))
        latest, elapsed = await waiter
        assert latest == 2
        assert elapsed < WOKEN
    finally:
        await other.close()


async def test_wait_wakes_on_an_import(store, store_url, tmp_path, backend_name):
    """Importing a tree wakes waiters on its sessions, which counted as 0 before."""
    await save_events(store, "session", 1, 2)
    out = io.BytesIO()
    await store.upkeep.export_trees(out)
    if backend_name == "sqlite":
        url = str(tmp_path / "second.sqlite3")
    else:
        url = store_url.replace("schema=", "schema=imp_")
    target = turnstore.open(url)
    try:
        waiter = asyncio.ensure_future(timed(target.wait_for_events("session", 0, LONG)))
        await asyncio.sleep(SETTLE)
        await target.upkeep.import_trees(io.BytesIO(out.getvalue()))
        latest, elapsed = await waiter
        assert latest == 2
        assert elapsed < WOKEN
    finally:
        await target.close()
        if backend_name == "postgres":
            with postgres_connection() as connection:
                schema = url.rpartition("schema=")[2].partition("&")[0]
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# --- many waiters and closing -------------------------------------------------------------------


async def test_a_hundred_waiters_all_wake(store_url):
    """100 concurrent waiters (50 on one session, 50 on their own) all wake, on one store."""
    async with turnstore.open(store_url) as store:
        await save_events(store, "shared", 1, 1)
        for index in range(50):
            await new_session(store, f"own-{index}")
        shared = [store.wait_for_events("shared", 1, LONG) for _ in range(50)]
        own = [store.wait_for_events(f"own-{index}", 0, LONG) for index in range(50)]
        waiters = asyncio.ensure_future(asyncio.gather(*shared, *own))
        await asyncio.sleep(SETTLE * 3)
        assert not waiters.done()
        started = time.monotonic()
        await save_events(store, "shared", 2, 1)
        for index in range(50):
            await store.append_event(f"own-{index}", 1, warning("wake"))
        assert await waiters == [2] * 50 + [1] * 50
        assert time.monotonic() - started < WOKEN


def test_a_hundred_blocking_waiters_in_threads_all_wake(store_url):
    """The blocking face: 100 threads waiting on one store all wake, across two sessions."""
    with turnstore.open_blocking(store_url) as store, ThreadPoolExecutor(100) as pool:
        for session_id in ("a", "b"):
            store.save(Checkpoint.empty(session_id))
        futures = [
            pool.submit(store.wait_for_events, "ab"[index % 2], 0, LONG) for index in range(100)
        ]
        time.sleep(SETTLE * 3)
        assert not any(future.done() for future in futures)
        store.append_event("a", 1, warning("a"))
        store.append_event("b", 1, warning("b"))
        assert [future.result(timeout=WOKEN) for future in futures] == [1] * 100


async def test_closing_the_store_ends_waits(store_url):
    """close() wakes every wait of the async face, which raises StoreClosed."""
    store = turnstore.open(store_url)
    await new_session(store)
    waiters = [asyncio.ensure_future(store.wait_for_events("session", 0, LONG)) for _ in range(3)]
    await asyncio.sleep(SETTLE)
    started = time.monotonic()
    await store.close()
    for waiter in waiters:
        with pytest.raises(turnstore.StoreClosed):
            await waiter
    assert time.monotonic() - started < WOKEN
    with pytest.raises(turnstore.StoreClosed):
        await store.wait_for_events("session", 0, 1)


def test_closing_a_blocking_store_ends_waits_in_other_threads(store_url):
    """close() from one thread ends a blocking wait in another with StoreClosed."""
    store = turnstore.open_blocking(store_url)
    store.save(Checkpoint.empty("session"))
    outcome: list[BaseException | int] = []

    def wait() -> None:
        try:
            outcome.append(store.wait_for_events("session", 0, LONG))
        except turnstore.TurnstoreError as error:
            outcome.append(error)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(SETTLE)
    store.close()
    thread.join(WOKEN)
    assert not thread.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], turnstore.StoreClosed)


async def test_a_cancelled_wait_leaves_no_waiter_behind(store):
    """Cancelling a waiting task unregisters it; later waits work as before."""
    await new_session(store)
    waiter = asyncio.ensure_future(store.wait_for_events("session", 0, LONG))
    await asyncio.sleep(SETTLE)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await store.append_event("session", 1, warning("after"))
    assert await store.wait_for_events("session", 0, LONG) == 1


# --- PostgreSQL: NOTIFY after COMMIT, per schema ----------------------------------------------


def _pg_url(schema: str) -> str:
    return postgres_store_url(schema)


class Listener:
    """A raw LISTEN connection on a schema's channel, collecting what is notified."""

    def __init__(self, schema: str) -> None:
        self.connection = postgres_connection()
        self.connection.execute(f'LISTEN "{channel_name(schema)}"')

    def received(self, seconds: float, stop_after: int | None = None) -> list[str]:
        """Every session id notified within `seconds` (or in the first `stop_after` ones)."""
        found: list[str] = []
        for notify in self.connection.notifies(timeout=seconds, stop_after=stop_after):
            found += json.loads(notify.payload)
        return found

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


@pytest.fixture
def pg_schemas() -> Any:
    """Two fresh PostgreSQL schemas, dropped afterwards."""
    require_postgres()
    schemas = [f"test_{uuid.uuid4().hex}" for _ in range(2)]
    yield schemas
    with postgres_connection() as connection:
        for schema in schemas:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_postgres_notifies_after_commit_only(pg_schemas):
    """A failed save notifies nobody and wakes no waiter elsewhere; a committed one does."""
    from conftest import Database

    schema = pg_schemas[0]
    async with turnstore.open(_pg_url(schema)) as writer, turnstore.open(_pg_url(schema)) as other:
        listener = Listener(schema)
        database = Database("postgres", None, schema)  # type: ignore[arg-type]
        try:
            await save_events(writer, "session", 1, 1)
            # The notification goes out from a sender thread after the commit: receive the
            # first save's before the failures, so a late one is not taken for theirs.
            assert listener.received(LONG, stop_after=1) == ["session"]
            # Events are journaled in their save's batch, or a row each (deltas, token counts).
            database.fail_inserts_into("event_journal")
            database.fail_inserts_into("event_batches")
            waiter = asyncio.ensure_future(other.wait_for_events("session", 1, 1.5))
            await asyncio.sleep(SETTLE)
            with pytest.raises(turnstore.StorageError):
                await save_events(writer, "session", 2, 1)
            with pytest.raises(turnstore.StorageError):
                await writer.append_event("session", 1, warning("lost"))
            assert await waiter == 1  # woken by nothing: it waited out its time-out
            assert listener.received(0.5) == []
            database.stop_failing_inserts_into("event_journal")
            database.stop_failing_inserts_into("event_batches")

            waiter = asyncio.ensure_future(timed(other.wait_for_events("session", 1, LONG)))
            await asyncio.sleep(SETTLE)
            await save_events(writer, "session", 2, 1)
            latest, elapsed = await waiter
            assert latest == 2
            assert elapsed < WOKEN
            assert listener.received(WOKEN, stop_after=1) == ["session"]
        finally:
            listener.close()


async def test_postgres_coalesces_many_commits_into_few_notifications(pg_schemas):
    """Concurrent commits of many sessions go out in batches, each payload under 8000 bytes."""
    schema = pg_schemas[0]
    async with turnstore.open(_pg_url(schema)) as store:
        ids = [f"session-{index:03d}-" + "x" * 200 for index in range(120)]
        for session_id in ids:
            await new_session(store, session_id)
        listener = Listener(schema)
        try:
            await asyncio.gather(
                *(store.append_event(session_id, 1, warning("hi")) for session_id in ids)
            )
            payloads_seen: list[str] = []
            for notify in listener.connection.notifies(timeout=2.0):
                payloads_seen.append(notify.payload)
            notified = {session_id for text in payloads_seen for session_id in json.loads(text)}
            assert notified == set(ids)
            assert len(payloads_seen) < len(ids)
            assert all(len(text.encode()) < 8000 for text in payloads_seen)
        finally:
            listener.close()


async def test_postgres_schemas_do_not_cross_talk(pg_schemas):
    """A commit in one schema wakes no waiter and notifies nobody of another schema."""
    first, second = pg_schemas
    async with (
        turnstore.open(_pg_url(first)) as one,
        turnstore.open(_pg_url(second)) as two,
    ):
        await new_session(one)
        await new_session(two)
        listener = Listener(second)
        try:
            waiter = asyncio.ensure_future(two.wait_for_events("session", 0, 1.0))
            await asyncio.sleep(SETTLE)
            await one.append_event("session", 1, warning("first schema"))
            assert await waiter == 0
            assert listener.received(0.3) == []
            waiter = asyncio.ensure_future(timed(two.wait_for_events("session", 0, LONG)))
            await asyncio.sleep(SETTLE)
            await two.append_event("session", 1, warning("second schema"))
            latest, elapsed = await waiter
            assert latest == 1
            assert elapsed < WOKEN
        finally:
            listener.close()


async def test_postgres_listener_reconnects_and_wakes_waiters(pg_schemas):
    """A lost listener connection is reopened; a commit made meanwhile still wakes the waiter."""
    schema = pg_schemas[0]
    channel = channel_name(schema)
    async with turnstore.open(_pg_url(schema)) as writer, turnstore.open(_pg_url(schema)) as other:
        await new_session(writer)
        waiter = asyncio.ensure_future(timed(other.wait_for_events("session", 0, LONG)))
        await asyncio.sleep(SETTLE)
        with postgres_connection() as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                (f'LISTEN "{channel}"',),
            ).fetchall()
            assert killed == [(True,)]
        await writer.append_event("session", 1, warning("while reconnecting"))
        latest, elapsed = await waiter
        assert latest == 1
        assert elapsed < WOKEN
        waiter = asyncio.ensure_future(timed(other.wait_for_events("session", 1, LONG)))
        await asyncio.sleep(1.0)  # past the reconnect delay: the new LISTEN serves this one
        await writer.append_event("session", 2, warning("after reconnecting"))
        latest, elapsed = await waiter
        assert latest == 2
        assert elapsed < WOKEN


def test_channel_names_are_per_schema_and_fit_an_identifier():
    """Channels differ by schema, and a long schema name is hashed to fit 63 bytes."""
    assert channel_name("a") != channel_name("b")
    long_one, long_two = "s" * 63, "s" * 62 + "t"
    assert channel_name(long_one) != channel_name(long_two)
    assert all(len(channel_name(name)) <= 63 for name in (long_one, long_two, "a"))


def test_payloads_split_under_the_limit():
    """Session ids are packed into JSON lists under PostgreSQL's 8000-byte payload limit."""
    ids = [f"s{index}-" + "é" * 300 for index in range(200)]
    found = payloads(ids)
    assert len(found) > 1
    assert all(len(text.encode()) <= PAYLOAD_BYTES < 8000 for text in found)
    assert sorted(i for text in found for i in json.loads(text)) == sorted(ids)
    assert payloads(["x" * 9000]) == ["*"]
