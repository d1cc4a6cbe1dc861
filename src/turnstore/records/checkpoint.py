"""Internal: records of the checkpoint store (checkpoint version 17): state, journals, pages."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

import msgspec

from turnstore.errors import CheckpointError
from turnstore.records.base import I64, U32, U64, U64_MAX, Record
from turnstore.records.context import Context
from turnstore.records.protocol import (
    ApprovalCall,
    Event,
    ExecApprovalRequestEvent,
    MessageAuthor,
    MessageDelivery,
    MessageEvent,
    MessageReply,
    MessageTarget,
    ModelStepContentPhase,
    NetworkAccess,
    SandboxMode,
    SessionContext,
    SessionFileReference,
    TokenUsage,
    ToolCall,
)

CHECKPOINT_VERSION = 17
"""The checkpoint format version this build reads and writes."""
MAX_QUEUED_MESSAGES = 1_024
"""Most pending messages one checkpoint may hold."""
TURN_PAGE_BATCH_SIZE = 100
"""Events fetched per page while `event_turn_page` looks for a turn's start."""


class ExecutionModelPhase(Record, tag_field="type", tag="model", kw_only=True):
    """The active turn is calling the model."""


class ExecutionCompletionPhase(Record, tag_field="type", tag="completion", kw_only=True):
    """The active turn is completing, with the last assistant message if any."""

    last_assistant_message: str | None = None


ExecutionPhase = ExecutionModelPhase | ExecutionCompletionPhase
"""Durable phase of the user turn currently running."""


class ActiveExecution(Record, kw_only=True):
    """Mutable state of the user turn currently running."""

    submission_id: str
    turn_id: str
    started_at_ms: I64
    model_calls: U64 = 0
    tool_calls: U64 = 0
    failed_tool_calls: U64 = 0
    usage: TokenUsage = msgspec.field(default_factory=TokenUsage)
    next_model_step: U64 = 0
    stop_hook_active: bool = False
    phase: ExecutionPhase = msgspec.field(default_factory=ExecutionModelPhase)


class ActiveModelStep(Record, kw_only=True):
    """The model step in flight for an active execution."""

    model_step_id: str
    step_index: U64
    started_at_ms: I64


ExecutionOutcome = Literal["completed", "aborted", "failed"]
"""Terminal outcome of one user turn."""


class ExecutionRecord(Record, kw_only=True):
    """Durable observability record of one finished user turn."""

    session_id: str
    submission_id: str
    turn_id: str
    started_at_ms: I64
    finished_at_ms: I64
    elapsed_ms: U64
    outcome: ExecutionOutcome
    model_calls: U64 = 0
    tool_calls: U64 = 0
    failed_tool_calls: U64 = 0
    usage: TokenUsage = msgspec.field(default_factory=TokenUsage)


_STAT_COUNTERS = (
    "run_count",
    "failed_run_count",
    "aborted_run_count",
    "model_calls",
    "tool_calls",
    "failed_tool_calls",
    "elapsed_ms",
)


class ExecutionStats(Record, kw_only=True):
    """Aggregate execution metrics of one session; arithmetic is checked."""

    run_count: U64 = 0
    failed_run_count: U64 = 0
    aborted_run_count: U64 = 0
    model_calls: U64 = 0
    tool_calls: U64 = 0
    failed_tool_calls: U64 = 0
    elapsed_ms: U64 = 0
    usage: TokenUsage = msgspec.field(default_factory=TokenUsage)

    def checked_add(self, other: ExecutionStats) -> bool:
        """Add `other` in place; return False and change nothing on overflow."""
        usage = msgspec.structs.replace(self.usage)
        if not usage.checked_add(other.usage):
            return False
        sums = {name: getattr(self, name) + getattr(other, name) for name in _STAT_COUNTERS}
        if any(value > U64_MAX for value in sums.values()):
            return False
        for name, value in sums.items():
            setattr(self, name, value)
        self.usage = usage
        return True

    def checked_record(self, record: ExecutionRecord) -> bool:
        """Count one finished turn in place; return False and change nothing on overflow."""
        return self.checked_add(
            ExecutionStats(
                run_count=1,
                failed_run_count=int(record.outcome == "failed"),
                aborted_run_count=int(record.outcome == "aborted"),
                model_calls=record.model_calls,
                tool_calls=record.tool_calls,
                failed_tool_calls=record.failed_tool_calls,
                elapsed_ms=record.elapsed_ms,
                usage=msgspec.structs.replace(record.usage),
            )
        )


