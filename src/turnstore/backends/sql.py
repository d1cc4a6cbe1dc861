"""The SQL of the checkpoint contract, written once for every SQL backend.

A backend supplies an `Engine` (how it reads and how it commits) and a `Dialect` (the few
words of SQL that differ: placeholders, row locks, the clock, id lists). Everything else —
which rows a save reads and writes, how events are sequenced and compacted, how a fork and a
tree deletion run — is here, so both backends follow one set of transaction scripts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from turnstore.backends.base import (
    EventRows,
    LoadedCheckpoint,
    RuntimeBackend,
    SessionRow,
    WriterStats,
)
from turnstore.errors import (
    InvalidInput,
    SequenceConflict,
    SessionExists,
    SessionNotFound,
    StorageError,
)
from turnstore.records.base import encode_json
from turnstore.records.checkpoint import JournalEvent, StreamMetrics
from turnstore.rules.context import ContextWrite, StoredContext, plan_context_write
from turnstore.rules.events import (
    STREAM_DELTA_KINDS,
    PreparedEvent,
    next_event_sequence,
    stream_metrics,
)
from turnstore.rules.saves import PreparedFork, PreparedSave

T = TypeVar("T")


class Tx(Protocol):
    """One open transaction: run statements with positional parameters."""

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run a statement and return its first row, or None."""

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a statement and return all its rows."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement that returns no rows."""


