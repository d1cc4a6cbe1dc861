"""Checkpoint writes and reads: save (with its context delta), load, fork, delete, state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from turnstore.engine.protocol import Statements, Tx, insert, select
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import Checkpoint, JournalEvent, SessionStates, SessionSummary
from turnstore.records.context import Context, ContextMark
from turnstore.records.kinds import Storage, kind_of
from turnstore.rules.context import (
    ContextWrite,
    StoredContext,
    first_difference,
    plan_context_write,
)
from turnstore.rules.journal import EventWrite
from turnstore.rules.saves import (
    PreparedFork,
    PreparedSave,
    StateExpectation,
    check_advance,
    check_expected_state,
    check_fork_created,
    check_fork_parent,
    relocked,
)
from turnstore.rules.stored import check_checkpoint_row, check_context_length, valid_stored
from turnstore.rules.validation import identifier, validate_stored_checkpoint
from turnstore.scripts import journals, search_cuts, sessions
from turnstore.scripts.context_reads import StoredChunk
from turnstore.scripts.sessions import Branch


class LockedSession(NamedTuple):
    """What a save reads of its session row, under the row's lock."""

    latest_sequence: int
    latest_event_sequence: int
    context_epoch: int
    context_length: int
    context_tail: bytes | None
    kind: str | None


class StoredCheckpoint(NamedTuple):
    """The checkpoint columns of a session row (its context is in chunks)."""

    latest_sequence: int
    checkpoint_state_json: str
    context_length: int


class StateEntry(NamedTuple):
    """One middleware state value of a scope, still JSON-encoded."""

    key: str
    value_json: str


class ScopedState(NamedTuple):
    """One scope's value of a middleware state key, still JSON-encoded."""

    scope: str
    value_json: str


class ChunkInsert(NamedTuple):
    """A context chunk as written: the items a save appended from context index `start`."""

    session_id: str
    start: int
    items_json: str


class TranscriptInsert(NamedTuple):
    """A transcript batch as written: its items, or the start of the chunk that holds them."""

    session_id: str
    sequence: int
    items_json: str | None
    context_start: int | None


class ExecutionInsert(NamedTuple):
    """An execution journal row as written."""

    session_id: str
    sequence: int
    record_json: str
    started_at_ms: int


class StateWrite(NamedTuple):
    """A middleware state value as written."""

    scope: str
    key: str
    value_json: str


class CheckpointSql(Statements):
    """Statements of checkpoints, their context chunks, and middleware state."""

    lock_session = select(LockedSession, "FROM sessions WHERE session_id = ?{lock}")
    share_parent = "SELECT latest_sequence FROM sessions WHERE session_id = ?{key_share}"
    stored = select(StoredCheckpoint, "FROM sessions WHERE session_id = ?")
    chunks = "SELECT items_json FROM context_chunks WHERE session_id = ? ORDER BY start"
    chunk_runs = select(StoredChunk, "FROM context_chunks WHERE session_id = ? ORDER BY start")
    delete_chunks = "DELETE FROM context_chunks WHERE session_id = ?"
    insert_chunk = insert(ChunkInsert, "context_chunks")
    insert_transcript = insert(TranscriptInsert, "transcript_delta", created_at="{now}")
    # Before a rewrite drops the context chunks, batches that name a chunk get its items back.
    materialize_transcript = (
        "UPDATE transcript_delta SET items_json = (SELECT c.items_json FROM context_chunks"
        " AS c WHERE c.session_id = transcript_delta.session_id"
        " AND c.start = transcript_delta.context_start), context_start = NULL"
        " WHERE session_id = ? AND context_start IS NOT NULL"
    )
    insert_execution = insert(ExecutionInsert, "execution_journal")
    lock_ids = "SELECT session_id FROM sessions WHERE {ids:session_id} ORDER BY session_id{lock}"
    tree = (
        "WITH RECURSIVE tree(session_id) AS ("
        " SELECT session_id FROM sessions WHERE {ids:session_id}"
        " UNION SELECT child.session_id FROM {children}"
        ") SELECT session_id FROM tree"
    )
    delete_state_scopes = "DELETE FROM middleware_state WHERE {ids:scope}"
    delete_ids = "DELETE FROM sessions WHERE {ids:session_id}"
    # Attachment rows outlive their session: deleting it makes its payloads orphans that the
    # next sweep reclaims, instead of files nobody knows about.
    orphan_attachments = (
        "UPDATE attachment_manifest SET committed_at_ms = NULL, intent_at_ms = 0"
        " WHERE {ids:session_id}"
    )
    upsert_state = insert(
        StateWrite,
        "middleware_state",
        " ON CONFLICT (scope, key) DO UPDATE SET value_json = excluded.value_json",
    )
    state = "SELECT value_json FROM middleware_state WHERE scope = ? AND key = ?"
    locked_state = "SELECT value_json FROM middleware_state WHERE scope = ? AND key = ?{lock}"
    scope_state = select(StateEntry, "FROM middleware_state WHERE scope = ? ORDER BY key")
    scopes_state = select(ScopedState, "FROM middleware_state WHERE {ids:scope} AND key = ?")
    # By the sessions' primary key, each session's own state row looked up by its key: the
    # cost follows the sessions in the range, whatever the planner knows of either table.
    sessions_state = select(
        ScopedState,
        "FROM sessions WHERE session_id >= ? AND session_id < ? AND session_id > ?"
        " ORDER BY session_id LIMIT ?",
        scope="session_id",
        value_json="(SELECT m.value_json FROM middleware_state AS m"
        " WHERE m.scope = sessions.session_id AND m.key = ?)",
    )


