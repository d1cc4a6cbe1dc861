"""Google ADK's session-service behaviour, on turnstore's service and on ADK's own.

ADK does not publish its shared session-service tests, so these are ours, written from ADK's
documented behaviour. Each test runs first on one of ADK's own services that has the
behaviour (`InMemorySessionService`; `DatabaseSessionService` on SQLite, which detects stale
writers), proving the test, then on `TurnstoreSessionService` on SQLite and PostgreSQL,
proving the service. Where no ADK service has the behaviour (a stale writer whose winner
wrote at the same timestamp), ADK's service is a strict xfail: the test can fail.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _adk_services import (
    APP,
    TURNSTORE,
    event,
    ids,
    opened,
    reload,
    services,
    texts,
)

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres

pytestmark = pytest.mark.peers


@pytest.fixture
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with opened(request.param, tmp_path) as chosen:
        yield chosen


RUNNER = Path(__file__).with_name("_adk_runner.py")


# --- sessions ------------------------------------------------------------------------------


@services("adk-inmemory", "adk-database")
async def test_create_get_and_delete(service: Any) -> None:
    assert await service.get_session(app_name=APP, user_id="u", session_id="none") is None
    created = await service.create_session(
        app_name=APP, user_id="u", session_id="s1", state={"k": 1}
    )
    assert (created.id, created.app_name, created.user_id, created.state) == (
        "s1",
        APP,
        "u",
        {"k": 1},
    )
    got = await reload(service, created)
    assert (got.id, got.state, got.events) == ("s1", {"k": 1}, [])
    await service.delete_session(app_name=APP, user_id="u", session_id="s1")
    assert await reload(service, created) is None
    await service.delete_session(app_name=APP, user_id="u", session_id="s1")  # missing is fine


@services("adk-inmemory", "adk-database")
async def test_a_generated_id_and_a_duplicate_id(service: Any) -> None:
    from google.adk.errors.already_exists_error import AlreadyExistsError

    made = await service.create_session(app_name=APP, user_id="u")
    assert made.id
    await service.create_session(app_name=APP, user_id="u", session_id="dup", state={"a": 1})
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id="dup", state={"a": 2})
    original = await service.get_session(app_name=APP, user_id="u", session_id="dup")
    assert original.state == {"a": 1}
    # The same id under another user is another session.
    other = await service.create_session(app_name=APP, user_id="v", session_id="dup")
    assert other.state == {}


@services("adk-inmemory", "adk-sqlite")
async def test_padded_session_id_reads_and_deletes(service: Any) -> None:
    """create, get and delete strip a session id alike, as ADK's in-memory and SQLite services
    do (its `DatabaseSessionService` strips none of them)."""
    from google.adk.errors.already_exists_error import AlreadyExistsError

    created = await service.create_session(app_name=APP, user_id="u", session_id="  pad \n")
    assert created.id == "pad"
    for asked in ("pad", "  pad \n", " pad"):
        got = await service.get_session(app_name=APP, user_id="u", session_id=asked)
        assert got is not None
        assert got.id == "pad"
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id=" pad")
    await service.delete_session(app_name=APP, user_id="u", session_id=" pad ")
    assert await service.get_session(app_name=APP, user_id="u", session_id="pad") is None


@services("adk-database")
async def test_concurrent_creates_of_one_id_let_exactly_one_win(service: Any) -> None:
    from google.adk.errors.already_exists_error import AlreadyExistsError

    results = await asyncio.gather(
        *(
            service.create_session(app_name=APP, user_id="u", session_id="race", state={"n": n})
            for n in range(6)
        ),
        return_exceptions=True,
    )
    winners = [result for result in results if not isinstance(result, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, AlreadyExistsError) for r in results if r not in winners)
    stored = await service.get_session(app_name=APP, user_id="u", session_id="race")
    assert stored.state == winners[0].state


# --- state ---------------------------------------------------------------------------------


@services("adk-inmemory", "adk-database")
async def test_state_is_scoped_to_app_user_and_session(service: Any) -> None:
    first = await service.create_session(
        app_name=APP,
        user_id="ada",
        session_id="a1",
        state={"app:tier": "free", "user:lang": "en", "own": 1, "temp:x": 9},
    )
    assert first.state == {"app:tier": "free", "user:lang": "en", "own": 1}
    await service.append_event(first, event("hi", delta={"app:tier": "pro", "user:n": 2}))
    same_user = await service.create_session(app_name=APP, user_id="ada", session_id="a2")
    assert same_user.state == {"app:tier": "pro", "user:lang": "en", "user:n": 2}
    other_user = await service.create_session(app_name=APP, user_id="bob", session_id="b1")
    assert other_user.state == {"app:tier": "pro"}
    other_app = await service.create_session(app_name="other", user_id="ada", session_id="o1")
    assert other_app.state == {}
    assert await service.get_user_state(app_name=APP, user_id="ada") == {"lang": "en", "n": 2}
    assert await service.get_user_state(app_name=APP, user_id="nobody") == {}
    # The app's and the user's state outlive a deleted session.
    await service.delete_session(app_name=APP, user_id="ada", session_id="a1")
    again = await service.create_session(app_name=APP, user_id="ada", session_id="a3")
    assert again.state == {"app:tier": "pro", "user:lang": "en", "user:n": 2}


@services("adk-inmemory", "adk-database")
async def test_deltas_replace_values_and_store_none(service: Any) -> None:
    session = await service.create_session(
        app_name=APP, user_id="u", state={"d": {"a": 1, "b": 2}, "app:d": {"x": 1}, "flag": True}
    )
    await service.append_event(session, event("1", delta={"d": {"c": 3}, "app:d": {"y": 2}}))
    await service.append_event(session, event("2", delta={"gone": None, "user:n": None}))
    stored = await reload(service, session)
    assert stored.state == {
        "d": {"c": 3},
        "flag": True,
        "gone": None,
        "app:d": {"y": 2},
        "user:n": None,
    }
    assert stored.state == session.state


@services("adk-inmemory", "adk-database")
async def test_temp_state_is_visible_in_the_invocation_and_never_stored(service: Any) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    await service.append_event(session, event("1", delta={"temp:scratch": 1, "kept": 1}))
    assert session.state["temp:scratch"] == 1  # the live session sees it
    stored = await reload(service, session)
    assert stored.state == {"kept": 1}
    assert "temp:scratch" not in stored.events[0].actions.state_delta


@services("adk-inmemory", "adk-database")
async def test_partial_events_are_not_stored(service: Any) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    partial = event("streaming", delta={"k": 1})
    partial.partial = True
    await service.append_event(session, partial)
    await service.append_event(session, event("done"))
    stored = await reload(service, session)
    assert texts(stored) == ["done"]
    assert stored.state == {}


# --- events --------------------------------------------------------------------------------


@services("adk-inmemory", "adk-database")
async def test_events_come_back_equal_and_last_update_time_is_exact(service: Any) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    sent = event("héllo", delta={"k": [1, 2.5, None]}, at=1_765_432_101.123456)
    await service.append_event(session, sent)
    stored = await reload(service, session)
    assert stored.events == [sent]
    assert stored.events == session.events
    assert abs(stored.last_update_time - sent.timestamp) < 1e-6
    assert session.last_update_time == sent.timestamp


@services("adk-inmemory", "adk-database")
async def test_get_session_config_narrows_the_events(service: Any) -> None:
    from google.adk.sessions.base_session_service import GetSessionConfig

    session = await service.create_session(app_name=APP, user_id="u")
    base = 1_700_000_000.0
    for n in range(6):
        await service.append_event(session, event(str(n), at=base + n))
    assert texts(await reload(service, session)) == ["0", "1", "2", "3", "4", "5"]
    assert texts(await reload(service, session, GetSessionConfig(num_recent_events=0))) == []
    assert texts(await reload(service, session, GetSessionConfig(num_recent_events=3))) == [
        "3",
        "4",
        "5",
    ]
    after = GetSessionConfig(after_timestamp=base + 4)  # inclusive
    assert texts(await reload(service, session, after)) == ["4", "5"]
    both = GetSessionConfig(num_recent_events=1, after_timestamp=base + 2)
    assert texts(await reload(service, session, both)) == ["5"]
    wide = GetSessionConfig(num_recent_events=3, after_timestamp=base + 4)
    assert texts(await reload(service, session, wide)) == ["4", "5"]


@services("adk-database", xfail=("adk-inmemory",))
async def test_events_with_tied_timestamps_come_back_in_event_id_order(service: Any) -> None:
    """Ties in timestamp are broken by event id, as ADK's `DatabaseSessionService` orders
    them; its in-memory service keeps append order instead (a strict xfail)."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    tied = 1_700_000_000.0
    session = await service.create_session(app_name=APP, user_id="u")
    for name in ("z", "a", "m"):
        await service.append_event(session, event(name, at=tied, ident=name))
    assert ids(session) == ["z", "a", "m"]  # the live session holds them as appended
    assert ids(await reload(service, session)) == ["a", "m", "z"]
    newest = await reload(service, session, GetSessionConfig(num_recent_events=1))
    assert ids(newest) == ["z"]
    after = await reload(service, session, GetSessionConfig(after_timestamp=tied))
    assert ids(after) == ["a", "m", "z"]
    both = GetSessionConfig(num_recent_events=2, after_timestamp=tied)
    assert ids(await reload(service, session, both)) == ["m", "z"]


