"""The three journals of a session: events (sequenced, compacted), transcript, executions."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

import msgspec

from turnstore.engine.protocol import Query, Statements, Tx, insert, select
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import (
    EventPage,
    ExecutionPage,
    ExecutionRecord,
    JournalEvent,
    StreamMetrics,
    TranscriptBatch,
    TranscriptPage,
)
from turnstore.records.protocol import Event
from turnstore.rules.journal import (
    STREAM_DELTA_KINDS,
    EventWrite,
    PreparedEvent,
    deleted_later,
    journal_latest,
    plan_event_write,
)
from turnstore.rules.pages import JournalQuery, split_page
from turnstore.rules.stored import valid_stored
from turnstore.rules.validation import validate_execution_record


class EventRow(NamedTuple):
    """One stored journal event, still JSON-encoded (its own row, or taken from a batch)."""

    sequence: int
    recorded_at_ms: int
    event_json: str | bytes
    stream_metrics_json: str | bytes


class BatchRow(NamedTuple):
    """One stored batch of a save's journal events, still JSON-encoded."""

    first_sequence: int
    last_sequence: int
    events_json: str


class BatchInsert(NamedTuple):
    """One batch of journal events as written, in the INSERT's order by construction."""

    session_id: str
    first_sequence: int
    last_sequence: int
    event_count: int
    events_json: str


BatchEvents = list[tuple[int, int, msgspec.Raw, msgspec.Raw]]
"""A batch's `events_json`: [sequence, recorded_at_ms, event, stream metrics] in order."""
BATCH_CHUNK = 16
"""Batches read per statement while a page gathers its events."""


class EventInsert(NamedTuple):
    """One journal event as written: its columns, in the INSERT's order by construction."""

    session_id: str
    sequence: int
    recorded_at_ms: int
    event_kind: str
    model_step_id: str | None
    stream_phase: str | None
    delta_bytes: int | None
    event_json: str
    stream_metrics_json: str


class DeltaRow(NamedTuple):
    """The timing of one streamed delta of a model step."""

    model_step_id: str
    sequence: int
    stream_phase: str
    recorded_at_ms: int
    delta_bytes: int


class TranscriptRow(NamedTuple):
    """One transcript batch, its items as JSON (from its own column or its context chunk)."""

    sequence: int
    created_at: int
    items_json: str


class ExecutionRow(NamedTuple):
    """One finished turn's record, as JSON."""

    sequence: int
    record_json: str


_DELTA_KINDS = "(" + ", ".join(f"'{kind}'" for kind in STREAM_DELTA_KINDS) + ")"
_TRANSCRIPT_FROM = (
    "FROM transcript_delta LEFT JOIN context_chunks"
    " ON context_chunks.session_id = transcript_delta.session_id"
    " AND context_chunks.start = transcript_delta.context_start"
)
_TRANSCRIPT_COLUMNS = {
    "sequence": "transcript_delta.sequence",
    "created_at": "transcript_delta.created_at",
    "items_json": "COALESCE(transcript_delta.items_json, context_chunks.items_json)",
}


R = TypeVar("R", bound=tuple[Any, ...])


def _pages(
    row: type[R], source: str, prefix: str = "", **expressions: str
) -> tuple[Query[R], Query[R]]:
    # Each page query comes in two shapes, first page and continuation, so that both are
    # plain keyset range scans of an index (an `? IS NULL OR …` filter is not).
    where = f"{source} WHERE {prefix}session_id = ?"
    order = f" ORDER BY {prefix}sequence DESC LIMIT ?"
    return (
        select(row, where + order, **expressions),
        select(row, f"{where} AND {prefix}sequence < ?{order}", **expressions),
    )


