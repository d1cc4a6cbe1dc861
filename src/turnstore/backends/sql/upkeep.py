"""Transaction scripts of the operators' calls: retention by last update, and store counts."""

from __future__ import annotations

from typing import NamedTuple

from turnstore.backends.sql import checkpoints
from turnstore.backends.sql.engine import Statements, Tx, select
from turnstore.backends.sql.transfer import tree
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ExecutionStats
from turnstore.records.upkeep import StoreStats


class RootRow(NamedTuple):
    """A tree's root, as prune pages through them: oldest last update first."""

    session_id: str
    updated_at: int


class SessionCounts(NamedTuple):
    """How many sessions and forks, and their checkpoint sequences summed."""

    sessions: int
    forks: int
    checkpoints: int


class BlobCounts(NamedTuple):
    """How many blobs, and their bytes."""

    blobs: int
    blob_bytes: int


class UpkeepSql(Statements):
    """The statements of prune and stats."""

    old_roots = select(
        RootRow,
        "FROM sessions WHERE parent_session_id IS NULL AND updated_at < ?"
        " AND (updated_at > ? OR (updated_at = ? AND session_id > ?))"
        " ORDER BY updated_at, session_id LIMIT ?",
    )
    old_owner_roots = select(
        RootRow,
        "FROM sessions WHERE parent_session_id IS NULL AND updated_at < ? AND owner_id = ?"
        " AND (updated_at > ? OR (updated_at = ? AND session_id > ?))"
        " ORDER BY updated_at, session_id LIMIT ?",
    )
    newest_update = "SELECT max(updated_at) FROM sessions WHERE {ids:session_id}"
    session_counts = select(
        SessionCounts,
        "FROM sessions",
        sessions="count(*)",
        forks="count(parent_session_id)",
        checkpoints="CAST(coalesce(sum(latest_sequence), 0) AS BIGINT)",
    )
    stats_json = "SELECT execution_stats_json FROM sessions"
    blob_counts = select(
        BlobCounts,
        "FROM blobs",
        blobs="count(*)",
        blob_bytes="CAST(coalesce(sum(length(data)), 0) AS BIGINT)",
    )
    turns = "SELECT count(*) FROM execution_journal"
    events = "SELECT count(*) FROM event_journal"
    batches = "SELECT count(*) FROM transcript_delta"
    attachments = "SELECT count(*) FROM attachment_manifest"
    langgraph_checkpoints = "SELECT count(*) FROM lg_checkpoints"


class PruneCursor(NamedTuple):
    """Where the next prune batch starts: after this root in (last update, id) order."""

    updated_at: int
    session_id: str


START = PruneCursor(-1, "")
"""The cursor of the first batch."""


def prune_batch(
    tx: Tx,
    updated_before: int,
    owner_id: str | None,
    cursor: PruneCursor,
    limit: int,
    delete: bool,
) -> tuple[list[str], int, PruneCursor | None]:
    """Remove (or only find) up to `limit` old trees after `cursor`.

    A tree goes only when every session in it was last updated before `updated_before`:
    a fork saved yesterday keeps its year-old parent. Returns the sessions removed, the
    trees, and the next cursor (None when no old root is left).
    """
    sql = tx.sql(UpkeepSql)
    page = (cursor.updated_at, cursor.updated_at, cursor.session_id, limit)
    if owner_id is None:
        found = tx.rows(sql.old_roots, (updated_before, *page))
    else:
        found = tx.rows(sql.old_owner_roots, (updated_before, owner_id, *page))
    removed: list[str] = []
    trees = 0
    roots: list[str] = []
    for root in found:
        ids = tree(tx, root.session_id)
        newest = tx.value(sql.newest_update, (tx.dialect.id_list(ids),))
        if newest is not None and newest < updated_before:
            roots.append(root.session_id)
            removed.extend(ids)
            trees += 1
    if delete and roots:
        checkpoints.delete(tx, roots)
    following = (
        None if len(found) < limit else PruneCursor(found[-1].updated_at, found[-1].session_id)
    )
    return removed, trees, following


def stats(tx: Tx) -> StoreStats:
    """Counts of what the store holds (database size is the engine's to add)."""
    sql = tx.sql(UpkeepSql)
    counts = tx.row(sql.session_counts)
    blobs = tx.row(sql.blob_counts)
    # Aggregates always return one row.
    assert counts is not None
    assert blobs is not None
    total = inputs = outputs = 0
    for (stats_json,) in tx.stream(sql.stats_json):
        usage = decode_stored(stats_json, ExecutionStats, "execution stats").usage
        total += usage.total_tokens
        inputs += usage.input_tokens
        outputs += usage.output_tokens
    return StoreStats(
        session_count=counts.sessions,
        fork_count=counts.forks,
        checkpoint_count=counts.checkpoints,
        turn_count=tx.value(sql.turns),
        event_count=tx.value(sql.events),
        transcript_batch_count=tx.value(sql.batches),
        total_tokens=total,
        input_tokens=inputs,
        output_tokens=outputs,
        blob_count=blobs.blobs,
        blob_bytes=blobs.blob_bytes,
        attachment_count=tx.value(sql.attachments),
        langgraph_checkpoint_count=tx.value(sql.langgraph_checkpoints),
    )
