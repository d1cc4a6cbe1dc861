"""The same-work reference: stdlib sqlite3 writing exactly the rows a turnstore save writes.

It runs on a file whose schema turnstore created, sends the statements a save sends (the
session row's read, its INSERT or UPDATE, the context chunk, the transcript batch that names
it, and with events the step-delta read, the execution row and the journal's batch row with
the completed steps' stream metrics), one transaction per turn, at full durability, and nothing
else: no validation, no records, no driver. What it costs is the SQL of the contract's rows;
what turnstore costs above it is turnstore's Python. `tests/contract/test_statement_counts.py`
holds turnstore to the same statement counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import turnstore
from bench.peers import Peer, durable_sqlite, first_checkpoint, sqlite_files_size
from bench.turn_events import TurnEvents
from bench.workload import Turn, compact
from turnstore import Checkpoint

_WRITTEN = (
    "latest_sequence, checkpoint_state_json, context_epoch, context_length, context_tail,"
    " session_context_json, owner_id, execution_stats_json, catalog_visible,"
    " first_user_message, latest_event_sequence"
)
LOCK = (
    "SELECT latest_sequence, latest_event_sequence, context_epoch, context_length,"
    " context_tail FROM sessions WHERE session_id = ?"
)
INSERT_SESSION = (
    f"INSERT INTO sessions ({_WRITTEN}, session_id, parent_session_id, parent_sequence,"
    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " unixepoch(), unixepoch()) ON CONFLICT (session_id) DO NOTHING RETURNING session_id"
)
UPDATE_SESSION = (
    "UPDATE sessions SET latest_sequence = ?, checkpoint_state_json = ?, context_epoch = ?,"
    " context_length = ?, context_tail = ?, session_context_json = ?, owner_id = ?,"
    " execution_stats_json = ?, catalog_visible = ?,"
    " first_user_message = COALESCE(first_user_message, ?), latest_event_sequence = ?,"
    " updated_at = unixepoch() WHERE session_id = ?"
)
INSERT_CHUNK = "INSERT INTO context_chunks (session_id, start, items_json) VALUES (?, ?, ?)"
INSERT_BATCH = (
    "INSERT INTO transcript_delta (session_id, sequence, items_json, context_start,"
    " created_at) VALUES (?, ?, NULL, ?, unixepoch())"
)
STEP_DELTAS = (
    "SELECT model_step_id, sequence, stream_phase, recorded_at_ms, delta_bytes FROM"
    " event_journal WHERE session_id = ? AND model_step_id IN (SELECT value FROM json_each(?))"
    " AND event_kind IN ('agent_message_content_delta', 'agent_reasoning_content_delta')"
)
INSERT_EXECUTION = (
    "INSERT INTO execution_journal (session_id, sequence, record_json, started_at_ms)"
    " VALUES (?, ?, ?, ?)"
)
INSERT_EVENTS = (
    "INSERT INTO event_batches (session_id, first_sequence, last_sequence, event_count,"
    " events_json) VALUES (?, ?, ?, ?, ?)"
)
DELTA = "agent_message_content_delta"
COMPLETED = "model_step_completed"


@dataclass
class _Session:
    """What the loop keeps of one session: its checkpoint's fields as builtins, its lengths."""

    state: dict[str, Any]
    context_length: int = 0
    latest_event: int = 0
    context_json: str = field(default="")


