"""ADK memory: `TurnstoreMemoryService` beside ADK's own `InMemoryMemoryService` and
`SqliteMemoryService`.

Each behaviour runs first on the ADK services that have it (proving the test), then on
turnstore's service on SQLite and PostgreSQL. The behaviours are those ADK's own memory tests
assert through the public API (a memory is an event's text, matched on whole words, scoped to
app and user); where ADK's two services disagree, the test names the one ours follows, and
the how-to page (docs/how-to/adk-memory.md) says why. A differential test then runs the same
scripted calls against all three and compares what each search finds.
"""

from __future__ import annotations

import asyncio
import random
import unicodedata
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_URL, postgres_connection, require_postgres

pytestmark = pytest.mark.peers

APP = "test-app"
TURNSTORE = ["turnstore-sqlite", "turnstore-postgres"]


def memories(*adk: str) -> Any:
    """Run a test on the named ADK memory services, then on turnstore's on both backends."""
    return pytest.mark.parametrize("opened", [*adk, *TURNSTORE], indirect=True)


class _Opened:
    """A memory service and how to open another on the same storage (a restart)."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.schema = f"test_{uuid.uuid4().hex}"
        self.opened: list[Any] = []

    def open(self) -> Any:
        if self.name == "adk-inmemory":
            from google.adk.memory import InMemoryMemoryService

            service: Any = InMemoryMemoryService()
        elif self.name == "adk-sqlite":
            from google.adk.memory import SqliteMemoryService

            service = SqliteMemoryService(str(self.tmp_path / "adk-memory.db"))
        else:
            from turnstore.integrations.adk_memory import TurnstoreMemoryService

            if self.name == "turnstore-sqlite":
                service = TurnstoreMemoryService(str(self.tmp_path / "turnstore.sqlite3"))
            else:
                require_postgres()
                separator = "&" if "?" in POSTGRES_URL else "?"
                service = TurnstoreMemoryService(f"{POSTGRES_URL}{separator}schema={self.schema}")
        self.opened.append(service)
        return service

    async def close(self) -> None:
        for service in self.opened:
            if hasattr(service, "close"):
                await service.close()
        if self.name == "turnstore-postgres":
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


@pytest.fixture
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[_Opened]:
    chosen = _Opened(request.param, tmp_path)
    yield chosen
    await chosen.close()


@pytest.fixture
def service(opened: _Opened) -> Any:
    return opened.open()


def event(text: str | None, author: str = "user", ident: str | None = None, **extra: Any) -> Any:
    """An event saying `text` (no content when None), with an id and a time if given."""
    from google.adk.events.event import Event
    from google.genai import types

    fields: dict[str, Any] = {"invocation_id": "inv", "author": author, **extra}
    if text is not None:
        fields["content"] = types.Content(role=author, parts=[types.Part(text=text)])
    if ident is not None:
        fields["id"] = ident
    return Event(**fields)


def session(session_id: str, events: list[Any], user: str = "test-user", app: str = APP) -> Any:
    from google.adk.sessions.session import Session

    return Session(id=session_id, app_name=app, user_id=user, events=events, last_update_time=0)


S1 = [
    ("event-1a", "user", "The ADK is a great toolkit."),
    ("event-1b", "user", None),
    ("event-1c", "model", "I agree. The Agent Development Kit (ADK) rocks!"),
]
S2 = [("event-2a", "user", "I like to code in Python.")]


def _session(session_id: str, rows: list[Any], user: str = "test-user") -> Any:
    return session(session_id, [event(text, author, ident) for ident, author, text in rows], user)


def found_texts(response: Any) -> list[str]:
    return [memory.content.parts[0].text for memory in response.memories]


async def search(service: Any, query: str, user: str = "test-user", app: str = APP) -> Any:
    return await service.search_memory(app_name=app, user_id=user, query=query)


# --- what ADK's own memory tests assert, on every service ------------------------------------


@memories("adk-inmemory", "adk-sqlite")
async def test_a_word_finds_the_event_that_says_it(service: Any) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    await service.add_session_to_memory(_session("session-2", S2))
    found = await search(service, "Python")
    assert found_texts(found) == ["I like to code in Python."]
    assert found.memories[0].author == "user"


@memories("adk-inmemory", "adk-sqlite")
async def test_words_match_whatever_their_case(service: Any) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    assert found_texts(await search(service, "development")) == [S1[2][2]]


@memories("adk-inmemory", "adk-sqlite")
async def test_every_event_holding_a_word_is_found_and_an_event_without_text_never(
    service: Any,
) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    found = await search(service, "How about ADK?")
    assert sorted(found_texts(found)) == sorted([S1[0][2], S1[2][2]])
    assert {memory.author for memory in found.memories} == {"user", "model"}


@memories("adk-inmemory", "adk-sqlite")
@pytest.mark.parametrize("query", ["nonexistent", "", "   ", "?!"])
async def test_a_query_of_no_stored_word_finds_nothing(service: Any, query: str) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    assert (await search(service, query)).memories == []


@memories("adk-inmemory", "adk-sqlite")
async def test_a_search_sees_only_its_own_users_memories(service: Any) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    secret = [("event-3a", "user", "This is a secret.")]
    await service.add_session_to_memory(_session("session-3", secret, user="another-user"))
    assert (await search(service, "secret")).memories == []
    found = await search(service, "secret", user="another-user")
    assert found_texts(found) == ["This is a secret."]


@memories("adk-inmemory", "adk-sqlite")
async def test_a_slash_or_a_dot_in_a_name_does_not_join_two_scopes(service: Any) -> None:
    secret = session("s", [event("This is a secret.")], user="user", app="app/other-user")
    await service.add_session_to_memory(secret)
    dotted = session("s", [event("A dotted secret.")], user="a.b", app="x")
    await service.add_session_to_memory(dotted)
    assert (await search(service, "secret", user="other-user/user", app="app")).memories == []
    assert (await search(service, "secret", user="a%2Eb", app="x")).memories == []
    assert found_texts(await search(service, "secret", user="a.b", app="x")) == ["A dotted secret."]


NON_LATIN = [
    ("私の名前は太郎です", "太郎", 1),
    ("私の名前は太郎です", "天気", 0),
    ("我喜欢机器学习", "机器学习", 1),
    ("我喜欢机器学习", "天气预报", 0),
    ("太郎 works at ABC Corp", "太郎", 1),
    ("太郎 works at ABC Corp", "ABC", 1),
    ("我用Python写代码", "python", 1),
    (unicodedata.normalize("NFD", "プログラミングを学ぶ"), "プログラミング", 1),
    (unicodedata.normalize("NFD", "제 이름은 민수입니다"), "민수입니다", 1),
    ("저는 파이썬을 좋아합니다", "파이썬을", 1),
    ("Я люблю программировать", "люблю", 1),
    ("私はPythonでADKを使っています", "Python", 1),
    ("私はPythonでADKを使っています", "adk", 1),
    ("私はPythonでADKを使っています", "Java", 0),
    ("私はPythonでADKを使っています", "thon", 0),
    ("I like to code in Python.", "thon", 0),
    (unicodedata.normalize("NFD", "Café au lait"), "Café", 1),
    ("Café au lait", unicodedata.normalize("NFD", "Café"), 1),
]


@memories("adk-inmemory")
@pytest.mark.parametrize(("text", "query", "expected"), NON_LATIN)
async def test_whole_words_of_any_script_match_and_parts_of_words_do_not(
    service: Any, text: str, query: str, expected: int
) -> None:
    """ADK's SQLite service reads a run of CJK as one word (`太郎` is not found in it)."""
    await service.add_session_to_memory(session("s", [event(text)]))
    assert len((await search(service, query)).memories) == expected


