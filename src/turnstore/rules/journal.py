"""Event-journal rules: indexing, transient events, compaction, stream metrics, turn pages."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple, TypeGuard

from turnstore.errors import InvalidInput, SessionNotFound
from turnstore.records.base import I64_MAX, U64_MAX
from turnstore.records.checkpoint import (
    TURN_PAGE_BATCH_SIZE,
    EventPage,
    EventPageRequest,
    JournalEvent,
    StreamMetrics,
    TimestampedEvent,
)
from turnstore.records.protocol import (
    AgentMessageContentDeltaEvent,
    AgentReasoningContentDeltaEvent,
    Event,
    EventMsg,
    FrontendEventMsg,
    FrontendNotice,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepContentPhase,
    SessionHistoryEvent,
    SessionResumeRequestedEvent,
    TurnAbortedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
)
from turnstore.rules.validation import optional_identifier
from turnstore.rules.values import (
    require,
    revalidated,
    round_tripped,
    round_tripped_all,
    typed_record,
)

STREAM_DELTA_KINDS = ("agent_message_content_delta", "agent_reasoning_content_delta")
"""Event kinds that a completed model step makes redundant."""
STREAM_PHASES: tuple[ModelStepContentPhase, ...] = ("reasoning", "commentary", "final_answer")


class EventIndex(NamedTuple):
    """The columns an event is indexed by in the journal (a named tuple: cheap to build)."""

    kind: str
    model_step_id: str | None = None
    stream_phase: ModelStepContentPhase | None = None
    delta_bytes: int | None = None


class _MsgType(NamedTuple):
    """What the journal needs to know of a message type, worked out once per type."""

    kind: str
    delta: int
    """1: a content delta, whose phase it carries; 2: a reasoning delta; 0: no delta."""
    step: bool
    """Whether the type has a `model_step_id` field."""
    transient: int
    """0: never transient; 1: always; 2: a frontend event, transient unless a notice."""


@cache
def _msg_type(cls: type) -> _MsgType:
    delta = (
        1
        if issubclass(cls, AgentMessageContentDeltaEvent)
        else 2
        if issubclass(cls, AgentReasoningContentDeltaEvent)
        else 0
    )
    transient = (
        1
        if issubclass(cls, SessionHistoryEvent | SessionResumeRequestedEvent)
        else 2
        if issubclass(cls, FrontendEventMsg)
        else 0
    )
    step = "model_step_id" in getattr(cls, "__struct_fields__", ())
    kind: str = cls.__struct_config__.tag  # type: ignore[attr-defined]
    return _MsgType(kind, delta, step, transient)


def event_index(msg: EventMsg) -> EventIndex:
    """Return the journal index of an event: its kind, model step and stream phase."""
    facts = _msg_type(type(msg))
    if facts.delta == 1:
        assert isinstance(msg, AgentMessageContentDeltaEvent)
        return EventIndex(facts.kind, msg.model_step_id, msg.phase, len(msg.delta.encode()))
    if facts.delta == 2:
        assert isinstance(msg, AgentReasoningContentDeltaEvent)
        return EventIndex(facts.kind, msg.model_step_id, "reasoning", len(msg.delta.encode()))
    if not facts.step:
        return EventIndex(facts.kind)
    model_step_id = getattr(msg, "model_step_id", None)
    return EventIndex(facts.kind, model_step_id if isinstance(model_step_id, str) else None)


def is_transient(msg: EventMsg) -> bool:
    """Whether an event is delivered but never kept: history replays, resumes, frontend UI."""
    transient = _msg_type(type(msg)).transient
    if transient == 2:
        assert isinstance(msg, FrontendEventMsg)
        return not isinstance(msg.event, FrontendNotice)
    return transient == 1


def completes_model_step(msg: EventMsg) -> bool:
    """Whether an event carries the authoritative output of a model step."""
    return isinstance(msg, ModelStepCompletedEvent) and isinstance(msg.outcome, ModelStepCompleted)


class PreparedEvent(NamedTuple):
    """An event validated and encoded before any I/O, with the journal work it implies.

    A named tuple, built by position: a frozen dataclass costs about 1 µs more per event.
    """

    recorded_at_ms: int
    event_json: bytes
    columns: EventIndex
    """The columns the journal indexes the event by."""
    transient: bool
    compacts_step_deltas: bool
    supersedes_token_count: bool
    event: Event
    """The validated event, as the journal record hands it back."""

    def journal_event(self, sequence: int, metrics: list[StreamMetrics]) -> JournalEvent:
        """Return the journal record this event became at `sequence`."""
        return JournalEvent(
            sequence=sequence,
            recorded_at_ms=self.recorded_at_ms,
            event=self.event,
            stream_metrics=metrics,
        )


def prepare_events(events: list[object]) -> list[PreparedEvent]:
    """Validate and encode a save's events before any I/O: `prepare_event` of each.

    Where every event is a typed message with an in-range timestamp, the whole list is
    round-tripped in one pass of msgspec's C code; otherwise, or if that pass finds anything
    wrong, each event goes through `prepare_event`, which names what it refuses.
    """
    stamps = _one_pass(events)
    checked = None if stamps is None else round_tripped_all([s.event for s in stamps], Event)
    if stamps is None or checked is None:
        return [prepare_event(require(event, TimestampedEvent, "event")) for event in events]
    return [
        _prepared(stamp.recorded_at_ms, event, data)
        for stamp, (event, data) in zip(stamps, checked, strict=True)
    ]


def _one_pass(events: list[object]) -> list[TimestampedEvent] | None:
    """The events, if each may take the one-pass round trip."""
    stamps = [stamp for stamp in events if _takes_one_pass(stamp)]
    return stamps if len(stamps) == len(events) else None


def _takes_one_pass(stamp: object) -> TypeGuard[TimestampedEvent]:
    """A timestamped event whose round trip in msgspec's C code is its whole check: a fully
    typed message (no free JSON to walk) and an `int` timestamp in the column's range."""
    if type(stamp) is not TimestampedEvent:
        return False
    at = stamp.recorded_at_ms
    inner = stamp.event
    return (
        type(at) is int
        and 0 <= at <= I64_MAX
        and type(inner) is Event
        and typed_record(type(inner.msg))
    )