class JournalSql(Statements):
    """Statements of the event, transcript and execution journals."""

    latest_event = "SELECT latest_event_sequence FROM sessions WHERE session_id = ?"
    lock_latest_event = "SELECT latest_event_sequence FROM sessions WHERE session_id = ?{lock}"
    set_latest_event = "UPDATE sessions SET latest_event_sequence = ? WHERE session_id = ?"
    # Naming the delta kinds lets the step index (session_id, model_step_id, event_kind) serve
    # the read (only delta events carry a stream phase). The rows are put in sequence order
    # here: with an ORDER BY, SQLite would rather walk the session's whole journal in
    # primary-key order than sort one step's deltas.
    step_deltas = select(
        DeltaRow,
        "FROM event_journal WHERE session_id = ? AND {ids:model_step_id}"
        f" AND event_kind IN {_DELTA_KINDS}",
    )
    insert_event = insert(EventInsert, "event_journal")
    delete_step_deltas = (
        "DELETE FROM event_journal WHERE session_id = ? AND model_step_id = ?"
        f" AND event_kind IN {_DELTA_KINDS}"
    )
    delete_older_token_counts = (
        "DELETE FROM event_journal"
        " WHERE session_id = ? AND event_kind = 'token_count' AND sequence < ?"
    )
    event_first_page, event_next_page = _pages(EventRow, "FROM event_journal")
    # A forward keyset range scan of event_journal's primary key (session_id, sequence).
    events_after = select(
        EventRow,
        "FROM event_journal WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
    )
    insert_batch = insert(BatchInsert, "event_batches")
    # Keyset range scans of the primary key (session_id, first_sequence). Batches do not
    # overlap, so the one holding a cursor is the nearest that starts below it.
    batches_newest = select(
        BatchRow, "FROM event_batches WHERE session_id = ? ORDER BY first_sequence DESC LIMIT ?"
    )
    batches_before = select(
        BatchRow,
        "FROM event_batches WHERE session_id = ? AND first_sequence < ?"
        " ORDER BY first_sequence DESC LIMIT ?",
    )
    batch_holding = select(
        BatchRow,
        "FROM event_batches WHERE session_id = ? AND first_sequence <= ?"
        " ORDER BY first_sequence DESC LIMIT 1",
    )
    batches_after = select(
        BatchRow,
        "FROM event_batches WHERE session_id = ? AND first_sequence > ?"
        " ORDER BY first_sequence LIMIT ?",
    )
    transcript_batch = select(
        TranscriptRow,
        f"{_TRANSCRIPT_FROM} WHERE transcript_delta.session_id = ?"
        " AND transcript_delta.sequence = ?",
        **_TRANSCRIPT_COLUMNS,
    )
    transcript_after = select(
        TranscriptRow,
        f"{_TRANSCRIPT_FROM} WHERE transcript_delta.session_id = ?"
        " AND transcript_delta.sequence > ? ORDER BY transcript_delta.sequence",
        **_TRANSCRIPT_COLUMNS,
    )
    transcript_first_page, transcript_next_page = _pages(
        TranscriptRow, _TRANSCRIPT_FROM, "transcript_delta.", **_TRANSCRIPT_COLUMNS
    )
    execution_first_page, execution_next_page = _pages(ExecutionRow, "FROM execution_journal")
    recent_executions = (
        "SELECT record_json FROM execution_journal"
        " ORDER BY started_at_ms DESC, session_id DESC, sequence DESC LIMIT ?"
    )
    # CROSS JOIN makes SQLite (which has no statistics) walk the recent index in order and
    # stop at LIMIT, instead of reading and sorting every turn of the owner's sessions; to
    # PostgreSQL it is a plain join, planned by its statistics.
    owner_recent_executions = (
        "SELECT execution_journal.record_json FROM execution_journal CROSS JOIN sessions"
        " WHERE sessions.session_id = execution_journal.session_id AND sessions.owner_id = ?"
        " ORDER BY execution_journal.started_at_ms DESC, execution_journal.session_id DESC,"
        " execution_journal.sequence DESC LIMIT ?"
    )


def _page(tx: Tx, first: Query[R], then: Query[R], query: JournalQuery) -> list[R]:
    if query.before is None:
        return tx.rows(first, (query.session_id, query.fetch))
    return tx.rows(then, (query.session_id, query.before, query.fetch))


# --- events --------------------------------------------------------------------------------------


def append_event(tx: Tx, session_id: str, event: PreparedEvent) -> JournalEvent:
    """Journal one event at the session's next sequence."""
    found = tx.value(tx.sql(JournalSql).lock_latest_event, (session_id,))
    latest = journal_latest(found, session_id)
    return store_events(tx, session_id, latest, [event], send_step_deltas(tx, session_id, [event]))[
        0
    ]


StepDeltas = Callable[[], dict[str, list[tuple[str, int, int]]]]
"""Reads the stored deltas of a batch's completed steps: (phase, recorded_at_ms, bytes) by step."""


