"""The kind of a Strands Agents session, written by `turnstore.integrations.strands`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstore.records.figures import Derived, count, field
from turnstore.records.kinds import SessionKind, Storage

SESSION_KEY = "strands-session"
"""The middleware state key of a Strands session's own record, in the scope of its id."""
INCARNATION_KEY = "strands-incarnation"
"""The middleware state key of a Strands session's incarnation id, drawn when it is created:
what a write built on a remembered record expects, so it never lands on a session deleted and
created again since."""
AGENT_KEY = "strands-agent/"
"""Starts the middleware state key of one agent's record (`SessionAgent`), in that scope."""
MULTI_AGENT_KEY = "strands-multi-agent/"
"""Starts the middleware state key of one multi-agent's state, in that scope."""
ORIGINAL_KEY = "strands-original/"
"""Starts the middleware state key of a redacted message's original, kept in that scope so
neither the conversation view nor search shows what a guardrail redacted."""
META = "strands"
"""The key of a stored message that holds Strands' own fields (agent, message id, times)."""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return (
        [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    )


def _tokens(derived: Derived, used: dict[str, Any]) -> None:
    usage = derived.stats.usage
    usage.input_tokens += count(used.get("inputTokens"))
    usage.cached_input_tokens += count(used.get("cacheReadInputTokens"))
    usage.output_tokens += count(used.get("outputTokens"))
    usage.total_tokens += count(used.get("totalTokens"))
    derived.measured.append("tokens")


def figures(messages: Sequence[Any], before: Any) -> Derived:
    """What Strands messages (Bedrock Converse shapes) carry: a user message with text starts
    a run; an assistant message is a model call, with its `metadata.usage` tokens; `toolUse`
    blocks are tool calls and a `toolResult` of status `error` a failed one. Strands keeps no
    run times in its messages, so elapsed time is unrecorded."""
    derived = Derived(measured=["runs", "model_calls", "tool_calls", "failed_tool_calls"])
    stats = derived.stats
    for message in messages:
        if not isinstance(message, dict):
            continue
        blocks = _blocks(message)
        if message.get("role") == "user" and any("text" in block for block in blocks):
            stats.run_count += 1
        for block in blocks:
            stats.tool_calls += isinstance(block.get("toolUse"), dict)
            stats.failed_tool_calls += field(block, "toolResult", "status") == "error"
        if message.get("role") != "assistant":
            continue
        stats.model_calls += 1
        used = field(message, "metadata", "usage")
        if isinstance(used, dict):
            _tokens(derived, used)
    return derived


KIND = SessionKind(
    name="strands",
    storage=Storage.CONTEXT,
    integration="strands",
    state_key=SESSION_KEY,
    id_prefix="strands/",
    figures=figures,
    # Strands' per-message UUID, tool use ids, usage, and our agent id, message id and times.
    unsearched=frozenset({"tracking_id", "toolUseId", "metadata", META}),
)
"""A session of items, one Strands message each: read, and searched, by its context."""
