"""Stored items of every framework read as conversation messages, by the shape they have.

One reader covers the shapes the integrations store, recognised by their keys rather than by
the session's kind, so a native session that stores chat messages reads like any other:

- chat messages: `{"role", "content", "tool_calls": [{"id", "function": {…}}], "tool_call_id"}`;
- OpenAI Responses items: messages with content parts, `function_call`,
  `function_call_output`, `reasoning` (the OpenAI Agents SDK's session items);
- ADK events: `{"author", "content": {"role", "parts": [...]}, "actions": {"state_delta"}}`;
- LangChain messages as LangGraph stores them: `{"type": "human" | "ai" | "tool" | …}`;
- Bedrock Converse messages (Strands Agents): `{"role", "content": [{"text"}, {"toolUse"},
  {"toolResult"}]}`.

Anything else is a message of role `item` with no text; its stored form is kept beside.
A page is built from what the conversation read found (`StoredConversation`): a transcript's
batches, or a window of a context's or a list channel's items.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from turnstore.records.checkpoint import TranscriptPage
from turnstore.records.conversation import (
    ConversationPage,
    ConversationRequest,
    LangGraphPoint,
    Message,
    MessageToolCall,
)
from turnstore.rules.pages import page_limit
from turnstore.rules.validation import validate_session_id
from turnstore.rules.values import integer, require, text

_TEXT_KEYS = ("text", "content", "output", "value", "refusal")
_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
MAX_PARTS = 256
"""The most content parts read of one message."""


def conversation_request(session_id: object, request: object) -> tuple[str, ConversationRequest]:
    """Validate a conversation page request for one session."""
    session = validate_session_id(session_id)
    checked = require(request, ConversationRequest, "request")
    page_limit(checked.limit, "conversation page")
    if checked.before is not None:
        integer(checked.before, "conversation cursor exceeds SQLite INTEGER")
    if checked.channel is not None:
        text(checked.channel, "channel")
    return session, checked


def _text(value: Any) -> str:
    """The text of message content: a string, or the text of a list of parts, joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(filter(None, map(_text, value[:MAX_PARTS])))
    if isinstance(value, dict):
        for key in _TEXT_KEYS:
            found = value.get(key)
            if isinstance(found, str):
                return found
    return ""


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _label(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _chat_tool_calls(calls: Any) -> list[MessageToolCall]:
    """Tool calls of a chat or LangChain message: `{"function": {…}}` or `{"name", "args"}`."""
    found = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        spec = function if isinstance(function, dict) else call
        arguments = spec.get("arguments", spec.get("args", {}))
        name = _label(spec.get("name")) or "tool"
        call_id = _label(call.get("id"))
        found.append(MessageToolCall(name=name, arguments=_arguments(arguments), call_id=call_id))
    return found


def _adk(event: dict[str, Any], base: dict[str, Any]) -> Message:
    """An ADK event: its author, text parts, function calls and responses, state delta."""
    content = event.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[MessageToolCall] = []
    result = None
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        call, response = part.get("function_call"), part.get("function_response")
        if isinstance(call, dict):
            arguments = _arguments(call.get("args") or {})
            name = _label(call.get("name")) or "tool"
            calls.append(
                MessageToolCall(name=name, arguments=arguments, call_id=_label(call.get("id")))
            )
        elif isinstance(response, dict):
            result = response
        elif isinstance(part.get("text"), str):
            (thoughts if part.get("thought") else texts).append(part["text"])
    author = _label(event.get("author"))
    actions = event.get("actions")
    delta = actions.get("state_delta") if isinstance(actions, dict) else None
    base.update(name=author, state_delta=delta if isinstance(delta, dict) and delta else None)
    if result is not None and not calls and not texts:
        output = result.get("response")
        base["name"] = _label(result.get("name")) or author
        return Message(
            **base,
            role="tool",
            text=_arguments(output) if output is not None else "",
            tool_call_id=_label(result.get("id")),
        )
    role = "user" if author == "user" else "assistant"
    if thoughts and not texts and not calls:
        role, texts = "reasoning", thoughts
    return Message(**base, role=role, text="\n".join(texts), tool_calls=calls)


def _responses(item: dict[str, Any], kind: str, base: dict[str, Any]) -> Message | None:
    """An OpenAI Responses item that is not a plain message, or None."""
    if kind == "function_call":
        call = MessageToolCall(
            name=_label(item.get("name")) or "tool",
            arguments=_arguments(item.get("arguments", "")),
            call_id=_label(item.get("call_id")),
        )
        return Message(**base, role="assistant", text="", tool_calls=[call])
    if kind == "function_call_output":
        output = item.get("output")
        return Message(
            **base,
            role="tool",
            text=_text(output) if not isinstance(output, dict) else _arguments(output),
            tool_call_id=_label(item.get("call_id")),
        )
    if kind == "reasoning":
        summary = item.get("summary") or item.get("content")
        return Message(**base, role="reasoning", text=_text(summary))
    return None


def _converse(item: dict[str, Any], base: dict[str, Any]) -> Message | None:
    """A Bedrock Converse message with `toolUse` or `toolResult` blocks, or None: a user
    message of results alone is the tools' answer."""
    blocks = [block for block in item["content"][:MAX_PARTS] if isinstance(block, dict)]
    texts: list[str] = []
    calls: list[MessageToolCall] = []
    answered: list[str | None] = []
    for block in blocks:
        use, result = block.get("toolUse"), block.get("toolResult")
        if isinstance(use, dict):
            name = _label(use.get("name")) or "tool"
            arguments = _arguments(use.get("input", {}))
            calls.append(
                MessageToolCall(
                    name=name, arguments=arguments, call_id=_label(use.get("toolUseId"))
                )
            )
        elif isinstance(result, dict):
            answered.append(_label(result.get("toolUseId")))
            texts.append(_text(result.get("content")))
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    if not calls and not answered:
        return None
    text = "\n".join(filter(None, texts))
    if answered and not calls and len(answered) == len(blocks):
        return Message(**base, role="tool", text=text, tool_call_id=answered[0])
    role = _ROLES.get(item["role"], item["role"])
    return Message(**base, role=role, text=text, tool_calls=calls)


def message_of(item: Any, sequence: int | None, index: int) -> Message:
    """One stored item as a conversation message (see the module's docstring for shapes)."""
    base: dict[str, Any] = {"sequence": sequence, "index": index, "item": item}
    if isinstance(item, str):
        return Message(**base, role="text", text=item)
    if not isinstance(item, dict):
        return Message(**base, role="item", text="")
    if "author" in item and "role" not in item and "type" not in item:
        return _adk(item, base)
    kind = _label(item.get("type"))
    if kind is not None:
        found = _responses(item, kind, base)
        if found is not None:
            return found
    if isinstance(item.get("content"), list) and _label(item.get("role")) is not None:
        found = _converse(item, base)
        if found is not None:
            return found
    raw_role = _label(item.get("role")) or kind
    role = _ROLES.get(raw_role or "", raw_role or "item")
    return Message(
        **base,
        role=role,
        text=_text(item.get("content")),
        name=_label(item.get("name")),
        tool_calls=_chat_tool_calls(item.get("tool_calls")),
        tool_call_id=_label(item.get("tool_call_id")),
    )


@dataclass(slots=True)
class StoredConversation:
    """What a conversation read found of a session, as stored: a page of its transcript
    (a kind stored in the transcript), or a window of its context's or list's items."""

    session_id: str
    kind: str | None
    transcript: TranscriptPage | None = None
    items: list[Any] = field(default_factory=list)
    start: int = 0
    """The index of the window's first item in the context or list."""
    total: int = 0
    """How many items the context or list holds."""
    langgraph: LangGraphPoint | None = None
    """Where a LangGraph thread's list was read; None for other kinds, or a thread with no
    checkpoint."""


def conversation_page(found: StoredConversation | None) -> ConversationPage | None:
    """What a conversation read found, read as a page of messages; None for no session."""
    if found is None:
        return None
    page = ConversationPage(session_id=found.session_id, kind=found.kind)
    transcript = found.transcript
    if transcript is not None:
        for batch in reversed(transcript.batches):
            for index, item in enumerate(batch.items):
                message = message_of(item, batch.sequence, index)
                message.created_at = batch.created_at
                page.messages.append(message)
        page.next_before = transcript.next_before_sequence
        return page
    start = found.start
    page.messages = [message_of(item, None, start + at) for at, item in enumerate(found.items)]
    page.next_before = start if start > 0 else None
    page.total = found.total
    page.langgraph = found.langgraph
    return page