def send_step_deltas(tx: Tx, session_id: str, events: list[PreparedEvent]) -> StepDeltas:
    """Send the one read of the stored deltas of every model step `events` complete.

    Sent with the session's row lock, it shares that read's round trip on PostgreSQL.
    """
    steps = sorted(
        {
            event.columns.model_step_id
            for event in events
            if event.columns.kind == "model_step_completed" and event.columns.model_step_id
        }
    )
    if not steps:
        return dict
    read = tx.later(tx.sql(JournalSql).step_deltas, (session_id, tx.dialect.id_list(steps)))

    def deltas() -> dict[str, list[tuple[str, int, int]]]:
        found: dict[str, list[tuple[str, int, int]]] = {}
        for row in sorted(read()):
            found.setdefault(row.model_step_id, []).append(
                (row.stream_phase, row.recorded_at_ms, row.delta_bytes)
            )
        return found

    return deltas


def plan_events(latest: int, events: list[PreparedEvent], deltas: StepDeltas) -> EventWrite | None:
    """Plan journaling `events` after sequence `latest`; None when there are none.

    `deltas` reads what `send_step_deltas` sent for these events, under the session's lock.
    """
    if not events:
        return None
    stored = deltas()
    return plan_event_write(latest, events, lambda step: stored.get(step, ()))


def write_events(tx: Tx, session_id: str, write: EventWrite | None) -> list[JournalEvent]:
    """Write a planned batch of events; the session row's latest sequence is the caller's."""
    if write is None:
        return []
    sql = tx.sql(JournalSql)
    for step in write.compacted_steps:
        tx.run(sql.delete_step_deltas, (session_id, step))
    if write.token_count_floor is not None:
        tx.run(sql.delete_older_token_counts, (session_id, write.token_count_floor))
    singles: list[tuple[int, PreparedEvent, list[StreamMetrics]]] = []
    batched: list[tuple[int, PreparedEvent, list[StreamMetrics]]] = []
    for sequence, event, metrics in write.rows:
        (singles if deleted_later(event) else batched).append((sequence, event, metrics))
    if singles:
        # Fields by position, in `EventInsert`'s order: a keyword call costs about 1 µs more
        # per event on the save path (mypy still checks each field's type).
        tx.many(
            sql.insert_event,
            [
                EventInsert(
                    session_id,
                    sequence,
                    event.recorded_at_ms,
                    event.columns.kind,
                    event.columns.model_step_id,
                    event.columns.stream_phase,
                    event.columns.delta_bytes,
                    event.event_json.decode(),
                    _metrics_json(metrics).decode(),
                )
                for sequence, event, metrics in singles
            ],
        )
    if batched:
        first, _, _ = batched[0]
        last, _, _ = batched[-1]
        tx.run(
            sql.insert_batch,
            BatchInsert(session_id, first, last, len(batched), _batch_json(batched)),
        )
    tx.wrote_events(session_id)
    return write.journal


def _batch_json(rows: list[tuple[int, PreparedEvent, list[StreamMetrics]]]) -> str:
    # The events are already encoded: the batch is their JSON joined, not encoded again.
    parts = [
        b"[%d,%d,%b,%b]"
        % (sequence, event.recorded_at_ms, event.event_json, _metrics_json(metrics))
        for sequence, event, metrics in rows
    ]
    return (b"[" + b",".join(parts) + b"]").decode()


def _metrics_json(metrics: list[StreamMetrics]) -> bytes:
    return encode_json(metrics) if metrics else b"[]"


def store_events(
    tx: Tx, session_id: str, latest: int, events: list[PreparedEvent], deltas: StepDeltas
) -> list[JournalEvent]:
    """Journal events after sequence `latest` and move the session row's latest sequence."""
    write = plan_events(latest, events, deltas)
    if write is None:
        return []
    journal = write_events(tx, session_id, write)
    tx.run(tx.sql(JournalSql).set_latest_event, (write.latest, session_id))
    return journal


def _journal_event(session_id: str, row: EventRow) -> JournalEvent:
    return JournalEvent(
        sequence=row.sequence,
        recorded_at_ms=row.recorded_at_ms,
        event=decode_stored(row.event_json, Event, "event", session_id),
        stream_metrics=decode_stored(
            row.stream_metrics_json, list[StreamMetrics], "stream metrics", session_id
        ),
    )


def event_page(tx: Tx, query: JournalQuery) -> EventPage:
    """One newest-first page of a session's journal events, with its high-water mark."""
    sql = tx.sql(JournalSql)
    latest = journal_latest(tx.value(sql.latest_event, (query.session_id,)), query.session_id)
    rows, last = split_page(_newest_events(tx, query), query.limit)
    return EventPage(
        latest_sequence=latest,
        events=[_journal_event(query.session_id, row) for row in rows],
        next_before_sequence=None if last is None else last.sequence,
    )


