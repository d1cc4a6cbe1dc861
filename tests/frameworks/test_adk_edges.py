"""ADK's edges: a re-created session, a re-delivered event, the catalog's first message, the
order of events whose timestamps tie or go backwards.

As in test_adk_sessions.py, each behaviour runs first on ADK's own `DatabaseSessionService`
(on SQLite) where it has it, then on turnstore's service on SQLite and PostgreSQL; the order of
events is also compared call by call with ADK's database service.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _adk_services import (
    APP,
    TURNSTORE,
    event,
    ids,
    is_turnstore,
    opened,
    reload,
    services,
    texts,
)

pytestmark = pytest.mark.peers


@pytest.fixture
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with opened(request.param, tmp_path) as chosen:
        yield chosen


# --- a session deleted and created again ---------------------------------------------------


@services("adk-database")
@pytest.mark.parametrize("appended", [0, 2])
async def test_a_session_read_before_its_id_was_deleted_and_created_again_is_stale(
    service: Any, appended: int
) -> None:
    """The new session is another incarnation: a `Session` of the old one cannot write to it,
    even when both stand at the same sequence."""
    from google.adk.errors import StaleSessionError

    old = await service.create_session(app_name=APP, user_id="u", session_id="again")
    for n in range(appended):
        await service.append_event(old, event(f"old {n}"))
    stale = await reload(service, old)
    await service.delete_session(app_name=APP, user_id="u", session_id="again")
    new = await service.create_session(
        app_name=APP, user_id="u", session_id="again", state={"fresh": True}
    )
    for n in range(appended):
        await service.append_event(new, event(f"new {n}"))
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, event("stale", delta={"fresh": False, "user:x": 1}))
    stored = await reload(service, new)
    assert texts(stored) == [f"new {n}" for n in range(appended)]
    assert stored.state == {"fresh": True}
    await service.append_event(new, event("goes on"))  # the new incarnation's own writer
    assert texts(await reload(service, new))[-1] == "goes on"


# --- the same event twice -------------------------------------------------------------------


def _duplicate_error(service: Any) -> type[BaseException]:
    """What appending a stored event id again raises: ADK's database service lets its
    database's unique key refuse it; turnstore's raises ADK's `AlreadyExistsError`."""
    if is_turnstore(service):
        from google.adk.errors.already_exists_error import AlreadyExistsError

        return AlreadyExistsError
    from sqlalchemy.exc import IntegrityError

    return IntegrityError


@services("adk-database")
async def test_the_same_event_appended_twice_changes_nothing_the_second_time(service: Any) -> None:
    """A re-delivered event (same id) is refused and changes nothing, stored or live, whether
    it is the same object, a copy with other content, or comes through a session read again."""
    from google.adk.events.event_actions import EventActions

    session = await service.create_session(app_name=APP, user_id="u", session_id="twice")
    sent = event("once", delta={"n": 1, "user:n": 1, "app:n": 1})
    await service.append_event(session, sent)
    with pytest.raises(_duplicate_error(service)):
        await service.append_event(session, sent)
    fresh = await reload(service, session)
    changed = sent.model_copy(update={"actions": EventActions(state_delta={"n": 2})})
    with pytest.raises(_duplicate_error(service)):
        await service.append_event(fresh, changed)
    stored = await reload(service, session)
    assert (texts(stored), stored.state) == (["once"], {"n": 1, "user:n": 1, "app:n": 1})
    assert (len(session.events), len(fresh.events)) == (1, 1)
    # Neither session went stale: each goes on with a new event.
    await service.append_event(session, event("next"))
    assert texts(await reload(service, session)) == ["once", "next"]
    # The same event id in another session is another event.
    other = await service.create_session(app_name=APP, user_id="u", session_id="other")
    await service.append_event(other, sent)
    assert texts(await reload(service, other)) == ["once"]


# --- the catalog's first message --------------------------------------------------------------


def _said(role: str, **part: Any) -> Any:
    from google.adk.events.event import Event
    from google.genai import types

    content = types.Content(role=role, parts=[types.Part(**part)])
    return Event(invocation_id="inv", author="user" if role == "user" else "bot", content=content)