class Engine(Protocol):
    """How a backend runs transactions: reads in the caller's thread, writes via futures."""

    def read(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in a read-only transaction that sees one snapshot."""

    def write(self, work: Callable[[Tx], T]) -> Future[T]:
        """Run `work` in a write transaction; the future resolves after COMMIT."""

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""

    def close(self) -> None:
        """Finish queued writes and release every connection."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of SQL that differ between backends."""

    placeholder: str
    """The positional parameter marker: `?` or `%s`."""
    lock: str
    """Suffix taking a row lock for update (empty where one writer serialises everything)."""
    key_share: str
    """Suffix keeping a row from being deleted while a child row is inserted."""
    now: str
    """Expression of the current time in Unix seconds."""
    in_ids: str
    """`IN`-style predicate of a column against one list parameter, with `{column}`."""
    id_list: Callable[[list[str]], object]
    """Turns a list of ids into the parameter `in_ids` expects."""
    now_ms: str
    """Expression of the current time in Unix milliseconds (leases, attachment stamps)."""
    blob_read_lock: str
    """Statement a commit runs so that garbage collection cannot delete blobs under it."""
    blob_write_lock: str
    """Statement garbage collection runs to exclude commits while it decides what to delete."""


SESSION_COLUMNS = (
    "session_id, parent_session_id, parent_sequence, latest_sequence, catalog_visible,"
    " first_user_message, session_context_json, execution_stats_json, created_at, updated_at"
)
_DELTA_KINDS = "(" + ", ".join(f"'{kind}'" for kind in STREAM_DELTA_KINDS) + ")"
_CATALOG_ORDER = " ORDER BY updated_at DESC, latest_sequence DESC, session_id DESC LIMIT ?"
_AFTER_CURSOR = "(updated_at, latest_sequence, session_id) < (?, ?, ?)"


class Statements:
    """Every statement of the contract in one dialect."""

    def __init__(self, d: Dialect) -> None:
        self.dialect = d
        ids = d.in_ids
        q = self._q
        self.lock_session = q(
            "SELECT latest_sequence, latest_event_sequence, context_epoch, context_length,"
            f" context_tail FROM sessions WHERE session_id = ?{d.lock}"
        )
        self.lock_event_sequence = q(
            f"SELECT latest_event_sequence FROM sessions WHERE session_id = ?{d.lock}"
        )
        self.share_parent = q(
            f"SELECT latest_sequence FROM sessions WHERE session_id = ?{d.key_share}"
        )
        self.insert_session = q(
            "INSERT INTO sessions (latest_sequence, checkpoint_state_json, context_epoch,"
            " context_length, context_tail, session_context_json, owner_id,"
            " execution_stats_json, catalog_visible, first_user_message, session_id,"
            " parent_session_id, parent_sequence, created_at, updated_at)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {d.now}, {d.now})"
            " ON CONFLICT (session_id) DO NOTHING RETURNING session_id"
        )
        self.update_session = q(
            "UPDATE sessions SET latest_sequence = ?, checkpoint_state_json = ?,"
            " context_epoch = ?, context_length = ?, context_tail = ?,"
            " session_context_json = ?, owner_id = ?, execution_stats_json = ?,"
            " catalog_visible = ?, first_user_message = COALESCE(first_user_message, ?),"
            f" updated_at = {d.now} WHERE session_id = ?"
        )
        self.delete_context = q("DELETE FROM context_chunks WHERE session_id = ?")
        self.insert_context = q(
            "INSERT INTO context_chunks (session_id, start, items_json) VALUES (?, ?, ?)"
        )
        self.insert_transcript = q(
            "INSERT INTO transcript_delta (session_id, sequence, items_json, context_start,"
            f" created_at) VALUES (?, ?, ?, ?, {d.now})"
        )
        self.materialize_transcript = q(
            "UPDATE transcript_delta SET items_json = (SELECT c.items_json FROM context_chunks"
            " AS c WHERE c.session_id = transcript_delta.session_id"
            " AND c.start = transcript_delta.context_start), context_start = NULL"
            " WHERE session_id = ? AND context_start IS NOT NULL"
        )
        self.insert_execution = q(
            "INSERT INTO execution_journal (session_id, sequence, record_json, started_at_ms)"
            " VALUES (?, ?, ?, ?)"
        )
        # Naming the delta kinds lets the step index (session_id, model_step_id, event_kind)
        # serve the read (only delta events carry a stream phase). The rows are put in
        # sequence order by the caller: with an ORDER BY here SQLite would rather walk the
        # session's whole journal in primary-key order than sort one step's deltas.
        self.step_deltas = q(
            "SELECT sequence, stream_phase, recorded_at_ms, delta_bytes FROM event_journal"
            f" WHERE session_id = ? AND model_step_id = ? AND event_kind IN {_DELTA_KINDS}"
        )
        self.insert_event = q(
            "INSERT INTO event_journal (session_id, sequence, recorded_at_ms, event_kind,"
            " model_step_id, stream_phase, delta_bytes, event_json, stream_metrics_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.set_latest_event = q(
            "UPDATE sessions SET latest_event_sequence = ? WHERE session_id = ?"
        )
        self.delete_step_deltas = q(
            "DELETE FROM event_journal WHERE session_id = ? AND model_step_id = ?"
            f" AND event_kind IN {_DELTA_KINDS}"
        )
        self.delete_older_token_counts = q(
            "DELETE FROM event_journal"
            " WHERE session_id = ? AND event_kind = 'token_count' AND sequence < ?"
        )
        self.session_row = q(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?")
        self.lock_ids = q(
            f"SELECT session_id FROM sessions WHERE {ids.format(column='session_id')}"
            f" ORDER BY session_id{d.lock}"
        )
        self.session_tree = q(
            "WITH RECURSIVE tree(session_id) AS ("
            f" SELECT session_id FROM sessions WHERE {ids.format(column='session_id')}"
            " UNION SELECT child.session_id FROM sessions AS child"
            " JOIN tree ON child.parent_session_id = tree.session_id"
            ") SELECT session_id FROM tree"
        )
        self.delete_state_scopes = q(
            f"DELETE FROM middleware_state WHERE {ids.format(column='scope')}"
        )
        self.delete_ids = q(f"DELETE FROM sessions WHERE {ids.format(column='session_id')}")
        # Attachment rows outlive their session: deleting it makes its payloads orphans that
        # the next sweep reclaims, instead of files nobody knows about.
        self.orphan_attachments = q(
            "UPDATE attachment_manifest SET committed_at_ms = NULL, intent_at_ms = 0"
            f" WHERE {ids.format(column='session_id')}"
        )
        self.upsert_state = q(
            "INSERT INTO middleware_state (scope, key, value_json) VALUES (?, ?, ?)"
            " ON CONFLICT (scope, key) DO UPDATE SET value_json = excluded.value_json"
        )
        self.load_state = q("SELECT value_json FROM middleware_state WHERE scope = ? AND key = ?")
        self.load_row = q(
            "SELECT latest_sequence, checkpoint_state_json, context_length"
            " FROM sessions WHERE session_id = ?"
        )
        self.load_chunks = q(
            "SELECT items_json FROM context_chunks WHERE session_id = ? ORDER BY start"
        )
        self.latest_event = q("SELECT latest_event_sequence FROM sessions WHERE session_id = ?")
        self.recent_executions = q(
            "SELECT record_json FROM execution_journal"
            " ORDER BY started_at_ms DESC, session_id DESC, sequence DESC LIMIT ?"
        )
        # Each page query comes in two shapes, first page and continuation, so that both
        # are plain keyset range scans of an index (an `? IS NULL OR …` filter is not).
        self.transcript_pages = self._journal(
            "transcript_delta.sequence, transcript_delta.created_at,"
            " COALESCE(transcript_delta.items_json, context_chunks.items_json)",
            "transcript_delta LEFT JOIN context_chunks"
            " ON context_chunks.session_id = transcript_delta.session_id"
            " AND context_chunks.start = transcript_delta.context_start",
            prefix="transcript_delta.",
        )
        self.execution_pages = self._journal("sequence, record_json", "execution_journal")
        self.event_pages = self._journal(
            "sequence, recorded_at_ms, event_json, stream_metrics_json", "event_journal"
        )
        self.catalog_pages = {
            (owner, after): q(
                f"SELECT {SESSION_COLUMNS} FROM sessions"
                + (" WHERE " if owner or after else "")
                + " AND ".join(
                    part for part, used in (("owner_id = ?", owner), (_AFTER_CURSOR, after)) if used
                )
                + _CATALOG_ORDER
            )
            for owner in (False, True)
            for after in (False, True)
        }

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.dialect.placeholder)

    def _journal(self, columns: str, table: str, prefix: str = "") -> tuple[str, str]:
        base = f"SELECT {columns} FROM {table} WHERE {prefix}session_id = ?"
        order = f" ORDER BY {prefix}sequence DESC LIMIT ?"
        continuation = f"{base} AND {prefix}sequence < ?{order}"
        return self._q(base + order), self._q(continuation)


# --- reads -------------------------------------------------------------------------------------


def _page(tx: Tx, queries: tuple[str, str], key: str, before: int | None, limit: int) -> list[Any]:
    if before is None:
        return tx.all(queries[0], (key, limit))
    return tx.all(queries[1], (key, before, limit))


def _session_row(row: tuple[Any, ...]) -> SessionRow:
    values = list(row)
    values[4] = bool(values[4])
    return SessionRow(*values)


class SqlBackend:
    """The checkpoint contract over any SQL engine and dialect."""

    def __init__(self, engine: Engine, statements: Statements, runtime: RuntimeBackend) -> None:
        self.engine = engine
        self.sql = statements
        self.runtime = runtime

    def load(self, session_id: str) -> LoadedCheckpoint | None:
        """Read the latest checkpoint's stored pieces in one snapshot."""
        sql = self.sql

        def work(tx: Tx) -> LoadedCheckpoint | None:
            row = tx.one(sql.load_row, (session_id,))
            if row is None:
                return None
            chunks = [chunk for (chunk,) in tx.all(sql.load_chunks, (session_id,))]
            return LoadedCheckpoint(row[0], row[1], row[2], chunks)

        return self.engine.read(work)

    def session_row(self, session_id: str) -> SessionRow | None:
        """Read one session's catalog row."""
        row = self.engine.read(lambda tx: tx.one(self.sql.session_row, (session_id,)))
        return None if row is None else _session_row(row)

    def session_rows(
        self, owner_id: str | None, cursor: tuple[int, int, str] | None, limit: int
    ) -> list[SessionRow]:
        """Read catalog rows newest first, strictly after `cursor`, optionally of one owner."""
        query = self.sql.catalog_pages[(owner_id is not None, cursor is not None)]
        params = (*([owner_id] if owner_id is not None else []), *(cursor or ()), limit)
        return [_session_row(row) for row in self.engine.read(lambda tx: tx.all(query, params))]

    def transcript_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, int, str]]:
        """Read (sequence, created_at, items_json) newest first."""
        queries = self.sql.transcript_pages
        return self.engine.read(lambda tx: _page(tx, queries, session_id, before, limit))

    def execution_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Read (sequence, record_json) newest first."""
        queries = self.sql.execution_pages
        return self.engine.read(lambda tx: _page(tx, queries, session_id, before, limit))

    def recent_execution_rows(self, limit: int) -> list[str]:
        """Read record_json of the most recently started executions across sessions."""
        rows = self.engine.read(lambda tx: tx.all(self.sql.recent_executions, (limit,)))
        return [record for (record,) in rows]

    def event_rows(self, session_id: str, before: int | None, limit: int) -> EventRows | None:
        """Read the event high-water and journal rows newest first; None if no session."""
        sql = self.sql

        def work(tx: Tx) -> EventRows | None:
            latest = tx.one(sql.latest_event, (session_id,))
            if latest is None:
                return None
            return EventRows(latest[0], _page(tx, sql.event_pages, session_id, before, limit))

        return self.engine.read(work)

    def load_state(self, scope: str, key: str) -> str | None:
        """Read one middleware state value's JSON."""
        row = self.engine.read(lambda tx: tx.one(self.sql.load_state, (scope, key)))
        return None if row is None else str(row[0])

    def save(self, save: PreparedSave) -> Future[list[JournalEvent]]:
        """Commit a checkpoint, its transcript delta, execution record and events."""
        return self.engine.write(lambda tx: save_script(tx, self.sql, save))

    def append_event(self, session_id: str, event: PreparedEvent) -> Future[JournalEvent]:
        """Commit one event."""
        return self.engine.write(lambda tx: append_event_script(tx, self.sql, session_id, event))

    def fork(self, fork: PreparedFork) -> Future[SessionRow]:
        """Commit a child session branched from a parent at an exact sequence."""
        return self.engine.write(lambda tx: fork_script(tx, self.sql, fork))

    def delete_sessions(self, session_ids: list[str]) -> Future[bool]:
        """Delete session trees atomically; False, deleting nothing, if any id is absent."""
        return self.engine.write(lambda tx: delete_script(tx, self.sql, session_ids))

    def save_state(self, scope: str, key: str, value_json: str) -> Future[None]:
        """Replace one middleware state value."""
        return self.engine.write(lambda tx: tx.run(self.sql.upsert_state, (scope, key, value_json)))

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""
        return self.engine.writer_stats()

    def close(self) -> None:
        """Finish queued writes and release every connection."""
        self.engine.close()


