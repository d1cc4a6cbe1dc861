"""Each framework's sessions read back as conversations, compared with the framework's own read.

On both backends: a LangGraph thread (its messages, a window of them, its next nodes, its run
count, its search and erasure), an OpenAI Agents SDK session and an ADK session, each written
by the framework itself, read through `store.conversation` as what the framework stored.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from _langgraph_graph import build, config, user

import turnstore
from turnstore.records import ConversationRequest, SearchRequest

pytestmark = pytest.mark.peers


def _roles(page: Any) -> list[str]:
    return [message.role for message in page.messages]


def test_a_langgraph_thread_reads_as_the_messages_langgraph_holds(store_url: str) -> None:
    """The newest checkpoint's messages, as LangGraph's `get_state` reads them, by window."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    with turnstore.open_blocking(store_url) as store:
        graph = build(TurnstoreSaver(store))
        for turn in range(3):
            graph.invoke(user("t", turn, f"question {turn} about walruses"), config("t"))
        theirs = graph.get_state(config("t")).values["messages"]
        page = store.conversation("langgraph/t", ConversationRequest(limit=100))
        assert page is not None
        assert page.kind == "langgraph"
        assert [message.item for message in page.messages] == [m.model_dump() for m in theirs]
        assert _roles(page)[:4] == ["user", "assistant", "tool", "assistant"]
        call = page.messages[1].tool_calls[0]
        assert (call.name, call.arguments, call.call_id) == (
            "lookup",
            '{"q": "question 0 about walruses"}',
            theirs[1].tool_calls[0]["id"],
        )
        assert page.messages[2].tool_call_id == theirs[2].tool_call_id
        assert (page.total, page.next_before) == (12, None)
        point = page.langgraph
        assert point is not None
        assert (
            point.checkpoint_id
            == graph.get_state(config("t")).config["configurable"]["checkpoint_id"]
        )
        assert (point.next, point.source, point.channel) == ([], "loop", "messages")

        window = store.conversation("langgraph/t", ConversationRequest(limit=5))
        assert window is not None
        assert [m.item for m in window.messages] == [m.model_dump() for m in theirs[-5:]]
        assert (window.next_before, [m.index for m in window.messages]) == (7, [7, 8, 9, 10, 11])
        older = store.conversation("langgraph/t", ConversationRequest(before=7, limit=5))
        assert older is not None
        assert [m.index for m in older.messages] == [2, 3, 4, 5, 6]

        store.search(SearchRequest(query="walruses"))  # the indexer derives the figures
        summary = store.session_summary("langgraph/t")
        assert summary is not None
        assert (summary.execution_stats.run_count, summary.kind) == (3, "langgraph")
        assert summary.first_user_message == "question 0 about walruses"
        # Two AI messages a turn, one asking for a tool; the scripted model reports no tokens.
        stats = summary.execution_stats
        assert (stats.model_calls, stats.tool_calls, stats.failed_tool_calls) == (6, 3, 0)
        assert summary.measured == ["runs", "model_calls", "tool_calls", "failed_tool_calls"]
        assert summary.waiting == []

        # A run's input checkpoint put again (a retry) is not another run.
        saver = TurnstoreSaver(store)
        (first,) = [c for c in saver.list(config("t")) if c.metadata["source"] == "input"][-1:]
        saver.put(first.parent_config or config("t"), first.checkpoint, first.metadata, {})
        again = store.session_summary("langgraph/t")
        assert again is not None
        assert again.execution_stats.run_count == 3


def test_a_compressed_message_is_inflated_only_to_the_reads_bound(store_url: str) -> None:
    """A message stored compressed that inflates past `max_value_bytes` is a placeholder."""
    from turnstore.integrations.langgraph import TurnstoreSaver
    from turnstore.rules.langgraph_values import OPAQUE

    with turnstore.open_blocking(store_url) as store:
        graph = build(TurnstoreSaver(store))
        graph.invoke(user("z", 0, "walrus " * 100_000), config("z"))
        whole = store.conversation("langgraph/z", ConversationRequest(limit=10))
        assert whole is not None
        assert whole.messages[0].item["content"] == "walrus " * 100_000
        bounded = ConversationRequest(limit=10, max_value_bytes=64 * 1024)
        page = store.conversation("langgraph/z", bounded)
        assert page is not None
        placeholders = [m.item for m in page.messages if OPAQUE in m.item]
        assert placeholders
        assert all(item["inflates_past"] == 64 * 1024 for item in placeholders)
        assert all(item["bytes"] < 64 * 1024 for item in placeholders)