@services("adk-database", xfail=("adk-inmemory",))
async def test_an_event_older_than_the_newest_comes_back_in_its_place_by_time(
    service: Any,
) -> None:
    """An event appended with an older timestamp than the newest one is returned where its
    timestamp puts it, and `after_timestamp` finds every event from that time on, as ADK's
    database service does; the session's update time is the last appended event's."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    base = 1_700_000_000.0
    session = await service.create_session(app_name=APP, user_id="u")
    for name, at in (("10", base + 10), ("30", base + 30), ("20", base + 20), ("5", base + 5)):
        await service.append_event(session, event(name, at=at, ident=name))
    stored = await reload(service, session)
    assert ids(stored) == ["5", "10", "20", "30"]
    assert stored.last_update_time == pytest.approx(base + 5, abs=1e-6)
    assert ids(await reload(service, session, GetSessionConfig(num_recent_events=2))) == [
        "20",
        "30",
    ]
    after = GetSessionConfig(after_timestamp=base + 15)
    assert ids(await reload(service, session, after)) == ["20", "30"]
    both = GetSessionConfig(num_recent_events=3, after_timestamp=base + 6)
    assert ids(await reload(service, session, both)) == ["10", "20", "30"]


@services("adk-inmemory", "adk-database")
async def test_append_after_delete_raises_session_not_found(service: Any) -> None:
    from google.adk.errors.session_not_found_error import SessionNotFoundError

    session = await service.create_session(app_name=APP, user_id="u", session_id="d")
    await service.delete_session(app_name=APP, user_id="u", session_id="d")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, event("late"))


# --- stale writers -------------------------------------------------------------------------


@services("adk-database")
async def test_a_stale_session_cannot_append(service: Any) -> None:
    from google.adk.errors import StaleSessionError

    created = await service.create_session(app_name=APP, user_id="u", session_id="s")
    mine, theirs = await reload(service, created), await reload(service, created)
    await service.append_event(mine, event("first", delta={"k": "mine"}))
    with pytest.raises(StaleSessionError):
        await service.append_event(theirs, event("second", delta={"k": "theirs"}))
    stored = await reload(service, created)
    assert (texts(stored), stored.state) == (["first"], {"k": "mine"})
    # Reloaded, the other writer goes on from the stored session.
    fresh = await reload(service, created)
    await service.append_event(fresh, event("second"))
    assert texts(await reload(service, created)) == ["first", "second"]


@services("adk-database")
async def test_of_concurrent_writers_on_one_session_exactly_one_wins(service: Any) -> None:
    from google.adk.errors import StaleSessionError

    created = await service.create_session(app_name=APP, user_id="u", session_id="s")
    copies = [await reload(service, created) for _ in range(8)]
    results = await asyncio.gather(
        *(service.append_event(copy, event(f"w{n}")) for n, copy in enumerate(copies)),
        return_exceptions=True,
    )
    losers = [result for result in results if isinstance(result, BaseException)]
    assert len(losers) == 7
    assert all(isinstance(loser, StaleSessionError) for loser in losers)
    assert len((await reload(service, created)).events) == 1


@services(xfail=("adk-database",))
async def test_a_stale_writer_is_caught_when_the_winner_wrote_at_the_same_time(
    service: Any,
) -> None:
    """ADK decides staleness by timestamps, and misses it when they tie; turnstore decides by
    the session's sequence."""
    from google.adk.errors import StaleSessionError

    created = await service.create_session(app_name=APP, user_id="u", session_id="tie")
    tied = 1_700_000_000.0
    first = await reload(service, created)
    await service.append_event(first, event("base", at=tied))
    mine, theirs = await reload(service, created), await reload(service, created)
    await service.append_event(mine, event("winner", at=tied))
    with pytest.raises(StaleSessionError):
        await service.append_event(theirs, event("stale", at=tied))