# --- write transaction scripts -------------------------------------------------------------


def save_script(tx: Tx, sql: Statements, save: PreparedSave) -> list[JournalEvent]:
    """Advance a session's checkpoint, creating the session if it is new."""
    row = tx.one(sql.lock_session, (save.session_id,))
    latest_event = 0
    if row is None:
        plan = plan_context_write(None, save.context_epoch, save.context)
        if tx.one(sql.insert_session, session_values(save, plan, None)) is None:
            # Another writer created the session after our lookup; continue as an update
            # under its row lock.
            row = tx.one(sql.lock_session, (save.session_id,))
            if row is None:
                raise StorageError(
                    "the session was created and deleted during this save", retryable=True
                )
    if row is not None:
        if save.sequence <= row[0]:
            raise SequenceConflict("checkpoint sequence did not advance")
        plan = plan_context_write(
            StoredContext(row[2], row[3], row[4]), save.context_epoch, save.context
        )
        tx.run(sql.update_session, (*session_values(save, plan, None)[:10], save.session_id))
        if plan.reset:
            tx.run(sql.materialize_transcript, (save.session_id,))
            tx.run(sql.delete_context, (save.session_id,))
        latest_event = row[1]
    _insert_items(tx, sql, save, plan)
    if save.execution is not None:
        started_at_ms, record_json = save.execution
        tx.run(sql.insert_execution, (save.session_id, save.sequence, record_json, started_at_ms))
    return _store_events(tx, sql, save.session_id, latest_event, save.events)


