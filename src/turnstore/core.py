"""Every store operation, written once as steps that the async and blocking faces both drive.

An operation is a generator: it validates and encodes its input before any I/O, yields the
backend calls it needs (`Read` runs a blocking read, `Write` submits a write whose future
resolves after commit), receives their results, and returns the public value. The faces in
`turnstore.api` only differ in how they wait for a step.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from turnstore.backends.base import Backend, LoadedCheckpoint, SessionRow
from turnstore.errors import CorruptRecord, InvalidInput, RecordDecodeError, SessionNotFound
from turnstore.records.base import I64_MAX, I64_MIN, decode_json
from turnstore.records.checkpoint import (
    Checkpoint,
    EventPage,
    EventPageRequest,
    ExecutionPage,
    ExecutionPageRequest,
    ExecutionRecord,
    ExecutionStats,
    JournalEvent,
    SessionCursor,
    SessionPage,
    SessionPageRequest,
    SessionSummary,
    StreamMetrics,
    TimestampedEvent,
    TranscriptBatch,
    TranscriptPage,
    TranscriptPageRequest,
)
from turnstore.records.protocol import Event, SessionContext
from turnstore.rules.events import event_turn_page_steps, prepare_event
from turnstore.rules.saves import PreparedFork, encode_values, prepare_save, type_check
from turnstore.rules.validation import (
    optional_cursor,
    page_limit,
    storage_integer,
    validate_checkpoint,
    validate_execution_record,
    validate_session_id,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """A blocking backend read."""

    call: Callable[[], T]


@dataclass(frozen=True, slots=True)
class Write(Generic[T]):
    """A backend write; the future resolves after the write's transaction commits."""

    submit: Callable[[], Future[T]]


Step = Read[Any] | Write[Any]
Steps = Generator[Step, Any, T]
"""An operation: yields backend steps, receives their results, returns the public value."""


def decode_checkpoint(session_id: str, loaded: LoadedCheckpoint) -> Checkpoint:
    """Rebuild a checkpoint from its state row and context chunks, checking both."""
    try:
        checkpoint = decode_json(loaded.state_json, Checkpoint)
        context: list[Any] = []
        for chunk in loaded.context_chunks:
            context.extend(decode_json(chunk, list[Any]))
        validate_checkpoint(checkpoint)
    except InvalidInput as error:
        raise CorruptRecord(f"stored checkpoint is invalid: {error}") from None
    if checkpoint.session_id != session_id or checkpoint.sequence != loaded.sequence:
        raise CorruptRecord("checkpoint row does not match its index")
    if len(context) != loaded.context_length:
        raise CorruptRecord("checkpoint context does not match its stored length")
    checkpoint.context = context
    return checkpoint


