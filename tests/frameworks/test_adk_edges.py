"""ADK's edges: a re-created session, a re-delivered event, the catalog's first message.

As in test_adk_sessions.py, each behaviour runs first on ADK's own `DatabaseSessionService`
(on SQLite) where it has it, then on turnstore's service on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _adk_services import (
    APP,
    TURNSTORE,
    event,
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