# --- saves -------------------------------------------------------------------------------------


def save(tx: Tx, save: PreparedSave, origin: object = None) -> list[JournalEvent]:
    """Advance a session's checkpoint, creating the session if it is new.

    `origin` is the engine running the save: a context it marked is trusted to match.
    """
    sql = tx.sql(CheckpointSql)
    locking = tx.later(sql.lock_session, (save.session_id,))
    # Sent behind the lock, so read under it, in the same round trip.
    deltas = journals.send_step_deltas(tx, save.session_id, save.events)
    locked = next(iter(locking()), None)
    if locked is None:
        # A prepared save's items were checked before any I/O.
        plan = plan_context_write(None, save.context_epoch, save.context, checked=True)
        events = journals.plan_events(0, save.events, deltas)
        if sessions.insert(tx, save, plan, latest_event=_latest(events, 0)):
            return _append(tx, save, plan, events)
        # Another writer created the session after our lookup; continue as an update under
        # its row lock.
        locked = relocked(tx.row(sql.lock_session, (save.session_id,)), "save")
        # The first read ran before that writer's commit: read again, under the lock.
        deltas = journals.send_step_deltas(tx, save.session_id, save.events)
    latest = locked.latest_event_sequence
    events = journals.plan_events(latest, save.events, deltas)
    if kind_of(locked.kind).storage is Storage.CONTEXT:
        # A save to a session of items may have changed any item: its context is indexed
        # anew, unindexed here while the items it indexed can still be read.
        search_cuts.cut_context(tx, save.session_id, 0)
    plan = _advance(tx, save, locked, origin, _latest(events, latest))
    return _append(tx, save, plan, events)


def _latest(events: EventWrite | None, latest: int) -> int:
    """The event sequence a save leaves its session at."""
    return latest if events is None else events.latest


def _held(save: PreparedSave, locked: LockedSession, origin: object) -> int | None:
    """The context's edit mark if it is the one this store holds, else None (compare it)."""
    mark = save.context_mark
    if (
        mark is not None
        and origin is not None
        and mark.origin is origin
        and mark.session_id == save.session_id
        and mark.sequence == locked.latest_sequence
        and mark.epoch == locked.context_epoch
        and mark.length == locked.context_length
    ):
        return save.context_edited
    return None


def _verifier(tx: Tx, session_id: str, context: list[Any]) -> Callable[[int], int | None]:
    """Compare a context's first items with the stored chunks, by value and JSON type."""

    def verify(length: int) -> int | None:
        runs = tx.rows(tx.sql(CheckpointSql).chunk_runs, (session_id,))
        ends = [run.start for run in runs[1:]] + ([length] if runs else [])
        for run, end in zip(runs, ends, strict=True):
            mine = context[run.start : end]
            if encode_json(mine).decode() == run.items_json:
                continue
            stored = decode_stored(run.items_json, list[Any], "checkpoint context", session_id)
            changed = first_difference(mine, stored)
            if changed is not None:
                return run.start + changed
        return None

    return verify


