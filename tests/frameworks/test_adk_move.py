"""Google ADK sessions moved: `DatabaseSessionService` databases (SQLite and PostgreSQL) into
turnstore (SQLite and PostgreSQL) and back out, and any other session service by its apps.

Every source is filled by ADK's own session services (`create_session`, `append_event` with
state deltas of every scope), never by hand-written rows (but the one unreadable row). Each
move is checked by `verify_sessions`, and against ADK's own `get_session`.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres
from turnstore.errors import CorruptRecord, InvalidInput
from turnstore.records import SessionPageRequest

pytestmark = pytest.mark.peers

APPS, USERS, SESSIONS, EVENTS = ("support", "sales"), ("ada", "bob"), 2, 4
"""The small source: every app has every user's sessions of events."""


def event(number: int, **delta: Any) -> Any:
    """An event as an agent loop appends it: text or a function call, a branch, an artifact
    and a state delta (its `temp:` keys are not stored)."""
    from google.adk.events.event import Event, EventActions
    from google.genai import types

    if number % 2:
        call = types.FunctionCall(id=f"call-{number}", name="lookup", args={"city": "Zürich"})
        content = types.Content(role="model", parts=[types.Part(function_call=call)])
    else:
        content = types.Content(role="user", parts=[types.Part(text=f"question {number} ☀")])
    actions = EventActions(state_delta=delta, artifact_delta={"notes.txt": number})
    return Event(
        author="user" if number % 2 == 0 else "helper",
        invocation_id=f"inv-{number // 2}",
        content=content,
        branch="root.helper" if number % 2 else None,
        actions=actions,
    )


async def fill_service(service: Any, apps: Any = APPS, prefix: str = "") -> None:
    """Sessions of every app and user, with state of every scope, through ADK's API; one
    event is appended with an earlier time than the one before it."""
    for app in apps:
        for user in USERS:
            for number in range(SESSIONS):
                session = await service.create_session(
                    app_name=app,
                    user_id=user,
                    session_id=f"{prefix}chat-{number}",
                    state={"topic": f"t{number}", "app:tier": "free", "user:name": user.title()},
                )
                for index in range(EVENTS):
                    delta = {"count": index, "app:hits": index + number, "user:visits": index}
                    await service.append_event(session, event(index, **delta, **{"temp:x": 1}))
                late = event(EVENTS, late=True)
                late.timestamp = session.events[0].timestamp - 1.0
                await service.append_event(session, late)


def database_service(url: str) -> Any:
    """ADK's `DatabaseSessionService`; on SQLite without a sync per commit (a fast fill)."""
    from google.adk.sessions import DatabaseSessionService
    from sqlalchemy import event as sql_event
    from sqlalchemy.ext.asyncio import create_async_engine

    if not url.startswith("sqlite"):
        return DatabaseSessionService(url)
    engine = create_async_engine(url)
    sql_event.listen(
        engine.sync_engine, "connect", lambda conn, _: conn.execute("PRAGMA synchronous=OFF")
    )
    return DatabaseSessionService(db_engine=engine)


def fill(url: str, **options: Any) -> None:
    async def run() -> None:
        service = database_service(url)
        await fill_service(service, **options)
        await service.db_engine.dispose()

    asyncio.run(run())


def digest(path: Path) -> tuple[str, str]:
    """The file's bytes and its log's (none and empty alike: nothing logged)."""
    log = path.with_name(f"{path.name}-wal")
    logged = log.read_bytes() if log.exists() else b""
    return hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(logged).hexdigest()


async def sessions_of(service: Any, keys: list[tuple[str, str, str]]) -> list[Any]:
    found = []
    for app, user, session_id in keys:
        found.append(await service.get_session(app_name=app, user_id=user, session_id=session_id))
    return found


def every_key() -> list[tuple[str, str, str]]:
    return [(a, u, f"chat-{n}") for a in APPS for u in USERS for n in range(SESSIONS)]


def read_both(source_url: str, store_url: str) -> tuple[list[Any], list[Any]]:
    """Every session through ADK's `DatabaseSessionService` and our service."""
    from turnstore.integrations.adk import TurnstoreSessionService

    async def run() -> tuple[list[Any], list[Any]]:
        theirs, ours = database_service(source_url), TurnstoreSessionService(store_url)
        try:
            return await sessions_of(theirs, every_key()), await sessions_of(ours, every_key())
        finally:
            await theirs.db_engine.dispose()
            await ours.close()

    return asyncio.run(run())


@pytest.fixture
def source_path(tmp_path: Path) -> Path:
    """A `DatabaseSessionService` SQLite file filled by ADK, closed."""
    path = tmp_path / "sessions.db"
    fill(f"sqlite+aiosqlite:///{path}")
    return path


