"""`TurnstoreSessionRepository` beyond what Strands' own suites check, on both backends.

- a real Strands `Agent` (on a scripted model, no network) keeps its conversation, state and
  tool calls across a reopened store;
- its session is in turnstore's catalog with its kind and owner, read as a conversation,
  found by search, counted (model calls, tool calls, tokens) and erased by `delete_sessions`;
- a redacted message reads back whole through Strands, and shows only its redaction to
  turnstore's readers: the conversation view and the search index;
- bad input gets a typed error and changes nothing; a session of two agents, or one edited
  outside the repository, still answers as Strands' own repositories do;
- writers in several threads on one session lose no message.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("strands")

from _strands_model import ScriptedModel, weather
from _strands_model import text_reply as _text
from strands import Agent
from strands.session.repository_session_manager import RepositorySessionManager
from strands.types.exceptions import SessionException
from strands.types.session import (
    Session,
    SessionAgent,
    SessionMessage,
    SessionType,
)

import turnstore
from turnstore import BlockingStore, InvalidInput, SessionPageRequest
from turnstore.errors import NotJsonValue
from turnstore.integrations.strands import TurnstoreSessionRepository
from turnstore.records import SearchRequest
from turnstore.transfer import export_jsonl, import_jsonl

pytestmark = pytest.mark.peers


def _agent(repository: TurnstoreSessionRepository, *replies: list[dict[str, Any]]) -> Agent:
    manager = RepositorySessionManager(session_id="chat", session_repository=repository)
    return Agent(
        agent_id="helper",
        model=ScriptedModel(*replies),
        tools=[weather],
        session_manager=manager,
        callback_handler=None,
    )


@pytest.fixture
def store(store_url: str) -> Iterator[BlockingStore]:
    with turnstore.open_blocking(store_url, index_in_background=False) as opened:
        yield opened


@pytest.fixture
def repository(store: BlockingStore) -> Iterator[TurnstoreSessionRepository]:
    """A repository borrowing the test's store, owning what it creates as `ada`."""
    with TurnstoreSessionRepository(store, owner_id="ada") as opened:
        yield opened


def _message(message_id: int, text: str, role: str = "user") -> SessionMessage:
    return SessionMessage(
        message={"role": role, "content": [{"text": text}]}, message_id=message_id
    )


def _session(repository: TurnstoreSessionRepository, session_id: str = "s", *agents: str) -> None:
    repository.create_session(Session(session_id=session_id, session_type=SessionType.AGENT))
    for agent_id in agents:
        repository.create_agent(session_id, SessionAgent(agent_id, {}, {}))


def test_an_agent_resumes_its_conversation_from_a_reopened_store(store_url: str) -> None:
    """Messages, agent state and a tool call survive the store being closed and reopened."""
    asked = [{"toolUse": {"name": "weather", "toolUseId": "t1", "input": {"city": "Oslo"}}}]
    with TurnstoreSessionRepository.from_url(store_url, owner_id="ada") as repository:
        agent = _agent(repository, asked, _text("Sunny in Oslo."))
        agent.state.set("city", "Oslo")
        agent("What is the weather in Oslo?")
    with TurnstoreSessionRepository.from_url(store_url) as reopened:
        agent = _agent(reopened, _text("You asked about Oslo."))
        assert agent.state.get("city") == "Oslo"
        assert [message["role"] for message in agent.messages] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert agent.messages[2]["content"][0]["toolResult"]["content"] == [
            {"text": "sunny in Oslo"}
        ]
        agent("Which city did I ask about?")
        stored = reopened.list_messages("chat", "helper")
        assert [message.message_id for message in stored] == list(range(6))
        assert stored[-1].message["content"] == [{"text": "You asked about Oslo."}]