ContextRewriteReason = Literal["context_offloading", "compaction", "scratchpad"]
"""Why the active model history was deliberately replaced."""


class ContextRewrite(Record, kw_only=True):
    """The latest deliberate rewrite of the active context."""

    epoch: U64
    reasons: list[ContextRewriteReason] = msgspec.field(default_factory=list)


class PendingApproval(Record, kw_only=True):
    """A tool batch waiting for a frontend decision."""

    submission_id: str
    turn_id: str
    request_id: str
    approval_call_ids: list[str]
    authorized_call_ids: list[str]
    calls: list[ToolCall]
    reason: str
    sandbox_mode: SandboxMode
    network_access: NetworkAccess
    decision_received: bool = False

    def request_event(self) -> ExecApprovalRequestEvent:
        """Present only the calls awaiting approval, excluding already authorized ones."""
        wanted = set(self.approval_call_ids)
        return ExecApprovalRequestEvent(
            id=self.request_id,
            turn_id=self.turn_id,
            calls=[
                ApprovalCall(call_id=call.call_id, name=call.name, arguments=call.arguments)
                for call in self.calls
                if call.call_id in wanted
            ],
            reason=self.reason,
        )


class TurnBoundary(Record, tag_field="type", tag="turn", kw_only=True):
    """Deliver the message by starting a new turn."""


class SteerBoundary(Record, tag_field="type", tag="steer", kw_only=True):
    """Deliver the message into the active turn `turn_id`."""

    turn_id: str


class QueueBoundary(Record, tag_field="type", tag="queue", kw_only=True):
    """Deliver the message as the next turn once the current one ends."""


QueuedMessageBoundary = TurnBoundary | SteerBoundary | QueueBoundary
"""The single delivery boundary of one queued message."""


def boundary_delivery(boundary: QueuedMessageBoundary) -> MessageDelivery:
    """Return the message delivery a boundary implies."""
    return boundary.__struct_config__.tag  # type: ignore[return-value]


def boundary_starts_turn(boundary: QueuedMessageBoundary) -> bool:
    """Return whether delivering at this boundary starts a new turn."""
    return not isinstance(boundary, SteerBoundary)


class QueuedMessage(Record, kw_only=True):
    """One conversation message waiting for its delivery boundary."""

    owner: str
    id: str
    boundary: QueuedMessageBoundary
    author: MessageAuthor
    message: str
    attachments: list[SessionFileReference] = msgspec.field(default_factory=list)
    reply: MessageReply | None = None

    def event(self) -> MessageEvent:
        """Return the message event this queued message delivers."""
        return MessageEvent(
            author=self.author,
            delivery=boundary_delivery(self.boundary),
            text=self.message,
            attachments=list(self.attachments),
            reply=self.reply,
            message_target=None,
        )


