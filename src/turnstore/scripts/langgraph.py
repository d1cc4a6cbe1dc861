"""LangGraph checkpoints: one turnstore session per thread, its checkpoints, values and writes.

A channel version is one `lg_blobs` row. A list value is a prefix of a lineage of `lg_items`:
a version that appends to the list it extends writes the new items only, and references
(lineage, length). A version that extends an older prefix of a lineage whose tip moved on (a
run resumed from an earlier checkpoint) starts a new lineage based on that prefix; a base
chain deeper than `MAX_DEPTH` is flattened by copying rows in SQL, so a load reads at most
`MAX_DEPTH + 1` ranges. Every table hangs off `sessions`, so `delete_sessions` removes it all.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from turnstore.engine.protocol import Query, Statements, Tx, columns, insert, select
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ExecutionStats
from turnstore.records.kinds.langgraph import KIND as THREAD
from turnstore.records.langgraph import (
    EMPTY,
    LIST,
    BlobWrite,
    ChannelValue,
    CheckpointRow,
    ListWrite,
    LoadedCheckpoint,
    PutRequest,
    PutResult,
    SearchQuery,
    Typed,
    WriteRow,
    WritesRequest,
)
from turnstore.rules.context import plan_context_write
from turnstore.rules.saves import prepare_append
from turnstore.rules.stored import check_list_items, stored_lineage
from turnstore.scripts import sessions

MAX_DEPTH = 4
"""Lineages a list value may span before a branch copies its prefix into a new root."""


class BlobRow(NamedTuple):
    """One channel version as stored."""

    channel: str
    version: str
    value_type: str
    value: bytes | None
    lineage: int | None
    length: int | None


class LineageRow(NamedTuple):
    """Where a lineage starts: a prefix of its base (or nothing), and how deep it is."""

    lineage: int
    base_lineage: int | None
    base_length: int
    depth: int


class CheckpointInsert(NamedTuple):
    """An `lg_checkpoints` row as written, its columns in the INSERT's order by construction."""

    session_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    run_id: str | None
    checkpoint_type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    versions_json: str
    delta_channels_json: str | None


class WriteInsert(NamedTuple):
    """An `lg_writes` row as written: a task's pending write at a checkpoint."""

    session_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    task_path: str
    channel: str
    value_type: str
    value: bytes | None


class BlobInsert(NamedTuple):
    """An `lg_blobs` row as written: a channel version, whole or a list's (lineage, length)."""

    session_id: str
    checkpoint_ns: str
    channel: str
    version: str
    value_type: str
    value: bytes | None
    lineage: int | None
    length: int | None


class ItemInsert(NamedTuple):
    """An `lg_items` row as written: one item of a list lineage."""

    session_id: str
    lineage: int
    position: int
    value_type: str
    value: bytes


class LineageInsert(NamedTuple):
    """An `lg_lineages` row as written."""

    session_id: str
    lineage: int
    base_lineage: int | None
    base_length: int
    depth: int


CHECKPOINT_COLUMNS = columns(CheckpointInsert)
WRITE_COLUMNS = columns(WriteInsert)
WRITE_KEY = "(session_id, checkpoint_ns, checkpoint_id, task_id, idx)"
BLOB_COLUMNS = columns(BlobInsert)
ITEM_COLUMNS = columns(ItemInsert)
_SEARCH_ORDER = " ORDER BY checkpoint_id DESC, session_id DESC, checkpoint_ns DESC LIMIT ?"