class _Asked(TypedDict):
    answer: str


def test_an_interrupted_thread_names_the_node_it_waits_in(store_url: str) -> None:
    """`next` is LangGraph's own: the node an `interrupt` stopped, then nothing once resumed."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from turnstore.integrations.langgraph import TurnstoreSaver

    def ask(state: _Asked) -> dict[str, Any]:
        return {"answer": interrupt("which one?")}

    with turnstore.open_blocking(store_url) as store:
        builder = StateGraph(_Asked)
        builder.add_node("ask", ask)
        builder.add_edge(START, "ask")
        builder.add_edge("ask", END)
        graph = builder.compile(checkpointer=TurnstoreSaver(store))
        graph.invoke({"answer": ""}, config("i"))
        waiting = store.conversation("langgraph/i")
        assert waiting is not None
        assert waiting.langgraph is not None
        assert waiting.langgraph.next == list(graph.get_state(config("i")).next) == ["ask"]
        assert (waiting.messages, waiting.total) == ([], 0)
        store.search(SearchRequest(query="which"))  # the catalog's view comes from the indexer
        summary = store.session_summary("langgraph/i")
        assert summary is not None
        assert summary.waiting == ["ask"]
        graph.invoke(Command(resume="the blue one"), config("i"))
        done = store.conversation("langgraph/i")
        assert done is not None
        assert done.langgraph is not None
        assert done.langgraph.next == list(graph.get_state(config("i")).next) == []
        store.search(SearchRequest(query="which"))
        resumed = store.session_summary("langgraph/i")
        assert resumed is not None
        assert resumed.waiting == []


def test_a_threads_messages_are_searched_and_a_removed_one_is_not(store_url: str) -> None:
    """Search finds LangGraph messages by place; a removed message or thread is gone from it."""
    from langchain_core.messages import RemoveMessage

    from turnstore.integrations.langgraph import TurnstoreSaver

    def found(store: Any, query: str) -> list[tuple[str, int | None, int]]:
        page = store.search(SearchRequest(query=query))
        return [(hit.session_id, hit.sequence, hit.item) for hit in page.hits]

    with turnstore.open_blocking(store_url) as store:
        graph = build(TurnstoreSaver(store))
        for turn, word in enumerate(("narwhal", "beluga")):
            graph.invoke(user("s", turn, f"tell me about the {word}"), config("s"))
        assert found(store, "beluga") == [
            ("langgraph/s", None, 7),
            ("langgraph/s", None, 6),
            ("langgraph/s", None, 5),
            ("langgraph/s", None, 4),
        ]
        assert found(store, "lookup") == [("langgraph/s", None, 5), ("langgraph/s", None, 1)]
        asked = graph.get_state(config("s")).values["messages"][0]
        graph.update_state(config("s"), {"messages": [RemoveMessage(id=asked.id)]})
        # The user's message is gone; the tool call that quoted it is still in the thread.
        assert found(store, "narwhal") == [
            ("langgraph/s", None, 2),
            ("langgraph/s", None, 1),
            ("langgraph/s", None, 0),
        ]
        page = store.conversation("langgraph/s")
        assert page is not None
        assert page.messages[0].role == "assistant"
        store.delete_sessions(["langgraph/s"])
        assert found(store, "narwhal") == found(store, "beluga") == []


def test_an_openai_agents_session_reads_as_the_items_the_sdk_holds(store_url: str) -> None:
    """The SDK's runner writes the items; the conversation holds what `get_items` returns."""
    from agents import Runner
    from test_agents_sdk_session import scripted_agent

    from turnstore.integrations.openai_agents import TurnstoreSession

    async def run() -> tuple[list[Any], Any, Any]:
        session = TurnstoreSession("chat", store_url, owner_id="ann")
        try:
            agent = scripted_agent("Hello Ann.", "Two ferries a day.")
            await Runner.run(agent, "hi", session=session)
            await session.add_items(
                [
                    {
                        "type": "function_call",
                        "name": "timetable",
                        "arguments": "{}",
                        "call_id": "c1",
                    },
                    {"type": "function_call_output", "call_id": "c1", "output": "09:00, 17:00"},
                ]
            )
            await Runner.run(agent, "ferries?", session=session)
            items = await session.get_items()
            page = await session.store.conversation("chat")
            await session.store.search(SearchRequest(query="ferries"))  # derives the figures
            summary = await session.store.session_summary("chat")
            return items, page, summary
        finally:
            session.close()

    items, page, summary = asyncio.run(run())
    # Two runs (two user messages), one tool call; the SDK keeps no tokens in its session.
    assert (summary.execution_stats.run_count, summary.execution_stats.tool_calls) == (2, 1)
    assert summary.measured == ["runs", "tool_calls"]
    assert page.kind == "openai-agents"
    assert [message.item for message in page.messages] == items
    assert _roles(page) == ["user", "assistant", "assistant", "tool", "user", "assistant"]
    assert [m.text for m in page.messages] == [
        "hi",
        "Hello Ann.",
        "",
        "09:00, 17:00",
        "ferries?",
        "Two ferries a day.",
    ]
    assert page.messages[2].tool_calls[0].name == "timetable"