def _advance(
    tx: Tx, save: PreparedSave, locked: LockedSession, origin: object, latest_event: int
) -> ContextWrite:
    """Move an existing session row to a save, rewriting its context chunks on a new epoch."""
    check_advance(save, locked.latest_sequence)
    stored = StoredContext(locked.context_epoch, locked.context_length, locked.context_tail)
    verify = _verifier(tx, save.session_id, save.context)
    edited = _held(save, locked, origin)
    plan = plan_context_write(
        stored, save.context_epoch, save.context, edited, verify, checked=True
    )
    sessions.update(tx, save, plan, latest_event)
    if plan.reset:
        sql = tx.sql(CheckpointSql)
        tx.run(sql.materialize_transcript, (save.session_id,))
        tx.run(sql.delete_chunks, (save.session_id,))
    return plan


def _append(
    tx: Tx, save: PreparedSave, plan: ContextWrite, events: EventWrite | None
) -> list[JournalEvent]:
    """Write what a save appends: context chunk, transcript batch, execution, events (the
    search index takes what was appended off the save path)."""
    insert_items(tx, save, plan)
    if save.execution is not None:
        started_at_ms, record_json = save.execution
        row = ExecutionInsert(save.session_id, save.sequence, record_json, started_at_ms)
        tx.run(tx.sql(CheckpointSql).insert_execution, row)
    return journals.write_events(tx, save.session_id, events)


def insert_items(tx: Tx, save: PreparedSave, plan: ContextWrite) -> None:
    """Write the appended context chunk and the transcript batch of one save."""
    sql = tx.sql(CheckpointSql)
    items = None if plan.items_json is None else plan.items_json.decode()
    if items is not None:
        tx.run(sql.insert_chunk, ChunkInsert(save.session_id, plan.start, items))
    delta = save.transcript_json
    if delta is None:
        return
    # The usual agent loop appends to its context exactly what it adds to its transcript:
    # then the batch names the context chunk instead of holding a second copy.
    named = items == delta
    batch = TranscriptInsert(
        save.session_id, save.sequence, None if named else delta, plan.start if named else None
    )
    tx.run(sql.insert_transcript, batch)


# --- loads -------------------------------------------------------------------------------------


def load(tx: Tx, session_id: str, origin: object = None) -> Checkpoint | None:
    """The latest checkpoint of a session, rebuilt from its row and context chunks.

    Its context is a `Context` marked as held by `origin` (the engine), when one is given.
    """
    sql = tx.sql(CheckpointSql)
    row = tx.row(sql.stored, (session_id,))
    if row is None:
        return None
    checkpoint = decode_stored(row.checkpoint_state_json, Checkpoint, "checkpoint", session_id)
    context: list[Any] = []
    for chunk in tx.values(sql.chunks, (session_id,)):
        context.extend(decode_stored(chunk, list[Any], "checkpoint context", session_id))
    valid_stored(validate_stored_checkpoint, checkpoint, "checkpoint", session_id)
    check_checkpoint_row(checkpoint, session_id, row.latest_sequence)
    check_context_length(len(context), row.context_length, session_id)
    mark = None
    if origin is not None:
        mark = ContextMark(
            origin, session_id, checkpoint.sequence, checkpoint.context_epoch, len(context)
        )
    checkpoint.context = Context.stored(context, mark)
    return checkpoint


# --- forks and deletes -------------------------------------------------------------------------


def fork(tx: Tx, fork: PreparedFork) -> SessionSummary:
    """Create a child session under a parent that is kept from deletion meanwhile."""
    sql = tx.sql(CheckpointSql)
    check_fork_parent(fork, tx.value(sql.share_parent, (fork.parent_session_id,)))
    child = fork.child
    plan = plan_context_write(None, child.context_epoch, child.context, checked=True)
    branch = Branch(fork.parent_session_id, fork.parent_sequence)
    check_fork_created(fork, sessions.insert(tx, child, plan, branch))
    insert_items(tx, child, plan)
    created = sessions.summary(tx, child.session_id)
    assert created is not None
    return created