def prepare_event(event: TimestampedEvent) -> PreparedEvent:
    """Validate one timestamped event and decide what appending it does."""
    recorded_at_ms = event.recorded_at_ms
    if isinstance(recorded_at_ms, int) and recorded_at_ms < 0:
        raise InvalidInput("event journal timestamp cannot be negative")
    inner = event.event
    # The common case takes one pass: a typed message with an in-range timestamp is
    # round-tripped alone, and that JSON is what the journal stores. Anything else goes
    # through the whole record's revalidation, which names what it refuses.
    found = round_tripped(inner, ()) if _takes_one_pass(event) else None
    if found is None:
        # The union of every message holds some free JSON; this message's own type may not.
        free = () if type(inner) is Event and typed_record(type(inner.msg)) else None
        source, _ = revalidated(event, free=free)
        return _prepared(source.recorded_at_ms, source.event, source.event.to_json())
    checked_event, event_json = found
    return _prepared(recorded_at_ms, checked_event, event_json)


def _prepared(recorded_at_ms: int, event: Event, event_json: bytes) -> PreparedEvent:
    """A validated event's journal work: its index columns and what appending it replaces."""
    msg = event.msg
    index = event_index(msg)
    # The journal indexes events by model step, so that id is a key, not content.
    optional_identifier(index.model_step_id, "event model step ID")
    return PreparedEvent(
        recorded_at_ms,
        event_json,
        index,
        is_transient(msg),
        completes_model_step(msg),
        index.kind == "token_count",
        event,
    )


def deleted_later(event: PreparedEvent) -> bool:
    """Whether a later save may delete this stored event: a streaming step's delta (its
    step's completion does) or a token count (the next one does). The journal keeps such
    events a row each; every other event is stored with its save's batch."""
    return event.columns.kind in STREAM_DELTA_KINDS or event.supersedes_token_count