class LangGraphSql(Statements):
    """Statements of the LangGraph tables."""

    upsert_checkpoint = insert(
        CheckpointInsert,
        "lg_checkpoints",
        " ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE SET"
        " parent_checkpoint_id = excluded.parent_checkpoint_id, run_id = excluded.run_id,"
        " checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint,"
        " metadata_type = excluded.metadata_type, metadata = excluded.metadata,"
        " versions_json = excluded.versions_json,"
        " delta_channels_json = excluded.delta_channels_json",
    )
    insert_blob = insert(
        BlobInsert,
        "lg_blobs",
        " ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING",
    )
    insert_lineage = insert(LineageInsert, "lg_lineages")
    lineage = select(LineageRow, "FROM lg_lineages WHERE session_id = ? AND lineage = ?")
    lineages = select(LineageRow, "FROM lg_lineages WHERE session_id = ?")
    tip = "SELECT MAX(position) FROM lg_items WHERE session_id = ? AND lineage = ?"
    insert_item = insert(ItemInsert, "lg_items")
    copy_items = (
        f"INSERT INTO lg_items ({ITEM_COLUMNS}) SELECT session_id, ?, position, value_type,"
        " value FROM lg_items WHERE session_id = ? AND lineage = ? AND position >= ?"
        " AND position < ?"
    )
    items = select(
        Typed,
        "FROM lg_items WHERE session_id = ? AND lineage = ? AND position >= ? AND position < ?"
        " ORDER BY position",
    )
    touch = (
        "UPDATE sessions SET updated_at = {now},"
        " first_user_message = COALESCE(first_user_message, ?) WHERE session_id = ?"
    )
    owner = "SELECT owner_id FROM sessions WHERE session_id = ?"
    stats = "SELECT execution_stats_json FROM sessions WHERE session_id = ?"
    set_stats = "UPDATE sessions SET execution_stats_json = ? WHERE session_id = ?"
    upsert_write = insert(
        WriteInsert,
        "lg_writes",
        f" ON CONFLICT {WRITE_KEY} DO UPDATE SET task_path = excluded.task_path,"
        " channel = excluded.channel, value_type = excluded.value_type, value = excluded.value",
    )
    insert_write = insert(WriteInsert, "lg_writes", f" ON CONFLICT {WRITE_KEY} DO NOTHING")
    checkpoint = select(
        CheckpointRow,
        "FROM lg_checkpoints WHERE session_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
    )
    latest = select(
        CheckpointRow,
        "FROM lg_checkpoints WHERE session_id = ? AND checkpoint_ns = ?"
        " ORDER BY checkpoint_id DESC LIMIT 1",
    )
    blobs = select(
        BlobRow,
        "FROM lg_blobs WHERE session_id = ? AND checkpoint_ns = ? AND {ids:channel}"
        " AND {ids:version}",
    )
    # One version by its whole key: equality on every key column plans the same with or
    # without table statistics (a list of ids as `= ANY` is a filter until ANALYZE has run).
    blob = select(
        BlobRow,
        "FROM lg_blobs WHERE session_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?",
    )
    writes = select(
        WriteRow,
        "FROM lg_writes WHERE session_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
    )


# --- sessions -------------------------------------------------------------------------------


def ensure_thread(
    tx: Tx, session_id: str, owner_id: str | None, first_user_message: str | None = None
) -> None:
    """Lock the thread's session row, creating it (owned by `owner_id`) if missing.

    A write to the thread makes it the catalog's newest; the first user message it carries
    is what the catalog shows of a thread that shows none yet.
    """
    if sessions.lock(tx, session_id):
        tx.run(tx.sql(LangGraphSql).touch, (first_user_message, session_id))
        return
    created = prepare_append(session_id, [], owner_id, 0).creation()
    created = dataclasses.replace(created, first_user_message=first_user_message)
    plan = plan_context_write(None, created.context_epoch, [])
    sessions.insert(tx, created, plan, kind=THREAD.name)
    sessions.lock(tx, session_id)


def _count_run(tx: Tx, session_id: str) -> None:
    """Count one more run of the thread in its execution stats (its turns, to the catalog)."""
    sql = tx.sql(LangGraphSql)
    stats = decode_stored(tx.value(sql.stats, (session_id,)), ExecutionStats, "execution stats")
    stats.run_count += 1
    tx.run(sql.set_stats, (stats.to_json().decode(), session_id))


# --- put ------------------------------------------------------------------------------------


def _tip(tx: Tx, session_id: str, lineage: LineageRow) -> int:
    top = tx.value(tx.sql(LangGraphSql).tip, (session_id, lineage.lineage))
    return lineage.base_length if top is None else int(top) + 1


def segments(tx: Tx, session_id: str, lineage: int, length: int) -> list[tuple[int, int, int]]:
    """The (lineage, start, end) ranges holding a lineage's first `length` items, oldest first."""
    sql = tx.sql(LangGraphSql)
    found: list[tuple[int, int, int]] = []
    end: int = length
    current: int | None = lineage
    while current is not None and end > 0:
        row = stored_lineage(tx.row(sql.lineage, (session_id, current)), current, session_id)
        start = row.base_length if row.base_lineage is not None else 0
        if end > start:
            found.append((current, start, end))
        end = min(end, start)
        current = row.base_lineage
    found.reverse()
    return found


