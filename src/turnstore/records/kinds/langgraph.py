"""The kind of a LangGraph thread, written by `turnstore.integrations.langgraph`'s saver."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstore.records.figures import Derived, count, field
from turnstore.records.kinds import SessionKind, Storage

CHANNEL = "messages"
"""The list channel that is a thread's conversation (LangGraph's `MessagesState`)."""
_MODEL_TYPES = frozenset({"ai", "AIMessageChunk"})


def figures(messages: Sequence[Any], before: Any) -> Derived:
    """What LangChain messages (as stored: their `model_dump()`) carry: an AI message is a
    model call, its `tool_calls` are tool calls, its `usage_metadata` tokens; a tool message
    with `status: error` is a failed tool call. A run's time is not kept in them."""
    derived = Derived(measured=["model_calls", "tool_calls", "failed_tool_calls"])
    stats, usage = derived.stats, derived.stats.usage
    for message in messages:
        if not isinstance(message, dict):
            continue
        kind = message.get("type")
        if kind == "tool" and message.get("status") == "error":
            stats.failed_tool_calls += 1
        if kind not in _MODEL_TYPES:
            continue
        stats.model_calls += 1
        calls = message.get("tool_calls")
        stats.tool_calls += len(calls) if isinstance(calls, list) else 0
        used = message.get("usage_metadata")
        if isinstance(used, dict):
            usage.input_tokens += count(used.get("input_tokens"))
            usage.cached_input_tokens += count(field(used, "input_token_details", "cache_read"))
            usage.output_tokens += count(used.get("output_tokens"))
            usage.reasoning_output_tokens += count(field(used, "output_token_details", "reasoning"))
            usage.total_tokens += count(used.get("total_tokens"))
            derived.measured.append("tokens")
    return derived


KIND = SessionKind(
    name="langgraph",
    storage=Storage.CHANNEL,
    integration="langgraph",
    channel=CHANNEL,
    id_prefix="langgraph/",
    counts=frozenset({"runs"}),
    figures=figures,
)
"""A thread: read, and searched, by the `CHANNEL` list of its newest root checkpoint."""
