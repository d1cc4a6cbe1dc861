"""Internal: protocol types the checkpoint records carry: usage, context, messages, events.

Each is kept as small as an agent runtime needs. Every tagged union uses a `"type"` field with
snake_case tags; an event's tag is the kind name the journal and the CLI show.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from turnstore.records.base import I64, U64, U64_MAX, Record

MAX_MESSAGE_BYTES = 128 * 1024
"""Largest message text, in UTF-8 bytes, that a message event may carry."""

ModelStepContentPhase = Literal["reasoning", "commentary", "final_answer"]
"""Which typed text stream of a model step a piece of content belongs to."""
AgentMessagePhase = Literal["commentary", "final_answer"]
"""Whether an agent message is intermediate commentary or the final answer."""
MessageDelivery = Literal["turn", "steer", "queue"]
"""How a message reaches the agent: start a turn, steer the active one, or wait in the queue."""
SandboxMode = Literal["read_only", "workspace_write", "danger_full_access"]
"""What a tool batch may touch on the host."""
NetworkAccess = Literal["restricted", "enabled"]
"""Whether a tool batch may reach the network."""


class TokenUsage(Record, kw_only=True):
    """Token counts of one or more model calls; `checked_add` leaves it unchanged on overflow."""

    input_tokens: U64 = 0
    cached_input_tokens: U64 = 0
    output_tokens: U64 = 0
    reasoning_output_tokens: U64 = 0
    total_tokens: U64 = 0

    def checked_add(self, other: TokenUsage) -> bool:
        """Add `other` in place; return False and change nothing if any field would overflow."""
        fields = self.__struct_fields__
        sums = [getattr(self, name) + getattr(other, name) for name in fields]
        if any(value > U64_MAX for value in sums):
            return False
        for name, value in zip(fields, sums, strict=True):
            setattr(self, name, value)
        return True


class SessionContext(Record, kw_only=True):
    """Where a session comes from and who owns it; shown in the catalog without the checkpoint."""

    owner_id: str | None = None
    workspace_id: str | None = None
    workspace_label: str | None = None
    origin_label: str | None = None


class ToolCall(Record, kw_only=True):
    """One tool invocation requested by the model; `arguments` is the raw JSON argument text."""

    call_id: str
    name: str
    arguments: str


class ApprovalCall(Record, kw_only=True):
    """One tool call presented to a person for approval."""

    call_id: str
    name: str
    arguments: str


class MessageAuthor(Record, kw_only=True):
    """Who wrote a message: a user, an agent or the system, with an optional id and name."""

    role: Literal["user", "agent", "system"] = "user"
    id: str | None = None
    name: str | None = None


class SessionFileReference(Record, kw_only=True):
    """A file attached to a message, stored elsewhere and referenced by id."""

    file_id: str
    name: str
    media_type: str | None = None
    size_bytes: U64 | None = None


class MessageTarget(Record, kw_only=True):
    """A durable transcript position: a checkpoint sequence and a 1-based item count within it."""

    checkpoint_sequence: U64
    batch_item_count: U64


class MessageReply(Record, kw_only=True):
    """Marks a message as a reply to an earlier transcript item."""

    target: MessageTarget
    excerpt: str | None = None


class MessageEvent(Record, kw_only=True):
    """One conversation message with its delivery and attachments."""

    author: MessageAuthor
    delivery: MessageDelivery
    text: str
    attachments: list[SessionFileReference] = msgspec.field(default_factory=list)
    reply: MessageReply | None = None
    message_target: MessageTarget | None = None


# --- event payloads -----------------------------------------------------------------------


class _Msg(Record, tag_field="type", kw_only=True):
    """Base of every `EventMsg` variant."""


class ErrorEvent(_Msg, tag="error", kw_only=True):
    """A failure reported to the frontend."""

    message: str


class WarningEvent(_Msg, tag="warning", kw_only=True):
    """A non-fatal problem reported to the frontend."""

    message: str


class SessionConfiguredEvent(_Msg, tag="session_configured", kw_only=True):
    """The session is ready, with the model route it will use."""

    session_id: str
    model_route: str | None = None


class TurnStartedEvent(_Msg, tag="task_started", kw_only=True):
    """A user turn began."""

    turn_id: str
    started_at_ms: I64 | None = None


class TurnCompleteEvent(_Msg, tag="task_complete", kw_only=True):
    """A user turn finished normally."""

    turn_id: str
    last_agent_message: str | None = None


class TurnAbortedEvent(_Msg, tag="turn_aborted", kw_only=True):
    """A user turn was aborted."""

    turn_id: str
    reason: str = ""


class UserMessageEvent(_Msg, tag="user_message", kw_only=True):
    """A message from the user entered the conversation."""

    message: MessageEvent
    turn_id: str | None = None


class AgentMessageEvent(_Msg, tag="agent_message", kw_only=True):
    """A complete agent message produced by one model step."""

    session_id: str
    turn_id: str
    model_step_id: str
    message: str
    phase: AgentMessagePhase = "final_answer"


class AgentMessageContentDeltaEvent(_Msg, tag="agent_message_content_delta", kw_only=True):
    """One streamed chunk of agent message text."""

    session_id: str
    turn_id: str
    model_step_id: str
    delta: str
    phase: AgentMessagePhase


class AgentReasoningContentDeltaEvent(_Msg, tag="agent_reasoning_content_delta", kw_only=True):
    """One streamed chunk of reasoning text."""

    session_id: str
    turn_id: str
    model_step_id: str
    delta: str


class ModelStepStartedEvent(_Msg, tag="model_step_started", kw_only=True):
    """A model call began."""

    session_id: str
    turn_id: str
    model_step_id: str
    step_index: U64
    started_at_ms: I64


class UrlCitation(Record, tag_field="type", tag="url_citation", kw_only=True):
    """A citation of a web page inside model output."""

    url: str
    title: str
    start_index: U64
    end_index: U64


ModelStepAnnotation = UrlCitation
"""An annotation on model output (only URL citations today)."""


class ModelStepContent(Record, kw_only=True):
    """One authoritative piece of model output text."""

    output_index: U64
    part_index: U64
    phase: ModelStepContentPhase
    text: str
    annotations: list[ModelStepAnnotation] = msgspec.field(default_factory=list)


class ModelStepCompleted(Record, tag_field="type", tag="completed", kw_only=True):
    """The model step produced its full output; its streamed deltas become redundant."""

    end_turn: bool
    tool_call_ids: list[str] = msgspec.field(default_factory=list)
    usage: TokenUsage = msgspec.field(default_factory=TokenUsage)
    content: list[ModelStepContent] = msgspec.field(default_factory=list)


class ModelStepFailed(Record, tag_field="type", tag="failed", kw_only=True):
    """The model step failed; its partial deltas are kept."""

    message: str | None = None


class ModelStepInterrupted(Record, tag_field="type", tag="interrupted", kw_only=True):
    """The model step was interrupted; its partial deltas are kept."""


ModelStepOutcome = ModelStepCompleted | ModelStepFailed | ModelStepInterrupted
"""How a model step ended."""


class ModelStepCompletedEvent(_Msg, tag="model_step_completed", kw_only=True):
    """A model call ended, with its outcome."""

    session_id: str
    turn_id: str
    model_step_id: str
    step_index: U64
    started_at_ms: I64
    completed_at_ms: I64
    outcome: ModelStepOutcome


class SessionHistoryEvent(_Msg, tag="session_history", kw_only=True):
    """A replay of history sent to a frontend (transient: never journaled)."""

    session_id: str
    items: list[Any] = msgspec.field(default_factory=list)


class ModelChangedEvent(_Msg, tag="model_changed", kw_only=True):
    """The session switched to another model route."""

    model_route: str


class SessionResumeRequestedEvent(_Msg, tag="session_resume_requested", kw_only=True):
    """A frontend asked to resume a session (transient: never journaled)."""

    session_id: str
    context: SessionContext = msgspec.field(default_factory=SessionContext)


class ToolCallBeginEvent(_Msg, tag="tool_call_begin", kw_only=True):
    """A tool call started."""

    turn_id: str
    call: ToolCall


class ToolCallEndEvent(_Msg, tag="tool_call_end", kw_only=True):
    """A tool call finished, with its output."""

    turn_id: str
    call_id: str
    output: str
    success: bool = True


class ExecApprovalRequestEvent(_Msg, tag="exec_approval_request", kw_only=True):
    """Tool calls wait for a person's decision."""

    id: str
    turn_id: str
    calls: list[ApprovalCall]
    reason: str


