"""Transaction scripts of the operators' calls: retention by last update, and store counts."""

from __future__ import annotations

from typing import NamedTuple

from turnstore.engine.protocol import Statements, Tx, select
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ExecutionStats
from turnstore.records.figures import Derived
from turnstore.records.upkeep import StoreGauges, StoreStats
from turnstore.scripts import checkpoints
from turnstore.scripts.transfer import tree


class RootRow(NamedTuple):
    """A tree's root, as prune pages through them: newest old update first, in index order."""

    session_id: str
    updated_at: int
    latest_sequence: int


class SessionCounts(NamedTuple):
    """How many sessions and forks, and their checkpoint sequences summed."""

    sessions: int
    forks: int
    checkpoints: int


class BlobCounts(NamedTuple):
    """How many blobs, and their bytes."""

    blobs: int
    blob_bytes: int


class QueueGauges(NamedTuple):
    """Queued work across sessions: every batch, the leased, the expired, the oldest waiting."""

    batches: int
    leased: int
    expired: int
    oldest_pending_age_ms: int | None


_LEASED = "claim_id IS NOT NULL AND lease_expires_at_ms > {now_ms}"
_EXPIRED = "claim_id IS NOT NULL AND lease_expires_at_ms <= {now_ms}"
_QUEUE_FIGURES = {
    "batches": "count(*)",
    "leased": f"CAST(coalesce(sum(CASE WHEN {_LEASED} THEN 1 ELSE 0 END), 0) AS BIGINT)",
    "expired": f"CAST(coalesce(sum(CASE WHEN {_EXPIRED} THEN 1 ELSE 0 END), 0) AS BIGINT)",
    "oldest_pending_age_ms": (
        f"{{now_ms}} - min(CASE WHEN {_LEASED} THEN NULL ELSE enqueued_at_ms END)"
    ),
}
"""The queue's gauges, over all of it or one owner's sessions."""
_OWNED = "SELECT session_id FROM sessions WHERE owner_id = ?"
"""The sessions of one owner (the catalog's owner index serves it)."""


class UpkeepSql(Statements):
    """The statements of prune (its memory count too) and stats."""

    # The catalog's index order (sessions_recent_idx, sessions_owner_recent_idx): each batch
    # reads its rows from where the last one stopped instead of sorting every old session.
    old_roots = select(
        RootRow,
        "FROM sessions WHERE updated_at < ? AND parent_session_id IS NULL"
        " AND (updated_at, latest_sequence, session_id) < (?, ?, ?)"
        " ORDER BY updated_at DESC, latest_sequence DESC, session_id DESC LIMIT ?",
    )
    old_owner_roots = select(
        RootRow,
        "FROM sessions WHERE owner_id = ? AND updated_at < ? AND parent_session_id IS NULL"
        " AND (updated_at, latest_sequence, session_id) < (?, ?, ?)"
        " ORDER BY updated_at DESC, latest_sequence DESC, session_id DESC LIMIT ?",
    )
    parents = "SELECT DISTINCT parent_session_id FROM sessions WHERE {ids:parent_session_id}"
    # A session's parent, when the owner asked about holds it too.
    owned_parent = (
        "SELECT p.session_id FROM sessions AS s JOIN sessions AS p"
        " ON p.session_id = s.parent_session_id WHERE s.session_id = ? AND p.owner_id = ?"
    )
    newest_update = "SELECT max(updated_at) FROM sessions WHERE {ids:session_id}"
    session_counts = select(
        SessionCounts,
        "FROM sessions",
        sessions="count(*)",
        forks="count(parent_session_id)",
        checkpoints="CAST(coalesce(sum(latest_sequence), 0) AS BIGINT)",
    )
    stats_json = "SELECT execution_stats_json, figures_json FROM sessions"
    blob_counts = select(
        BlobCounts,
        "FROM blobs",
        blobs="count(*)",
        blob_bytes="CAST(coalesce(sum(length(data)), 0) AS BIGINT)",
    )
    turns = "SELECT count(*) FROM execution_journal"
    events = (
        "SELECT (SELECT count(*) FROM event_journal)"
        " + (SELECT CAST(coalesce(sum(event_count), 0) AS BIGINT) FROM event_batches)"
    )
    batches = "SELECT count(*) FROM transcript_delta"
    attachments = "SELECT count(*) FROM attachment_manifest"
    langgraph_checkpoints = "SELECT count(*) FROM lg_checkpoints"
    uncommitted_attachments = (
        "SELECT count(*) FROM attachment_manifest WHERE committed_at_ms IS NULL"
    )
    session_count = "SELECT count(*) FROM sessions"
    # One pass over the queue, which holds only work not done yet.
    queue_gauges = select(QueueGauges, "FROM queued_work", **_QUEUE_FIGURES)
    owned_uncommitted_attachments = f"{uncommitted_attachments} AND session_id IN ({_OWNED})"
    owned_session_count = "SELECT count(*) FROM sessions WHERE owner_id = ?"
    owned_queue_gauges = select(
        QueueGauges, f"FROM queued_work WHERE session_id IN ({_OWNED})", **_QUEUE_FIGURES
    )
    tombstoned_sessions = (
        "SELECT DISTINCT session_id FROM graph_nodes WHERE tombstoned ORDER BY session_id"
    )
    # The memory sweep's own condition, so a dry run counts what it would delete (read off
    # memory_items_expiry_idx).
    expired_memory = (
        "SELECT count(*) FROM memory_items"
        " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= {now_ms}"
    )


