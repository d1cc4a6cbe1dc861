"""Internal: a session of any kind read as a conversation: messages, tool calls, extras."""

from __future__ import annotations

from typing import Any

import msgspec

from turnstore.records.base import I64, U64, Record


class MessageToolCall(Record, kw_only=True):
    """One tool call an assistant message asks for."""

    name: str
    arguments: str
    """The arguments as the framework stored them: JSON text, or text."""
    call_id: str | None = None


class Message(Record, kw_only=True):
    """One stored item read as a conversation message; `item` keeps what was stored."""

    sequence: U64 | None
    """The transcript batch holding the item; None for an item of a context or a list."""
    index: U64
    """The item's index in its transcript batch, or in the context or list."""
    role: str
    """`user`, `assistant`, `system`, `tool` (a tool's result), `reasoning`, or the item's
    own type when it is none of these."""
    text: str
    """The message's text, parts joined by newlines; "" when it has none (a bare tool call)."""
    name: str | None = None
    """Who wrote it when the framework says (an ADK author, a tool's name for its result)."""
    tool_calls: list[MessageToolCall] = msgspec.field(default_factory=list)
    tool_call_id: str | None = None
    """The call a tool result answers."""
    state_delta: dict[str, Any] | None = None
    """The session state the message changed (an ADK event's `actions.state_delta`)."""
    item: Any = None
    """The item as stored (a LangGraph value decoded to JSON-like values)."""
    created_at: I64 | None = None
    """When the transcript batch holding it was saved (Unix seconds, as the catalog's times);
    None for an item of a context or list, which keeps no time per item."""


class LangGraphPoint(Record, kw_only=True):
    """Where a LangGraph thread's conversation was read: its newest checkpoint."""

    checkpoint_id: str
    next: list[str] = msgspec.field(default_factory=list)
    """Nodes the graph runs next (an interrupted or unfinished run); [] when it is done."""
    step: int | None = None
    source: str | None = None
    """What wrote the checkpoint: `input`, `loop`, `update` or `fork`."""
    channel: str | None = None
    """The list channel read as the conversation (`messages` unless asked for another)."""


class ConversationRequest(Record, kw_only=True):
    """One newest-first page of a session read as a conversation.

    `before` is the cursor: a transcript sequence for a `turnstore` session (the page holds
    up to `limit` whole batches), else an index in the context or list (up to `limit` items).
    """

    before: U64 | None = None
    limit: U64 = 50
    channel: str | None = None
    """A LangGraph thread's list channel to read; `messages` by default."""
    max_value_bytes: U64 = 16 * 2**20
    """The most bytes a LangGraph value stored compressed is inflated to; past it the message
    is a placeholder that names the bound (16 MiB by default)."""


class ConversationPage(Record, kw_only=True):
    """A page of a conversation, oldest message first; `next_before` is None on the last."""

    session_id: str
    kind: str | None
    messages: list[Message] = msgspec.field(default_factory=list)
    next_before: U64 | None = None
    total: U64 | None = None
    """How many items the context or list holds; None for a transcript."""
    langgraph: LangGraphPoint | None = None
