"""LangGraph checkpoints: ancestor walks (delta-channel history, prune), deletes and copies.

See `turnstore.scripts.langgraph` for how checkpoints, values and lists are stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import NamedTuple

from turnstore.engine.protocol import Statements, Tx, matching, select
from turnstore.records.langgraph import EMPTY, DeltaHistory, WriteRow
from turnstore.scripts import search_cuts, sessions
from turnstore.scripts.langgraph import (
    BLOB_COLUMNS,
    CHECKPOINT_COLUMNS,
    ITEM_COLUMNS,
    WRITE_COLUMNS,
    WRITE_KEY,
    BlobRow,
    LangGraphSql,
    blobs_at,
    channel_value,
    ensure_thread,
    versions_of,
)

CHAIN_STEP = 1000
"""Ancestors one statement of a history walk reads."""


class ChainRow(NamedTuple):
    """One checkpoint of an ancestor walk."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    versions_json: str
    depth: int


class StoredBlob(NamedTuple):
    """A channel version's key, kind and lineage, without its value."""

    checkpoint_ns: str
    channel: str
    version: str
    value_type: str
    lineage: int | None


class NamedVersions(NamedTuple):
    """The channel versions one checkpoint names."""

    checkpoint_ns: str
    versions_json: str


class CheckpointKey(NamedTuple):
    """The primary key of a checkpoint."""

    session_id: str
    checkpoint_ns: str
    checkpoint_id: str


class BlobKey(NamedTuple):
    """Which `lg_blobs` row: a channel version of a namespace of a thread."""

    session_id: str
    checkpoint_ns: str
    channel: str
    version: str


class LineageKey(NamedTuple):
    """Which lineage of a thread (its `lg_lineages` row, or its `lg_items`)."""

    session_id: str
    lineage: int


class ChannelWrite(NamedTuple):
    """A pending write with the checkpoint it was made on."""

    checkpoint_id: str
    task_id: str
    idx: int
    task_path: str
    channel: str
    value_type: str
    value: bytes | None