class TokenCountEvent(_Msg, tag="token_count", kw_only=True):
    """Running token totals; a newer one supersedes the older in the journal."""

    total_usage: TokenUsage
    last_usage: TokenUsage | None = None


class ContextCompactedEvent(_Msg, tag="context_compacted", kw_only=True):
    """The active context was compacted."""


class WebSearchBeginEvent(_Msg, tag="web_search_begin", kw_only=True):
    """A model-side web search started."""

    model_step_id: str
    call_id: str


class WebSearchEndEvent(_Msg, tag="web_search_end", kw_only=True):
    """A model-side web search finished."""

    model_step_id: str
    call_id: str
    query: str = ""


# --- frontend events ------------------------------------------------------------------------

FrontendSlot = Literal["header", "footer", "sidebar"]
"""Where a frontend widget is placed."""
FrontendTone = Literal["neutral", "info", "success", "warning", "danger"]
"""The colour family of a frontend widget or notice."""
FrontendPreviewUpdate = Literal["replace", "append"]
"""Whether preview events replace or extend what the preview shows."""


class PickerOption(Record, kw_only=True):
    """One choice offered by a picker."""

    id: str
    label: str
    description: str | None = None


class FrontendWidget(Record, kw_only=True):
    """A small status widget a capability shows in the frontend."""

    id: str
    slot: FrontendSlot
    text: str
    tone: FrontendTone = "neutral"
    symbol: str | None = None
    icon_only: bool = False
    progress: float | None = None
    content: str | None = None
    action: str | None = None