def test_an_adk_session_reads_as_the_events_adk_holds(tmp_path: Any, store_url: str) -> None:
    """ADK's events come back as stored: authors, text, function calls and results, state."""
    from google.adk.events.event import Event, EventActions
    from google.genai import types

    from turnstore.integrations import _adk_storage as storage
    from turnstore.integrations.adk import TurnstoreSessionService

    def model(*parts: Any, author: str = "planner", delta: Any = None) -> Any:
        return Event(
            invocation_id="inv",
            author=author,
            actions=EventActions(state_delta=delta or {}),
            content=types.Content(role="user" if author == "user" else "model", parts=list(parts)),
        )

    async def run() -> tuple[Any, Any, Any]:
        service = TurnstoreSessionService(store_url)
        try:
            session = await service.create_session(app_name="app", user_id="ann")
            events = [
                model(types.Part(text="Plan Lisbon"), author="user", delta={"city": "Lisbon"}),
                model(
                    types.Part(
                        function_call=types.FunctionCall(id="f1", name="trams", args={"n": 28})
                    )
                ),
                model(
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="f1", name="trams", response={"lines": [28, 15]}
                        )
                    )
                ),
                model(types.Part(text="Take tram 28.")),
            ]
            for event in events:
                await service.append_event(session, event)
            theirs = await service.get_session(app_name="app", user_id="ann", session_id=session.id)
            catalog = await service.store.list_sessions_page(turnstore.SessionPageRequest(limit=5))
            (stored,) = catalog.sessions
            await service.store.search(SearchRequest(query="tram"))  # derives the figures
            summary = await service.store.session_summary(stored.session_id)
            return theirs, await service.store.conversation(stored.session_id), summary
        finally:
            await service.close()

    theirs, page, summary = asyncio.run(run())
    # One invocation; the model wrote a call and an answer; the tool's response is no call.
    stats = summary.execution_stats
    assert (stats.run_count, stats.model_calls, stats.tool_calls, stats.failed_tool_calls) == (
        1,
        2,
        1,
        0,
    )
    span = theirs.events[-1].timestamp - theirs.events[0].timestamp
    assert stats.elapsed_ms == pytest.approx(span * 1000, abs=2)
    assert "tokens" not in summary.measured
    assert "elapsed" in summary.measured
    assert page.kind == "adk"
    assert [Event.model_validate(storage.loaded(m.item)) for m in page.messages] == theirs.events
    assert [(m.role, m.name, m.text) for m in page.messages] == [
        ("user", "user", "Plan Lisbon"),
        ("assistant", "planner", ""),
        ("tool", "trams", '{"lines": [28, 15]}'),
        ("assistant", "planner", "Take tram 28."),
    ]
    assert page.messages[0].state_delta == {"city": "Lisbon"}
    assert page.messages[1].tool_calls[0].arguments == '{"n": 28}'
    assert page.messages[2].tool_call_id == "f1"
