"""Whether a session tree's stored rows decode as the store's reads decode them.

An import runs every row of a tree through a `RowCheck` before the tree commits, and
`doctor(deep=True)` runs every stored tree through one: a row that a read would refuse with
`CorruptRecord` is named instead of stored (or found). The checks are the reads' own: the
same record types, the checkpoint's and execution record's validation, the head's schema
version, the context length the session row keeps, and the blobs a runtime head reaches.
LangGraph's serialized values are its serializer's bytes and are not decoded (their JSON
columns are).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnstore.engine.protocol import Statements, Tx
from turnstore.errors import CorruptRecord, InvalidInput
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import Checkpoint, ExecutionRecord, ExecutionStats, StreamMetrics
from turnstore.records.protocol import Event, SessionContext
from turnstore.records.runtime import (
    AgentFrameRecord,
    PersistedSessionConfig,
    RuntimeCommitResult,
    SessionCheckpoint,
    SessionMeta,
    SessionNodeRecord,
    TokenLedgerEntry,
)
from turnstore.records.values import check_value
from turnstore.rules.runtime import ensure_supported_schema_version
from turnstore.rules.stored import check_checkpoint_row, check_event_batch, valid_stored
from turnstore.rules.validation import validate_execution_record, validate_stored_checkpoint
from turnstore.scripts.runtime_tables import blob_bytes
from turnstore.scripts.transfer_rows import Table

_JSON_LIST = list[msgspec.Raw]
"""A JSON array whose items are any JSON, each checked as the save path checks an item."""

_JSON_VALUE = msgspec.Raw
"""One JSON value of any shape, checked as the save path checks a value."""

# (table, column) -> (the type a read decodes the column into, what a read calls it).
_COLUMNS: dict[tuple[str, str], tuple[Any, str]] = {
    ("sessions", "checkpoint_state_json"): (Checkpoint, "checkpoint"),
    ("sessions", "session_context_json"): (SessionContext, "session context"),
    ("sessions", "execution_stats_json"): (ExecutionStats, "execution stats"),
    ("context_chunks", "items_json"): (_JSON_LIST, "checkpoint context"),
    ("transcript_delta", "items_json"): (_JSON_LIST, "transcript"),
    ("execution_journal", "record_json"): (ExecutionRecord, "execution record"),
    ("event_journal", "event_json"): (Event, "event"),
    ("event_journal", "stream_metrics_json"): (list[StreamMetrics], "stream metrics"),
    ("event_batches", "events_json"): (
        list[tuple[int, int, Event, list[StreamMetrics]]],
        "event batch",
    ),
    ("runtime_heads", "config_json"): (PersistedSessionConfig, "config"),
    ("runtime_heads", "agent_frames_json"): (list[AgentFrameRecord], "agent frames"),
    ("graph_nodes", "record_json"): (SessionNodeRecord, "graph node"),
    ("token_ledger", "entry_json"): (TokenLedgerEntry, "token ledger entry"),
    ("turn_commits", "result_json"): (RuntimeCommitResult, "turn commit"),
    ("queued_work", "items_json"): (_JSON_LIST, "queued work"),
    ("session_meta", "meta_json"): (SessionMeta, "session meta"),
    ("middleware_state", "value_json"): (_JSON_VALUE, "middleware state"),
    ("lg_checkpoints", "versions_json"): (dict[str, Any], "channel versions"),
    ("lg_checkpoints", "delta_channels_json"): (_JSON_LIST, "delta channels"),
}
_NULL = b"null"


def row_name(table: Table, record: Any) -> str:
    """A row as people find it: its table, session and key columns."""
    names = dict.fromkeys((table.session_column, *table.key) if table.session_column else table.key)
    key = ", ".join(f"{name} {getattr(record, name)!r}" for name in names)
    return f"{table.name} row ({key})"


class RowCheck:
    """The checks of one tree's rows, fed in export order, then `finish`ed in its transaction."""

    def __init__(self) -> None:
        self._context_lengths: dict[str, int] = {}
        self._context_seen: dict[str, int] = {}
        self._heads: list[tuple[str, str]] = []

    def row(self, table: Table, record: Any) -> str | None:
        """Why a read would refuse this row (its name and the reason), or None."""
        try:
            self._check(table, record)
        except (CorruptRecord, InvalidInput) as error:
            return f"{row_name(table, record)}: {error}"
        return None

    def finish(self, tx: Tx) -> list[str]:
        """Why reads would refuse what the tree's rows say together: lengths and head blobs."""
        problems = [
            f"sessions row (session_id {session_id!r}): checkpoint context holds "
            f"{self._context_seen.get(session_id, 0)} items, the row says {length}"
            for session_id, length in self._context_lengths.items()
            if self._context_seen.get(session_id, 0) != length
        ]
        for session_id, ref in self._heads:
            try:
                _hydrate(tx, session_id, ref)
            except (CorruptRecord, InvalidInput) as error:
                problems.append(f"runtime_heads row (session_id {session_id!r}): {error}")
        return problems

    def _check(self, table: Table, record: Any) -> None:
        session_id = getattr(record, table.session_column) if table.session_column else None
        decoded = {
            column.name: _decode(table.name, column.name, getattr(record, column.name), session_id)
            for column in table.columns
            if (table.name, column.name) in _COLUMNS
            and not (column.nullable and _is_null(getattr(record, column.name)))
        }
        special = _SPECIAL.get(table.name)
        if special is not None:
            special(self, record, decoded)

    def _session(self, record: Any, decoded: dict[str, Any]) -> None:
        checkpoint: Checkpoint = decoded["checkpoint_state_json"]
        valid_stored(validate_stored_checkpoint, checkpoint, "checkpoint", record.session_id)
        check_checkpoint_row(checkpoint, record.session_id, record.latest_sequence)
        self._context_lengths[record.session_id] = record.context_length

    def _chunk(self, record: Any, decoded: dict[str, Any]) -> None:
        seen = self._context_seen.get(record.session_id, 0)
        self._context_seen[record.session_id] = seen + len(decoded["items_json"])

    def _execution(self, record: Any, decoded: dict[str, Any]) -> None:
        execution = decoded["record_json"]
        valid_stored(validate_execution_record, execution, "execution record", record.session_id)

    def _batch(self, record: Any, decoded: dict[str, Any]) -> None:
        sequences = [event[0] for event in decoded["events_json"]]
        first, last, count = record.first_sequence, record.last_sequence, record.event_count
        check_event_batch(sequences, first, last, count, record.session_id)

    def _head(self, record: Any, decoded: dict[str, Any]) -> None:
        ensure_supported_schema_version("session head", record.schema_version, record.session_id)
        self._heads.append((record.session_id, record.checkpoint_ref))

    def _turn(self, record: Any, decoded: dict[str, Any]) -> None:
        version = decoded["result_json"].manifest.schema_version
        ensure_supported_schema_version("session checkpoint", version, record.session_id)