def test_the_session_is_turnstores_in_catalog_conversation_search_and_delete(
    store: BlockingStore,
) -> None:
    """Kind, owner, first message, roles, search hits and figures, as the CLI reads them."""
    repository = TurnstoreSessionRepository(store, owner_id="ada")
    asked = [{"toolUse": {"name": "weather", "toolUseId": "t1", "input": {"city": "Lima"}}}]
    _agent(repository, asked, _text("Lima is sunny.")).__call__("Weather in Lima please")
    repository.close()  # borrowed: the store stays open
    (summary,) = store.list_sessions_page(SessionPageRequest(limit=10, owner_id="ada")).sessions
    assert (summary.session_id, summary.kind) == ("strands/chat", "strands")
    assert summary.first_user_message == "Weather in Lima please"
    page = store.conversation("strands/chat")
    assert page is not None
    ends = [page.messages[0], page.messages[-1]]
    assert [(message.role, message.text) for message in ends] == [
        ("user", "Weather in Lima please"),
        ("assistant", "Lima is sunny."),
    ]
    # The call and its result are kept as Strands wrote them (the reader shows them as tool
    # calls once it reads the Converse shape: see docs/how-to/strands.md).
    assert page.messages[1].item["content"][0]["toolUse"]["name"] == "weather"
    assert page.messages[2].item["content"][0]["toolResult"]["toolUseId"] == "t1"
    # The tool's result and the answer; the tool call's arguments too, by its city.
    hits = store.search(SearchRequest(query="sunny", kind="strands")).hits
    assert sorted((hit.session_id, hit.item) for hit in hits) == [
        ("strands/chat", 2),
        ("strands/chat", 3),
    ]
    assert [hit.item for hit in store.search(SearchRequest(query="Lima")).hits] != []
    # Not words of the conversation: Strands' tracking ids and tool use ids, the agent's id,
    # the message times (`KIND.unsearched`).
    first = page.messages[0].item
    for unsaid in (first["tracking_id"], "t1", "helper", first["strands"]["created_at"][:10]):
        assert store.search(SearchRequest(query=f'"{unsaid}"')).hits == [], unsaid
    stats = store.session_summary("strands/chat").execution_stats  # type: ignore[union-attr]
    assert (stats.run_count, stats.model_calls, stats.tool_calls) == (1, 2, 1)
    assert stats.usage.total_tokens == 30
    assert store.delete_sessions(["strands/chat"])
    with TurnstoreSessionRepository(store) as again:
        assert again.read_session("chat") is None
        assert again.read_agent("chat", "helper") is None


def test_a_redacted_message_reads_whole_through_strands_and_redacted_elsewhere(
    store: BlockingStore,
    repository: TurnstoreSessionRepository,
) -> None:
    """Strands gets the original and its redaction; the conversation and search only the
    redaction, and the created time is kept."""
    _session(repository, "s", "a")
    for message_id, text in enumerate(("first words", "my card is 4111", "later words")):
        repository.create_message("s", "a", _message(message_id, text))
    secret = repository.read_message("s", "a", 1)
    assert secret is not None
    secret.redact_message = {"role": "user", "content": [{"text": "[redacted]"}]}
    secret.created_at = "changed"
    repository.update_message("s", "a", secret)
    read = repository.read_message("s", "a", 1)
    assert read is not None
    assert read.created_at != "changed"
    assert read.message["content"] == [{"text": "my card is 4111"}]
    assert read.to_message()["content"] == [{"text": "[redacted]"}]
    assert [m.to_message()["content"][0]["text"] for m in repository.list_messages("s", "a")] == [
        "first words",
        "[redacted]",
        "later words",
    ]
    page = store.conversation("strands/s")
    assert page is not None
    assert [m.text for m in page.messages][1] == "[redacted]"
    assert store.search(SearchRequest(query="4111")).hits == []
    assert len(store.search(SearchRequest(query="later")).hits) == 1