@memories("adk-inmemory")
async def test_memories_holding_more_of_the_query_come_first(service: Any) -> None:
    """ADK's `SqliteMemoryService` ranks by BM25 alone; ours ranks as the in-memory one."""
    texts = ["The deploy is ready.", "Ready.", "The deploy status is ready."]
    await service.add_session_to_memory(
        session("s", [event(text, timestamp=1000.0 + n) for n, text in enumerate(texts)])
    )
    found = await search(service, "deploy status ready")
    assert found_texts(found) == [texts[2], texts[0], texts[1]]


@memories("adk-inmemory")
async def test_a_search_returns_the_ten_best_ties_in_the_order_they_were_added(
    service: Any,
) -> None:
    """The events tie in time too, and their ids sort apart from their order."""
    events = [
        event(f"note {n} about work", ident=f"event-note-{n}", timestamp=1.0) for n in range(20)
    ]
    events.append(event("the backlog note about work", ident="event-backlog", timestamp=1.0))
    await service.add_session_to_memory(session("s", events))
    found = await search(service, "work backlog note")
    expected = ["the backlog note about work"] + [f"note {n} about work" for n in range(9)]
    assert found_texts(found) == expected


@memories("adk-inmemory", "adk-sqlite")
@pytest.mark.parametrize("how", ["session", "events"])
async def test_a_memory_does_not_follow_a_later_change_of_the_callers_event(
    service: Any, how: str
) -> None:
    said = event("I prefer jasmine tea.")
    if how == "session":
        await service.add_session_to_memory(session("s", [said]))
    else:
        await service.add_events_to_memory(app_name=APP, user_id="test-user", events=[said])
    said.author = "changed"
    said.content.parts[0].text = "I prefer coffee."
    found = await search(service, "jasmine")
    assert found_texts(found) == ["I prefer jasmine tea."]
    assert found.memories[0].author == "user"