@pytest.mark.parametrize("service", TURNSTORE, indirect=True)
async def test_an_adk_session_shows_its_first_user_message_in_the_catalog(service: Any) -> None:
    """An ADK event keeps its role under `content`: the catalog finds the first user text in
    it, past the model's turns and the user-role tool results, which carry no text."""
    from google.genai import types

    from turnstore import SessionPageRequest
    from turnstore.integrations.adk import turnstore_id

    session = await service.create_session(app_name=APP, user_id="ada", session_id="c")
    result = types.FunctionResponse(name="tool", response={"ok": True})
    for said in (
        _said("model", text="How can I help?"),
        _said("user", function_response=result),
        _said("user", text="Plan a trip to Lyon"),
        _said("user", text="and back"),
    ):
        await service.append_event(session, said)
    page = await service.store.list_sessions_page(SessionPageRequest(limit=5, owner_id="ada"))
    assert [s.first_user_message for s in page.sessions] == ["Plan a trip to Lyon"]
    summary = await service.store.session_summary(turnstore_id(APP, "ada", "c"))
    assert summary.first_user_message == "Plan a trip to Lyon"


# --- the order of events ------------------------------------------------------------------

BASE = 1_700_000_000.0
OFFSETS = (0.0, 0.0, 1.0, 2.0, 2.0000001, 2.0000002, 2.0000004, 3.0, -1.0)
"""Event times (after `BASE`) drawn from: ties, times apart by less than the microsecond ADK's
database stores, and one earlier than the session's first event."""
IDS = ("a", "B", "b", "m", "Z", "z", "0", "e-1", "e-10", "e-9")


@pytest.fixture(params=TURNSTORE)
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """ADK's database service on SQLite, and turnstore's on one backend."""
    async with (
        opened("adk-database", tmp_path) as theirs,
        opened(request.param, tmp_path) as ours,
    ):
        yield theirs, ours