def summary_from_row(row: SessionRow) -> SessionSummary:
    """Build a catalog summary from a session row without touching the checkpoint."""
    try:
        return SessionSummary(
            session_id=row.session_id,
            session_context=decode_json(row.session_context_json, SessionContext),
            parent_session_id=row.parent_session_id,
            parent_sequence=row.parent_sequence,
            sequence=row.sequence,
            catalog_visible=row.catalog_visible,
            first_user_message=row.first_user_message,
            execution_stats=decode_json(row.execution_stats_json, ExecutionStats),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
    except RecordDecodeError as error:
        raise CorruptRecord(f"session row does not decode: {error}") from None


def _decode_execution(record_json: str) -> ExecutionRecord:
    try:
        record = decode_json(record_json, ExecutionRecord)
        validate_execution_record(record)
    except InvalidInput as error:
        raise CorruptRecord(f"stored execution record is invalid: {error}") from None
    return record


def _journal_event(row: tuple[int, int, str, str]) -> JournalEvent:
    sequence, recorded_at_ms, event_json, metrics_json = row
    try:
        return JournalEvent(
            sequence=sequence,
            recorded_at_ms=recorded_at_ms,
            event=decode_json(event_json, Event),
            stream_metrics=decode_json(metrics_json, list[StreamMetrics]),
        )
    except RecordDecodeError as error:
        raise CorruptRecord(f"stored event does not decode: {error}") from None


class Core:
    """The operations of the checkpoint contract over one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def load(self, session_id: str) -> Steps[Checkpoint | None]:
        """Load the latest checkpoint of a session."""
        session_id = validate_session_id(session_id)
        loaded = yield Read(lambda: self.backend.load(session_id))
        return None if loaded is None else decode_checkpoint(session_id, loaded)

    def save_with_events(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any],
        execution: ExecutionRecord | None,
        events: Iterable[TimestampedEvent],
    ) -> Steps[list[JournalEvent]]:
        """Commit checkpoint, transcript delta, execution record and events as one unit."""
        prepared = prepare_save(checkpoint, transcript_delta, execution, events)
        stored: list[JournalEvent] = yield Write(lambda: self.backend.save(prepared))
        return stored

    def append_event(
        self, session_id: str, recorded_at_ms: int, event: Event
    ) -> Steps[JournalEvent]:
        """Assign the next session-local sequence to one event and journal it."""
        session_id = validate_session_id(session_id)
        type_check(event, Event, "event")
        prepared = prepare_event(TimestampedEvent(recorded_at_ms=recorded_at_ms, event=event))
        stored: JournalEvent = yield Write(lambda: self.backend.append_event(session_id, prepared))
        return stored

    def event_page(self, session_id: str, request: EventPageRequest) -> Steps[EventPage]:
        """Load one newest-first page of a session's journal events."""
        session_id = validate_session_id(session_id)
        type_check(request, EventPageRequest, "request")
        query_limit = page_limit(request.limit, "event journal page")
        before = optional_cursor(
            request.before_sequence, "event journal cursor exceeds SQLite INTEGER"
        )
        found = yield Read(lambda: self.backend.event_rows(session_id, before, query_limit))
        if found is None:
            raise SessionNotFound("event journal session does not exist")
        rows = found.rows
        has_more = len(rows) > request.limit
        events = [_journal_event(row) for row in rows[: request.limit]]
        return EventPage(
            latest_sequence=found.latest_sequence,
            events=events,
            next_before_sequence=events[-1].sequence if has_more and events else None,
        )

    def event_turn_page(self, session_id: str, before_sequence: int | None) -> Steps[EventPage]:
        """Load the newest whole turn of events before a cursor, walking pages of 100."""
        walk = event_turn_page_steps(before_sequence)
        request = next(walk)
        while True:
            page = yield from self.event_page(session_id, request)
            try:
                request = walk.send(page)
            except StopIteration as done:
                result: EventPage = done.value
                return result

    def session_summary(self, session_id: str) -> Steps[SessionSummary | None]:
        """Load one session's catalog entry without reading its checkpoint."""
        session_id = validate_session_id(session_id)
        row = yield Read(lambda: self.backend.session_row(session_id))
        return None if row is None else summary_from_row(row)

    def list_sessions_page(self, request: SessionPageRequest) -> Steps[SessionPage]:
        """List one newest-first page of the catalog, optionally for one owner."""
        type_check(request, SessionPageRequest, "request")
        query_limit = page_limit(request.limit, "session page")
        cursor = None
        if request.cursor is not None:
            key = request.cursor
            type_check(key, SessionCursor, "cursor")
            sequence = storage_integer(
                key.sequence, "session cursor sequence exceeds SQLite INTEGER"
            )
            updated_at = key.updated_at
            if (
                not isinstance(updated_at, int)
                or isinstance(updated_at, bool)
                or not I64_MIN <= updated_at <= I64_MAX
                or not isinstance(key.session_id, str)
            ):
                raise InvalidInput("session cursor is invalid")
            cursor = (key.updated_at, sequence, key.session_id)
        owner = request.owner_id
        if owner is not None:
            type_check(owner, str, "owner_id")
        rows = yield Read(lambda: self.backend.session_rows(owner, cursor, query_limit))
        sessions = [summary_from_row(row) for row in rows[: request.limit]]
        last = sessions[-1] if len(rows) > request.limit and sessions else None
        next_cursor = None
        if last is not None:
            next_cursor = SessionCursor(
                updated_at=last.updated_at, sequence=last.sequence, session_id=last.session_id
            )
        return SessionPage(sessions=sessions, next_cursor=next_cursor)

    def transcript_page(
        self, session_id: str, request: TranscriptPageRequest
    ) -> Steps[TranscriptPage]:
        """Load one newest-first page of transcript batches."""
        session_id = validate_session_id(session_id)
        type_check(request, TranscriptPageRequest, "request")
        query_limit = page_limit(request.max_batches, "transcript page")
        before = optional_cursor(
            request.before_sequence, "transcript cursor exceeds SQLite INTEGER"
        )
        rows = yield Read(lambda: self.backend.transcript_rows(session_id, before, query_limit))
        try:
            batches = [
                TranscriptBatch(
                    sequence=sequence, created_at=created_at, items=decode_json(items, list[Any])
                )
                for sequence, created_at, items in rows[: request.max_batches]
            ]
        except RecordDecodeError as error:
            raise CorruptRecord(f"stored transcript does not decode: {error}") from None
        has_more = len(rows) > request.max_batches
        return TranscriptPage(
            batches=batches,
            next_before_sequence=batches[-1].sequence if has_more and batches else None,
        )

    def execution_page(
        self, session_id: str, request: ExecutionPageRequest
    ) -> Steps[ExecutionPage]:
        """Load one newest-first page of finished-turn records."""
        session_id = validate_session_id(session_id)
        type_check(request, ExecutionPageRequest, "request")
        query_limit = page_limit(request.limit, "execution page")
        before = optional_cursor(request.before_sequence, "execution cursor exceeds SQLite INTEGER")
        rows = yield Read(lambda: self.backend.execution_rows(session_id, before, query_limit))
        page = rows[: request.limit]
        has_more = len(rows) > request.limit
        return ExecutionPage(
            executions=[_decode_execution(record) for _, record in page],
            next_before_sequence=page[-1][0] if has_more and page else None,
        )

    def recent_executions(self, limit: int) -> Steps[list[ExecutionRecord]]:
        """Load the most recently started finished turns across all sessions."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise InvalidInput("recent execution limit must be positive")
        if limit > I64_MAX:
            raise InvalidInput("recent execution limit is too large")
        rows = yield Read(lambda: self.backend.recent_execution_rows(limit))
        return [_decode_execution(record) for record in rows]

    def fork(
        self, parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
    ) -> Steps[SessionSummary]:
        """Create a child session branched from the parent at an exact durable sequence."""
        type_check(checkpoint, Checkpoint, "checkpoint")
        parent_session_id = validate_session_id(parent_session_id)
        if parent_session_id == checkpoint.session_id:
            raise InvalidInput("a session cannot fork itself")
        clean = (
            checkpoint.sequence == 0
            and checkpoint.active_execution is None
            and checkpoint.pending_approval is None
            and not checkpoint.pending_messages
        )
        if not clean:
            raise InvalidInput("a fork must begin at a clean sequence-zero checkpoint")
        parent_sequence = storage_integer(parent_sequence, "parent sequence exceeds SQLite INTEGER")
        # The child's starting context is its first transcript batch, so its history pages
        # show what it began with.
        child = prepare_save(checkpoint, checkpoint.context, None, ())
        prepared = PreparedFork(parent_session_id, parent_sequence, child)
        row: SessionRow = yield Write(lambda: self.backend.fork(prepared))
        return summary_from_row(row)

    def delete_sessions(self, session_ids: Sequence[str]) -> Steps[bool]:
        """Delete sessions, their descendants and session-scoped state, all or nothing."""
        if isinstance(session_ids, str):
            raise InvalidInput("session_ids must be a sequence of session IDs, not one string")
        ids = [validate_session_id(session_id) for session_id in session_ids]
        deleted: bool = yield Write(lambda: self.backend.delete_sessions(ids))
        return deleted

    def load_state(self, scope: str, key: str) -> Steps[Any]:
        """Load one middleware state value, or None."""
        type_check(scope, str, "scope")
        type_check(key, str, "key")
        value_json = yield Read(lambda: self.backend.load_state(scope, key))
        return None if value_json is None else decode_json(value_json, Any)

    def save_state(self, scope: str, key: str, value: Any) -> Steps[None]:
        """Durably replace one middleware state value."""
        type_check(scope, str, "scope")
        type_check(key, str, "key")
        value_json = encode_values(value, "middleware state")
        yield Write(lambda: self.backend.save_state(scope, key, value_json))