class StreamMetricAccumulator:
    """Accumulates one phase's delta timings; wall-clock regressions count as no gap."""

    def __init__(self) -> None:
        self.first_delta_at_ms: int | None = None
        self.last_delta_at_ms: int | None = None
        self.chunk_count = 0
        self.utf8_bytes = 0
        self.longest_gap_ms = 0

    def observe(self, recorded_at_ms: int, delta_bytes: int) -> None:
        """Count one delta received at `recorded_at_ms` carrying `delta_bytes` bytes."""
        if delta_bytes < 0:
            raise InvalidInput("stream delta has a negative length")
        previous = self.last_delta_at_ms
        if previous is None:
            self.first_delta_at_ms = recorded_at_ms
            self.last_delta_at_ms = recorded_at_ms
        else:
            recorded_at_ms = max(recorded_at_ms, previous)
            self.longest_gap_ms = max(self.longest_gap_ms, recorded_at_ms - previous)
            self.last_delta_at_ms = recorded_at_ms
        if self.chunk_count + 1 > U64_MAX:
            raise InvalidInput("stream chunk count overflow")
        if self.utf8_bytes + delta_bytes > U64_MAX:
            raise InvalidInput("stream byte count overflow")
        self.chunk_count += 1
        self.utf8_bytes += delta_bytes

    def finish(self, phase: ModelStepContentPhase) -> StreamMetrics | None:
        """Return the metrics of this phase, or None if it saw no delta."""
        if self.first_delta_at_ms is None or self.last_delta_at_ms is None:
            return None
        return StreamMetrics(
            phase=phase,
            first_delta_at_ms=self.first_delta_at_ms,
            last_delta_at_ms=self.last_delta_at_ms,
            chunk_count=self.chunk_count,
            utf8_bytes=self.utf8_bytes,
            longest_gap_ms=self.longest_gap_ms,
        )


def stream_metrics(rows: Iterable[tuple[str, int, int]]) -> list[StreamMetrics]:
    """Compute per-phase metrics from (phase, recorded_at_ms, delta_bytes) rows, in order."""
    accumulators = {phase: StreamMetricAccumulator() for phase in STREAM_PHASES}
    for phase, recorded_at_ms, delta_bytes in rows:
        accumulator = accumulators.get(phase)  # type: ignore[call-overload]
        if accumulator is None:
            raise InvalidInput("event journal contains an unknown stream phase")
        accumulator.observe(recorded_at_ms, delta_bytes)
    finished = (accumulators[phase].finish(phase) for phase in STREAM_PHASES)
    return [metrics for metrics in finished if metrics is not None]


def journal_latest(latest: int | None, session_id: str) -> int:
    """A session's event high-water mark as read from its row; no row (None) is not found."""
    if latest is None:
        raise SessionNotFound("event journal session does not exist", session_id=session_id)
    return latest


def next_event_sequence(latest: int) -> int:
    """Return the sequence after `latest`, refusing to leave the storage integer range."""
    if latest + 1 > I64_MAX:
        raise InvalidInput("event journal sequence overflow")
    return latest + 1


StoredDeltas = Callable[[str], Iterable[tuple[str, int, int]]]
"""A model step's deltas already journaled, as (phase, recorded_at_ms, delta_bytes) in order."""


@dataclass(slots=True)
class EventWrite:
    """What journaling a batch of events writes, decided in memory before any of it is.

    A batch that streams a step's deltas and completes the step never writes those deltas;
    of its token counts only the last is written. The stored rows the batch makes redundant
    are deleted before its rows are inserted, so the deletes touch stored rows only.
    """

    latest: int
    """The session's latest event sequence after the batch."""
    rows: list[tuple[int, PreparedEvent, list[StreamMetrics]]]
    """The events to insert, in order, each with its sequence and stream metrics."""
    journal: list[JournalEvent]
    """The journal record of every event of the batch, transient ones included."""
    compacted_steps: list[str]
    """Model steps whose stored deltas the batch deletes."""
    token_count_floor: int | None
    """Stored token counts below this sequence are deleted (None: no token count came)."""