def _unchanged(store: BlockingStore) -> tuple[Any, ...]:
    window = store.context_window("strands/s", None, None)
    return window.sequence, list(window.items), store.load_state_scope("strands/s")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda r: r.create_session(Session("s", SessionType.AGENT)), SessionException),
        (lambda r: r.create_session(Session("", SessionType.AGENT)), InvalidInput),
        (lambda r: r.create_agent("s", SessionAgent("a", {}, {})), SessionException),
        (lambda r: r.create_agent("nobody", SessionAgent("b", {}, {})), SessionException),
        (lambda r: r.create_agent("s", SessionAgent("a\x00b", {}, {})), InvalidInput),
        (lambda r: r.create_message("s", "a", _message(0, "again")), SessionException),
        (lambda r: r.create_message("s", "ghost", _message(5, "hi")), SessionException),
        (lambda r: r.create_message("s", "a", _message(-1, "hi")), InvalidInput),
        (lambda r: r.create_message("s", "a", _message(True, "hi")), InvalidInput),  # type: ignore[arg-type]
        (
            lambda r: r.create_message(
                "s", "a", SessionMessage({"role": "user", "content": [{"x": {1, 2}}]}, 9)
            ),
            NotJsonValue,
        ),
        (lambda r: r.update_message("s", "a", _message(7, "never stored")), SessionException),
        (lambda r: r.update_agent("s", SessionAgent("ghost", {}, {})), SessionException),
        (lambda r: r.update_agent("s", SessionAgent("a", {"x": float("nan")}, {})), InvalidInput),
        (lambda r: r.list_messages("s", "a", offset=-1), InvalidInput),
        (lambda r: r.read_message("s", "a", "0"), InvalidInput),
    ],
    ids=[
        "session exists",
        "blank session id",
        "agent exists",
        "no such session",
        "NUL in agent id",
        "message id taken",
        "no such agent",
        "negative message id",
        "bool message id",
        "not JSON",
        "update of no message",
        "update of no agent",
        "NaN in agent state",
        "negative offset",
        "text message id",
    ],
)
def test_bad_input_gets_a_typed_error_and_changes_nothing(
    store: BlockingStore, repository: TurnstoreSessionRepository, call: Any, error: Any
) -> None:
    """Each refused call raises its type (Strands' own for its contract) and writes nothing."""
    _session(repository, "s", "a")
    repository.create_message("s", "a", _message(0, "hello"))
    before = _unchanged(store)
    with pytest.raises(error):
        call(repository)
    assert _unchanged(store) == before


def test_two_agents_in_one_session_page_as_strands_does(
    store: BlockingStore, repository: TurnstoreSessionRepository
) -> None:
    """Interleaved agents, ids out of order: each agent's messages by id, paged by offset."""
    _session(repository, "s", "a", "b")
    for message_id in (0, 1, 2):
        repository.create_message("s", "a", _message(message_id, f"a{message_id}"))
        repository.create_message("s", "b", _message(message_id, f"b{message_id}"))
    repository.create_message("s", "a", _message(10, "a10"))
    repository.create_message("s", "a", _message(5, "a5"))

    def texts(agent: str, **page: Any) -> list[str]:
        listed = repository.list_messages("s", agent, **page)
        return [m.message["content"][0]["text"] for m in listed]

    assert texts("a") == ["a0", "a1", "a2", "a5", "a10"]
    assert texts("a", offset=1, limit=2) == ["a1", "a2"]
    assert texts("b", offset=2) == ["b2"]
    assert texts("b", limit=0) == []
    assert texts("nobody") == []
    assert repository.list_messages("none", "a") == []
    assert repository.read_message("s", "a", 5).message_id == 5  # type: ignore[union-attr]
    assert repository.read_message("s", "b", 5) is None


def test_an_edit_outside_the_repository_is_read_by_a_scan(
    store: BlockingStore, repository: TurnstoreSessionRepository
) -> None:
    """Messages popped through the store are gone for Strands too; new ones follow."""
    _session(repository, "s", "a")
    for message_id in range(4):
        repository.create_message("s", "a", _message(message_id, f"m{message_id}"))
    store.pop_context("strands/s", 2)
    repository.create_message("s", "a", _message(4, "m4"))
    listed = repository.list_messages("s", "a", offset=1)
    assert [m.message_id for m in listed] == [1, 4]
    assert repository.read_message("s", "a", 3) is None