class Checkpoint(Record, kw_only=True):
    """Versioned runtime state persisted at each durable loop boundary.

    `context` is the active model history, a `Context` unless the caller gives a plain list.
    A save writes only what was appended since the store last held it; an edit made through
    a `Context` (replacing, removing, reordering items) is saved as a rewrite, and any other
    change before the stored end needs a new `context_epoch`.
    """

    version: U32 = CHECKPOINT_VERSION
    session_id: str
    session_context: SessionContext = msgspec.field(default_factory=SessionContext)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    catalog_visible: bool = True
    first_user_message: str | None = None
    model_route: str | None = None
    sequence: U64 = 0
    context: list[Any] = msgspec.field(default_factory=Context)
    context_epoch: U64 = 0
    compaction_count: U64 = 0
    last_context_rewrite: ContextRewrite | None = None
    total_usage: TokenUsage = msgspec.field(default_factory=TokenUsage)
    last_usage: TokenUsage | None = None
    pending_messages: list[QueuedMessage] = msgspec.field(default_factory=list)
    active_execution: ActiveExecution | None = None
    active_model_step: ActiveModelStep | None = None
    execution_stats: ExecutionStats = msgspec.field(default_factory=ExecutionStats)
    pending_tools: list[ToolCall] = msgspec.field(default_factory=list)
    pending_approval: PendingApproval | None = None

    @classmethod
    def empty(cls, session_id: str) -> Checkpoint:
        """Create an empty checkpoint at sequence 0."""
        return cls(session_id=session_id)

    def finish_execution(self, outcome: ExecutionOutcome, finished_at_ms: int) -> ExecutionRecord:
        """End the active turn: return its record and fold it into `execution_stats`."""
        if self.active_model_step is not None:
            raise CheckpointError("turn ended with an active model step")
        active = self.active_execution
        if active is None:
            raise CheckpointError("turn ended without an active execution")
        finished_at_ms = max(finished_at_ms, active.started_at_ms)
        elapsed_ms = finished_at_ms - active.started_at_ms
        if elapsed_ms > U64_MAX:
            raise CheckpointError("execution elapsed time is unsupported")
        record = ExecutionRecord(
            session_id=self.session_id,
            submission_id=active.submission_id,
            turn_id=active.turn_id,
            started_at_ms=active.started_at_ms,
            finished_at_ms=finished_at_ms,
            elapsed_ms=elapsed_ms,
            outcome=outcome,
            model_calls=active.model_calls,
            tool_calls=active.tool_calls,
            failed_tool_calls=active.failed_tool_calls,
            usage=msgspec.structs.replace(active.usage),
        )
        stats = msgspec.structs.replace(self.execution_stats)
        if not stats.checked_record(record):
            raise CheckpointError("execution statistics exceed the supported range")
        self.active_execution = None
        self.execution_stats = stats
        return record


class ContextWindow(Record, kw_only=True):
    """A run of a session's context items, read with the sequence the session was at."""

    items: list[Any]
    start: U64
    """The context index of `items[0]`: 0 when the run begins at the oldest item."""
    length: U64
    """How many items the whole context holds."""
    sequence: U64
    """The session's sequence at the read (0 when there is no such session)."""


class SessionSummary(Record, kw_only=True):
    """Catalog metadata of one durable session, read without decoding its checkpoint."""

    session_id: str
    session_context: SessionContext
    parent_session_id: str | None
    parent_sequence: U64 | None
    sequence: U64
    catalog_visible: bool
    first_user_message: str | None
    execution_stats: ExecutionStats
    created_at: I64
    updated_at: I64
    kind: str | None = None
    """What wrote the session: `turnstore` (checkpoint saves), `langgraph`, `openai-agents`,
    `adk`, `items` (`append_context`), … (declared in `turnstore.records.kinds`); None until a
    store written before schema 7 is reindexed."""
    measured: list[str] = msgspec.field(default_factory=list)
    """The figures of `execution_stats` this session records (`turnstore.records.figures`):
    every one for a `turnstore` session; for a framework's, those its items carry. A figure
    not named here is unrecorded, not zero."""
    waiting: list[str] = msgspec.field(default_factory=list)
    """The nodes a LangGraph thread runs next (interrupted, or its run unfinished); []."""


class SessionCursor(Record, kw_only=True):
    """Stable key for continuing a newest-first catalog query."""

    updated_at: I64
    sequence: U64
    session_id: str

    def to_token(self) -> str:
        """This cursor as one printable, shell- and URL-safe token (base64url of its JSON)."""
        return base64.urlsafe_b64encode(msgspec.json.encode(self)).rstrip(b"=").decode()

    @classmethod
    def from_token(cls, token: str) -> SessionCursor:
        """The cursor a token from `to_token` holds; ValueError if it holds none."""
        padded = token + "=" * (-len(token) % 4)
        try:
            raw = base64.urlsafe_b64decode(padded.encode("ascii"))
            return msgspec.json.decode(raw, type=cls)
        except (
            binascii.Error,
            UnicodeEncodeError,
            msgspec.DecodeError,
            ValueError,
            RecursionError,
        ) as error:
            raise ValueError(f"{token[:80]!r} is not a catalog cursor") from error


