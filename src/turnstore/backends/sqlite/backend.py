"""The SQLite backend: SQL for every operation of the checkpoint contract."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

from turnstore.backends.base import (
    EventRows,
    LoadedCheckpoint,
    PreparedFork,
    PreparedSave,
    SessionRow,
    WriterStats,
)
from turnstore.backends.sqlite.connection import (
    BUSY_TIMEOUT_S,
    ReaderPool,
    check_database,
    connect,
    open_database,
)
from turnstore.backends.sqlite.writer import GroupCommitWriter
from turnstore.errors import (
    InvalidInput,
    ReadOnlyStore,
    SequenceConflict,
    SessionExists,
    SessionNotFound,
)
from turnstore.records.base import encode_json
from turnstore.records.checkpoint import JournalEvent
from turnstore.rules.context import StoredContext, plan_context_write
from turnstore.rules.events import PreparedEvent, next_event_sequence, stream_metrics

T = TypeVar("T")

_SESSION_COLUMNS = """session_id, parent_session_id, parent_sequence, latest_sequence,
    catalog_visible, first_user_message, session_context_json, execution_stats_json,
    created_at, updated_at"""

_SESSION_TREE = """WITH RECURSIVE tree(session_id) AS (
        SELECT session_id FROM sessions WHERE session_id IN (SELECT value FROM json_each(?1))
        UNION
        SELECT child.session_id FROM sessions AS child
        JOIN tree ON child.parent_session_id = tree.session_id
    )"""


def _session_row(row: tuple[object, ...]) -> SessionRow:
    values = list(row)
    values[4] = bool(values[4])
    return SessionRow(*values)  # type: ignore[arg-type]


class SqliteBackend:
    """One SQLite database file: a group-commit writer thread and a pool of readers.

    Read-only, the file is neither created nor migrated, connections are opened `mode=ro`
    with `query_only`, no writer thread runs, and every write raises `ReadOnlyStore`.
    """

    def __init__(
        self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S, read_only: bool = False
    ) -> None:
        self.path = path
        self._readers = ReaderPool(path, busy_timeout_s, read_only=read_only)
        self._writer: GroupCommitWriter | None = None
        if read_only:
            check_database(path, busy_timeout_s)
        else:
            open_database(path, busy_timeout_s)
            self._writer = GroupCommitWriter(lambda: connect(path, busy_timeout_s))

    def _submit(self, work: Callable[[sqlite3.Connection], T]) -> Future[T]:
        if self._writer is None:
            raise ReadOnlyStore("the store was opened read-only")
        return self._writer.submit(work)

    # --- reads ------------------------------------------------------------------------------

    def load(self, session_id: str) -> LoadedCheckpoint | None:
        """Read the latest checkpoint's stored pieces."""
        with self._readers.snapshot() as db:
            row = db.execute(
                "SELECT latest_sequence, checkpoint_state_json, context_length"
                " FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            chunks = db.execute(
                "SELECT items_json FROM context_chunks WHERE session_id = ? ORDER BY start",
                (session_id,),
            ).fetchall()
        return LoadedCheckpoint(row[0], row[1], row[2], [chunk for (chunk,) in chunks])

    def session_row(self, session_id: str) -> SessionRow | None:
        """Read one session's catalog row."""
        with self._readers.snapshot() as db:
            row = db.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else _session_row(row)

    def session_rows(
        self, owner_id: str | None, cursor: tuple[int, int, str] | None, limit: int
    ) -> list[SessionRow]:
        """Read catalog rows newest first, strictly after `cursor`, optionally of one owner."""
        where = []
        params: list[object] = []
        if owner_id is not None:
            where.append("owner_id = ?")
            params.append(owner_id)
        if cursor is not None:
            where.append("(updated_at, latest_sequence, session_id) < (?, ?, ?)")
            params.extend(cursor)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._readers.snapshot() as db:
            rows = db.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions {clause}"
                " ORDER BY updated_at DESC, latest_sequence DESC, session_id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_session_row(row) for row in rows]

    def transcript_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, int, str]]:
        """Read (sequence, created_at, items_json) newest first."""
        with self._readers.snapshot() as db:
            return db.execute(
                "SELECT sequence, created_at, items_json FROM transcript_delta"
                " WHERE session_id = ?1 AND (?2 IS NULL OR sequence < ?2)"
                " ORDER BY sequence DESC LIMIT ?3",
                (session_id, before, limit),
            ).fetchall()

    def execution_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Read (sequence, record_json) newest first."""
        with self._readers.snapshot() as db:
            return db.execute(
                "SELECT sequence, record_json FROM execution_journal"
                " WHERE session_id = ?1 AND (?2 IS NULL OR sequence < ?2)"
                " ORDER BY sequence DESC LIMIT ?3",
                (session_id, before, limit),
            ).fetchall()

    def recent_execution_rows(self, limit: int) -> list[str]:
        """Read record_json of the most recently started executions across sessions."""
        with self._readers.snapshot() as db:
            rows = db.execute(
                "SELECT record_json FROM execution_journal"
                " ORDER BY started_at_ms DESC, session_id DESC, sequence DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [record for (record,) in rows]

    def event_rows(self, session_id: str, before: int | None, limit: int) -> EventRows | None:
        """Read the event high-water and journal rows newest first; None if no session."""
        with self._readers.snapshot() as db:
            latest = db.execute(
                "SELECT latest_event_sequence FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if latest is None:
                return None
            rows = db.execute(
                "SELECT sequence, recorded_at_ms, event_json, stream_metrics_json"
                " FROM event_journal WHERE session_id = ?1 AND (?2 IS NULL OR sequence < ?2)"
                " ORDER BY sequence DESC LIMIT ?3",
                (session_id, before, limit),
            ).fetchall()
        return EventRows(latest[0], rows)

    def load_state(self, scope: str, key: str) -> str | None:
        """Read one middleware state value's JSON."""
        with self._readers.snapshot() as db:
            row = db.execute(
                "SELECT value_json FROM middleware_state WHERE scope = ? AND key = ?",
                (scope, key),
            ).fetchone()
        return None if row is None else str(row[0])

    # --- writes -----------------------------------------------------------------------------

    def save(self, save: PreparedSave) -> Future[list[JournalEvent]]:
        """Commit a checkpoint, its transcript delta, execution record and events."""
        return self._submit(lambda db: _save(db, save))

    def append_event(self, session_id: str, event: PreparedEvent) -> Future[JournalEvent]:
        """Commit one event."""
        return self._submit(lambda db: _append_event(db, session_id, event))

    def fork(self, fork: PreparedFork) -> Future[SessionRow]:
        """Commit a child session branched from a parent at an exact sequence."""
        return self._submit(lambda db: _fork(db, fork))

    def delete_sessions(self, session_ids: list[str]) -> Future[bool]:
        """Delete session trees atomically; False, deleting nothing, if any id is absent."""
        return self._submit(lambda db: _delete_sessions(db, session_ids))

    def save_state(self, scope: str, key: str, value_json: str) -> Future[None]:
        """Replace one middleware state value."""
        return self._submit(lambda db: _save_state(db, scope, key, value_json))

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""
        return WriterStats(0, 0) if self._writer is None else self._writer.stats()

    def close(self) -> None:
        """Commit queued writes, then close every connection."""
        if self._writer is not None:
            self._writer.close()
        self._readers.close()