class _Frontend(Record, tag_field="type", kw_only=True):
    """Base of every frontend event."""


class FrontendPicker(_Frontend, tag="picker", kw_only=True):
    """Ask the person to choose one option (transient)."""

    title: str
    options: list[PickerOption] = msgspec.field(default_factory=list)


class FrontendPreview(_Frontend, tag="preview", kw_only=True):
    """Show a live preview page (transient)."""

    id: str
    title: str
    subtitle: str
    page_id: str
    update: FrontendPreviewUpdate
    events: list[Any] = msgspec.field(default_factory=list)
    next: str | None = None


class FrontendWidgetEvent(_Frontend, tag="widget", kw_only=True):
    """Show or replace a widget (transient)."""

    capability: str
    item: FrontendWidget


class FrontendRemoveWidget(_Frontend, tag="remove_widget", kw_only=True):
    """Remove a widget (transient)."""

    capability: str
    id: str


class FrontendNotice(_Frontend, tag="notice", kw_only=True):
    """A durable notice kept in the session history."""

    text: str
    tone: FrontendTone = "neutral"


FrontendEvent = (
    FrontendPicker | FrontendPreview | FrontendWidgetEvent | FrontendRemoveWidget | FrontendNotice
)
"""Events addressed to a frontend's own widgets."""


class FrontendEventMsg(_Msg, tag="frontend", kw_only=True):
    """Wraps a frontend event in the event stream."""

    event: FrontendEvent


EventMsg = (
    ErrorEvent
    | WarningEvent
    | SessionConfiguredEvent
    | TurnStartedEvent
    | TurnCompleteEvent
    | TurnAbortedEvent
    | UserMessageEvent
    | AgentMessageEvent
    | AgentMessageContentDeltaEvent
    | AgentReasoningContentDeltaEvent
    | ModelStepStartedEvent
    | ModelStepCompletedEvent
    | SessionHistoryEvent
    | ModelChangedEvent
    | SessionResumeRequestedEvent
    | ToolCallBeginEvent
    | ToolCallEndEvent
    | ExecApprovalRequestEvent
    | TokenCountEvent
    | ContextCompactedEvent
    | WebSearchBeginEvent
    | WebSearchEndEvent
    | FrontendEventMsg
)
"""Every provider-neutral event the runtime emits, tagged by `"type"`."""


class Event(Record, kw_only=True):
    """One framework event, optionally tied to the submission that caused it."""

    submission_id: str | None = None
    msg: EventMsg
