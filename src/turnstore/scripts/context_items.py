"""A session's context as a list of items the store edits itself: append, pop, clear, tail.

Each edit runs under the session row's lock and advances the checkpoint's sequence by one, so
concurrent editors of one session keep one total order, and a writer holding an older
checkpoint gets `SequenceConflict` instead of overwriting an edit. An edit writes what it
changes (the appended chunk, or the last chunks it shortens), never the history before it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from turnstore.engine.protocol import Statements, Tx, select, update
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import Checkpoint
from turnstore.records.kinds import Storage, kind_of
from turnstore.rules.context import digest, plan_context_write
from turnstore.rules.saves import (
    PreparedAppend,
    check_append_creates,
    check_append_sequence,
    check_replace_start,
    relocked,
)
from turnstore.scripts import search_cuts, sessions
from turnstore.scripts.checkpoints import (
    CheckpointSql,
    ChunkInsert,
    StateWrite,
    TranscriptInsert,
    check_state,
    insert_items,
)
from turnstore.scripts.context_reads import ending_at, runs_from, tail


class LockedContext(NamedTuple):
    """What an edit reads of its session row, under the row's lock."""

    latest_sequence: int
    checkpoint_state_json: str
    context_length: int
    kind: str | None


class Advance(NamedTuple):
    """What an item edit writes to its session row (the row picked by the last field)."""

    latest_sequence: int
    checkpoint_state_json: str
    context_length: int
    context_tail: bytes | None
    first_user_message: str | None
    session_id: str


class Rewrite(NamedTuple):
    """What a rewrite of the context writes to its session row, in a new epoch."""

    latest_sequence: int
    checkpoint_state_json: str
    context_epoch: int
    context_length: int
    context_tail: bytes | None
    session_id: str


class ContextItemSql(Statements):
    """Statements of item-level context edits."""

    lock = select(LockedContext, "FROM sessions WHERE session_id = ?{lock}")
    delete_chunks_from = "DELETE FROM context_chunks WHERE session_id = ? AND start >= ?"
    # Transcript batches that name a chunk about to change get its items back first.
    materialize_from = CheckpointSql.materialize_transcript + " AND context_start >= ?"
    advance = update(
        Advance,
        "sessions",
        keys=1,
        also="updated_at = {now}",
        first_user_message="COALESCE(first_user_message, ?)",
    )
    rewritten = update(Rewrite, "sessions", keys=1, also="updated_at = {now}")


def _advanced(row: LockedContext, session_id: str, epoch: int | None = None) -> tuple[int, str]:
    """The next sequence and the stored checkpoint's JSON at it (and at `epoch`, if given)."""
    checkpoint = decode_stored(row.checkpoint_state_json, Checkpoint, "checkpoint", session_id)
    sequence = row.latest_sequence + 1
    state = msgspec.structs.replace(checkpoint, sequence=sequence)
    if epoch is not None:
        state = msgspec.structs.replace(state, context_epoch=epoch)
    return sequence, encode_json(state).decode()


def _lock(tx: Tx, session_id: str) -> LockedContext | None:
    return tx.row(tx.sql(ContextItemSql).lock, (session_id,))


def append(tx: Tx, prepared: PreparedAppend) -> int:
    """Append items to a session's context and transcript, and write state, in one commit.

    Creates the session when it is missing. Refuses with `SequenceConflict` a session not at
    `expected_sequence` (0: one that exists). Returns the sequence the append committed.
    """
    session_id = prepared.session_id
    row = _lock(tx, session_id)
    if row is None:
        check_append_creates(prepared)
        created = prepared.creation()
        # `prepare_append` checked every item before any I/O: not walked again under the lock.
        plan = plan_context_write(None, created.context_epoch, created.context, checked=True)
        if sessions.insert(tx, created, plan, kind=prepared.kind):
            check_state(tx, prepared.expected_state)
            insert_items(tx, created, plan)
            _write_state(tx, prepared)
            return created.sequence
        # Another writer created the session after our lookup: append under its lock.
        row = relocked(_lock(tx, session_id), "append")
    check_append_sequence(prepared, row.latest_sequence)
    # After the session's lock, as every append with state takes its locks: no deadlock.
    check_state(tx, prepared.expected_state)
    sequence, state_json = _advanced(row, session_id)
    start = row.context_length
    tail = prepared.tail_digest
    if prepared.items_json is not None:
        checkpoint_sql = tx.sql(CheckpointSql)
        tx.run(checkpoint_sql.insert_chunk, ChunkInsert(session_id, start, prepared.items_json))
        # The transcript batch names the chunk instead of holding a second copy of the items.
        batch = TranscriptInsert(session_id, sequence, items_json=None, context_start=start)
        tx.run(checkpoint_sql.insert_transcript, batch)
    elif start:
        runs = runs_from(tx, session_id, start - 1)
        tail = digest(encode_json(runs[0][1][start - 1 - runs[0][0]]))
    length = start + len(prepared.items)
    written = Advance(sequence, state_json, length, tail, prepared.first_user_message, session_id)
    tx.run(tx.sql(ContextItemSql).advance, written)
    _write_state(tx, prepared)
    return sequence