def plan_event_write(latest: int, events: list[PreparedEvent], stored: StoredDeltas) -> EventWrite:
    """Sequence a batch after `latest` and decide what it inserts and deletes.

    The result is the one appending the events one at a time would leave; `stored` is asked
    once per completed step whose stored deltas the batch has not already deleted.
    """
    kept: dict[int, tuple[PreparedEvent, list[StreamMetrics]]] = {}
    step_deltas: dict[str, list[int]] = {}
    token_counts: list[int] = []
    compacted: set[str] = set()
    to_delete: list[str] = []
    floor: int | None = None
    journal: list[JournalEvent] = []
    for event in events:
        latest = next_event_sequence(latest)
        index = event.columns
        step = index.model_step_id
        metrics: list[StreamMetrics] = []
        earlier: list[tuple[str, int, int]] = []
        if index.kind == "model_step_completed" and step is not None:
            if step not in compacted:
                earlier = list(stored(step))
            mine = [_delta(kept[sequence][0]) for sequence in step_deltas.get(step, ())]
            metrics = stream_metrics([*earlier, *mine])
        if not event.transient:
            kept[latest] = (event, metrics)
            if index.kind in STREAM_DELTA_KINDS and step is not None:
                step_deltas.setdefault(step, []).append(latest)
            elif index.kind == "token_count":
                token_counts.append(latest)
        if event.compacts_step_deltas and step is not None:
            for sequence in step_deltas.pop(step, ()):
                del kept[sequence]
            if step not in compacted:
                compacted.add(step)
                if earlier:
                    to_delete.append(step)
        elif event.supersedes_token_count:
            for sequence in token_counts:
                if sequence < latest:
                    del kept[sequence]
            token_counts = [sequence for sequence in token_counts if sequence >= latest]
            floor = latest
        journal.append(event.journal_event(latest, metrics))
    rows = [(sequence, event, metrics) for sequence, (event, metrics) in kept.items()]
    return EventWrite(latest, rows, journal, to_delete, floor)


def _delta(event: PreparedEvent) -> tuple[str, int, int]:
    """A delta event's (phase, recorded_at_ms, delta_bytes), as the journal stores them."""
    # `event_index` gives every delta kind a phase and a length.
    index = event.columns
    return (index.stream_phase or "", event.recorded_at_ms, index.delta_bytes or 0)


TurnPageSteps = Generator[EventPageRequest, EventPage, EventPage]
"""A turn-page walk: yields page requests, receives pages, returns the turn's page."""


def event_turn_page_steps(before_sequence: int | None) -> TurnPageSteps:
    """Walk newest-first pages of 100 until the newest turn before the cursor is whole.

    The result holds the events from that turn's `task_started` up to its terminal event (or
    the newest event), newest first; `next_before_sequence` is set only if an earlier turn
    exists.
    """
    cursor = before_sequence
    latest_sequence = 0
    events: list[JournalEvent] = []
    found_start = False
    has_earlier_turn = False
    while True:
        page = yield EventPageRequest(before_sequence=cursor, limit=TURN_PAGE_BATCH_SIZE)
        if not events:
            latest_sequence = page.latest_sequence
        for event in page.events:
            started = isinstance(event.event.msg, TurnStartedEvent)
            if found_start:
                if started:
                    has_earlier_turn = True
                    break
            else:
                found_start = started
                events.append(event)
        if has_earlier_turn or page.next_before_sequence is None:
            break
        cursor = page.next_before_sequence
    return _turn_slice(events, latest_sequence, has_earlier_turn)


def _turn_slice(events: list[JournalEvent], latest: int, has_earlier_turn: bool) -> EventPage:
    start = next(
        (i for i, event in enumerate(events) if isinstance(event.event.msg, TurnStartedEvent)),
        None,
    )
    if start is None:
        return EventPage(latest_sequence=latest, events=[], next_before_sequence=None)
    started = events[start].event.msg
    assert isinstance(started, TurnStartedEvent)
    turn_id = started.turn_id
    page_start = next(
        (
            i
            for i, event in enumerate(events[:start])
            if isinstance(event.event.msg, TurnCompleteEvent | TurnAbortedEvent)
            and event.event.msg.turn_id == turn_id
        ),
        0,
    )
    return EventPage(
        latest_sequence=latest,
        events=events[page_start : start + 1],
        next_before_sequence=events[start].sequence if has_earlier_turn else None,
    )