class PruneCursor(NamedTuple):
    """Where the next prune batch starts: below this root in the catalog's order."""

    updated_at: int
    latest_sequence: int
    session_id: str


def start(updated_before: int) -> PruneCursor:
    """The cursor of the first batch: every root last updated before `updated_before`."""
    return PruneCursor(updated_before, -1, "")


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
    page = (*cursor, limit)
    if owner_id is None:
        found = tx.rows(sql.old_roots, (updated_before, *page))
    else:
        found = tx.rows(sql.old_owner_roots, (owner_id, updated_before, *page))
    ids = [root.session_id for root in found]
    # Most roots have no forks: only those with children need their tree read.
    parents = set(tx.values(sql.parents, (tx.dialect.id_list(ids),))) if ids else set()
    removed: list[str] = []
    roots: list[str] = []
    for root in ids:
        tree_ids = tree(tx, root) if root in parents else [root]
        if root in parents:
            newest = tx.value(sql.newest_update, (tx.dialect.id_list(tree_ids),))
            if newest is None or newest >= updated_before:
                continue
        roots.append(root)
        removed.extend(tree_ids)
    if delete and roots:
        checkpoints.delete(tx, roots)
    if len(found) < limit:
        return removed, len(roots), None
    last = found[-1]
    return removed, len(roots), PruneCursor(last.updated_at, last.latest_sequence, last.session_id)


def expired_memory(tx: Tx) -> int:
    """How many memory items have expired: what `scripts.memory.sweep` would delete now."""
    return int(tx.value(tx.sql(UpkeepSql).expired_memory))


def stats(tx: Tx) -> StoreStats:
    """Counts of what the store holds (database size is the engine's to add)."""
    sql = tx.sql(UpkeepSql)
    counts = tx.row(sql.session_counts)
    blobs = tx.row(sql.blob_counts)
    # Aggregates always return one row.
    assert counts is not None
    assert blobs is not None
    total = inputs = outputs = 0
    for stats_json, figures_json in tx.stream(sql.stats_json):
        usages = [decode_stored(stats_json, ExecutionStats, "execution stats").usage]
        if figures_json is not None:  # a framework session's, as its items carry them
            usages.append(decode_stored(figures_json, Derived, "figures").stats.usage)
        for usage in usages:
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


def gauges(tx: Tx, owner_id: str | None = None) -> StoreGauges:
    """The counts a monitor samples, of every session or of one owner's (sizes and schema
    version are the engine's to add, and are the whole store's)."""
    sql = tx.sql(UpkeepSql)
    if owner_id is None:
        queued = tx.row(sql.queue_gauges)
        sessions = tx.value(sql.session_count)
        uncommitted = tx.value(sql.uncommitted_attachments)
    else:
        queued = tx.row(sql.owned_queue_gauges, (owner_id,))
        sessions = tx.value(sql.owned_session_count, (owner_id,))
        uncommitted = tx.value(sql.owned_uncommitted_attachments, (owner_id,))
    assert queued is not None  # an aggregate always returns one row
    age = queued.oldest_pending_age_ms
    return StoreGauges(
        owner_id=owner_id,
        session_count=sessions,
        queued_batch_count=queued.batches,
        leased_batch_count=queued.leased,
        expired_lease_batch_count=queued.expired,
        # A clock step back could make the age negative for a moment.
        oldest_pending_age_ms=None if age is None else max(0, int(age)),
        uncommitted_attachment_count=uncommitted,
    )


def owned_top(tx: Tx, session_id: str, owner_id: str) -> str:
    """The highest session above `session_id` (itself if none) that `owner_id` holds with
    every session between: deleting its tree deletes theirs in one commit."""
    sql = tx.sql(UpkeepSql)
    top = session_id
    while parent := tx.values(sql.owned_parent, (top, owner_id)):
        top = str(parent[0])
    return top