def test_writers_in_threads_lose_no_message(store_url: str) -> None:
    """Four threads append to one session at once, two through one shared repository and two
    through stores of their own: every message is stored once, in each agent's order."""
    with TurnstoreSessionRepository(store_url) as shared:
        _session(shared, "s", *(f"agent{n}" for n in range(4)))

        def write(agent: str) -> None:
            def appends(repository: TurnstoreSessionRepository) -> None:
                for message_id in range(10):
                    message = _message(message_id, f"{agent} {message_id}")
                    repository.create_message("s", agent, message)

            if agent in ("agent0", "agent1"):
                appends(shared)
                return
            with TurnstoreSessionRepository(store_url) as own:
                appends(own)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, [f"agent{n}" for n in range(4)]))
        for n in range(4):
            listed = shared.list_messages("s", f"agent{n}")
            assert [m.message_id for m in listed] == list(range(10))


def test_agents_added_while_another_agent_writes_are_all_kept(store_url: str) -> None:
    """Agents created by other repositories while one agent appends stay in the session: a
    write that lost a race re-reads the record after the context, never a stale one."""
    with TurnstoreSessionRepository(store_url) as shared:
        _session(shared, "s", "writer")

        def write() -> None:
            for message_id in range(15):
                shared.create_message("s", "writer", _message(message_id, f"w {message_id}"))

        def add(n: int) -> None:
            with TurnstoreSessionRepository(store_url) as own:
                own.create_agent("s", SessionAgent(f"late{n}", {}, {}))

        with ThreadPoolExecutor(4) as pool:
            done = [pool.submit(write), *(pool.submit(add, n) for n in range(3))]
            for future in done:
                future.result()
        for n in range(3):
            shared.create_message("s", f"late{n}", _message(0, "hello"))  # refused if lost
        assert [m.message_id for m in shared.list_messages("s", "writer")] == list(range(15))


def test_multi_agent_state_is_stored_in_the_session(
    store: BlockingStore, repository: TurnstoreSessionRepository
) -> None:
    """Create, read and update a multi-agent's state; missing ones as Strands says."""

    class Graph:
        id = "graph"

        def __init__(self, state: dict[str, Any]) -> None:
            self.state = state

        def serialize_state(self) -> dict[str, Any]:
            return self.state

    with pytest.raises(SessionException):
        repository.create_multi_agent("s", Graph({}))  # type: ignore[arg-type]
    _session(repository, "s")
    assert repository.read_multi_agent("s", "graph") is None
    with pytest.raises(SessionException):
        repository.update_multi_agent("s", Graph({}))  # type: ignore[arg-type]
    repository.create_multi_agent("s", Graph({"step": 1}))  # type: ignore[arg-type]
    repository.update_multi_agent("s", Graph({"step": 2}))  # type: ignore[arg-type]
    assert repository.read_multi_agent("s", "graph") == {"step": 2}


def test_an_export_carries_the_session_whole(
    store: BlockingStore, repository: TurnstoreSessionRepository, tmp_path: Any
) -> None:
    """Exported and imported into another store, a session reads the same through Strands:
    its agent, its messages, a redacted one's original, its owner."""
    _session(repository, "s", "a")
    repository.create_message("s", "a", _message(0, "keep me"))
    repository.create_message("s", "a", _message(1, "hide me"))
    hidden = repository.read_message("s", "a", 1)
    assert hidden is not None
    hidden.redact_message = {"role": "user", "content": [{"text": "[hidden]"}]}
    repository.update_message("s", "a", hidden)
    exported = tmp_path / "strands.jsonl"
    with exported.open("wb") as out:
        export_jsonl(store, out)
    with turnstore.open_blocking(tmp_path / "other.sqlite3") as other:
        with exported.open("rb") as source:
            import_jsonl(other, source)
        with TurnstoreSessionRepository(other) as moved:
            assert moved.read_session("s") == repository.read_session("s")
            assert moved.read_agent("s", "a") == repository.read_agent("s", "a")
            assert moved.list_messages("s", "a") == repository.list_messages("s", "a")
            moved.create_message("s", "a", _message(2, "after the move"))
        summary = other.session_summary("strands/s")
        assert summary is not None
        assert (summary.kind, summary.session_context.owner_id) == ("strands", "ada")