def session_values(
    save: PreparedSave, plan: ContextWrite, parent: tuple[str, int] | None
) -> tuple[Any, ...]:
    return (
        save.sequence,
        save.state_json,
        plan.stored.epoch,
        plan.stored.length,
        plan.stored.tail_digest,
        save.session_context_json,
        save.owner_id,
        save.execution_stats_json,
        save.catalog_visible,
        save.first_user_message,
        save.session_id,
        *(parent or (None, None)),
    )


def _insert_items(tx: Tx, sql: Statements, save: PreparedSave, plan: ContextWrite) -> None:
    """Write the appended context chunk and the transcript batch of one save."""
    items = None if plan.items_json is None else plan.items_json.decode()
    if items is not None:
        tx.run(sql.insert_context, (save.session_id, plan.start, items))
    delta = save.transcript_json
    if delta is None:
        return
    # The usual agent loop appends to its context exactly what it adds to its transcript:
    # then the batch names the context chunk instead of holding a second copy.
    row = (None, plan.start) if items == delta else (delta, None)
    tx.run(sql.insert_transcript, (save.session_id, save.sequence, *row))


def append_event_script(
    tx: Tx, sql: Statements, session_id: str, event: PreparedEvent
) -> JournalEvent:
    """Journal one event at the session's next sequence."""
    row = tx.one(sql.lock_event_sequence, (session_id,))
    if row is None:
        raise SessionNotFound("event journal session does not exist")
    return _store_events(tx, sql, session_id, row[0], [event])[0]


