"""Contract: a session of any kind read as a conversation, on both backends and both faces.

Native sessions read their transcript by batch; sessions of items (the OpenAI Agents SDK's,
ADK's, `append_context`'s) read their context by index. Each stored shape comes back as the
message it is: role, text, tool calls and the call a result answers, an ADK author and state
delta, and the item as stored. LangGraph threads, written by LangGraph itself, are read in
tests/frameworks/test_conversations.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstore import Checkpoint, InvalidInput, SessionContext
from turnstore.records import ConversationRequest, MessageToolCall

OPENAI = [
    {"role": "user", "content": "Book the ferry"},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Check the timetable"}]},
    {"type": "function_call", "name": "timetable", "arguments": '{"day": 1}', "call_id": "c1"},
    {"type": "function_call_output", "call_id": "c1", "output": "09:00 and 17:00"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "The 09:00 ferry."}],
    },
    {"type": "web_search_call", "id": "ws1", "status": "completed"},
]
ADK = [
    {
        "author": "user",
        "id": "e1",
        "content": {"role": "user", "parts": [{"text": "Plan a trip"}]},
        "actions": {"state_delta": {"trip": "lisbon"}},
    },
    {
        "author": "planner",
        "id": "e2",
        "content": {
            "role": "model",
            "parts": [
                {"text": "Looking"},
                {"function_call": {"id": "f1", "name": "trams", "args": {"n": 2}}},
            ],
        },
    },
    {
        "author": "planner",
        "id": "e3",
        "content": {
            "role": "user",
            "parts": [
                {"function_response": {"id": "f1", "name": "trams", "response": {"lines": [28]}}}
            ],
        },
    },
    {
        "author": "planner",
        "id": "e4",
        "content": {"role": "model", "parts": [{"text": "hm", "thought": True}]},
    },
]
CHAT = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "add", "arguments": "[1,2]"}}
        ],
    },
    {"role": "tool", "tool_call_id": "t1", "content": "3"},
    "a bare string",
    42,
]


def _shape(page: Any) -> list[tuple[Any, ...]]:
    return [
        (
            m.sequence,
            m.index,
            m.role,
            m.text,
            m.name,
            [tuple(c.to_builtins().values()) for c in m.tool_calls],
            m.tool_call_id,
        )
        for m in page.messages
    ]


async def test_an_openai_agents_session_reads_as_its_items(store):
    """Messages, reasoning, function calls and outputs, and an unknown item type."""
    await store.append_context("oa", OPENAI, "ann", kind="openai-agents")
    page = await store.conversation("oa")
    assert page.kind == "openai-agents"
    assert (page.total, page.next_before, page.langgraph) == (6, None, None)
    assert _shape(page) == [
        (None, 0, "user", "Book the ferry", None, [], None),
        (None, 1, "reasoning", "Check the timetable", None, [], None),
        (None, 2, "assistant", "", None, [("timetable", '{"day": 1}', "c1")], None),
        (None, 3, "tool", "09:00 and 17:00", None, [], "c1"),
        (None, 4, "assistant", "The 09:00 ferry.", None, [], None),
        (None, 5, "web_search_call", "", None, [], None),
    ]
    assert [m.item for m in page.messages] == OPENAI
    assert {m.created_at for m in page.messages} == {None}


async def test_an_adk_session_reads_as_events_with_authors_calls_and_state(store):
    """An ADK event: its author, text parts, function calls and responses, state delta."""
    await store.append_context("adk", ADK, "ann", kind="adk")
    page = await store.conversation("adk")
    assert _shape(page) == [
        (None, 0, "user", "Plan a trip", "user", [], None),
        (None, 1, "assistant", "Looking", "planner", [("trams", '{"n": 2}', "f1")], None),
        (None, 2, "tool", '{"lines": [28]}', "trams", [], "f1"),
        (None, 3, "reasoning", "hm", "planner", [], None),
    ]
    assert page.messages[0].state_delta == {"trip": "lisbon"}
    assert [m.state_delta for m in page.messages[1:]] == [None, None, None]


async def test_chat_messages_strings_and_other_values(store):
    """Chat-completions tool calls and results; a string is text; anything else an item."""
    await store.append_context("chat", CHAT)
    page = await store.conversation("chat")
    assert page.kind == "items"
    assert _shape(page) == [
        (None, 0, "system", "Be brief.", None, [], None),
        (None, 1, "assistant", "", None, [("add", "[1,2]", "t1")], None),
        (None, 2, "tool", "3", None, [], "t1"),
        (None, 3, "text", "a bare string", None, [], None),
        (None, 4, "item", "", None, [], None),
    ]
    assert page.messages[1].tool_calls == [
        MessageToolCall(name="add", arguments="[1,2]", call_id="t1")
    ]


async def test_items_page_newest_first_by_index(store):
    """A page holds the newest `limit` items before `before`; `next_before` goes on."""
    await store.append_context("many", [{"role": "user", "content": f"m{i}"} for i in range(7)])
    seen: list[str] = []
    before = None
    while True:
        page = await store.conversation("many", ConversationRequest(before=before, limit=3))
        seen[:0] = [m.text for m in page.messages]
        assert page.total == 7
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == [f"m{i}" for i in range(7)]
    page = await store.conversation("many", ConversationRequest(before=2, limit=50))
    assert [m.index for m in page.messages] == [0, 1]
    await store.pop_context("many", 2)
    page = await store.conversation("many")
    assert (page.total, [m.text for m in page.messages][-1]) == (5, "m4")


async def test_a_native_session_reads_its_transcript_by_batch(store):
    """A `turnstore` session's messages are its transcript items, placed by (sequence, item)."""
    items = [
        [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]
        for n in range(3)
    ]
    context: list[Any] = []
    for sequence, batch in enumerate(items, start=1):
        context += batch
        checkpoint = Checkpoint(
            session_id="native",
            sequence=sequence,
            context=list(context),
            session_context=SessionContext(owner_id="ann"),
        )
        await store.save(checkpoint, batch)
    page = await store.conversation("native", ConversationRequest(limit=2))
    assert page.kind == "turnstore"
    assert [(m.sequence, m.index, m.role, m.text) for m in page.messages] == [
        (2, 0, "user", "q1"),
        (2, 1, "assistant", "a1"),
        (3, 0, "user", "q2"),
        (3, 1, "assistant", "a2"),
    ]
    assert (page.next_before, page.total) == (2, None)
    summary = await store.session_summary("native")
    assert {m.created_at for m in page.messages} <= set(
        range(summary.created_at, summary.updated_at + 1)
    )
    items_page = await store.conversation("native")
    assert all(isinstance(m.created_at, int) for m in items_page.messages)
    older = await store.conversation("native", ConversationRequest(before=2, limit=2))
    assert [m.text for m in older.messages] == ["q0", "a0"]
    assert older.next_before is None


async def test_a_missing_session_reads_as_none(store):
    assert await store.conversation("nobody") is None


@pytest.mark.parametrize(
    "request_",
    [
        ConversationRequest(limit=0),
        ConversationRequest(before=-1),
        ConversationRequest(before=2**63),
        ConversationRequest(channel=3),  # type: ignore[arg-type]
        "not a request",
    ],
)
async def test_bad_requests_are_refused(store, request_):
    """A bad limit, cursor, channel or request is `InvalidInput`."""
    await store.append_context("s", ["x"])
    with pytest.raises(InvalidInput):
        await store.conversation("s", request_)


async def test_a_bad_session_id_is_refused(store):
    with pytest.raises(InvalidInput):
        await store.conversation("")