def delete(tx: Tx, session_ids: list[str]) -> bool:
    """Delete whole session trees and their session-scoped state, or nothing."""
    sql = tx.sql(CheckpointSql)
    ids = sorted(set(session_ids))
    id_list = tx.dialect.id_list
    # Lock the selected rows before judging presence: a row deleted by a concurrent caller
    # after an unlocked check would otherwise let this call delete the rest.
    if len(tx.values(sql.lock_ids, (id_list(ids),))) != len(ids):
        return False
    tree = _tree(tx, ids)
    while True:
        # Lock the tree, then look again: a fork that committed before the locks were taken
        # may have added a child; once every node is locked no fork can add one.
        tx.values(sql.lock_ids, (id_list(tree),))
        locked, tree = tree, _tree(tx, ids)
        if tree == locked:
            break
    tx.run(sql.delete_state_scopes, (id_list(tree),))
    tx.run(sql.orphan_attachments, (id_list(tree),))
    search_cuts.drop_sessions(tx, tree)
    tx.run(sql.delete_ids, (id_list(tree),))
    return True


def _tree(tx: Tx, ids: list[str]) -> list[str]:
    return sorted(tx.values(tx.sql(CheckpointSql).tree, (tx.dialect.id_list(ids),)))


# --- middleware state --------------------------------------------------------------------------


def _state_key(scope: str, key: str) -> tuple[str, str]:
    return identifier(scope, "middleware state scope"), identifier(key, "middleware state key")


def load_state(tx: Tx, scope: str, key: str) -> Any:
    """One middleware state value, or None."""
    scope, key = _state_key(scope, key)
    value_json = tx.value(tx.sql(CheckpointSql).state, (scope, key))
    return None if value_json is None else decode_stored(value_json, Any, "middleware state")


def save_state(
    tx: Tx, scope: str, key: str, value_json: str, expected: Sequence[StateExpectation] = ()
) -> None:
    """Replace one middleware state value, once the `expected` values are found."""
    scope, key = _state_key(scope, key)
    check_state(tx, expected)
    tx.run(tx.sql(CheckpointSql).upsert_state, StateWrite(scope, key, value_json))


def check_state(tx: Tx, expected: Sequence[StateExpectation]) -> None:
    """Refuse with `StateConflict` unless each expected state value is the stored one, read
    under a row lock (PostgreSQL; SQLite's write transaction holds the database) so that no
    other writer changes it before this transaction ends."""
    if not expected:  # every append and state write passes here: nothing to look up
        return
    locked = tx.sql(CheckpointSql).locked_state
    for expectation in expected:
        stored = tx.value(locked, (expectation.scope, expectation.key))
        check_expected_state(expectation, stored)


def load_states(tx: Tx, scopes: Sequence[str], key: str) -> dict[str, Any]:
    """One middleware state key's value in each of `scopes` that has one, by scope."""
    scopes = [identifier(scope, "middleware state scope") for scope in scopes]
    key = identifier(key, "middleware state key")
    if not scopes:
        return {}
    rows = tx.rows(tx.sql(CheckpointSql).scopes_state, (tx.dialect.id_list(scopes), key))
    return {row.scope: decode_stored(row.value_json, Any, "middleware state") for row in rows}


def load_session_states(
    tx: Tx, id_range: tuple[str, str], key: str, after: str, limit: int
) -> SessionStates:
    """The sessions with ids in `id_range` after `after`, at most `limit`, each with its own
    scope's value of `key` (those without one left out), in id order."""
    low, high = id_range
    rows = tx.rows(tx.sql(CheckpointSql).sessions_state, (key, low, high, after, limit))
    states = [
        (row.scope, decode_stored(row.value_json, Any, "middleware state"))
        for row in rows
        if row.value_json is not None
    ]
    return SessionStates(states=states, next_after=rows[-1].scope if len(rows) == limit else None)


def load_state_scope(tx: Tx, scope: str) -> dict[str, Any]:
    """Every middleware state value of one scope, by key."""
    scope = identifier(scope, "middleware state scope")
    rows = tx.rows(tx.sql(CheckpointSql).scope_state, (scope,))
    return {row.key: decode_stored(row.value_json, Any, "middleware state") for row in rows}