def _place(tx: Tx, request: PutRequest, write: ListWrite) -> tuple[int, bool] | None:
    """Which lineage the list's new items go to, and whether it must be made; None: gone."""
    if write.lineage is None:
        return write.fresh, True
    row = tx.row(tx.sql(LangGraphSql).lineage, (request.session_id, write.lineage))
    if row is None:
        return None
    tip = _tip(tx, request.session_id, row)
    if tip < write.start:
        return None
    if tip == write.start or not write.items:
        return write.lineage, False
    return write.fresh, True


def _write_list(tx: Tx, request: PutRequest, write: ListWrite, lineage: int, new: bool) -> int:
    """Store a list version's new items; the length of the list it names."""
    sql = tx.sql(LangGraphSql)
    session_id = request.session_id
    if new:
        base = write.lineage
        depth = 0
        if base is not None:
            row = tx.row(sql.lineage, (session_id, base))
            assert row is not None  # checked by _place in this transaction
            depth = row.depth + 1
        flat = base is None or depth > MAX_DEPTH
        root = LineageInsert(session_id, lineage, base_lineage=None, base_length=0, depth=0)
        tx.run(
            sql.insert_lineage,
            root
            if flat
            else root._replace(base_lineage=base, base_length=write.start, depth=depth),
        )
        if base is not None and depth > MAX_DEPTH:
            for source, start, end in segments(tx, session_id, base, write.start):
                tx.run(sql.copy_items, (lineage, session_id, source, start, end))
    rows = [
        ItemInsert(
            session_id=session_id,
            lineage=lineage,
            position=write.start + offset,
            value_type=item.value_type,
            value=item.value,
        )
        for offset, item in enumerate(write.items)
    ]
    if rows:
        tx.many(sql.insert_item, rows)
    return write.start + len(write.items)


Unindex = Callable[[Tx, PutRequest, dict[str, tuple[int, bool] | None]], None]
"""Called before a root checkpoint is written: the request, and where each list it writes goes
(its lineage, and whether the put makes it)."""


def put(tx: Tx, request: PutRequest, unindex: Unindex) -> PutResult:
    """Store a checkpoint and the channel versions it introduces, in one commit.

    Every list's lineage is checked before anything is written: when one is gone (its thread
    was deleted or pruned meanwhile), nothing is written and its channel comes back in
    `missing`, to be sent again whole. A root checkpoint's `unindex` (`search_cuts`, which
    reads threads through this module) is called first, with where its lists go.
    """
    sql = tx.sql(LangGraphSql)
    ensure_thread(tx, request.session_id, request.owner_id, request.first_user_message)
    places = {}
    missing = []
    for write in request.lists:
        place = _place(tx, request, write)
        if place is None:
            missing.append(write.channel)
        places[write.channel] = place
    if missing:
        return PutResult(stored={}, missing=missing)
    key = (request.session_id, request.checkpoint_ns, request.checkpoint_id)
    if request.run_started and tx.row(sql.checkpoint, key) is None:
        # Once per run's input checkpoint: a put sent again (whole, or retried) counts nothing.
        _count_run(tx, request.session_id)
    stored: dict[str, tuple[int, int]] = {}
    if not request.checkpoint_ns:
        # Before anything is written: the list the search index read is still the newest.
        unindex(tx, request, places)
    blob_rows = [_blob(request, blob.channel, blob.version, blob) for blob in request.blobs]
    for write in request.lists:
        place = places[write.channel]
        assert place is not None
        length = _write_list(tx, request, write, *place)
        stored[write.channel] = (place[0], length)
        listed = _blob(request, write.channel, write.version, None, lineage=place[0], length=length)
        blob_rows.append(listed)
    if blob_rows:
        tx.many(sql.insert_blob, blob_rows)
    tx.run(sql.upsert_checkpoint, _checkpoint(request))
    return PutResult(stored=stored, missing=[])


def _blob(
    request: PutRequest,
    channel: str,
    version: str,
    whole: BlobWrite | None,
    lineage: int | None = None,
    length: int | None = None,
) -> BlobInsert:
    """A channel version's row: its value `whole`, or (None) a list at (`lineage`, `length`)."""
    return BlobInsert(
        session_id=request.session_id,
        checkpoint_ns=request.checkpoint_ns,
        channel=channel,
        version=version,
        value_type=LIST if whole is None else whole.value_type,
        value=None if whole is None else whole.value,
        lineage=lineage,
        length=length,
    )