class SameWorkPeer(Peer):
    """stdlib sqlite3 sending a turnstore save's statements and rows, one transaction a turn."""

    def __init__(self, path: Path, *, events: bool, hop: bool = False) -> None:
        self.path = path
        self.events = events
        self.hop = hop
        self.name = ("same-work-async" if hop else "same-work") + ("+events" if events else "")
        what = "checkpoint+transcript+events+execution" if events else "checkpoint+transcript"
        self.label = f"stdlib sqlite3, turnstore's rows ({what})"
        self.note = "the rows and statements of a turnstore save, sent by stdlib sqlite3"
        if hop:
            self.label += " via asyncio.to_thread"
            self.note += (
                ", each turn's transaction in asyncio.to_thread: what an async face that runs"
                " no transaction on the event loop's thread costs at least"
            )
        self._sessions: dict[str, _Session] = {}
        self._checkpoints: dict[str, Checkpoint] = {}

    async def setup(self) -> None:
        turnstore.open_blocking(str(self.path)).close()  # turnstore's schema, then only SQL
        self.db = durable_sqlite(self.path, isolation_level=None)

    def _session(self, session: str, turn: Turn) -> _Session:
        found = self._sessions.get(session)
        if found is None:
            checkpoint = first_checkpoint(session, turn)
            state = msgspec.to_builtins(checkpoint)
            state["context"] = []
            found = self._sessions[session] = _Session(state)
            self._checkpoints[session] = checkpoint
        return found

    async def save_turn(self, session: str, turn: Turn) -> None:
        if self.hop:
            await asyncio.to_thread(self._save, session, turn)
        else:
            self._save(session, turn)

    def _save(self, session: str, turn: Turn) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self._statements(session, turn)
        self.db.execute("COMMIT")

    def save_group(self, turns: list[tuple[str, Turn]]) -> None:
        """Save several sessions' turns in one transaction, each in a SAVEPOINT, as turnstore's
        group commit runs concurrent saves: the most a store sending these rows can do."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        for session, turn in turns:
            db.execute("SAVEPOINT job")
            self._statements(session, turn)
            db.execute("RELEASE job")
        db.execute("COMMIT")

    def _statements(self, session: str, turn: Turn) -> None:
        kept = self._session(session, turn)
        state = kept.state
        state["sequence"] += 1
        state["metadata"] = {"loop_state": turn.state}
        events: list[Any] = []
        execution = None
        if self.events:
            events, execution = self._turn_events(session, turn, state)
        items_json = compact(turn.items)
        tail = hashlib.blake2b(compact(turn.items[-1]).encode(), digest_size=16).digest()
        db = self.db
        locked = db.execute(LOCK, (session,)).fetchone()
        if events:
            steps = sorted({e.event.msg.model_step_id for e in events if _kind(e) == COMPLETED})
            db.execute(STEP_DELTAS, (session, json.dumps(steps))).fetchall()
        rows = _event_rows(kept.latest_event, events)
        latest_event = kept.latest_event + len(events)
        written = (
            state["sequence"],
            compact(state),
            0,
            kept.context_length + len(turn.items),
            tail,
            compact(state["session_context"]),
            "bench",
            compact(state["execution_stats"]),
            True,
            state["first_user_message"],
            latest_event,
        )
        if locked is None:
            db.execute(INSERT_SESSION, (*written, session, None, None)).fetchall()
        else:
            db.execute(UPDATE_SESSION, (*written, session))
        db.execute(INSERT_CHUNK, (session, kept.context_length, items_json))
        db.execute(INSERT_BATCH, (session, state["sequence"], kept.context_length))
        if execution is not None:
            record = execution.to_json().decode()
            db.execute(
                INSERT_EXECUTION, (session, state["sequence"], record, execution.started_at_ms)
            )
        if rows:
            # The workload's events are all ones no later save deletes: one batch row.
            batch = (
                "["
                + ",".join(f"[{seq},{at},{event},{metrics}]" for seq, at, event, metrics in rows)
                + "]"
            )
            db.execute(INSERT_EVENTS, (session, rows[0][0], rows[-1][0], len(rows), batch))
        kept.context_length += len(turn.items)
        kept.latest_event = latest_event

    def _turn_events(
        self, session: str, turn: Turn, state: dict[str, Any]
    ) -> tuple[list[Any], Any]:
        """The turn's events and execution record, built as the turnstore rows build them."""
        checkpoint = self._checkpoints[session]
        checkpoint.sequence = state["sequence"]
        events, execution = TurnEvents(checkpoint, turn).build()
        state["total_usage"] = msgspec.to_builtins(checkpoint.total_usage)
        return events, execution

    async def load_latest(self, session: str) -> int | None:
        return None

    def size(self) -> int:
        return sqlite_files_size(self.path)

    async def close(self) -> None:
        self.db.close()


def _kind(event: Any) -> str:
    return str(event.event.msg.__struct_config__.tag)


def _event_rows(latest: int, events: list[Any]) -> list[tuple[int, int, str, str]]:
    """A turn's stored events, (sequence, recorded_at_ms, event, stream metrics): deltas fold
    into their step's completed event."""
    rows: list[tuple[int, int, str, str]] = []
    deltas: dict[str, list[tuple[int, int]]] = {}
    for offset, stamped in enumerate(events, start=1):
        msg, kind = stamped.event.msg, _kind(stamped)
        step = getattr(msg, "model_step_id", None)
        if kind == DELTA:
            deltas.setdefault(step, []).append((stamped.recorded_at_ms, len(msg.delta.encode())))
            continue
        metrics = "[]"
        if kind == COMPLETED and deltas.get(step):
            metrics = compact([_metrics(deltas.pop(step))])
        event_json = msgspec.json.encode(stamped.event).decode()
        rows.append((latest + offset, stamped.recorded_at_ms, event_json, metrics))
    return rows


def _metrics(deltas: list[tuple[int, int]]) -> dict[str, Any]:
    times = [at for at, _ in deltas]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    return {
        "phase": "final_answer",
        "first_delta_at_ms": times[0],
        "last_delta_at_ms": times[-1],
        "chunk_count": len(deltas),
        "utf8_bytes": sum(size for _, size in deltas),
        "longest_gap_ms": max(gaps, default=0),
    }