def url_of(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture
def ours(store_url: str) -> Iterator[Any]:
    from turnstore.integrations.adk_move import TurnstoreSessions

    with TurnstoreSessions(store_url) as sessions:
        yield sessions


def test_a_database_into_turnstore_exact_and_back_out(source_path, ours, store_url, tmp_path):
    """Every app, user, session, event and state value goes in exact (times included) and
    back out through ADK's own service; the source is untouched."""
    from turnstore.integrations.adk_move import (
        DatabaseSessions,
        copy_sessions,
        survey,
        verify_sessions,
    )

    before = digest(source_path)
    total = len(every_key()) * (EVENTS + 1)
    with DatabaseSessions(url_of(source_path), read_only=True) as source:
        planned = survey(source)
        assert (planned.session_count, planned.event_count) == (len(every_key()), total)
        assert planned.source_bytes
        report = copy_sessions(source, ours)
        assert (report.conflicts, report.skipped) == ([], [])
        assert (report.session_count, report.event_count) == (len(every_key()), total)
        assert report.state_count == len(APPS) * 2 + len(APPS) * len(USERS) * 2
        checked = verify_sessions(source, ours)
        assert (checked.difference, checked.event_count) == (None, total)
    theirs, mine = read_both(url_of(source_path), store_url)
    for a, b in zip(theirs, mine, strict=True):
        assert [e.model_dump() for e in b.events] == [e.model_dump() for e in a.events]
        assert (b.state, b.last_update_time) == (a.state, a.last_update_time)
        assert b.state["app:hits"] == a.state["app:hits"]
        assert "temp:x" not in b.state
    assert theirs[0].events[0].actions.state_delta["late"] is True  # the late event first
    assert created_times(source_path) == recorded_create_times(store_url)
    with turnstore.open_blocking(store_url, read_only=True) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=50))
    assert {(s.kind, s.session_context.owner_id) for s in page.sessions} == {
        ("adk", "ada"),
        ("adk", "bob"),
    }
    back_path = tmp_path / "back.db"
    with DatabaseSessions(url_of(back_path)) as back:
        out = copy_sessions(ours, back)
        assert (out.event_count, out.conflicts) == (total, [])
        assert verify_sessions(ours, back).difference is None
        assert copy_sessions(ours, back).event_count == 0
    with (
        DatabaseSessions(url_of(source_path), read_only=True) as source,
        DatabaseSessions(url_of(back_path), read_only=True) as back,
    ):
        assert verify_sessions(source, back).difference is None  # times are not compared
    assert digest(source_path) == before


def created_times(path: Path) -> dict[tuple[str, str, str], float]:
    """Each session's create time as ADK stored it (naive UTC)."""
    from datetime import UTC, datetime

    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT app_name, user_id, id, create_time FROM sessions")
        found = {
            (a, u, i): datetime.fromisoformat(t).replace(tzinfo=UTC).timestamp()
            for a, u, i, t in rows
        }
    connection.close()
    return found


def recorded_create_times(url: str) -> dict[tuple[str, str, str], float]:
    from turnstore.integrations.adk import turnstore_id
    from turnstore.records.kinds.adk import SESSION_KEY

    with turnstore.open_blocking(url, read_only=True) as store:
        return {
            key: store.load_state(turnstore_id(*key), SESSION_KEY)["create_time"]
            for key in every_key()
        }


def test_a_second_run_copies_nothing_and_a_grown_source_only_the_new(source_path, ours):
    """Run again: nothing; after the source grew: only its new events and sessions, and the
    app and user state the new events changed."""
    from turnstore.integrations.adk_move import DatabaseSessions, copy_sessions, verify_sessions

    source = DatabaseSessions(url_of(source_path), read_only=True)
    first = copy_sessions(source, ours)
    again = copy_sessions(source, ours)
    assert (again.event_count, again.state_count) == (0, 0)
    assert again.present_count == first.event_count

    async def grow() -> None:
        service = database_service(url_of(source_path))
        old = await service.get_session(app_name="sales", user_id="bob", session_id="chat-1")
        await service.append_event(old, event(7, **{"app:hits": 99, "user:visits": 7}))
        await fill_service(service, apps=["support"], prefix="new-")
        await service.db_engine.dispose()

    asyncio.run(grow())
    grown = copy_sessions(source, ours)
    assert grown.event_count == 1 + len(USERS) * SESSIONS * (EVENTS + 1)
    assert grown.present_count == first.event_count
    assert grown.state_count > 0
    assert verify_sessions(source, ours).difference is None
    source.close()


def test_a_differing_session_is_a_conflict_left_alone_and_a_longer_one_is_kept(
    source_path, ours, store_url
):
    """A target session whose events differ is reported and not written; one that went on
    after the source's events (workers switched to turnstore) is kept as it is."""
    from turnstore.integrations.adk import TurnstoreSessionService
    from turnstore.integrations.adk_move import DatabaseSessions, copy_sessions

    async def plant() -> None:
        service = TurnstoreSessionService(store_url)
        session = await service.create_session(
            app_name="support", user_id="ada", session_id="chat-0"
        )
        await service.append_event(session, event(0))
        await service.close()

    asyncio.run(plant())
    source = DatabaseSessions(url_of(source_path), read_only=True)
    report = copy_sessions(source, ours)
    assert [p.place[:4] for p in report.conflicts] == [("support", "ada", "chat-0", 0)]
    assert "the target holds event" in report.conflicts[0].reason
    _, mine = read_both(url_of(source_path), store_url)
    assert len(mine[0].events) == 1

    async def go_on() -> None:
        service = TurnstoreSessionService(store_url)
        session = await service.get_session(app_name="sales", user_id="bob", session_id="chat-1")
        await service.append_event(session, event(8))
        await service.close()

    asyncio.run(go_on())
    again = copy_sessions(source, ours)
    assert (again.event_count, again.ahead_count, len(again.conflicts)) == (0, 1, 1)
    source.close()


