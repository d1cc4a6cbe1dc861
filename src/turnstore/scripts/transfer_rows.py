"""The tables a session tree spans, as typed JSON Lines records: the export format's rows.

Each line of an export is one JSON object whose `kind` names its table (or a line of the
format's own: `turnstore_export`, `tree`, `end`); its other fields are the row's columns in
table order. Integers and text are JSON numbers and strings, bytes are base64 strings, flags
are booleans, and JSON columns are embedded as JSON, byte for byte as stored. The same
rows therefore encode to the same bytes on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

import msgspec

from turnstore.rules.transfer import check_exportable_json

Kind = Literal["int", "text", "bytes", "bool", "json"]

FORMAT_VERSION = 2
"""The version of the export format this build writes: 2 added long-term memory's sections."""
READ_VERSIONS = (1, 2)
"""The versions this build reads: a version 1 file is a version 2 file without memory."""

_TYPES: dict[str, Any] = {"int": int, "text": str, "bytes": bytes, "bool": bool}


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, how its value is written, and whether it may be NULL."""

    name: str
    kind: Kind
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Table:
    """A table whose rows belong to sessions: the column naming the session, and the key."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    session_column: str = "session_id"
    on_conflict: str = ""
    """What an import does with a row already present (rows shared between sessions)."""

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in table order."""
        return tuple(column.name for column in self.columns)


def _columns(spec: str) -> tuple[Column, ...]:
    """`name:kind` words, a trailing `?` marking a nullable column."""
    found = []
    for word in spec.split():
        name, kind = word.split(":")
        nullable = kind.endswith("?")
        found.append(Column(name, kind.rstrip("?"), nullable))  # type: ignore[arg-type]
    return tuple(found)


def _table(name: str, spec: str, key: str, **extra: str) -> Table:
    return Table(name, _columns(spec), tuple(key.split()), **extra)


SESSIONS = _table(
    "sessions",
    "session_id:text parent_session_id:text? parent_sequence:int? latest_sequence:int"
    " latest_event_sequence:int checkpoint_state_json:json context_epoch:int context_length:int"
    " context_tail:bytes? session_context_json:json owner_id:text? execution_stats_json:json"
    " catalog_visible:bool first_user_message:text? created_at:int updated_at:int kind:text?",
    "session_id",
)
"""The catalog row of each session; a tree's rows come parent first. Its `kind` is written
as `session_kind` (`kind` names a line's table) and left out when NULL, as exports made
before it was carried leave it out."""
_RENAMED = {"kind": "session_kind"}
"""Columns written under another name: `kind` is the line's own tag."""

SESSION_TABLES: tuple[Table, ...] = (
    _table("context_chunks", "session_id:text start:int items_json:json", "start"),
    _table(
        "transcript_delta",
        "session_id:text sequence:int items_json:json? context_start:int? created_at:int",
        "sequence",
    ),
    _table(
        "execution_journal",
        "session_id:text sequence:int record_json:json started_at_ms:int",
        "sequence",
    ),
    _table(
        "event_journal",
        "session_id:text sequence:int recorded_at_ms:int event_kind:text model_step_id:text?"
        " stream_phase:text? delta_bytes:int? event_json:json stream_metrics_json:json",
        "sequence",
    ),
    _table(
        "event_batches",
        "session_id:text first_sequence:int last_sequence:int event_count:int events_json:json",
        "first_sequence",
    ),
    _table(
        "runtime_heads",
        "session_id:text schema_version:int head_revision:int config_json:json"
        " agent_frames_json:json current_agent_frame_id:text checkpoint_ref:text"
        " leaf_node_id:text? first_user_message:text? user_message_count:int",
        "session_id",
    ),
    _table(
        "graph_nodes",
        "session_id:text node_id:text parent_node_id:text? position:int record_json:json"
        " tombstoned:bool",
        "node_id",
    ),
    _table("token_ledger", "session_id:text position:int entry_json:json", "position"),
    _table(
        "turn_commits",
        "session_id:text turn_id:text commit_hash:text result_json:json",
        "turn_id",
    ),
    _table(
        "queued_work",
        "session_id:text batch_id:text position:int boundary:text items_json:json"
        " enqueued_at_ms:int claim_id:text? claim_owner_id:text? lease_expires_at_ms:int?",
        "batch_id",
    ),
    _table("session_meta", "session_id:text meta_json:json", "session_id"),
    _table(
        "attachment_manifest",
        "attachment_id:text session_id:text canonical_uri:text intent_at_ms:int"
        " committed_at_ms:int?",
        "attachment_id",
        # Attachment rows outlive their session (the sweep needs them), so a tree imported
        # again after a deletion finds its own rows: they are taken over, not duplicated.
        on_conflict="ON CONFLICT (attachment_id) DO UPDATE SET session_id = excluded.session_id,"
        " canonical_uri = excluded.canonical_uri, intent_at_ms = excluded.intent_at_ms,"
        " committed_at_ms = excluded.committed_at_ms",
    ),
    _table(
        "middleware_state",
        "scope:text key:text value_json:json",
        "key",
        session_column="scope",
        on_conflict="ON CONFLICT (scope, key) DO UPDATE SET value_json = excluded.value_json",
    ),
    _table(
        "lg_checkpoints",
        "session_id:text checkpoint_ns:text checkpoint_id:text parent_checkpoint_id:text?"
        " run_id:text? checkpoint_type:text checkpoint:bytes metadata_type:text metadata:bytes"
        " versions_json:json delta_channels_json:json?",
        "checkpoint_ns checkpoint_id",
    ),
    _table(
        "lg_blobs",
        "session_id:text checkpoint_ns:text channel:text version:text value_type:text"
        " value:bytes? lineage:int? length:int?",
        "checkpoint_ns channel version",
    ),
    _table(
        "lg_lineages",
        "session_id:text lineage:int base_lineage:int? base_length:int depth:int",
        "lineage",
    ),
    _table(
        "lg_items",
        "session_id:text lineage:int position:int value_type:text value:bytes",
        "lineage position",
    ),
    _table(
        "lg_writes",
        "session_id:text checkpoint_ns:text checkpoint_id:text task_id:text idx:int"
        " task_path:text channel:text value_type:text value:bytes?",
        "checkpoint_ns checkpoint_id task_id idx",
    ),
)
"""Every other table holding a session's rows, in the order an export writes them."""

BLOBS = _table(
    "blobs",
    "blob_ref:text data:bytes",
    "blob_ref",
    session_column="",
    on_conflict="ON CONFLICT (blob_ref) DO NOTHING",
)
"""Content-addressed blobs, shared between sessions: a tree carries those its heads reach."""

TABLES: tuple[Table, ...] = (SESSIONS, *SESSION_TABLES, BLOBS)
"""Every table a session tree carries, in the order a tree's rows are written."""
MEMORY_ITEMS = _table(
    "memory_items",
    "namespace:text item_key:text owner_id:text? value_json:text created_at_ms:int"
    " updated_at_ms:int ttl_ms:int? expires_at_ms:int? searched:bool",
    "namespace item_key",
    session_column="",
)
"""A long-term memory item; `searched` says whether its words are searched (`text=True`), which
the database keeps in its own columns (the index itself is derived). Its value is written as a
string, the stored text exactly: a put takes what strict JSON refuses (`NaN`, or any text at
all when the words are not searched), which no line could embed."""
MEMORY_VECTORS = _table(
    "memory_vectors",
    "namespace:text item_key:text field:text vector:bytes",
    "namespace item_key field",
    session_column="",
)
"""An item's embedding, one per field; its rows follow the item's own."""
MEMORY_TABLES: tuple[Table, ...] = (MEMORY_ITEMS, MEMORY_VECTORS)
"""The tables a memory section carries."""
DERIVED_TABLES = frozenset({"search_items", "search_marks", "search_index_state"})
"""Tables an export leaves out (with SQLite's FTS5 tables, `search_fts*`): the search index,
which an import rebuilds for what it writes, with the figures it derives
(`sessions.figures_json`, not exported either). A session whose kind an export does not
carry (one made before it did) is named from what it holds, as `reindex` does."""


class ExportHeader(msgspec.Struct, tag_field="kind", tag="turnstore_export", kw_only=True):
    """The first line of an export: the format's version and the schema it was read from."""

    format_version: int
    schema_version: int


class TreeHeader(msgspec.Struct, tag_field="kind", tag="tree", kw_only=True):
    """The line before a session tree's rows: its sessions, row count and SHA-256 of its rows."""

    root: str
    session_ids: list[str]
    row_count: int
    digest: str


class MemoryHeader(msgspec.Struct, tag_field="kind", tag="memory", kw_only=True):
    """The line before a section of memory items: how many items and rows, their SHA-256."""

    item_count: int
    row_count: int
    digest: str


class ExportEnd(msgspec.Struct, tag_field="kind", tag="end", kw_only=True, omit_defaults=True):
    """The last line: how many trees, rows (memory's too) and memory items came before it (a
    shorter file is cut off)."""

    tree_count: int
    row_count: int
    memory_item_count: int = 0


def _field(column: Column) -> tuple[str, Any] | tuple[str, Any, Any]:
    if column.kind == "json":
        # Raw keeps the stored text byte for byte; a NULL is written as `null`.
        return column.name, msgspec.Raw
    kind = _TYPES[column.kind]
    if column.name in _RENAMED:
        # Absent from older exports: a default, omitted when it is one, keeps their digests.
        return column.name, kind | None, None
    return column.name, kind | None if column.nullable else kind


ROW_TYPES: dict[str, type[msgspec.Struct]] = {
    table.name: msgspec.defstruct(
        f"{table.name}_row",
        [_field(column) for column in table.columns],
        tag_field="kind",
        tag=table.name,
        forbid_unknown_fields=True,
        rename=_RENAMED,
        omit_defaults=True,
    )
    for table in (*TABLES, *MEMORY_TABLES)
}
"""One record type per table, its fields the columns: decoding validates a row's shape."""

TABLE_BY_NAME = {table.name: table for table in TABLES}
"""The tables by name."""

_LINE: Any = Union[(ExportHeader, TreeHeader, MemoryHeader, ExportEnd, *ROW_TYPES.values())]
LINE_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_LINE)
"""Decodes any line of an export, refusing unknown kinds, fields and mistyped values."""
ENCODER = msgspec.json.Encoder()
"""Encodes lines; a record's fields come out in column order, so the bytes are stable."""
_NULL = b"null"