def _store_events(
    tx: Tx, sql: Statements, session_id: str, latest: int, events: list[PreparedEvent]
) -> list[JournalEvent]:
    stored = []
    for event in events:
        latest = next_event_sequence(latest)
        stored.append(_store_event(tx, sql, session_id, latest, event))
    if events:
        tx.run(sql.set_latest_event, (latest, session_id))
    return stored


def _store_event(
    tx: Tx, sql: Statements, session_id: str, sequence: int, event: PreparedEvent
) -> JournalEvent:
    index = event.index
    metrics: list[StreamMetrics] = []
    if index.kind == "model_step_completed" and index.model_step_id is not None:
        rows = sorted(tx.all(sql.step_deltas, (session_id, index.model_step_id)))
        metrics = stream_metrics((phase, at_ms, size) for _, phase, at_ms, size in rows)
    if not event.transient:
        tx.run(
            sql.insert_event,
            (
                session_id,
                sequence,
                event.recorded_at_ms,
                index.kind,
                index.model_step_id,
                index.stream_phase,
                index.delta_bytes,
                event.event_json.decode(),
                encode_json(metrics).decode(),
            ),
        )
    if event.compacts_step_deltas:
        tx.run(sql.delete_step_deltas, (session_id, index.model_step_id))
    elif event.supersedes_token_count:
        tx.run(sql.delete_older_token_counts, (session_id, sequence))
    return event.journal_event(sequence, metrics)


def fork_script(tx: Tx, sql: Statements, fork: PreparedFork) -> SessionRow:
    """Create a child session under a parent that is kept from deletion meanwhile."""
    parent = tx.one(sql.share_parent, (fork.parent_session_id,))
    if parent is None:
        raise SessionNotFound("fork parent does not exist")
    if fork.parent_sequence > parent[0]:
        raise InvalidInput("fork point is newer than the parent checkpoint")
    child = fork.child
    plan = plan_context_write(None, child.context_epoch, child.context)
    branch = (fork.parent_session_id, fork.parent_sequence)
    if tx.one(sql.insert_session, session_values(child, plan, branch)) is None:
        raise SessionExists("fork child session already exists")
    _insert_items(tx, sql, child, plan)
    row = tx.one(sql.session_row, (child.session_id,))
    assert row is not None
    return _session_row(row)


def delete_script(tx: Tx, sql: Statements, session_ids: list[str]) -> bool:
    """Delete whole session trees and their session-scoped state, or nothing."""
    ids = sorted(set(session_ids))
    id_list = sql.dialect.id_list
    # Lock the selected rows before judging presence: a row deleted by a concurrent caller
    # after an unlocked check would otherwise let this call delete the rest.
    if len(tx.all(sql.lock_ids, (id_list(ids),))) != len(ids):
        return False
    tree = _tree(tx, sql, ids)
    while True:
        # Lock the tree, then look again: a fork that committed before the locks were taken
        # may have added a child; once every node is locked no fork can add one.
        tx.all(sql.lock_ids, (id_list(tree),))
        locked, tree = tree, _tree(tx, sql, ids)
        if tree == locked:
            break
    tx.run(sql.delete_state_scopes, (id_list(tree),))
    tx.run(sql.orphan_attachments, (id_list(tree),))
    tx.run(sql.delete_ids, (id_list(tree),))
    return True


def _tree(tx: Tx, sql: Statements, ids: list[str]) -> list[str]:
    return sorted(row[0] for row in tx.all(sql.session_tree, (sql.dialect.id_list(ids),)))