def _plans() -> dict[str, list[tuple[str, float]]]:
    """Sessions of (event id, time): in order, in order through ties, and shuffled."""
    rng = random.Random(43)
    shuffled = [(f"{name}-{n}", BASE + rng.choice(OFFSETS)) for n, name in enumerate(IDS * 3)]
    rng.shuffle(shuffled)
    return {
        "rising": [(name, BASE + n) for n, name in enumerate(reversed(IDS))],
        "ties rising by id": [(name, BASE + n // 3) for n, name in enumerate(sorted(IDS))],
        "shuffled": shuffled,
    }


def _configs(times: list[float]) -> list[Any]:
    from google.adk.sessions.base_session_service import GetSessionConfig

    edges = sorted({edge for at in times for edge in (at, at - 1e-7, at + 1e-7, at + 0.5)})
    configs: list[Any] = [None]
    configs += [GetSessionConfig(num_recent_events=n) for n in range(len(times) + 2)]
    configs += [GetSessionConfig(after_timestamp=edge) for edge in edges]
    configs += [
        GetSessionConfig(num_recent_events=n, after_timestamp=edge)
        for n in (1, 2, 5)
        for edge in edges[:: max(1, len(edges) // 6)]
    ]
    return configs


async def test_events_come_back_in_the_order_of_adks_database_service(
    pair: tuple[Any, Any],
) -> None:
    """Call by call, turnstore returns the events ADK's database service returns, in its
    order (time to the microsecond, then event id), whether times rise, tie or go back, with
    every `num_recent_events` and `after_timestamp` around each event's time."""
    theirs, ours = pair
    differ: dict[str, Any] = {}
    for name, plan in _plans().items():
        sessions = [
            await service.create_session(app_name=APP, user_id="u", session_id=name)
            for service in pair
        ]
        for ident, at in plan:
            for service, session in zip(pair, sessions, strict=True):
                await service.append_event(session, event(ident, at=at, ident=ident))
        for config in _configs([at for _, at in plan]):
            adk = await reload(theirs, sessions[0], config)
            mine = await reload(ours, sessions[1], config)
            if adk.events != mine.events:
                differ[f"{name} {config!r}"] = {"adk": ids(adk), "turnstore": ids(mine)}
            assert mine.last_update_time == pytest.approx(adk.last_update_time, abs=1e-6)
    assert differ == {}


@services("adk-database")
async def test_a_hand_built_copy_of_a_session_with_tied_events_can_append(service: Any) -> None:
    """A `Session` built by hand from a read one holds its events in the order read; its
    newest event is the newest stored in that order, so the copy is current."""
    from google.adk.sessions.session import Session

    tied = 1_700_000_000.0
    session = await service.create_session(app_name=APP, user_id="u", session_id="hand")
    for name in ("z", "a"):
        await service.append_event(session, event(name, at=tied, ident=name))
    read = await reload(service, session)
    assert ids(read) == ["a", "z"]
    hand = Session(
        id="hand",
        app_name=APP,
        user_id="u",
        state=read.state,
        events=read.events,
        last_update_time=read.last_update_time,
    )
    await service.append_event(hand, event("later", at=tied + 1, ident="later"))
    assert ids(await reload(service, session)) == ["a", "z", "later"]


@pytest.mark.parametrize("service", TURNSTORE, indirect=True)
async def test_recent_events_of_a_session_in_order_are_read_alone(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While its events are appended in the order they are returned (time, then id), a
    session's newest events are read without the rest; once one comes out of order, the
    session's events are all read and ordered, and come back right."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    session = await service.create_session(app_name=APP, user_id="u", session_id="w")
    for ident, at in (("a", BASE), ("b", BASE), ("c", BASE + 1), ("d", BASE + 2)):
        await service.append_event(session, event(ident, at=at, ident=ident))
    asked: list[int | None] = []
    window = service.store.context_window

    async def counted(tid: str, before: int | None, limit: int | None) -> Any:
        asked.append(limit)
        return await window(tid, before, limit)

    monkeypatch.setattr(service.store, "context_window", counted)
    recent = GetSessionConfig(num_recent_events=2)
    assert ids(await reload(service, session, recent)) == ["c", "d"]
    assert asked == [2]
    await service.append_event(session, event("0", at=BASE + 1, ident="0"))
    asked.clear()
    assert ids(await reload(service, session, recent)) == ["c", "d"]
    assert asked == [None]
    full = await reload(service, session)
    assert ids(full) == ["a", "b", "0", "c", "d"]


# --- a service on an open store ------------------------------------------------------------


@pytest.mark.parametrize("face", ["async", "blocking"])
async def test_a_service_on_an_open_store_shares_it_and_leaves_it_open(
    tmp_path: Path, face: str
) -> None:
    """Given an open store (either face), the service writes through it and `close()` leaves
    it open for the rest of the program."""
    import turnstore
    from turnstore.integrations.adk import TurnstoreSessionService, turnstore_id

    path = tmp_path / "shared.sqlite3"
    store = turnstore.open(path) if face == "async" else turnstore.open_blocking(path)
    service = TurnstoreSessionService(store)
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, event("hi"))
    await service.close()
    tid = turnstore_id(APP, "u", "s")
    if face == "async":
        assert (await store.session_summary(tid)).sequence == 2
        await store.close()
    else:
        assert store.session_summary(tid).sequence == 2
        store.close()


# --- listing ----------------------------------------------------------------------------------


@services("adk-database")
async def test_list_sessions_lists_every_session_of_the_app_or_user_across_pages(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions of the app (or of one user), whatever their ids hold, each with its merged
    state, and none of another app or user whose name starts the same; turnstore's read in
    pages of two, so a listing spans several."""
    if is_turnstore(service):
        from turnstore.integrations import adk

        monkeypatch.setattr(adk, "LIST_PAGE", 2)
    users = ["u", "u/2", "u%", "ü"]
    made = set()
    for user in users:
        for number in range(3):
            session_id = f"s{number}/{user}"
            await service.create_session(
                app_name=APP, user_id=user, session_id=session_id, state={"n": number}
            )
            made.add((user, session_id))
    await service.create_session(app_name=APP + "2", user_id="u", session_id="other")
    await service.create_session(
        app_name=APP, user_id="u", session_id="shared", state={"app:a": 1, "user:b": 2}
    )
    made.add(("u", "shared"))
    listed = (await service.list_sessions(app_name=APP)).sessions
    assert {(one.user_id, one.id) for one in listed} == made
    assert all(not one.events for one in listed)
    times = [one.last_update_time for one in listed]
    assert times == sorted(times)
    for user in users:
        mine = (await service.list_sessions(app_name=APP, user_id=user)).sessions
        assert {one.id for one in mine} == {sid for owner, sid in made if owner == user}
        for one in mine:
            assert one.state["app:a"] == 1
            assert ("user:b" in one.state) is (user == "u")
            if one.id != "shared":
                assert one.state["n"] == int(one.id[1])
