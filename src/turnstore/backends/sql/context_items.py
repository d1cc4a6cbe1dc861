"""A session's context as a list of items the store edits itself: append, pop, clear, tail.

Each edit runs under the session row's lock and advances the checkpoint's sequence by one, so
concurrent editors of one session keep one total order, and a writer holding an older
checkpoint gets `SequenceConflict` instead of overwriting an edit. An edit writes what it
changes (the appended chunk, or the last chunks it shortens), never the history before it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from turnstore.backends.sql import sessions
from turnstore.backends.sql.checkpoints import CheckpointSql, StoredChunk, insert_items
from turnstore.backends.sql.engine import Statements, Tx, select
from turnstore.errors import CorruptRecord, StorageError
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import Checkpoint
from turnstore.rules.context import digest, plan_context_write
from turnstore.rules.saves import PreparedSave


class LockedContext(NamedTuple):
    """What an edit reads of its session row, under the row's lock."""

    latest_sequence: int
    checkpoint_state_json: str
    context_length: int


class Tail(NamedTuple):
    """The session-row columns a tail read needs."""

    context_length: int


class ContextItemSql(Statements):
    """Statements of item-level context edits."""

    lock = select(LockedContext, "FROM sessions WHERE session_id = ?{lock}")
    length = select(Tail, "FROM sessions WHERE session_id = ?")
    # The chunks from the one holding context index ? on: a tail read or a truncation
    # touches these and no earlier chunk.
    chunks_from = select(
        StoredChunk,
        "FROM context_chunks WHERE session_id = ? AND start >= (SELECT COALESCE(MAX(start), 0)"
        " FROM context_chunks WHERE session_id = ? AND start <= ?) ORDER BY start",
    )
    delete_chunks_from = "DELETE FROM context_chunks WHERE session_id = ? AND start >= ?"
    # Transcript batches that name a chunk about to change get its items back first.
    materialize_from = CheckpointSql.materialize_transcript + " AND context_start >= ?"
    advance = (
        "UPDATE sessions SET latest_sequence = ?, checkpoint_state_json = ?,"
        " context_length = ?, context_tail = ?,"
        " first_user_message = COALESCE(first_user_message, ?), updated_at = {now}"
        " WHERE session_id = ?"
    )


def _advanced(row: LockedContext, session_id: str) -> tuple[int, str]:
    """The next sequence and the stored checkpoint's JSON at it."""
    checkpoint = decode_stored(row.checkpoint_state_json, Checkpoint, "checkpoint", session_id)
    sequence = row.latest_sequence + 1
    state = msgspec.structs.replace(checkpoint, sequence=sequence)
    return sequence, encode_json(state).decode()


def _lock(tx: Tx, session_id: str) -> LockedContext | None:
    return tx.row(tx.sql(ContextItemSql).lock, (session_id,))


def append(tx: Tx, created: PreparedSave, items_json: str, count: int, tail: bytes) -> int:
    """Append `count` items (one JSON array) to a session's context and transcript.

    `created` is the save that creates the session when it is missing (sequence 1, these
    items as its context and transcript). Returns the sequence the append committed.
    """
    session_id = created.session_id
    row = _lock(tx, session_id)
    if row is None:
        plan = plan_context_write(None, created.context_epoch, created.context)
        if sessions.insert(tx, created, plan):
            insert_items(tx, created, plan)
            return created.sequence
        # Another writer created the session after our lookup: append under its lock.
        row = _lock(tx, session_id)
        if row is None:
            raise StorageError(
                "the session was created and deleted during this append", retryable=True
            )
    sequence, state_json = _advanced(row, session_id)
    sql = tx.sql(ContextItemSql)
    start = row.context_length
    checkpoint_sql = tx.sql(CheckpointSql)
    tx.run(checkpoint_sql.insert_chunk, (session_id, start, items_json))
    # The transcript batch names the chunk instead of holding a second copy of the items.
    tx.run(checkpoint_sql.insert_transcript, (session_id, sequence, None, start))
    params = (sequence, state_json, start + count, tail, created.first_user_message, session_id)
    tx.run(sql.advance, params)
    return sequence


def _runs_from(tx: Tx, session_id: str, index: int) -> list[tuple[int, list[Any]]]:
    """The context chunks from the one holding `index` on, decoded: (start, items) each."""
    runs = []
    expected = None
    for run in tx.rows(tx.sql(ContextItemSql).chunks_from, (session_id, session_id, index)):
        if expected is not None and run.start != expected:
            raise CorruptRecord(
                "checkpoint context chunks are not contiguous", session_id=session_id
            )
        items = decode_stored(run.items_json, list[Any], "checkpoint context", session_id)
        runs.append((run.start, items))
        expected = run.start + len(items)
    return runs


def _ending_at(runs: list[tuple[int, list[Any]]], length: int, session_id: str) -> None:
    """Refuse chunks that do not end where the session row says the context ends."""
    end = runs[-1][0] + len(runs[-1][1]) if runs else 0
    if end != length:
        raise CorruptRecord(
            "checkpoint context does not match its stored length", session_id=session_id
        )


def truncate(tx: Tx, session_id: str, drop: int | None) -> list[Any] | None:
    """Remove the newest `drop` context items (all when None); None if there is no session.

    Returns the removed items, oldest first (an empty list when `drop` is None: a clear reads
    nothing it removes). The transcript keeps every batch it journaled.
    """
    row = _lock(tx, session_id)
    if row is None:
        return None
    length = row.context_length
    keep = 0 if drop is None else max(0, length - drop)
    if keep == length:
        return []
    sql = tx.sql(ContextItemSql)
    removed: list[Any] = []
    cut = 0  # chunks from this context index on are deleted
    rewrite: tuple[int, list[Any]] | None = None
    tail = None
    if drop is not None or keep:
        # From the chunk holding the last kept item (its digest becomes the tail) on.
        runs = _runs_from(tx, session_id, max(keep - 1, 0))
        _ending_at(runs, length, session_id)
        first_start, first_items = runs[0]
        flat = [item for _, items in runs for item in items]
        removed = flat[keep - first_start :] if keep else flat
        if keep:
            kept = first_items[: keep - first_start]
            tail = digest(encode_json(kept[-1]))
            if len(kept) == len(first_items):
                cut = keep  # the last kept item ends its chunk: that chunk stays as it is
            else:
                cut, rewrite = first_start, (first_start, kept)
    tx.run(sql.materialize_from, (session_id, cut))
    tx.run(sql.delete_chunks_from, (session_id, cut))
    if rewrite is not None:
        # The chunk holding the last kept item, shortened: the only chunk rewritten.
        chunk = (session_id, rewrite[0], encode_json(rewrite[1]).decode())
        tx.run(tx.sql(CheckpointSql).insert_chunk, chunk)
    sequence, state_json = _advanced(row, session_id)
    tx.run(sql.advance, (sequence, state_json, keep, tail, None, session_id))
    return removed if drop is not None else []


def tail(tx: Tx, session_id: str, limit: int | None) -> list[Any]:
    """The newest `limit` context items (all when None), oldest first; [] without a session."""
    row = tx.row(tx.sql(ContextItemSql).length, (session_id,))
    if row is None or row.context_length == 0 or limit == 0:
        return []
    first = 0 if limit is None else max(0, row.context_length - limit)
    runs = _runs_from(tx, session_id, first)
    _ending_at(runs, row.context_length, session_id)
    return [item for _, items in runs for item in items][first - runs[0][0] :]