# --- listing -------------------------------------------------------------------------------


@services("adk-inmemory", "adk-database")
async def test_list_sessions_oldest_update_first_with_state_and_no_events(service: Any) -> None:
    a = await service.create_session(app_name=APP, user_id="ada", session_id="a", state={"n": 1})
    b = await service.create_session(app_name=APP, user_id="bob", session_id="b")
    await service.create_session(app_name="other", user_id="ada", session_id="x")
    await service.append_event(a, event("later", delta={"user:k": 1}, at=b.last_update_time + 5))
    listed = (await service.list_sessions(app_name=APP)).sessions
    assert [(s.user_id, s.id) for s in listed] == [("bob", "b"), ("ada", "a")]
    assert all(s.events == [] for s in listed)
    assert listed[1].state == {"n": 1, "user:k": 1}
    mine = (await service.list_sessions(app_name=APP, user_id="ada")).sessions
    assert [s.id for s in mine] == ["a"]
    assert (await service.list_sessions(app_name="nobody")).sessions == []


@pytest.mark.parametrize("service", TURNSTORE, indirect=True)
async def test_list_sessions_page_walks_the_catalog_by_cursor(service: Any) -> None:
    for n in range(7):
        await service.create_session(app_name=APP, user_id="ada", session_id=f"s{n}")
    await service.create_session(app_name=APP, user_id="bob", session_id="b")
    seen, cursor = [], None
    while True:
        page = await service.list_sessions_page(app_name=APP, user_id="ada", limit=3, cursor=cursor)
        seen += [s.id for s in page.sessions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == [f"s{n}" for n in range(7)]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("service", TURNSTORE, indirect=True)
async def test_adk_sessions_are_in_the_catalog_and_deleted_with_it(service: Any) -> None:
    from turnstore import SessionPageRequest
    from turnstore.integrations.adk import turnstore_id

    await service.create_session(app_name="a/b", user_id="u%1", session_id="s/1")
    tid = turnstore_id("a/b", "u%1", "s/1")
    page = await service.store.list_sessions_page(SessionPageRequest(limit=10, owner_id="u%1"))
    assert [summary.session_id for summary in page.sessions] == [tid]
    assert await service.store.delete_sessions([tid]) is True
    assert await service.get_session(app_name="a/b", user_id="u%1", session_id="s/1") is None
    assert await service.store.load_state_scope(tid) == {}


# --- a runner across a process restart -----------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_runner_keeps_its_session_across_a_process_restart(tmp_path: Path, backend: str) -> None:
    if backend == "postgres":
        require_postgres()
        schema = f"test_{uuid.uuid4().hex}"
        separator = "&" if "?" in POSTGRES_URL else "?"
        url = f"{POSTGRES_URL}{separator}schema={schema}"
    else:
        url = str(tmp_path / "runner.sqlite3")
    try:
        outputs = [
            subprocess.run(
                [sys.executable, str(RUNNER), url, str(turn)],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
            for turn in (1, 2)
        ]
    finally:
        if backend == "postgres":
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    assert "events=4 counter=2 turns=1 temp=False" in outputs[0]
    # The restarted process finds the session, its events and every scope of its state.
    assert "events=8 counter=4 turns=2 temp=False" in outputs[1]
    assert "user_state={'counter': 4}" in outputs[1]


@services("adk-inmemory", "adk-database")
async def test_a_hand_built_session_keeps_the_stored_state(service: Any) -> None:
    """Only event deltas are stored: a hand-built session's (or a direct) state change is not."""
    from google.adk.sessions.session import Session

    await service.create_session(app_name=APP, user_id="u", session_id="h", state={"a": 1})
    hand = Session(id="h", app_name=APP, user_id="u", state={"junk": "x"}, events=[])
    await service.append_event(hand, event("1", delta={"b": 2}))
    stored = await service.get_session(app_name=APP, user_id="u", session_id="h")
    assert stored.state == {"a": 1, "b": 2}


@pytest.mark.parametrize("service", TURNSTORE, indirect=True)
async def test_a_session_written_outside_the_service_is_an_error_not_a_hang(service: Any) -> None:
    from turnstore import StorageError
    from turnstore.integrations.adk import turnstore_id

    session = await service.create_session(app_name=APP, user_id="u", session_id="x")
    await service.append_event(session, event("1"))
    await service.store.pop_context(turnstore_id(APP, "u", "x"))
    with pytest.raises(StorageError, match="written outside this service"):
        await service.get_session(app_name=APP, user_id="u", session_id="x")
    with pytest.raises(turnstore.InvalidInput):
        await service.list_sessions_page(app_name=APP, user_id="u", limit=0)