# --- write transactions (run on the writer thread, inside a SAVEPOINT) -----------------------


def _save(db: sqlite3.Connection, save: PreparedSave) -> list[JournalEvent]:
    row = db.execute(
        "SELECT latest_sequence, latest_event_sequence, context_epoch, context_length,"
        " context_tail FROM sessions WHERE session_id = ?",
        (save.session_id,),
    ).fetchone()
    if row is not None and save.sequence <= row[0]:
        raise SequenceConflict("checkpoint sequence did not advance")
    stored = None if row is None else StoredContext(row[2], row[3], row[4])
    _write_session(db, save, stored, None)
    if save.transcript_json is not None:
        db.execute(
            "INSERT INTO transcript_delta (session_id, sequence, items_json) VALUES (?, ?, ?)",
            (save.session_id, save.sequence, save.transcript_json),
        )
    if save.execution is not None:
        started_at_ms, record_json = save.execution
        db.execute(
            "INSERT INTO execution_journal (session_id, sequence, record_json, started_at_ms)"
            " VALUES (?, ?, ?, ?)",
            (save.session_id, save.sequence, record_json, started_at_ms),
        )
    latest_event = 0 if row is None else row[1]
    return _store_events(db, save.session_id, latest_event, save.events)


def _write_session(
    db: sqlite3.Connection,
    save: PreparedSave,
    stored: StoredContext | None,
    parent: tuple[str, int] | None,
) -> None:
    plan = plan_context_write(stored, save.context_epoch, save.context)
    values = (
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
    )
    if stored is None:
        db.execute(
            "INSERT INTO sessions (latest_sequence, checkpoint_state_json, context_epoch,"
            " context_length, context_tail, session_context_json, owner_id,"
            " execution_stats_json, catalog_visible, first_user_message, session_id,"
            " parent_session_id, parent_sequence)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*values, save.session_id, *(parent or (None, None))),
        )
    else:
        db.execute(
            "UPDATE sessions SET latest_sequence = ?, checkpoint_state_json = ?,"
            " context_epoch = ?, context_length = ?, context_tail = ?,"
            " session_context_json = ?, owner_id = ?, execution_stats_json = ?,"
            " catalog_visible = ?, first_user_message = COALESCE(first_user_message, ?),"
            " updated_at = unixepoch() WHERE session_id = ?",
            (*values, save.session_id),
        )
        if plan.reset:
            db.execute("DELETE FROM context_chunks WHERE session_id = ?", (save.session_id,))
    if plan.items_json is not None:
        db.execute(
            "INSERT INTO context_chunks (session_id, start, items_json) VALUES (?, ?, ?)",
            (save.session_id, plan.start, plan.items_json.decode()),
        )


