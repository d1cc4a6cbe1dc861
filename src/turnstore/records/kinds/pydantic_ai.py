"""The kind of a Pydantic AI conversation, written by `turnstore.integrations.pydantic_ai`.

A conversation is a session of items, one per `ConversationEntry` it holds, each once, in the
order it came to hold them: `{"id", "parent_id", "parent_index", "role", "content",
"tool_calls", "tool_call_id", "message"}`. `message` is the entry's `ModelMessage` as Pydantic
AI dumps it to JSON; the rest is what the conversation view, the catalog and search read (a
role, the message's text, its tool calls in the chat shape) and the links of the entry's
history (`parent_index`: where its parent is among the same session's items).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstore.records.figures import Derived, count, field
from turnstore.records.kinds import SessionKind, Storage

RECORD_KEY = "pydantic-ai-conversation"
"""The middleware state key of a conversation's `ConversationRecord`, in the scope of its id."""
ENTRY_KEY = "pydantic-ai-entry/"
"""Starts the middleware state key that records where one entry is among its session's items."""
_FAILED = frozenset({"failed", "retried"})
"""Tool-return outcomes that reached the model as an error (Pydantic AI's `ERROR_OUTCOMES`)."""


def _usage(derived: Derived, used: dict[str, Any]) -> None:
    usage = derived.stats.usage
    usage.input_tokens += count(used.get("input_tokens"))
    usage.cached_input_tokens += count(used.get("cache_read_tokens"))
    usage.output_tokens += count(used.get("output_tokens"))
    usage.reasoning_output_tokens += count(used.get("output_reasoning_tokens"))
    usage.total_tokens += count(used.get("input_tokens")) + count(used.get("output_tokens"))
    derived.measured.append("tokens")


def _request(derived: Derived, parts: list[Any]) -> None:
    """A user prompt starts a run; a failed tool return or a tool's retry prompt is a failed
    tool call."""
    stats = derived.stats
    kinds = [part.get("part_kind") for part in parts if isinstance(part, dict)]
    stats.run_count += "user-prompt" in kinds
    for part in parts:
        if not isinstance(part, dict):
            continue
        failed = part.get("part_kind") == "tool-return" and part.get("outcome") in _FAILED
        retried = part.get("part_kind") == "retry-prompt" and part.get("tool_name") is not None
        stats.failed_tool_calls += failed or retried


def figures(items: Sequence[Any], before: Any) -> Derived:
    """What Pydantic AI messages carry: a request with a user prompt starts a run, a response
    is a model call with its `usage` tokens and its `tool-call` parts; a tool return that
    failed, or a retry prompt for a tool, is a failed tool call. Runs' times are not kept."""
    derived = Derived(measured=["runs", "model_calls", "tool_calls", "failed_tool_calls"])
    stats = derived.stats
    for item in items:
        message = field(item, "message")
        parts = field(message, "parts")
        if not isinstance(parts, list):
            continue
        if message.get("kind") == "request":
            _request(derived, parts)
        elif message.get("kind") == "response":
            stats.model_calls += 1
            calls = [part for part in parts if field(part, "part_kind") == "tool-call"]
            stats.tool_calls += len(calls)
            used = message.get("usage")
            if isinstance(used, dict):
                _usage(derived, used)
    return derived


KIND = SessionKind(
    name="pydantic-ai",
    storage=Storage.CONTEXT,
    integration="pydantic_ai",
    state_key=RECORD_KEY,
    id_prefix="pydantic-ai/",
    figures=figures,
    # Entry ids, and Pydantic AI's own message JSON: its text is the item's `content` and
    # `tool_calls` already; the rest is part kinds, model names, run ids and times.
    unsearched=frozenset({"parent_id", "message"}),
)
"""A session of items, one per entry of the conversation: read, and searched, by its context."""
