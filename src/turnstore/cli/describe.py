"""Internal: one-line plain-text descriptions of journal events and transcript items, for tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentMessageEvent,
    AgentReasoningContentDeltaEvent,
    ErrorEvent,
    EventMsg,
    ExecApprovalRequestEvent,
    FrontendEventMsg,
    ModelChangedEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepFailed,
    ModelStepStartedEvent,
    SessionConfiguredEvent,
    TokenCountEvent,
    ToolCallBeginEvent,
    ToolCallEndEvent,
    TurnAbortedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    UserMessageEvent,
    WarningEvent,
    WebSearchBeginEvent,
    WebSearchEndEvent,
)
from turnstore.records import Message


def event_kind(msg: EventMsg) -> str:
    """The event's wire tag, as the journal indexes it (`task_started`, `tool_call_end`, ...)."""
    return str(msg.__struct_config__.tag)


def _step_completed(msg: ModelStepCompletedEvent) -> str:
    took = f"step {msg.step_index} in {msg.completed_at_ms - msg.started_at_ms} ms"
    outcome = msg.outcome
    if isinstance(outcome, ModelStepFailed):
        return f"{took}: failed {outcome.message or ''}".rstrip()
    if not isinstance(outcome, ModelStepCompleted):
        return f"{took}: interrupted"
    calls = f", calls {', '.join(outcome.tool_call_ids)}" if outcome.tool_call_ids else ""
    return f"{took}, {outcome.usage.total_tokens} tokens{calls}"


_DETAILS: dict[type[Any], Callable[[Any], str]] = {
    TurnStartedEvent: lambda m: m.turn_id,
    TurnCompleteEvent: lambda m: f"{m.turn_id}: {m.last_agent_message or ''}",
    TurnAbortedEvent: lambda m: f"{m.turn_id}: {m.reason}",
    UserMessageEvent: lambda m: f"({m.message.delivery}) {m.message.text}",
    AgentMessageEvent: lambda m: f"({m.phase}) {m.message}",
    AgentMessageContentDeltaEvent: lambda m: f"({m.phase}) {m.delta!r}",
    AgentReasoningContentDeltaEvent: lambda m: f"(reasoning) {m.delta!r}",
    ModelStepStartedEvent: lambda m: f"step {m.step_index}: {m.model_step_id}",
    ModelStepCompletedEvent: _step_completed,
    ToolCallBeginEvent: lambda m: f"{m.call.name} {m.call.arguments}",
    ToolCallEndEvent: lambda m: f"{'ok' if m.success else 'failed'}: {m.output}",
    ExecApprovalRequestEvent: lambda m: f"approve {', '.join(c.name for c in m.calls)}? {m.reason}",
    TokenCountEvent: lambda m: f"{m.total_usage.total_tokens} tokens in the session",
    ErrorEvent: lambda m: m.message,
    WarningEvent: lambda m: m.message,
    SessionConfiguredEvent: lambda m: m.model_route or "",
    ModelChangedEvent: lambda m: m.model_route,
    WebSearchBeginEvent: lambda m: m.call_id,
    WebSearchEndEvent: lambda m: m.query,
    FrontendEventMsg: lambda m: str(m.event.__struct_config__.tag),
}


def event_detail(msg: EventMsg) -> str:
    """A short human description of an event's payload."""
    describe = _DETAILS.get(type(msg))
    return "" if describe is None else describe(msg)


def _compact_json(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError):
        return repr(value)


def message_who(message: Message) -> str:
    """Who wrote a message: its role, and its author or tool name when it has one."""
    return message.role if message.name is None else f"{message.role} {message.name}"


def message_line(message: Message) -> str:
    """A message as one line: its text, the tools it calls, the call it answers, its state."""
    parts = [message.text] if message.text else []
    if message.tool_call_id is not None:
        parts.insert(0, f"[{message.tool_call_id}]")
    parts += [f"-> {call.name}({call.arguments})" for call in message.tool_calls]
    if message.state_delta:
        parts.append(f"state: {_compact_json(message.state_delta)}")
    if not parts:
        parts.append(_compact_json(message.item))
    return " ".join(parts)