def _append_event(db: sqlite3.Connection, session_id: str, event: PreparedEvent) -> JournalEvent:
    row = db.execute(
        "SELECT latest_event_sequence FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound("event journal session does not exist")
    return _store_events(db, session_id, row[0], [event])[0]


def _store_events(
    db: sqlite3.Connection, session_id: str, latest: int, events: list[PreparedEvent]
) -> list[JournalEvent]:
    stored = []
    for event in events:
        latest = next_event_sequence(latest)
        stored.append(_store_event(db, session_id, latest, event))
    if events:
        db.execute(
            "UPDATE sessions SET latest_event_sequence = ? WHERE session_id = ?",
            (latest, session_id),
        )
    return stored


def _store_event(
    db: sqlite3.Connection, session_id: str, sequence: int, event: PreparedEvent
) -> JournalEvent:
    index = event.index
    metrics = []
    if index.kind == "model_step_completed" and index.model_step_id is not None:
        rows = db.execute(
            "SELECT stream_phase, recorded_at_ms, delta_bytes FROM event_journal"
            " WHERE session_id = ? AND model_step_id = ? AND stream_phase IS NOT NULL"
            " ORDER BY sequence",
            (session_id, index.model_step_id),
        ).fetchall()
        metrics = stream_metrics(rows)
    if not event.transient:
        db.execute(
            "INSERT INTO event_journal (session_id, sequence, recorded_at_ms, event_kind,"
            " model_step_id, stream_phase, delta_bytes, event_json, stream_metrics_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        db.execute(
            "DELETE FROM event_journal WHERE session_id = ? AND model_step_id = ?"
            " AND event_kind IN ('agent_message_content_delta', 'agent_reasoning_content_delta')",
            (session_id, index.model_step_id),
        )
    elif event.supersedes_token_count:
        db.execute(
            "DELETE FROM event_journal"
            " WHERE session_id = ? AND event_kind = 'token_count' AND sequence < ?",
            (session_id, sequence),
        )
    return event.journal_event(sequence, metrics)


def _fork(db: sqlite3.Connection, fork: PreparedFork) -> SessionRow:
    parent = db.execute(
        "SELECT latest_sequence FROM sessions WHERE session_id = ?", (fork.parent_session_id,)
    ).fetchone()
    if parent is None:
        raise SessionNotFound("fork parent does not exist")
    if fork.parent_sequence > parent[0]:
        raise InvalidInput("fork point is newer than the parent checkpoint")
    child = fork.child
    exists = db.execute(
        "SELECT 1 FROM sessions WHERE session_id = ?", (child.session_id,)
    ).fetchone()
    if exists is not None:
        raise SessionExists("fork child session already exists")
    _write_session(db, child, None, (fork.parent_session_id, fork.parent_sequence))
    if child.transcript_json is not None:
        db.execute(
            "INSERT INTO transcript_delta (session_id, sequence, items_json) VALUES (?, ?, ?)",
            (child.session_id, child.sequence, child.transcript_json),
        )
    row = db.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (child.session_id,)
    ).fetchone()
    return _session_row(row)


def _delete_sessions(db: sqlite3.Connection, session_ids: list[str]) -> bool:
    ids_json = encode_json(sorted(set(session_ids))).decode()
    (present,) = db.execute(
        "SELECT COUNT(*) FROM sessions WHERE session_id IN (SELECT value FROM json_each(?))",
        (ids_json,),
    ).fetchone()
    if present != len(set(session_ids)):
        return False
    db.execute(
        f"{_SESSION_TREE} DELETE FROM middleware_state"
        " WHERE scope IN (SELECT session_id FROM tree)",
        (ids_json,),
    )
    db.execute(
        f"{_SESSION_TREE} DELETE FROM sessions WHERE session_id IN (SELECT session_id FROM tree)",
        (ids_json,),
    )
    return True


def _save_state(db: sqlite3.Connection, scope: str, key: str, value_json: str) -> None:
    db.execute(
        "INSERT INTO middleware_state (scope, key, value_json) VALUES (?, ?, ?)"
        " ON CONFLICT (scope, key) DO UPDATE SET value_json = excluded.value_json",
        (scope, key, value_json),
    )