class SessionPageRequest(Record, kw_only=True):
    """Bounds one newest-first catalog query; `owner_id` restricts sessions and cursor keys."""

    owner_id: str | None = None
    cursor: SessionCursor | None = None
    limit: U64
    id_prefix: str | None = None
    """Only ids starting with this text, literally and case-sensitively; "" filters nothing."""


class SessionPage(Record, kw_only=True):
    """One page of durable sessions."""

    sessions: list[SessionSummary]
    next_cursor: SessionCursor | None = None


class SessionStates(Record, kw_only=True):
    """One page of sessions by id, each with its own value of one middleware state key."""

    states: list[tuple[str, Any]]
    """(session id, value) in id order; sessions without the key are left out."""
    next_after: str | None = None
    """The `after` of the next page; None when this page reached the end."""


class ForkTree(Record, kw_only=True):
    """The root of a fork tree and its descendants: root first, then breadth-first."""

    root_session_id: str
    sessions: list[SessionSummary]
    """Siblings ordered by (parent_sequence, created_at, session_id); at most the limit asked."""
    truncated: bool
    """Whether the tree holds more sessions than `sessions` lists."""


class TranscriptBatch(Record, kw_only=True):
    """One append-only transcript delta at its durable checkpoint sequence."""

    sequence: U64
    created_at: I64
    items: list[Any]


class TranscriptPageRequest(Record, kw_only=True):
    """Bounds one newest-first transcript query."""

    before_sequence: U64 | None = None
    max_batches: U64


class TranscriptPage(Record, kw_only=True):
    """One newest-first page of transcript deltas."""

    batches: list[TranscriptBatch] = msgspec.field(default_factory=list)
    next_before_sequence: U64 | None = None

    def into_positioned_items_chronological(self) -> list[tuple[MessageTarget, Any]]:
        """Flatten this page into chronological items with their durable positions."""
        return [
            (MessageTarget(checkpoint_sequence=batch.sequence, batch_item_count=index + 1), item)
            for batch in reversed(self.batches)
            for index, item in enumerate(batch.items)
        ]


class ExecutionPageRequest(Record, kw_only=True):
    """Bounds one newest-first execution-journal query."""

    before_sequence: U64 | None = None
    limit: U64


class ExecutionPage(Record, kw_only=True):
    """One newest-first page of finished user-turn records."""

    executions: list[ExecutionRecord] = msgspec.field(default_factory=list)
    next_before_sequence: U64 | None = None


class StreamMetrics(Record, kw_only=True):
    """Delivery metrics of one typed text stream within a completed model step."""

    phase: ModelStepContentPhase
    first_delta_at_ms: I64
    last_delta_at_ms: I64
    chunk_count: U64
    utf8_bytes: U64
    longest_gap_ms: U64


class JournalEvent(Record, kw_only=True):
    """One normalized frontend event in the durable session journal."""

    sequence: U64
    recorded_at_ms: I64
    event: Event
    stream_metrics: list[StreamMetrics] = msgspec.field(default_factory=list)


class TimestampedEvent(Record, kw_only=True):
    """One event paired with the time the framework received it."""

    recorded_at_ms: I64
    event: Event


class EventPageRequest(Record, kw_only=True):
    """Bounds one newest-first event-journal query."""

    before_sequence: U64 | None = None
    limit: U64


class EventPage(Record, kw_only=True):
    """One newest-first page of journal events; `latest_sequence` counts discarded ones too."""

    latest_sequence: U64 = 0
    events: list[JournalEvent] = msgspec.field(default_factory=list)
    next_before_sequence: U64 | None = None

    def into_chronological(self) -> list[JournalEvent]:
        """Return this page's events in replay order."""
        return list(reversed(self.events))