def test_an_unreadable_event_stops_the_copy_or_is_skipped_when_asked(source_path, ours):
    """A row ADK cannot read is named with its place; `skip_bad` leaves it out, reported."""
    from turnstore.integrations.adk_move import DatabaseSessions, Place, copy_sessions

    with sqlite3.connect(source_path) as connection:
        (event_id,) = connection.execute(
            "SELECT id FROM events WHERE app_name = 'sales' AND user_id = 'ada'"
            " AND session_id = 'chat-1' ORDER BY timestamp, id LIMIT 1 OFFSET 2"
        ).fetchone()
        connection.execute("UPDATE events SET event_data = '{oops' WHERE id = ?", (event_id,))
    connection.close()
    source = DatabaseSessions(url_of(source_path), read_only=True)
    with pytest.raises(CorruptRecord, match="sales/ada/chat-1 event 2"):
        copy_sessions(source, ours)
    report = copy_sessions(source, ours, skip_bad=True)
    assert [p.place for p in report.skipped] == [Place("sales", "ada", "chat-1", 2, event_id)]
    source.close()


def test_any_other_session_service_is_moved_by_its_apps(source_path, ours):
    """ADK's `InMemorySessionService` (no tables): listed by the apps named, in and out."""
    from google.adk.sessions import InMemorySessionService

    from turnstore.integrations.adk_move import (
        DatabaseSessions,
        Sessions,
        acopy_sessions,
        averify_sessions,
    )

    async def run() -> None:
        memory = Sessions(InMemorySessionService())
        async with DatabaseSessions(url_of(source_path), read_only=True) as source:
            into = await acopy_sessions(source, memory)
            assert into.conflicts == []
            assert (await averify_sessions(source, memory)).difference is None
        with pytest.raises(InvalidInput, match="name them"):
            await acopy_sessions(memory, ours)
        report = await acopy_sessions(memory, ours, apps=["sales"], users=["bob"])
        assert (report.session_count, report.event_count) == (SESSIONS, SESSIONS * (EVENTS + 1))
        checked = await averify_sessions(memory, ours, apps=["sales"], users=["bob"])
        assert checked.difference is None

    asyncio.run(run())


def test_verify_names_the_first_difference(source_path, ours, store_url):
    """An event appended on the target after the copy: the verify names its place."""
    from turnstore.integrations.adk import TurnstoreSessionService
    from turnstore.integrations.adk_move import (
        DatabaseSessions,
        Place,
        copy_sessions,
        verify_sessions,
    )

    source = DatabaseSessions(url_of(source_path), read_only=True)
    copy_sessions(source, ours)

    async def extra() -> str:
        service = TurnstoreSessionService(store_url)
        session = await service.get_session(app_name="sales", user_id="ada", session_id="chat-0")
        added = await service.append_event(session, event(9))
        await service.close()
        return added.id

    added = asyncio.run(extra())
    found = verify_sessions(source, ours).difference
    assert found is not None
    assert found.place == Place("sales", "ada", "chat-0", EVENTS + 1, added)
    assert "only the target" in found.reason
    source.close()


@pytest.fixture
def postgres_adk_url() -> Iterator[str]:
    """An empty schema of the test server, as ADK's async URL names it (dropped after)."""
    require_postgres()
    schema = f"adk_move_{uuid.uuid4().hex}"
    with postgres_connection() as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    base = POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    separator = "&" if "?" in base else "?"
    yield f"{base}{separator}options=-csearch_path%3D{schema}"
    with postgres_connection() as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_postgresql_database_session_service_moves_in_read_only(postgres_adk_url, ours):
    """ADK's service on PostgreSQL as the source: its transactions read-only, moved exact."""
    from turnstore.integrations.adk_move import DatabaseSessions, copy_sessions, verify_sessions

    fill(postgres_adk_url, apps=["support"])
    with DatabaseSessions(postgres_adk_url, read_only=True) as source:
        report = copy_sessions(source, ours)
        assert (report.session_count, report.conflicts) == (len(USERS) * SESSIONS, [])
        assert verify_sessions(source, ours).difference is None
        assert copy_sessions(source, ours).event_count == 0
        extra = ours.service.create_session(app_name="support", user_id="eve", session_id="x")
        asyncio.run(extra)
        with pytest.raises(Exception, match=r"read-?only"):  # a read-only source's engine
            copy_sessions(ours, source, session_ids=["x"])
