"""`TurnstoreSessionRepository` remembers the records it wrote, on both backends.

- a turn of a real Strands `Agent` (four messages, its agent's updates) reads nothing from
  the store once the repository knows the session: each write checks what it remembers under
  the session's lock (the sequence, and the incarnation by `expected_state`) instead of
  reading it first;
- a session deleted and created again by another repository, up to the same sequence, is
  never written with the remembered record of its predecessor: each write expects the
  session's incarnation id (`strands-incarnation`), drawn at creation;
- an agent keeps its first `created_at` whoever updates it; an agent of a session created
  again takes its own, not the one a repository remembers of its predecessor's agent, and an
  update of an agent the new session does not have is refused, writing nothing;
- an agent another repository added is found, not refused from a remembered record;
- a session written before incarnations gets one at its next write.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("strands")

from _strands_model import ScriptedModel, weather
from _strands_model import text_reply as _text
from strands import Agent
from strands.session.repository_session_manager import RepositorySessionManager
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

import turnstore
from turnstore import BlockingStore
from turnstore.integrations.strands import TurnstoreSessionRepository

pytestmark = pytest.mark.peers

READS = {"load_state", "load_states", "load_state_scope", "context_window", "context_tail"}


class Counted:
    """A store whose calls are counted by method name, passed on unchanged."""

    def __init__(self, store: BlockingStore) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return call


@pytest.fixture
def store(store_url: str) -> Iterator[BlockingStore]:
    with turnstore.open_blocking(store_url, index_in_background=False) as opened:
        yield opened


def _repository(store: BlockingStore) -> TurnstoreSessionRepository:
    return TurnstoreSessionRepository(store, owner_id="ada")


def _message(message_id: int, text: str) -> SessionMessage:
    return SessionMessage(
        message={"role": "user", "content": [{"text": text}]}, message_id=message_id
    )


def _tool_call(city: str) -> list[dict[str, Any]]:
    return [{"toolUse": {"name": "weather", "toolUseId": f"t-{city}", "input": {"city": city}}}]


def test_a_turn_of_writes_reads_nothing_once_the_session_is_known(store: BlockingStore) -> None:
    repository = _repository(store)
    counted = Counted(store)
    repository.store = counted  # type: ignore[assignment]
    replies = [_tool_call("Oslo"), _text("Cold."), _tool_call("Rome"), _text("Warm.")]
    manager = RepositorySessionManager(session_id="chat", session_repository=repository)
    agent = Agent(
        agent_id="helper",
        model=ScriptedModel(*replies),
        tools=[weather],
        session_manager=manager,
        callback_handler=None,
    )
    agent("Weather in Oslo?")
    counted.calls.clear()
    agent("And in Rome?")
    assert counted.calls["append_context"] == 4  # the turn's four messages
    assert counted.calls["save_state"] >= 1  # the agent's record, as Strands updates it
    assert not READS & counted.calls.keys(), counted.calls
    messages = repository.list_messages("chat", "helper")
    assert [m.message["role"] for m in messages] == ["user", "assistant", "user", "assistant"] * 2
    assert repository.read_agent("chat", "helper") is not None


def test_a_session_created_again_is_not_written_with_its_predecessors_record(
    store: BlockingStore,
) -> None:
    first, second = _repository(store), _repository(store)
    first.create_session(Session("s", SessionType.AGENT, created_at="2026-01-01T00:00:00"))
    first.create_agent("s", SessionAgent("a", {}, {}))
    first.create_message("s", "a", _message(0, "old"))
    assert store.delete_sessions(["strands/s"]) is True
    successor = Session("s", SessionType.AGENT, created_at="2026-02-02T00:00:00")
    second.create_session(successor)
    second.create_agent("s", SessionAgent("a", {}, {}))
    second.create_message("s", "a", _message(0, "new"))  # the sequence `first` remembers
    first.create_message("s", "a", _message(1, "after"))
    assert second.read_session("s") == successor
    texts = [m.message["content"][0]["text"] for m in second.list_messages("s", "a")]
    assert texts == ["new", "after"]


def test_an_agent_updated_elsewhere_keeps_its_first_created_at(
    store: BlockingStore,
) -> None:
    first, second = _repository(store), _repository(store)
    first.create_session(Session("s", SessionType.AGENT))
    agent = SessionAgent("a", {"n": 0}, {}, created_at="2026-01-01T00:00:00")
    first.create_agent("s", agent)
    second.update_agent("s", SessionAgent("a", {"n": 1}, {}, created_at="2026-03-03T00:00:00"))
    first.update_agent("s", SessionAgent("a", {"n": 2}, {}, created_at="2026-04-04T00:00:00"))
    stored = second.read_agent("s", "a")
    assert stored is not None
    assert (stored.state, stored.created_at) == ({"n": 2}, "2026-01-01T00:00:00")


def test_an_agent_added_elsewhere_is_found_not_refused(store: BlockingStore) -> None:
    first, second = _repository(store), _repository(store)
    first.create_session(Session("s", SessionType.AGENT))
    first.create_agent("s", SessionAgent("a", {}, {}))
    second.create_agent("s", SessionAgent("b", {}, {}))
    first.create_message("s", "b", _message(0, "from b"))  # `first` remembers no agent b
    assert [m.message_id for m in second.list_messages("s", "b")] == [0]
    with pytest.raises(Exception, match="already exists"):
        first.create_agent("s", SessionAgent("b", {}, {}))


def test_an_agent_of_a_session_created_again_keeps_its_own_created_at(
    store: BlockingStore,
) -> None:
    first, second = _repository(store), _repository(store)
    first.create_session(Session("s", SessionType.AGENT))
    first.create_agent("s", SessionAgent("a", {}, {}, created_at="2026-01-01T00:00:00"))
    assert store.delete_sessions(["strands/s"]) is True
    second.create_session(Session("s", SessionType.AGENT))
    second.create_agent("s", SessionAgent("a", {}, {}, created_at="2026-02-02T00:00:00"))
    first.create_message("s", "a", _message(0, "hello"))  # `first` reads the new session
    first.update_agent("s", SessionAgent("a", {"n": 1}, {}, created_at="2026-03-03T00:00:00"))
    stored = second.read_agent("s", "a")
    assert stored is not None
    assert (stored.state, stored.created_at) == ({"n": 1}, "2026-02-02T00:00:00")


def test_an_update_of_an_agent_after_its_session_was_created_again_reads_it_again(
    store: BlockingStore,
) -> None:
    """`first` remembers both records of the old session when it updates the agent; the
    write expects the old incarnation, is refused, and is made again from what is stored."""
    first, second = _repository(store), _repository(store)
    first.create_session(Session("s", SessionType.AGENT))
    first.create_agent("s", SessionAgent("a", {}, {}, created_at="2026-01-01T00:00:00"))
    assert store.delete_sessions(["strands/s"]) is True
    second.create_session(Session("s", SessionType.AGENT))
    with pytest.raises(Exception, match="does not exist"):
        first.update_agent("s", SessionAgent("a", {"n": 1}, {}))
    assert store.load_state_scope("strands/s").keys() == {
        "strands-session",
        "strands-incarnation",
    }
    second.create_agent("s", SessionAgent("a", {}, {}, created_at="2026-02-02T00:00:00"))
    first.update_agent("s", SessionAgent("a", {"n": 2}, {}, created_at="2026-03-03T00:00:00"))
    stored = second.read_agent("s", "a")
    assert stored is not None
    assert (stored.state, stored.created_at) == ({"n": 2}, "2026-02-02T00:00:00")


def test_a_session_written_before_incarnations_gets_one_at_its_next_write(
    store: BlockingStore,
) -> None:
    """A record without an incarnation (as repositories before it wrote them) is read, not
    remembered, until a write gives the session one."""
    _repository(store).create_session(Session("s", SessionType.AGENT))
    record = store.load_state("strands/s", "strands-session")
    del record["incarnation"]
    assert store.delete_sessions(["strands/s"]) is True
    store.append_context("strands/s", [], None, 0, [("strands/s", "strands-session", record)])
    repository = _repository(store)
    assert repository.read_session("s") is not None
    repository.create_agent("s", SessionAgent("a", {}, {}))
    repository.create_message("s", "a", _message(0, "hello"))
    stored = store.load_state_scope("strands/s")
    assert stored["strands-incarnation"] == stored["strands-session"]["incarnation"]
    assert [m.message_id for m in _repository(store).list_messages("s", "a")] == [0]