def to_record(table: Table, row: tuple[Any, ...]) -> msgspec.Struct:
    """A row as read from the database, as its table's record."""
    values: list[Any] = []
    for column, value in zip(table.columns, row, strict=True):
        if value is None:
            values.append(msgspec.Raw(_NULL) if column.kind == "json" else None)
        elif column.kind == "json":
            check_exportable_json(table.name, column.name, column.nullable, value)
            values.append(msgspec.Raw(value))  # no copy of a long text
        elif column.kind == "bool":
            values.append(bool(value))
        elif column.kind == "bytes":
            values.append(bytes(value))
        else:
            values.append(value)
    return ROW_TYPES[table.name](*values)


def to_params(table: Table, record: msgspec.Struct) -> tuple[Any, ...]:
    """A record's values as statement parameters, in column order."""
    params = []
    for column in table.columns:
        value = getattr(record, column.name)
        if column.kind == "json":
            # Decoded straight from the line's buffer, without a copy of it in bytes first.
            text = str(memoryview(value), "utf-8")
            params.append(None if column.nullable and text == "null" else text)
        else:
            params.append(value)
    return tuple(params)


def record_table(record: object, tables: dict[str, Table] = TABLE_BY_NAME) -> Table | None:
    """The table of `tables` (a tree's, unless told) a decoded line's record belongs to;
    None for the format's own lines and another section's rows."""
    config = getattr(type(record), "__struct_config__", None)
    return None if config is None else tables.get(str(config.tag))