class HeadRow(NamedTuple):
    """What prune reads of each checkpoint of a thread."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    versions_json: str
    delta_channels_json: str | None


class UpkeepSql(Statements):
    """Statements of walks, deletes and copies of the LangGraph tables."""

    blob_kinds = select(
        BlobRow,
        "FROM lg_blobs WHERE session_id = ? AND checkpoint_ns = ? AND {ids:channel}",
        value="NULL",
    )
    channel_writes = select(
        ChannelWrite,
        "FROM lg_writes WHERE session_id = ? AND checkpoint_ns = ? AND {ids:checkpoint_id}"
        " AND {ids:channel}",
    )
    # An ancestor walk from one checkpoint, CHAIN_STEP parents at a time.
    chain = select(
        ChainRow,
        "FROM (WITH RECURSIVE walk (checkpoint_id, parent_checkpoint_id, versions_json, depth)"
        " AS (SELECT checkpoint_id, parent_checkpoint_id, versions_json, 0 FROM lg_checkpoints"
        " WHERE session_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        " UNION ALL SELECT c.checkpoint_id, c.parent_checkpoint_id, c.versions_json,"
        " walk.depth + 1 FROM lg_checkpoints c JOIN walk"
        " ON c.checkpoint_id = walk.parent_checkpoint_id"
        " WHERE c.session_id = ? AND c.checkpoint_ns = ? AND walk.depth < ?)"
        " SELECT * FROM walk) AS chain ORDER BY depth",
    )
    heads = select(HeadRow, "FROM lg_checkpoints WHERE session_id = ?")
    run_checkpoints = select(CheckpointKey, "FROM lg_checkpoints WHERE {ids:run_id}")
    delete_checkpoint = matching(CheckpointKey, "DELETE FROM lg_checkpoints")
    delete_checkpoint_writes = matching(CheckpointKey, "DELETE FROM lg_writes")
    orphan = matching(CheckpointKey, "UPDATE lg_checkpoints SET parent_checkpoint_id = NULL")
    referenced = select(NamedVersions, "FROM lg_checkpoints WHERE session_id = ?")
    stored_blobs = select(StoredBlob, "FROM lg_blobs WHERE session_id = ?")
    delete_blob = matching(BlobKey, "DELETE FROM lg_blobs")
    delete_items = matching(LineageKey, "DELETE FROM lg_items")
    delete_lineage = matching(LineageKey, "DELETE FROM lg_lineages")
    copy_checkpoints = (
        f"INSERT INTO lg_checkpoints ({CHECKPOINT_COLUMNS}) SELECT ?,"
        f" {CHECKPOINT_COLUMNS.split(', ', 1)[1]} FROM lg_checkpoints WHERE session_id = ?"
        " ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO NOTHING"
    )
    copy_blobs = (
        f"INSERT INTO lg_blobs ({BLOB_COLUMNS}) SELECT ?, {BLOB_COLUMNS.split(', ', 1)[1]}"
        " FROM lg_blobs WHERE session_id = ?"
        " ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING"
    )
    copy_lineages = (
        "INSERT INTO lg_lineages (session_id, lineage, base_lineage, base_length, depth)"
        " SELECT ?, lineage, base_lineage, base_length, depth FROM lg_lineages"
        " WHERE session_id = ? ON CONFLICT (session_id, lineage) DO NOTHING"
    )
    copy_all_items = (
        f"INSERT INTO lg_items ({ITEM_COLUMNS}) SELECT ?, lineage, position, value_type, value"
        " FROM lg_items WHERE session_id = ?"
        " ON CONFLICT (session_id, lineage, position) DO NOTHING"
    )
    copy_writes = (
        f"INSERT INTO lg_writes ({WRITE_COLUMNS}) SELECT ?,"
        f" {WRITE_COLUMNS.split(', ', 1)[1]} FROM lg_writes WHERE session_id = ?"
        f" ON CONFLICT {WRITE_KEY} DO NOTHING"
    )


def _chain(tx: Tx, session_id: str, ns: str, checkpoint_id: str) -> Iterable[ChainRow]:
    """A checkpoint and its ancestors, newest first, read CHAIN_STEP at a time."""
    sql = tx.sql(UpkeepSql)
    start: str | None = checkpoint_id
    first = True
    while start is not None:
        rows = tx.rows(sql.chain, (session_id, ns, start, session_id, ns, CHAIN_STEP))
        if not first:
            rows = rows[1:]
        yield from rows
        if not rows or rows[-1].depth < CHAIN_STEP:
            return
        start, first = rows[-1].checkpoint_id, False


def _seeded(kinds: dict[tuple[str, str], str], channel: str, versions: dict[str, str]) -> bool:
    """Whether a checkpoint stores a value of `channel` (LangGraph: it is in channel_values)."""
    version = versions.get(channel)
    return version is not None and kinds.get((channel, version), EMPTY) != EMPTY


def delta_history(
    tx: Tx, session_id: str, ns: str, checkpoint_id: str | None, channels: list[str]
) -> list[DeltaHistory]:
    """Each channel's writes on the target's ancestors back to the nearest stored value.

    One read: the ancestor walk, the channels' blob kinds, their writes and the seeds.
    """
    sql = tx.sql(UpkeepSql)
    if checkpoint_id is None:
        latest = tx.row(tx.sql(LangGraphSql).latest, (session_id, ns))
        checkpoint_id = None if latest is None else latest.checkpoint_id
    empty = [DeltaHistory(channel, [], None) for channel in channels]
    if checkpoint_id is None or not channels:
        return empty
    ids = tx.dialect.id_list
    kinds = {
        (blob.channel, blob.version): blob.value_type
        for blob in tx.rows(sql.blob_kinds, (session_id, ns, ids(sorted(set(channels)))))
    }
    remaining = set(channels)
    path: dict[str, list[str]] = {channel: [] for channel in channels}
    seeds: dict[str, tuple[str, str]] = {}
    for depth, row in enumerate(_chain(tx, session_id, ns, checkpoint_id)):
        if depth == 0:
            continue  # the target's own writes are pending for its next step
        versions = versions_of(row)
        for channel in list(remaining):
            path[channel].append(row.checkpoint_id)
            if _seeded(kinds, channel, versions):
                seeds[channel] = (channel, versions[channel])
                remaining.discard(channel)
        if not remaining:
            break
    on_path = sorted({cid for cids in path.values() for cid in cids})
    by_checkpoint: dict[tuple[str, str], list[WriteRow]] = {}
    if on_path:
        params = (session_id, ns, ids(on_path), ids(sorted(set(channels))))
        for write in tx.rows(sql.channel_writes, params):
            key = (write.checkpoint_id, write.channel)
            by_checkpoint.setdefault(key, []).append(WriteRow(*write[1:]))
    found = []
    for channel in channels:
        writes: list[WriteRow] = []
        for cid in reversed(path[channel]):
            batch = by_checkpoint.get((cid, channel), [])
            writes += sorted(batch, key=lambda w: (w.task_path, w.task_id, w.idx))
        seed = None
        if channel in seeds:
            (blob,) = blobs_at(tx, session_id, ns, dict([seeds[channel]]))
            seed = channel_value(tx, session_id, blob)
        found.append(DeltaHistory(channel, writes, seed))
    return found


# --- deletes, prune, copy -------------------------------------------------------------------


def collect(tx: Tx, session_id: str) -> None:
    """Delete the channel versions no checkpoint names, and the lineages no version needs."""
    sql = tx.sql(UpkeepSql)
    named: set[tuple[str, str, str]] = set()
    for named_row in tx.rows(sql.referenced, (session_id,)):
        ns = named_row.checkpoint_ns
        named.update((ns, channel, v) for channel, v in versions_of(named_row).items())
    dead = []
    live: set[int] = set()
    for blob in tx.rows(sql.stored_blobs, (session_id,)):
        if (blob.checkpoint_ns, blob.channel, blob.version) in named:
            if blob.lineage is not None:
                live.add(blob.lineage)
        else:
            dead.append(BlobKey(session_id, blob.checkpoint_ns, blob.channel, blob.version))
    if dead:
        tx.many(sql.delete_blob, dead)
    stored = tx.rows(tx.sql(LangGraphSql).lineages, (session_id,))
    lineages = {row.lineage: row for row in stored}
    needed: set[int] = set()
    for lineage in live:
        current: int | None = lineage
        while current is not None and current not in needed:
            needed.add(current)
            found = lineages.get(current)
            current = None if found is None else found.base_lineage
    gone = [LineageKey(session_id, lineage) for lineage in lineages if lineage not in needed]
    if gone:
        tx.many(sql.delete_items, gone)
        tx.many(sql.delete_lineage, gone)


def delete_runs(tx: Tx, run_ids: list[str]) -> None:
    """Delete the checkpoints (and their writes) the given runs made."""
    sql = tx.sql(UpkeepSql)
    keys = sorted(tx.rows(sql.run_checkpoints, (tx.dialect.id_list(run_ids),)))
    for session_id in sorted({key[0] for key in keys}):
        sessions.lock(tx, session_id)
    if not keys:
        return
    doomed = set(keys)
    for session_id in sorted({key[0] for key in keys}):
        newest = tx.row(tx.sql(LangGraphSql).latest, (session_id, ""))
        key = None if newest is None else CheckpointKey(*newest[:3])
        if key in doomed:
            # The list the search index read goes: unindexed while it can still be read.
            search_cuts.langgraph_reset(tx, session_id)
    tx.many(sql.delete_checkpoint_writes, keys)
    tx.many(sql.delete_checkpoint, keys)
    for session_id in sorted({key[0] for key in keys}):
        collect(tx, session_id)


def _kept(
    rows: list[HeadRow], kinds: dict[str, dict[tuple[str, str], str]]
) -> set[tuple[str, str]]:
    """Each namespace's newest checkpoint, and the ancestors its delta channels replay."""
    by_id = {(row.checkpoint_ns, row.checkpoint_id): row for row in rows}
    heads: dict[str, HeadRow] = {}
    for row in rows:
        head = heads.get(row.checkpoint_ns)
        if head is None or row.checkpoint_id > head.checkpoint_id:
            heads[row.checkpoint_ns] = row
    kept = set()
    for ns, head in heads.items():
        remaining = set(json.loads(head.delta_channels_json or "[]"))
        current: HeadRow | None = head
        while current is not None:
            kept.add((ns, current.checkpoint_id))
            versions = versions_of(current)
            ns_kinds = kinds.get(ns, {})
            remaining = {c for c in remaining if not _seeded(ns_kinds, c, versions)}
            if not remaining or current.parent_checkpoint_id is None:
                break
            current = by_id.get((ns, current.parent_checkpoint_id))
    return kept