def _write_state(tx: Tx, prepared: PreparedAppend) -> None:
    upsert = tx.sql(CheckpointSql).upsert_state
    for scope, key, value_json in prepared.state:
        tx.run(upsert, StateWrite(scope, key, value_json))


def _cut(
    tx: Tx, session_id: str, length: int, keep: int, read: bool
) -> tuple[list[Any], bytes | None]:
    """Shorten the stored context from `length` to `keep` items; the removed ones and the tail.

    Rewrites at most the chunk holding the last kept item. Without `read`, a cut to nothing
    reads no chunk and returns no items.
    """
    sql = tx.sql(ContextItemSql)
    removed: list[Any] = []
    cut = 0  # chunks from this context index on are deleted
    rewrite: tuple[int, list[Any]] | None = None
    tail = None
    if read or keep:
        # From the chunk holding the last kept item (its digest becomes the tail) on.
        runs = runs_from(tx, session_id, max(keep - 1, 0))
        ending_at(runs, length, session_id)
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
        chunk = ChunkInsert(session_id, rewrite[0], encode_json(rewrite[1]).decode())
        tx.run(tx.sql(CheckpointSql).insert_chunk, chunk)
    return removed, tail


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
    if kind_of(row.kind).storage is Storage.CONTEXT:
        # Before the cut: the index is handed the words of the items while they are stored.
        search_cuts.cut_context(tx, session_id, keep)
    removed, tail = _cut(tx, session_id, length, keep, read=drop is not None)
    sequence, state_json = _advanced(row, session_id)
    written = Advance(sequence, state_json, keep, tail, None, session_id)
    tx.run(tx.sql(ContextItemSql).advance, written)
    return removed


def replace(
    tx: Tx,
    session_id: str,
    expected_sequence: int,
    start: int,
    drop_prefix: int,
    items: list[Any],
    items_json: str | None,
) -> bool:
    """Replace the context from `start` on with `items`, dropping its first `drop_prefix`.

    Only while the session is still at `expected_sequence`: False, writing nothing, once any
    write moved it on. The items are journaled as one transcript batch. Without a dropped
    prefix, this rewrites at most one chunk before `start`; a dropped prefix rewrites the
    rest of the context once, in a new context epoch (stored indexes start at 0).
    """
    row = _lock(tx, session_id)
    if row is None or row.latest_sequence != expected_sequence:
        return False
    length = row.context_length
    check_replace_start(start, drop_prefix, length)
    if drop_prefix == 0 and start == length and not items:
        return True  # nothing changes
    sql = tx.sql(ContextItemSql)
    checkpoint_sql = tx.sql(CheckpointSql)
    in_context = kind_of(row.kind).storage is Storage.CONTEXT
    if in_context:
        search_cuts.cut_context(tx, session_id, start)
        if drop_prefix:
            search_cuts.drop_context_prefix(tx, session_id, drop_prefix)
    if drop_prefix:
        kept = tail(tx, session_id, length - drop_prefix)[: start - drop_prefix] + items
        _cut(tx, session_id, length, 0, read=False)
        epoch = _stored_epoch(row, session_id) + 1
        sequence, state_json = _advanced(row, session_id, epoch)
        if kept:
            tx.run(
                checkpoint_sql.insert_chunk, ChunkInsert(session_id, 0, encode_json(kept).decode())
            )
        if items_json is not None:
            tx.run(
                checkpoint_sql.insert_transcript,
                TranscriptInsert(session_id, sequence, items_json, None),
            )
        last = digest(encode_json(kept[-1])) if kept else None
        tx.run(sql.rewritten, Rewrite(sequence, state_json, epoch, len(kept), last, session_id))
        return True
    last = None  # the items' last, or what the cut leaves last
    if start < length:
        _, last = _cut(tx, session_id, length, start, read=False)
    sequence, state_json = _advanced(row, session_id)
    if items_json is not None:
        tx.run(checkpoint_sql.insert_chunk, ChunkInsert(session_id, start, items_json))
        # The batch names the chunk it equals instead of holding a second copy.
        tx.run(
            checkpoint_sql.insert_transcript, TranscriptInsert(session_id, sequence, None, start)
        )
        last = digest(encode_json(items[-1]))
    tx.run(sql.advance, Advance(sequence, state_json, start + len(items), last, None, session_id))
    return True


def _stored_epoch(row: LockedContext, session_id: str) -> int:
    checkpoint = decode_stored(row.checkpoint_state_json, Checkpoint, "checkpoint", session_id)
    return checkpoint.context_epoch