def _newest_events(tx: Tx, query: JournalQuery) -> list[EventRow]:
    """The newest `query.fetch` events before the cursor, from their own rows and batches."""
    sql = tx.sql(JournalSql)
    singles = _page(tx, sql.event_first_page, sql.event_next_page, query)
    session_id, before = query.session_id, query.before

    def older(cursor: int | None) -> list[BatchRow]:
        if cursor is None:
            return tx.rows(sql.batches_newest, (session_id, BATCH_CHUNK))
        return tx.rows(sql.batches_before, (session_id, cursor, BATCH_CHUNK))

    batched: list[EventRow] = []
    for batch in _batches(older, before, query.fetch):
        events = reversed(batch_events(session_id, batch))
        batched.extend(row for row in events if before is None or row.sequence < before)
        if len(batched) >= query.fetch:
            break
    merged = heapq.merge(singles, batched, key=_sequence, reverse=True)
    return list(itertools.islice(merged, query.fetch))


def events_from(tx: Tx, session_id: str, after: int, limit: int) -> list[EventRow]:
    """The oldest `limit` events after sequence `after`, from their own rows and batches."""
    sql = tx.sql(JournalSql)
    singles = tx.rows(sql.events_after, (session_id, after, limit))
    batched: list[EventRow] = []
    # The batch that may hold `after` (and events past it): the nearest starting at or below.
    holding = tx.rows(sql.batch_holding, (session_id, after))
    for batch in holding:
        if batch.last_sequence > after:
            batched.extend(row for row in batch_events(session_id, batch) if row.sequence > after)

    def newer(cursor: int | None) -> list[BatchRow]:
        return tx.rows(sql.batches_after, (session_id, cursor, BATCH_CHUNK))

    for batch in _batches(newer, after, limit - len(batched)):
        batched.extend(batch_events(session_id, batch))
        if len(batched) >= limit:
            break
    return list(itertools.islice(heapq.merge(singles, batched, key=_sequence), limit))


def _batches(
    read: Callable[[int | None], list[BatchRow]], cursor: int | None, wanted: int
) -> Iterator[BatchRow]:
    """Batches `BATCH_CHUNK` at a time, each chunk read past the last one's first sequence,
    until a short chunk; none when `wanted` is not positive."""
    while wanted > 0:
        chunk = read(cursor)
        yield from chunk
        if len(chunk) < BATCH_CHUNK:
            return
        cursor = chunk[-1].first_sequence


def _sequence(row: EventRow) -> int:
    return row.sequence


def batch_events(session_id: str, batch: BatchRow) -> list[EventRow]:
    """A stored batch's events, oldest first, each still JSON-encoded."""
    events = decode_stored(batch.events_json, BatchEvents, "event batch", session_id)
    return [
        EventRow(sequence, recorded_at_ms, bytes(event), bytes(metrics))
        for sequence, recorded_at_ms, event, metrics in events
    ]


# --- transcript and executions -----------------------------------------------------------------


def transcript_page(tx: Tx, query: JournalQuery) -> TranscriptPage:
    """One newest-first page of a session's transcript batches."""
    sql = tx.sql(JournalSql)
    found = _page(tx, sql.transcript_first_page, sql.transcript_next_page, query)
    rows, last = split_page(found, query.limit)
    batches = [
        TranscriptBatch(
            sequence=row.sequence,
            created_at=row.created_at,
            items=decode_stored(row.items_json, list[Any], "transcript", query.session_id),
        )
        for row in rows
    ]
    return TranscriptPage(
        batches=batches, next_before_sequence=None if last is None else last.sequence
    )


def _execution(record_json: str) -> ExecutionRecord:
    record = decode_stored(record_json, ExecutionRecord, "execution record")
    return valid_stored(validate_execution_record, record, "execution record", record.session_id)


def execution_page(tx: Tx, query: JournalQuery) -> ExecutionPage:
    """One newest-first page of a session's finished-turn records."""
    sql = tx.sql(JournalSql)
    found = _page(tx, sql.execution_first_page, sql.execution_next_page, query)
    rows, last = split_page(found, query.limit)
    return ExecutionPage(
        executions=[_execution(row.record_json) for row in rows],
        next_before_sequence=None if last is None else last.sequence,
    )


def recent_executions(tx: Tx, limit: int, owner_id: str | None = None) -> list[ExecutionRecord]:
    """The most recently started finished turns across all sessions, or an owner's sessions."""
    sql = tx.sql(JournalSql)
    if owner_id is None:
        found = tx.values(sql.recent_executions, (limit,))
    else:
        found = tx.values(sql.owner_recent_executions, (owner_id, limit))
    return [_execution(record) for record in found]