_SPECIAL: dict[str, Callable[[RowCheck, Any, dict[str, Any]], None]] = {
    "sessions": RowCheck._session,
    "context_chunks": RowCheck._chunk,
    "execution_journal": RowCheck._execution,
    "event_batches": RowCheck._batch,
    "runtime_heads": RowCheck._head,
    "turn_commits": RowCheck._turn,
}
"""What a read checks of a row beyond decoding its JSON columns."""


def _is_null(raw: msgspec.Raw) -> bool:
    """Whether a JSON column's value is SQL NULL (written `null`, for a nullable column)."""
    return len(raw) == len(_NULL) and bytes(memoryview(raw)) == _NULL


def _decode(table: str, column: str, raw: msgspec.Raw, session_id: str | None) -> Any:
    type_, what = _COLUMNS[(table, column)]
    value = decode_stored(raw, type_, what, session_id)
    # What a save would refuse (nesting past MAX_DEPTH, integers past 64 bits) a read must
    # not meet either: free JSON is held to the save path's own check. Item by item, each
    # built and dropped in turn, so a row costs the memory of its largest item, not of all.
    if type_ is _JSON_LIST:
        for index, item in enumerate(value):
            named = f"stored {what}[{index}]"
            check_value(decode_stored(item, Any, named, session_id), named, record=False)
    elif type_ is _JSON_VALUE:
        named = f"stored {what}"
        check_value(decode_stored(value, Any, named, session_id), named, record=False)
    return value


def _hydrate(tx: Tx, session_id: str, ref: str) -> None:
    """Read a head's checkpoint blobs as `load_session` does: a read refusing them raises."""
    data = blob_bytes(tx, ref, session_id)
    if data is None:
        return
    manifest = decode_stored(data, SessionCheckpoint, "checkpoint manifest")
    ensure_supported_schema_version("session checkpoint", manifest.schema_version, session_id)
    for blob_ref, what in (
        (manifest.tool_state_ref, "tool state"),
        (manifest.plugin_snapshot_ref, "plugin snapshot"),
    ):
        found = blob_bytes(tx, blob_ref, session_id)
        if found is not None:
            decode_stored(found, Any, what)
    blob_bytes(tx, manifest.execution_state_ref, session_id)


class StoredRowSql(Statements):
    """The deep scan's statement that no tree's rows cover."""

    unscoped_state = (
        "SELECT scope, key, value_json FROM middleware_state"
        " WHERE scope NOT IN (SELECT session_id FROM sessions) ORDER BY scope, key"
    )
    """Middleware state of scopes that are no session: no tree carries it."""


def state_problems(tx: Tx) -> list[str]:
    """Why reads would refuse middleware state rows that no session tree holds."""
    problems = []
    for scope, key, value_json in tx.stream(tx.sql(StoredRowSql).unscoped_state):
        try:
            _decode("middleware_state", "value_json", value_json, None)
        except (CorruptRecord, InvalidInput) as error:
            problems.append(f"middleware_state row (scope {scope!r}, key {key!r}): {error}")
    return problems