@memories("adk-inmemory", "adk-sqlite")
async def test_changing_a_found_memory_changes_nothing_stored(service: Any) -> None:
    said = event("I prefer jasmine tea.")
    kept = session("s", [said])
    await service.add_session_to_memory(kept)
    (await search(service, "jasmine")).memories[0].content.parts.clear()
    assert found_texts(await search(service, "jasmine")) == ["I prefer jasmine tea."]
    assert kept.events[0].content.parts[0].text == "I prefer jasmine tea."


@memories("adk-inmemory", "adk-sqlite")
async def test_events_added_later_are_found_and_an_id_added_twice_is_one_memory(
    service: Any,
) -> None:
    await service.add_session_to_memory(_session("session-1", S1))
    await service.add_session_to_memory(_session("session-1", S1))
    new = event("A new fact.", ident="event-1d")
    await service.add_events_to_memory(
        app_name=APP, user_id="test-user", events=[new], session_id="session-1"
    )
    assert found_texts(await search(service, "fact")) == ["A new fact."]
    assert len((await search(service, "ADK")).memories) == 2


@memories("adk-sqlite")
async def test_an_event_added_again_with_new_text_is_found_by_its_new_text(service: Any) -> None:
    """ADK's in-memory service keeps the first text of an event id; its SQLite service, and
    ours, the latest (an event edited and added again is remembered as it is now)."""
    await service.add_session_to_memory(_session("session-1", S1))
    again = event("Updated duplicate text.", ident="event-1a")
    await service.add_events_to_memory(
        app_name=APP, user_id="test-user", events=[again], session_id="session-1"
    )
    assert found_texts(await search(service, "Updated")) == ["Updated duplicate text."]
    assert (await search(service, "toolkit")).memories == []


@memories("adk-inmemory")
async def test_a_deleted_memory_is_not_found_nor_added_back_with_its_session(
    service: Any,
) -> None:
    """ADK's SQLite service cannot delete a memory (`NotImplementedError`)."""
    await service.add_session_to_memory(_session("session-1", S1))
    [found] = (await search(service, "toolkit")).memories
    await service.delete_memory(app_name=APP, user_id="test-user", memory_id=found.id)
    assert (await search(service, "toolkit")).memories == []
    await service.add_session_to_memory(_session("session-1", S1))
    assert (await search(service, "toolkit")).memories == []
    assert len((await search(service, "ADK")).memories) == 1


@memories("adk-sqlite")
async def test_memories_outlive_the_service_that_added_them(service: Any, opened: _Opened) -> None:
    await service.add_session_to_memory(session("session-1", [event("Remember me")]))
    again = opened.open()
    found = await search(again, "Remember")
    assert found_texts(found) == ["Remember me"]
    assert found.memories[0].custom_metadata["session_id"] == "session-1"


@memories("adk-inmemory", "adk-sqlite")
async def test_concurrent_adds_and_searches_all_succeed(service: Any) -> None:
    for n in range(20):
        await service.add_session_to_memory(session(f"s{n}", [event(f"fact number {n}")]))

    async def add(n: int) -> None:
        await service.add_session_to_memory(session(f"w{n}", [event(f"new fact token{n}")]))

    async def look() -> int:
        return len((await search(service, "fact")).memories)

    results = await asyncio.gather(*(add(n) for n in range(30)), *(look() for _ in range(30)))
    assert all(isinstance(found, int) and found >= 1 for found in results[30:])
    for n in range(30):
        assert found_texts(await search(service, f"token{n}")) == [f"new fact token{n}"]


# --- turnstore's own: explicit memories, the store underneath, bad input ---------------------


@memories()
async def test_an_explicit_memory_is_found_with_its_id_and_metadata_then_deleted(
    service: Any,
) -> None:
    from google.adk.memory.memory_entry import MemoryEntry
    from google.genai import types

    entry = MemoryEntry(
        id="pref-1",
        content=types.Content(role="user", parts=[types.Part(text="Ada prefers green tea")]),
        author="profile",
        timestamp="2026-12-07T10:00:00",
        custom_metadata={"source": "onboarding"},
    )
    await service.add_memory(app_name=APP, user_id="ada", memories=[entry])
    [found] = (await search(service, "tea", user="ada")).memories
    assert (found.id, found.author, found.timestamp) == ("pref-1", "profile", entry.timestamp)
    assert found.custom_metadata == {"source": "onboarding"}
    assert found.content == entry.content
    await service.delete_memory(app_name=APP, user_id="ada", memory_id="pref-1")
    assert (await search(service, "tea", user="ada")).memories == []