def keep_latest(tx: Tx, session_id: str) -> None:
    """Delete every checkpoint but each namespace's newest (and what its delta channels need)."""
    sql = tx.sql(UpkeepSql)
    if not sessions.lock(tx, session_id):
        return
    rows = tx.rows(sql.heads, (session_id,))
    kinds: dict[str, dict[tuple[str, str], str]] = {}
    for blob in tx.rows(sql.stored_blobs, (session_id,)):
        kinds.setdefault(blob.checkpoint_ns, {})[(blob.channel, blob.version)] = blob.value_type
    kept = _kept(rows, kinds)
    doomed = [
        CheckpointKey(session_id, row.checkpoint_ns, row.checkpoint_id)
        for row in rows
        if (row.checkpoint_ns, row.checkpoint_id) not in kept
    ]
    if not doomed:
        return
    tx.many(sql.delete_checkpoint_writes, doomed)
    tx.many(sql.delete_checkpoint, doomed)
    orphans = [
        CheckpointKey(session_id, row.checkpoint_ns, row.checkpoint_id)
        for row in rows
        if (row.checkpoint_ns, row.checkpoint_id) in kept
        and row.parent_checkpoint_id is not None
        and (row.checkpoint_ns, row.parent_checkpoint_id) not in kept
    ]
    if orphans:
        tx.many(sql.orphan, orphans)
    collect(tx, session_id)


def copy(tx: Tx, source: str, target: str) -> bool:
    """Copy every checkpoint, value and write of a thread to another; False if none."""
    sql = tx.sql(UpkeepSql)
    if not sessions.lock(tx, source):
        return False
    ensure_thread(tx, target, tx.value(tx.sql(LangGraphSql).owner, (source,)))
    # The copy may make another checkpoint the target's newest: its list is read again.
    search_cuts.langgraph_reset(tx, target)
    for statement in (
        sql.copy_lineages,
        sql.copy_all_items,
        sql.copy_blobs,
        sql.copy_checkpoints,
        sql.copy_writes,
    ):
        tx.run(statement, (target, source))
    return True