def _checkpoint(request: PutRequest) -> CheckpointInsert:
    return CheckpointInsert(
        session_id=request.session_id,
        checkpoint_ns=request.checkpoint_ns,
        checkpoint_id=request.checkpoint_id,
        parent_checkpoint_id=request.parent_checkpoint_id,
        run_id=request.run_id,
        checkpoint_type=request.checkpoint.value_type,
        checkpoint=request.checkpoint.value,
        metadata_type=request.metadata.value_type,
        metadata=request.metadata.value,
        versions_json=request.versions_json,
        delta_channels_json=request.delta_channels_json,
    )


def put_writes(tx: Tx, request: WritesRequest) -> None:
    """Store a task's pending writes; the special channels replace, others keep the first."""
    sql = tx.sql(LangGraphSql)
    ensure_thread(tx, request.session_id, request.owner_id)
    statement = sql.upsert_write if request.replace else sql.insert_write
    key = (request.session_id, request.checkpoint_ns, request.checkpoint_id)
    # A WriteRow is the tail of a WriteInsert, field by field (tests/unit/test_statements.py).
    tx.many(statement, [WriteInsert._make((*key, *row)) for row in request.rows])


# --- reads ----------------------------------------------------------------------------------


def versions_of(row: Any) -> dict[str, str]:
    """The channel versions a row's `versions_json` names."""
    versions: dict[str, str] = json.loads(row.versions_json)
    return versions


def channel_value(tx: Tx, session_id: str, blob: BlobRow) -> ChannelValue:
    """A stored channel version's value, a list's items read from its lineage ranges."""
    if blob.value_type != LIST:
        value = None if blob.value is None else Typed(blob.value_type, blob.value)
        return ChannelValue(blob.channel, value, None, None)
    assert blob.lineage is not None
    assert blob.length is not None
    sql = tx.sql(LangGraphSql)
    items: list[Typed] = []
    for lineage, start, end in segments(tx, session_id, blob.lineage, blob.length):
        items += tx.rows(sql.items, (session_id, lineage, start, end))
    check_list_items(len(items), blob.length, blob.channel, session_id)
    return ChannelValue(blob.channel, None, items, blob.lineage)


def blobs_at(tx: Tx, session_id: str, ns: str, versions: dict[str, str]) -> list[BlobRow]:
    """The stored channel versions a checkpoint names."""
    if not versions:
        return []
    ids = tx.dialect.id_list
    params = (session_id, ns, ids(sorted(versions)), ids(sorted(set(versions.values()))))
    found = tx.rows(tx.sql(LangGraphSql).blobs, params)
    return [blob for blob in found if versions.get(blob.channel) == blob.version]


def _load(tx: Tx, row: CheckpointRow) -> LoadedCheckpoint:
    sql = tx.sql(LangGraphSql)
    session_id, ns = row.session_id, row.checkpoint_ns
    values = [
        channel_value(tx, session_id, blob)
        for blob in blobs_at(tx, session_id, ns, versions_of(row))
        if blob.value_type != EMPTY
    ]
    writes = tx.rows(sql.writes, (session_id, ns, row.checkpoint_id))
    writes.sort(key=lambda write: (write.task_path, write.task_id, write.idx))
    return LoadedCheckpoint(row=row, values=values, writes=writes)


def get(
    tx: Tx, session_id: str, checkpoint_ns: str, checkpoint_id: str | None
) -> LoadedCheckpoint | None:
    """One checkpoint by id, or the namespace's newest; None if there is none."""
    sql = tx.sql(LangGraphSql)
    if checkpoint_id is None:
        row = tx.row(sql.latest, (session_id, checkpoint_ns))
    else:
        row = tx.row(sql.checkpoint, (session_id, checkpoint_ns, checkpoint_id))
    return None if row is None else _load(tx, row)


def search(tx: Tx, query: SearchQuery) -> list[CheckpointRow]:
    """One newest-first page of checkpoint rows (no values) matching a listing's filters."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("session_id", query.session_id),
        ("checkpoint_ns", query.checkpoint_ns),
        ("checkpoint_id", query.checkpoint_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if query.before is not None:
        where.append("checkpoint_id < ?")
        params.append(query.before)
    if query.after is not None:
        where.append("(checkpoint_id, session_id, checkpoint_ns) < (?, ?, ?)")
        params.extend(query.after)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    statement = select(CheckpointRow, f"FROM lg_checkpoints{clause}{_SEARCH_ORDER}")
    formatted = Query(tx.dialect.format(statement.sql), statement.make)
    return tx.rows(formatted, (*params, query.limit))


def load_rows(tx: Tx, rows: Iterable[CheckpointRow]) -> list[LoadedCheckpoint]:
    """The values and writes of checkpoints a search found."""
    return [_load(tx, row) for row in rows]