@memories()
async def test_memories_are_owned_by_their_user_and_listed_in_the_catalog(service: Any) -> None:
    from turnstore.records.memory import MemoryCatalogRequest

    await service.add_session_to_memory(_session("session-1", S1))
    await service.add_session_to_memory(_session("session-3", S2, user="another-user"))
    page = await service.store.memory.catalog(MemoryCatalogRequest(owner_id="test-user"))
    assert [(one.namespace, one.items) for one in page.namespaces] == [
        (("adk", APP, "test-user", "session-1"), 2)
    ]


@memories()
async def test_adding_a_session_again_writes_only_what_changed(service: Any) -> None:
    from turnstore.records.memory import MemoryCall, MemoryGet

    same = _session("session-1", S1)
    await service.add_session_to_memory(same)
    where = (MemoryGet(("adk", APP, "test-user", "session-1"), "event-1a"),)
    [before] = (await service.store.memory.run(MemoryCall(gets=where))).gets
    await asyncio.sleep(0.01)
    await service.add_session_to_memory(same)
    [after] = (await service.store.memory.run(MemoryCall(gets=where))).gets
    assert after is not None
    assert before is not None
    assert after.updated_at_ms == before.updated_at_ms


@memories()
async def test_a_long_query_is_searched_by_its_first_words(service: Any) -> None:
    await service.add_session_to_memory(session("s", [event("zebra crossing")]))
    words = " ".join(f"w{n}" for n in range(40))
    assert found_texts(await search(service, f"zebra {words}")) == ["zebra crossing"]
    assert (await search(service, f"{words} zebra")).memories == []


@memories()
async def test_bad_names_are_refused_with_a_typed_error(service: Any) -> None:
    from turnstore.errors import InvalidInput

    with pytest.raises(InvalidInput):
        await search(service, "x", user="")
    with pytest.raises(InvalidInput):
        await service.search_memory(app_name=APP, user_id="u", query=None)
    with pytest.raises(InvalidInput):
        await service.add_session_to_memory(session("s", [event("x")], user="u" * 300))
    assert (await search(service, "x", user="u")).memories == []


# --- the same scripted calls on all three ----------------------------------------------------

VOCABULARY = ["alpha", "beta", "gamma", "delta", "tea", "coffee", "budget", "travel", "window"]


def _script(seed: int) -> tuple[list[Any], list[tuple[str, str]]]:
    """Sessions of two users (each user at most ten events with text, so no service's cut
    applies) and the searches to run after adding them."""
    rng = random.Random(seed)
    sessions = []
    moment = 1000.0
    for user in ("ada", "bob"):
        for n in range(3):
            events = []
            for _ in range(rng.randint(1, 3)):
                moment += 1
                words = rng.sample(VOCABULARY, rng.randint(1, 4))
                text = " ".join(words).capitalize() + "."
                events.append(event(text, author=rng.choice(["user", "model"]), timestamp=moment))
            sessions.append(session(f"{user}-{n}", events, user=user))
    queries = [
        (user, " ".join(rng.sample(VOCABULARY, rng.randint(1, 3))))
        for user in ("ada", "bob")
        for _ in range(6)
    ]
    return sessions, queries


@pytest.mark.parametrize("backend", TURNSTORE)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("path", ["scan", "index"])
async def test_the_same_calls_find_the_same_memories_as_adks_services(
    backend: str, seed: int, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is found: the same events as both ADK services (they agree: a whole-word match of
    any query word); in the same order as `InMemoryMemoryService` (most words, then oldest);
    whether the user's memories are read whole (few) or through the text index (many)."""
    if path == "index":
        from turnstore.integrations import adk_memory

        monkeypatch.setattr(adk_memory, "SCANNED", 0)
    sessions, queries = _script(seed)
    sides = [_Opened(name, tmp_path) for name in ("adk-inmemory", "adk-sqlite", backend)]
    try:
        services = [side.open() for side in sides]
        for chosen in services:
            for one in sessions:
                await chosen.add_session_to_memory(one)
        for user, query in queries:
            inmemory, sqlite, ours = [
                [
                    (m.author, m.content.parts[0].text)
                    for m in (await search(s, query, user)).memories
                ]
                for s in services
            ]
            assert sorted(inmemory) == sorted(sqlite), query  # ADK's two agree here
            assert ours == inmemory, query
    finally:
        for side in sides:
            await side.close()


@memories("adk-sqlite")
async def test_a_thought_is_not_remembered_and_the_rest_of_its_event_is(service: Any) -> None:
    """ADK's in-memory service searches thoughts too; its SQLite service, and ours, do not."""
    from google.adk.events.event import Event
    from google.genai import types

    parts = [types.Part(text="a hidden plan", thought=True), types.Part(text="Hello there")]
    said = Event(invocation_id="i", author="model", content=types.Content(parts=parts))
    await service.add_session_to_memory(session("s", [said]))
    assert (await search(service, "plan")).memories == []
    assert len((await search(service, "hello")).memories) == 1
