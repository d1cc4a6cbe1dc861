"""The kind of a Google ADK session, written by `turnstore.integrations.adk`'s service."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from turnstore.records.figures import Derived, count, field
from turnstore.records.kinds import SessionKind, Storage

SESSION_KEY = "adk-session"
"""The middleware state key of an ADK session's own record, in the scope of its id."""
WRAPPED = "adk-json"
"""The one key of an object the service stores as its JSON text: a value strict JSON cannot
hold (`turnstore.integrations._adk_storage`)."""


def _event(item: Any) -> dict[str, Any] | None:
    if isinstance(item, dict) and len(item) == 1 and isinstance(item.get(WRAPPED), str):
        try:
            item = json.loads(item[WRAPPED])
        except ValueError:
            return None
    return item if isinstance(item, dict) else None


def _seconds(event: dict[str, Any]) -> float | None:
    at = event.get("timestamp")
    if type(at) is int or (type(at) is float and math.isfinite(at)):
        return float(at)
    return None


def _tokens(derived: Derived, used: dict[str, Any]) -> None:
    usage = derived.stats.usage
    usage.input_tokens += count(used.get("prompt_token_count"))
    usage.cached_input_tokens += count(used.get("cached_content_token_count"))
    usage.output_tokens += count(used.get("candidates_token_count"))
    usage.reasoning_output_tokens += count(used.get("thoughts_token_count"))
    usage.total_tokens += count(used.get("total_token_count"))
    derived.measured.append("tokens")


def _parts(derived: Derived, event: dict[str, Any]) -> bool:
    """Count the event's tool calls and failed tool responses; whether a model wrote it (a
    part other than a function response, in content of the `model` role)."""
    stats = derived.stats
    parts = field(event, "content", "parts")
    modelled = False
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("function_call"), dict):
            stats.tool_calls += 1
        response = field(part, "function_response", "response")
        if isinstance(response, dict) and "error" in response:
            stats.failed_tool_calls += 1
        modelled = modelled or part.get("function_response") is None
    return modelled and field(event, "content", "role") == "model"


def figures(events: Sequence[Any], before: Any) -> Derived:
    """What ADK events carry: an invocation is a run, its time from its first event to its
    last; an event with an `error_code` fails its run; an event a model wrote (text or calls
    in `model` content, or token counts) is a model call, with its `usage_metadata` tokens;
    `function_call` parts are tool calls, and a function response holding an `error` is a
    failed one."""
    derived = Derived(
        measured=[
            "runs",
            "failed_runs",
            "model_calls",
            "tool_calls",
            "failed_tool_calls",
            "elapsed",
        ]
    )
    stats = derived.stats
    previous = _event(before)
    for item in events:
        event = _event(item)
        if event is None:
            continue
        invocation = event.get("invocation_id")
        if previous is None or invocation != previous.get("invocation_id"):
            stats.run_count += 1
        else:
            start, end = _seconds(previous), _seconds(event)
            if start is not None and end is not None and end > start:
                stats.elapsed_ms += round((end - start) * 1000)
        if event.get("error_code") is not None:
            stats.failed_run_count += 1
        used = event.get("usage_metadata")
        if _parts(derived, event) or isinstance(used, dict):
            stats.model_calls += 1
        if isinstance(used, dict):
            _tokens(derived, used)
        previous = event
    return derived


KIND = SessionKind(
    name="adk",
    storage=Storage.CONTEXT,
    integration="adk",
    state_key=SESSION_KEY,
    id_prefix="adk/",
    figures=figures,
)
"""A session of items, one ADK event each: read, and searched, by its context."""
