"""The kind of an OpenAI Agents SDK session, written by `turnstore.integrations.openai_agents`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstore.records.figures import Derived
from turnstore.records.kinds import SessionKind, Storage


def figures(items: Sequence[Any], before: Any) -> Derived:
    """What Responses items carry: a user message starts a run, an item of a `…_call` type is
    a tool call. The SDK keeps tokens, model calls and times in its run results, not in the
    session, so those are unrecorded; so are tool failures, which come back as output."""
    derived = Derived(measured=["runs", "tool_calls"])
    stats = derived.stats
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in (None, "message") and item.get("role") == "user":
            stats.run_count += 1
        elif isinstance(kind, str) and kind.endswith("_call"):
            stats.tool_calls += 1
    return derived


KIND = SessionKind(
    name="openai-agents", storage=Storage.CONTEXT, integration="openai_agents", figures=figures
)
"""A session of items, the SDK's session items: read, and searched, by its context."""
