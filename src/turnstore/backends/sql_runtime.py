"""The SQL of the runtime face (session graph, turn commits, queued work, attachments, blobs).

Like `sql.py`, written once for every SQL backend: a runtime session is a row of `sessions`
(so it is in the catalog and `delete_sessions` removes it) plus rows of the runtime tables.
Every write locks the session row first, so writes to one session are serialised on every
backend and writes to different sessions run in parallel.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from turnstore.backends.sql import Engine, Statements, Tx, session_values
from turnstore.errors import (
    HeadRevisionConflict,
    InvalidInput,
    QueuedWorkClaimExpired,
    RuntimeTurnCommitConflict,
)
from turnstore.records.base import decode_json, encode_json
from turnstore.records.checkpoint import Checkpoint
from turnstore.records.runtime import (
    AgentFrameRecord,
    AttachmentIntent,
    AttachmentManifestEntry,
    FullGraph,
    GcReport,
    GraphAppend,
    GraphReplaceFull,
    HydratedSessionCheckpoint,
    PersistedSessionConfig,
    PersistedSessionRead,
    QueuedWorkBatch,
    QueuedWorkBatchDraft,
    QueuedWorkClaim,
    QueuedWorkClaimBoundary,
    RootRelation,
    RuntimeCommitResult,
    SessionCheckpoint,
    SessionGraph,
    SessionMeta,
    SessionNodeRecord,
    SessionPickerInfo,
    SessionReadScope,
    TokenLedgerEntry,
    VacuumReport,
    delta_leaf,
)
from turnstore.rules.context import plan_context_write
from turnstore.rules.runtime import PreparedCommit, ensure_supported_schema_version
from turnstore.rules.saves import prepare_save

_BATCH_COLUMNS = (
    "batch_id, position, boundary, items_json, enqueued_at_ms, claim_id, claim_owner_id,"
    " lease_expires_at_ms"
)


class RuntimeStatements:
    """Every statement of the runtime face in one dialect."""

    def __init__(self, base: Statements) -> None:
        self.base = base
        d = base.dialect
        q = base._q
        ids = d.in_ids
        self.now_ms = f"SELECT {d.now_ms}"
        self.lock_session = q(f"SELECT 1 FROM sessions WHERE session_id = ?{d.lock}")
        self.head = q(
            "SELECT head_revision, schema_version, leaf_node_id, first_user_message,"
            " user_message_count, config_json, agent_frames_json, current_agent_frame_id,"
            " checkpoint_ref FROM runtime_heads WHERE session_id = ?"
        )
        self.upsert_head = q(
            "INSERT INTO runtime_heads (session_id, schema_version, head_revision, config_json,"
            " agent_frames_json, current_agent_frame_id, checkpoint_ref, leaf_node_id,"
            " first_user_message, user_message_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET schema_version = excluded.schema_version,"
            " head_revision = excluded.head_revision, config_json = excluded.config_json,"
            " agent_frames_json = excluded.agent_frames_json,"
            " current_agent_frame_id = excluded.current_agent_frame_id,"
            " checkpoint_ref = excluded.checkpoint_ref, leaf_node_id = excluded.leaf_node_id,"
            " first_user_message = excluded.first_user_message,"
            " user_message_count = excluded.user_message_count"
        )
        self.touch_session = q(
            f"UPDATE sessions SET updated_at = {d.now},"
            " first_user_message = COALESCE(first_user_message, ?) WHERE session_id = ?"
        )
        self.turn_commit = q(
            "SELECT commit_hash, result_json FROM turn_commits WHERE session_id = ? AND turn_id = ?"
        )
        self.insert_turn_commit = q(
            "INSERT INTO turn_commits (session_id, turn_id, commit_hash, result_json)"
            " VALUES (?, ?, ?, ?)"
        )
        self.delete_nodes = q("DELETE FROM graph_nodes WHERE session_id = ?")
        self.next_node_position = q(
            "SELECT COALESCE(MAX(position), 0) FROM graph_nodes WHERE session_id = ?"
        )
        self.node_exists = q(
            "SELECT tombstoned FROM graph_nodes WHERE session_id = ? AND node_id = ?"
        )
        self.insert_node = q(
            "INSERT INTO graph_nodes (session_id, node_id, parent_node_id, position, record_json)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        self.live_node = q(
            "SELECT record_json FROM graph_nodes"
            " WHERE session_id = ? AND node_id = ? AND NOT tombstoned"
        )
        self.live_nodes = q(
            "SELECT record_json FROM graph_nodes WHERE session_id = ? AND NOT tombstoned"
            " ORDER BY position"
        )
        self.path_nodes = q(
            "WITH RECURSIVE path(node_id, parent_node_id, position, record_json) AS ("
            " SELECT node_id, parent_node_id, position, record_json FROM graph_nodes"
            " WHERE session_id = ? AND node_id = ? AND NOT tombstoned"
            " UNION SELECT g.node_id, g.parent_node_id, g.position, g.record_json"
            " FROM graph_nodes AS g JOIN path ON g.node_id = path.parent_node_id"
            " WHERE g.session_id = ? AND NOT g.tombstoned"
            ") SELECT record_json FROM path ORDER BY position"
        )
        self.tombstone = q(
            "UPDATE graph_nodes SET tombstoned = ?"
            f" WHERE session_id = ? AND {ids.format(column='node_id')}"
        )
        self.vacuum = q(
            "DELETE FROM graph_nodes WHERE session_id = ? AND tombstoned RETURNING node_id"
        )
        self.insert_blob = q(
            "INSERT INTO blobs (blob_ref, data) VALUES (?, ?) ON CONFLICT (blob_ref) DO NOTHING"
        )
        self.blob = q("SELECT data FROM blobs WHERE blob_ref = ?")
        self.present_blobs = q(f"SELECT blob_ref FROM blobs WHERE {ids.format(column='blob_ref')}")
        self.all_blob_refs = "SELECT blob_ref FROM blobs"
        self.head_refs = "SELECT DISTINCT checkpoint_ref FROM runtime_heads"
        self.delete_blobs = q(f"DELETE FROM blobs WHERE {ids.format(column='blob_ref')}")
        self.next_ledger_position = q(
            "SELECT COALESCE(MAX(position), 0) FROM token_ledger WHERE session_id = ?"
        )
        self.insert_ledger = q(
            "INSERT INTO token_ledger (session_id, position, entry_json) VALUES (?, ?, ?)"
        )
        self.ledger = q(
            "SELECT entry_json FROM token_ledger WHERE session_id = ? ORDER BY position"
        )
        self.batches = q(
            f"SELECT {_BATCH_COLUMNS} FROM queued_work WHERE session_id = ? ORDER BY position"
        )
        self.next_batch_position = q(
            "SELECT COALESCE(MAX(position), 0) FROM queued_work WHERE session_id = ?"
        )
        self.batch_exists = q("SELECT 1 FROM queued_work WHERE session_id = ? AND batch_id = ?")
        self.insert_batch = q(
            "INSERT INTO queued_work (session_id, batch_id, position, boundary, items_json,"
            " enqueued_at_ms) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.claim_batch = q(
            "UPDATE queued_work SET claim_id = ?, claim_owner_id = ?, lease_expires_at_ms = ?"
            " WHERE session_id = ? AND batch_id = ?"
        )
        self.renew_claim = q(
            "UPDATE queued_work SET lease_expires_at_ms = ? WHERE session_id = ? AND claim_id = ?"
        )
        self.release_claim = q(
            "UPDATE queued_work SET claim_id = NULL, claim_owner_id = NULL,"
            " lease_expires_at_ms = NULL WHERE session_id = ? AND claim_id = ?"
        )
        self.delete_batch = q("DELETE FROM queued_work WHERE session_id = ? AND batch_id = ?")
        self.insert_intent = q(
            "INSERT INTO attachment_manifest (attachment_id, session_id, canonical_uri,"
            " intent_at_ms) VALUES (?, ?, ?, ?) ON CONFLICT (attachment_id) DO NOTHING"
        )
        self.attachment = q(
            "SELECT session_id, canonical_uri FROM attachment_manifest WHERE attachment_id = ?"
        )
        self.commit_attachment = q(
            f"UPDATE attachment_manifest SET committed_at_ms = {d.now_ms}"
            " WHERE attachment_id = ? AND session_id = ?"
        )
        self.uncommitted = q(
            "SELECT attachment_id, session_id, canonical_uri, intent_at_ms, committed_at_ms"
            " FROM attachment_manifest WHERE session_id = ? AND committed_at_ms IS NULL"
            " AND intent_at_ms < ? ORDER BY intent_at_ms, attachment_id"
        )
        self.forget = q(
            "DELETE FROM attachment_manifest WHERE attachment_id = ? AND session_id = ?"
            " AND committed_at_ms IS NULL RETURNING attachment_id"
        )
        self.upsert_meta = q(
            "INSERT INTO session_meta (session_id, meta_json) VALUES (?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET meta_json = excluded.meta_json"
        )
        self.meta = q("SELECT meta_json FROM session_meta WHERE session_id = ?")


def _rust_option(value: int | None) -> str:
    return "None" if value is None else f"Some({value})"


def _now(tx: Tx, sql: RuntimeStatements) -> int:
    row = tx.one(sql.now_ms)
    assert row is not None
    return int(row[0])


def ensure_session(tx: Tx, sql: RuntimeStatements, session_id: str) -> bool:
    """Create the session's catalog row (an empty checkpoint) if missing, then lock it.

    Returns whether the row existed before.
    """
    if tx.one(sql.lock_session, (session_id,)) is not None:
        return True
    empty = prepare_save(Checkpoint.empty(session_id), (), None, ())
    plan = plan_context_write(None, 0, [])
    tx.one(sql.base.insert_session, session_values(empty, plan, None))
    tx.one(sql.lock_session, (session_id,))
    return False


# --- commits -----------------------------------------------------------------------------------


def commit_script(tx: Tx, sql: RuntimeStatements, prepared: PreparedCommit) -> RuntimeCommitResult:
    """Apply one runtime commit whole: CAS, graph, blobs, ledger, queue, attachments, head."""
    commit = prepared.commit
    session_id = commit.session_id
    if sql.base.dialect.blob_read_lock:
        tx.one(sql.base.dialect.blob_read_lock)
    ensure_session(tx, sql, session_id)
    head = tx.one(sql.head, (session_id,))
    stamp = commit.turn_commit
    if stamp is not None:
        earlier = tx.one(sql.turn_commit, (session_id, stamp.turn_id))
        if earlier is not None:
            if earlier[0] != prepared.turn_commit_hash:
                raise RuntimeTurnCommitConflict(
                    f"runtime turn `{stamp.turn_id}` for session `{session_id}` was already "
                    "committed with a different commit hash",
                    session_id=session_id,
                    turn_id=stamp.turn_id,
                )
            return decode_json(earlier[1], RuntimeCommitResult)
    current = None if head is None else int(head[0])
    if commit.expected_head_revision != current:
        actual = current or 0
        raise HeadRevisionConflict(
            "store head revision conflict: expected "
            f"{_rust_option(commit.expected_head_revision)}, actual {actual}",
            expected=commit.expected_head_revision,
            actual=actual,
        )
    first_user_message, user_messages = _apply_graph(tx, sql, prepared, head)
    _store_blobs(tx, sql, prepared)
    _append_ledger(tx, sql, session_id, prepared)
    for completion in commit.completed_queue_claims:
        _complete_claim(tx, sql, session_id, completion.claim_id, completion.batch_ids)
    commit_attachments(tx, sql, session_id, commit.committed_attachment_ids)
    revision = (current or 0) + 1
    tx.run(
        sql.upsert_head,
        (
            session_id,
            prepared.manifest.schema_version,
            revision,
            commit.config.to_json().decode(),
            encode_json(commit.agent_frames).decode(),
            commit.current_agent_frame_id,
            prepared.manifest_blob.ref,
            delta_leaf(commit.graph),
            first_user_message,
            user_messages,
        ),
    )
    tx.run(sql.touch_session, (first_user_message, session_id))
    result = RuntimeCommitResult(
        head_revision=revision,
        checkpoint_ref=prepared.manifest_blob.ref,
        manifest=prepared.manifest,
    )
    if stamp is not None:
        tx.run(
            sql.insert_turn_commit,
            (session_id, stamp.turn_id, prepared.turn_commit_hash, result.to_json().decode()),
        )
    return result


def _apply_graph(
    tx: Tx, sql: RuntimeStatements, prepared: PreparedCommit, head: tuple[Any, ...] | None
) -> tuple[str | None, int]:
    commit = prepared.commit
    session_id = commit.session_id
    first, count = (None, 0) if head is None else (head[3], int(head[4]))
    if isinstance(commit.graph, GraphReplaceFull):
        tx.run(sql.delete_nodes, (session_id,))
        first, count = None, 0
    if isinstance(commit.graph, GraphAppend | GraphReplaceFull):
        row = tx.one(sql.next_node_position, (session_id,))
        position = int(row[0]) if row else 0
        for node_id, parent_node_id, record_json in prepared.node_rows:
            if tx.one(sql.node_exists, (session_id, node_id)) is not None:
                raise InvalidInput(f"graph node `{node_id}` already exists")
            position += 1
            tx.run(sql.insert_node, (session_id, node_id, parent_node_id, position, record_json))
        if prepared.user_messages:
            first = first if first is not None else prepared.user_messages[0]
            count += len(prepared.user_messages)
    leaf = delta_leaf(commit.graph)
    if leaf is not None and tx.one(sql.live_node, (session_id, leaf)) is None:
        raise InvalidInput(f"graph leaf `{leaf}` is not a live node of the session")
    return first, count


def _store_blobs(tx: Tx, sql: RuntimeStatements, prepared: PreparedCommit) -> None:
    provided = {blob.ref for blob in prepared.blobs}
    for blob in (*prepared.blobs, prepared.manifest_blob):
        tx.run(sql.insert_blob, (blob.ref, blob.data))
    referenced = sorted(set(prepared.manifest.blob_refs()) - provided)
    if referenced:
        id_list = sql.base.dialect.id_list
        present = {row[0] for row in tx.all(sql.present_blobs, (id_list(referenced),))}
        missing = [ref for ref in referenced if ref not in present]
        if missing:
            raise InvalidInput(f"checkpoint references blob `{missing[0]}`, which is not stored")


def _append_ledger(
    tx: Tx, sql: RuntimeStatements, session_id: str, prepared: PreparedCommit
) -> None:
    entries = prepared.commit.usage_deltas
    if not entries:
        return
    row = tx.one(sql.next_ledger_position, (session_id,))
    position = int(row[0]) if row else 0
    for entry in entries:
        position += 1
        tx.run(sql.insert_ledger, (session_id, position, entry.to_json().decode()))


# --- queued work -----------------------------------------------------------------------------


def _batch(session_id: str, row: tuple[Any, ...]) -> QueuedWorkBatch:
    return QueuedWorkBatch(
        session_id=session_id,
        batch_id=row[0],
        position=row[1],
        boundary=row[2],
        items=decode_json(row[3], list[Any]),
        enqueued_at_ms=row[4],
        claim_id=row[5],
        claim_owner_id=row[6],
        lease_expires_at_ms=row[7],
    )


def _live(batch: QueuedWorkBatch, now: int) -> bool:
    return (
        batch.claim_id is not None
        and batch.lease_expires_at_ms is not None
        and batch.lease_expires_at_ms > now
    )


def _batches(tx: Tx, sql: RuntimeStatements, session_id: str) -> list[QueuedWorkBatch]:
    return [_batch(session_id, row) for row in tx.all(sql.batches, (session_id,))]


def enqueue_script(tx: Tx, sql: RuntimeStatements, draft: QueuedWorkBatchDraft) -> QueuedWorkBatch:
    """Append a batch at the end of the session's durable queue."""
    session_id = draft.session_id
    ensure_session(tx, sql, session_id)
    batch_id = draft.batch_id or uuid.uuid4().hex
    if tx.one(sql.batch_exists, (session_id, batch_id)) is not None:
        raise InvalidInput(f"queued work batch `{batch_id}` already exists")
    row = tx.one(sql.next_batch_position, (session_id,))
    position = (int(row[0]) if row else 0) + 1
    now = _now(tx, sql)
    items_json = encode_json(draft.items).decode()
    tx.run(sql.insert_batch, (session_id, batch_id, position, draft.boundary, items_json, now))
    return QueuedWorkBatch(
        session_id=session_id,
        batch_id=batch_id,
        position=position,
        boundary=draft.boundary,
        items=draft.items,
        enqueued_at_ms=now,
    )


def claim_script(
    tx: Tx,
    sql: RuntimeStatements,
    session_id: str,
    owner_id: str,
    boundary: QueuedWorkClaimBoundary,
    lease_ttl_ms: int,
    max_batches: int,
    exact_ids: list[str] | None,
) -> QueuedWorkClaim | None:
    """Lease the next ready group: the oldest ready batches sharing the claim's boundary."""
    if tx.one(sql.lock_session, (session_id,)) is None:
        return None
    now = _now(tx, sql)
    group: list[QueuedWorkBatch] = []
    for batch in _batches(tx, sql, session_id):
        if _live(batch, now):
            if group:
                break  # the group is consecutive: it never jumps over a held batch
            continue
        if batch.boundary != boundary or len(group) == max_batches:
            break
        group.append(batch)
    if not group or (exact_ids is not None and [b.batch_id for b in group] != exact_ids):
        return None
    claim_id = uuid.uuid4().hex
    expires = now + lease_ttl_ms
    for batch in group:
        tx.run(sql.claim_batch, (claim_id, owner_id, expires, session_id, batch.batch_id))
        batch.claim_id, batch.claim_owner_id, batch.lease_expires_at_ms = (
            claim_id,
            owner_id,
            expires,
        )
    return QueuedWorkClaim(
        session_id=session_id,
        claim_id=claim_id,
        owner_id=owner_id,
        boundary=boundary,
        batches=group,
        lease_expires_at_ms=expires,
    )


def _held(
    tx: Tx, sql: RuntimeStatements, session_id: str, claim_id: str, batch_ids: Iterable[str]
) -> list[QueuedWorkBatch]:
    """Return the batches of a live claim, or raise QueuedWorkClaimExpired."""
    tx.one(sql.lock_session, (session_id,))
    now = _now(tx, sql)
    wanted = set(batch_ids)
    held = [
        batch
        for batch in _batches(tx, sql, session_id)
        if batch.claim_id == claim_id and _live(batch, now) and batch.batch_id in wanted
    ]
    if not wanted or len(held) != len(wanted):
        raise QueuedWorkClaimExpired(
            f"queued work claim `{claim_id}` for session `{session_id}` is missing or expired",
            session_id=session_id,
            claim_id=claim_id,
        )
    return held


def _complete_claim(
    tx: Tx, sql: RuntimeStatements, session_id: str, claim_id: str, batch_ids: list[str]
) -> None:
    for batch in _held(tx, sql, session_id, claim_id, batch_ids):
        tx.run(sql.delete_batch, (session_id, batch.batch_id))


def renew_script(
    tx: Tx, sql: RuntimeStatements, claim: QueuedWorkClaim, lease_ttl_ms: int
) -> QueuedWorkClaim:
    """Extend a live claim's lease; an expired or missing claim cannot be renewed."""
    ids = [batch.batch_id for batch in claim.batches]
    held = _held(tx, sql, claim.session_id, claim.claim_id, ids)
    expires = _now(tx, sql) + lease_ttl_ms
    tx.run(sql.renew_claim, (expires, claim.session_id, claim.claim_id))
    for batch in held:
        batch.lease_expires_at_ms = expires
    return QueuedWorkClaim(
        session_id=claim.session_id,
        claim_id=claim.claim_id,
        owner_id=claim.owner_id,
        boundary=claim.boundary,
        batches=held,
        lease_expires_at_ms=expires,
    )


def abandon_script(tx: Tx, sql: RuntimeStatements, claim: QueuedWorkClaim) -> None:
    """Release a claim's batches so they are ready again."""
    tx.run(sql.release_claim, (claim.session_id, claim.claim_id))


def cancel_script(
    tx: Tx, sql: RuntimeStatements, session_id: str, batch_id: str
) -> QueuedWorkBatch | None:
    """Remove an unclaimed batch; None when it is missing or a live claim holds it."""
    if tx.one(sql.lock_session, (session_id,)) is None:
        return None
    now = _now(tx, sql)
    for batch in _batches(tx, sql, session_id):
        if batch.batch_id == batch_id:
            if _live(batch, now):
                return None
            tx.run(sql.delete_batch, (session_id, batch_id))
            return batch
    return None


def list_batches(
    tx: Tx, sql: RuntimeStatements, session_id: str, pending_only: bool
) -> list[QueuedWorkBatch]:
    """The session's queue in order; pending excludes batches a live claim holds."""
    batches = _batches(tx, sql, session_id)
    if not pending_only:
        return batches
    now = _now(tx, sql)
    return [batch for batch in batches if not _live(batch, now)]


# --- attachments, meta, graph maintenance, blobs --------------------------------------------------


def record_intent_script(tx: Tx, sql: RuntimeStatements, intent: AttachmentIntent) -> None:
    """Record that an attachment's bytes are about to land (idempotent for the same id)."""
    ensure_session(tx, sql, intent.session_id)
    tx.run(
        sql.insert_intent,
        (intent.attachment_id, intent.session_id, intent.canonical_uri, intent.intent_at_epoch_ms),
    )
    row = tx.one(sql.attachment, (intent.attachment_id,))
    if row is None or tuple(row) != (intent.session_id, intent.canonical_uri):
        raise InvalidInput(
            f"attachment `{intent.attachment_id}` is already recorded for another payload"
        )


def commit_attachments(
    tx: Tx, sql: RuntimeStatements, session_id: str, attachment_ids: Iterable[str]
) -> None:
    """Stamp attachments committed; each must have a recorded intent in this session."""
    for attachment_id in attachment_ids:
        row = tx.one(sql.attachment, (attachment_id,))
        if row is None or row[0] != session_id:
            raise InvalidInput(
                f"attachment `{attachment_id}` has no recorded intent in session `{session_id}`"
            )
        tx.run(sql.commit_attachment, (attachment_id, session_id))


def uncommitted_attachments(
    tx: Tx, sql: RuntimeStatements, session_id: str, older_than_ms: int
) -> list[AttachmentManifestEntry]:
    """Intents older than `older_than_ms` that no commit referenced."""
    return [
        AttachmentManifestEntry(
            attachment_id=row[0],
            session_id=row[1],
            canonical_uri=row[2],
            intent_at_epoch_ms=row[3],
            committed_at_epoch_ms=row[4],
        )
        for row in tx.all(sql.uncommitted, (session_id, older_than_ms))
    ]


def save_meta_script(tx: Tx, sql: RuntimeStatements, meta: SessionMeta) -> None:
    """Replace the session's metadata."""
    ensure_session(tx, sql, meta.session_id)
    tx.run(sql.upsert_meta, (meta.session_id, meta.to_json().decode()))


def picker_info(tx: Tx, sql: RuntimeStatements, session_id: str) -> SessionPickerInfo | None:
    """What a resume picker shows, from the head's message counters and the metadata."""
    head = tx.one(sql.head, (session_id,))
    meta_row = tx.one(sql.meta, (session_id,))
    if head is None and meta_row is None:
        return None
    meta = None if meta_row is None else decode_json(meta_row[0], SessionMeta)
    return SessionPickerInfo(
        session_id=session_id,
        cwd=None if meta is None else meta.cwd,
        relation=RootRelation() if meta is None else meta.relation,
        first_user_message=(head[3] if head else None) or "",
        user_message_count=int(head[4]) if head else 0,
    )


def tombstone_script(tx: Tx, sql: RuntimeStatements, session_id: str, node_ids: list[str]) -> None:
    """Mark nodes dead: loads skip them, and `vacuum` removes them."""
    tx.one(sql.lock_session, (session_id,))
    tx.run(sql.tombstone, (True, session_id, sql.base.dialect.id_list(sorted(set(node_ids)))))


def vacuum_script(tx: Tx, sql: RuntimeStatements, session_id: str) -> VacuumReport:
    """Physically remove the session's tombstoned nodes."""
    tx.one(sql.lock_session, (session_id,))
    return VacuumReport(removed_node_count=len(tx.all(sql.vacuum, (session_id,))))


def gc_script(tx: Tx, sql: RuntimeStatements) -> GcReport:
    """Delete every blob that no session head's manifest reaches."""
    dialect = sql.base.dialect
    if dialect.blob_write_lock:
        tx.one(dialect.blob_write_lock)
    roots = [row[0] for row in tx.all(sql.head_refs)]
    retained = set(roots)
    for root in roots:
        row = tx.one(sql.blob, (root,))
        if row is not None:
            retained.update(decode_json(bytes(row[0]), SessionCheckpoint).blob_refs())
    stored = {row[0] for row in tx.all(sql.all_blob_refs)}
    doomed = sorted(stored - retained)
    if doomed:
        tx.run(sql.delete_blobs, (dialect.id_list(doomed),))
    return GcReport(
        root_count=len(roots),
        retained_blob_count=len(stored & retained),
        deleted_blob_count=len(doomed),
    )


# --- reads ---------------------------------------------------------------------------------------


def load_session_script(
    tx: Tx, sql: RuntimeStatements, session_id: str, scope: SessionReadScope
) -> PersistedSessionRead | None:
    """Read the head, the graph (or its active path), the hydrated checkpoint and the ledger."""
    head = tx.one(sql.head, (session_id,))
    if head is None:
        return None
    ensure_supported_schema_version("session head", int(head[1]))
    leaf = head[2]
    if isinstance(scope, FullGraph):
        rows = tx.all(sql.live_nodes, (session_id,))
    else:
        start = scope.leaf_node_id if scope.leaf_node_id is not None else leaf
        rows = [] if start is None else tx.all(sql.path_nodes, (session_id, start, session_id))
    return PersistedSessionRead(
        session_id=session_id,
        head_revision=head[0],
        config=decode_json(head[5], PersistedSessionConfig),
        agent_frames=decode_json(head[6], list[AgentFrameRecord]),
        current_agent_frame_id=head[7],
        graph=SessionGraph(
            nodes=[decode_json(row[0], SessionNodeRecord) for row in rows], leaf_node_id=leaf
        ),
        checkpoint_ref=head[8],
        checkpoint=_hydrate(tx, sql, head[8]),
        token_ledger=[
            decode_json(row[0], TokenLedgerEntry) for row in tx.all(sql.ledger, (session_id,))
        ],
    )


def _blob_bytes(tx: Tx, sql: RuntimeStatements, ref: str | None) -> bytes | None:
    if ref is None:
        return None
    row = tx.one(sql.blob, (ref,))
    if row is None:
        raise InvalidInput(f"blob `{ref}` is missing from the store")
    return bytes(row[0])


def _hydrate(tx: Tx, sql: RuntimeStatements, ref: str) -> HydratedSessionCheckpoint | None:
    data = _blob_bytes(tx, sql, ref)
    if data is None:
        return None
    manifest = decode_json(data, SessionCheckpoint)
    ensure_supported_schema_version("session checkpoint", manifest.schema_version)
    tool_state = _blob_bytes(tx, sql, manifest.tool_state_ref)
    plugin = _blob_bytes(tx, sql, manifest.plugin_snapshot_ref)
    return HydratedSessionCheckpoint(
        turn_state=manifest.turn_state,
        tool_state_ref=manifest.tool_state_ref,
        tool_state=None if tool_state is None else decode_json(tool_state, Any),
        plugin_snapshot_ref=manifest.plugin_snapshot_ref,
        plugin_snapshot=None if plugin is None else decode_json(plugin, Any),
        plugin_snapshot_revision=manifest.plugin_snapshot_revision,
        execution_state_ref=manifest.execution_state_ref,
        execution_state=_blob_bytes(tx, sql, manifest.execution_state_ref),
    )


class SqlRuntimeBackend:
    """The runtime face over any SQL engine and dialect; every call names its session."""

    def __init__(self, engine: Engine, statements: RuntimeStatements) -> None:
        self.engine = engine
        self.sql = statements

    def load_session(self, session_id: str, scope: SessionReadScope) -> PersistedSessionRead | None:
        """Read a session's head, graph, hydrated checkpoint and ledger in one snapshot."""
        return self.engine.read(lambda tx: load_session_script(tx, self.sql, session_id, scope))

    def load_node(self, session_id: str, node_id: str) -> SessionNodeRecord | None:
        """Read one live graph node."""
        row = self.engine.read(lambda tx: tx.one(self.sql.live_node, (session_id, node_id)))
        return None if row is None else decode_json(row[0], SessionNodeRecord)

    def commit(self, prepared: PreparedCommit) -> Future[RuntimeCommitResult]:
        """Apply a runtime commit in one transaction."""
        return self.engine.write(lambda tx: commit_script(tx, self.sql, prepared))

    def enqueue(self, draft: QueuedWorkBatchDraft) -> Future[QueuedWorkBatch]:
        """Append a queued-work batch."""
        return self.engine.write(lambda tx: enqueue_script(tx, self.sql, draft))

    def claim(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
        exact_ids: list[str] | None,
    ) -> Future[QueuedWorkClaim | None]:
        """Lease the next ready group of batches (only `exact_ids`, when given)."""
        return self.engine.write(
            lambda tx: claim_script(
                tx, self.sql, session_id, owner_id, boundary, lease_ttl_ms, max_batches, exact_ids
            )
        )

    def renew(self, claim: QueuedWorkClaim, lease_ttl_ms: int) -> Future[QueuedWorkClaim]:
        """Extend a live claim's lease."""
        return self.engine.write(lambda tx: renew_script(tx, self.sql, claim, lease_ttl_ms))

    def abandon(self, claim: QueuedWorkClaim) -> Future[None]:
        """Release a claim."""
        return self.engine.write(lambda tx: abandon_script(tx, self.sql, claim))

    def cancel(self, session_id: str, batch_id: str) -> Future[QueuedWorkBatch | None]:
        """Remove an unclaimed batch."""
        return self.engine.write(lambda tx: cancel_script(tx, self.sql, session_id, batch_id))

    def list_batches(self, session_id: str, pending_only: bool) -> list[QueuedWorkBatch]:
        """Read the session's queue."""
        return self.engine.read(lambda tx: list_batches(tx, self.sql, session_id, pending_only))

    def record_intent(self, intent: AttachmentIntent) -> Future[None]:
        """Record an attachment intent."""
        return self.engine.write(lambda tx: record_intent_script(tx, self.sql, intent))

    def commit_refs(self, session_id: str, attachment_ids: list[str]) -> Future[None]:
        """Stamp attachments committed outside a runtime commit."""
        return self.engine.write(
            lambda tx: commit_attachments(tx, self.sql, session_id, attachment_ids)
        )

    def list_uncommitted(
        self, session_id: str, older_than_ms: int
    ) -> list[AttachmentManifestEntry]:
        """Read uncommitted attachment intents older than a time."""
        return self.engine.read(
            lambda tx: uncommitted_attachments(tx, self.sql, session_id, older_than_ms)
        )

    def forget(self, session_id: str, attachment_id: str) -> Future[bool]:
        """Delete an uncommitted attachment row; False if none (absent or committed)."""
        return self.engine.write(
            lambda tx: bool(tx.all(self.sql.forget, (attachment_id, session_id)))
        )

    def save_meta(self, meta: SessionMeta) -> Future[None]:
        """Replace a session's metadata."""
        return self.engine.write(lambda tx: save_meta_script(tx, self.sql, meta))

    def load_meta(self, session_id: str) -> SessionMeta | None:
        """Read a session's metadata."""
        row = self.engine.read(lambda tx: tx.one(self.sql.meta, (session_id,)))
        return None if row is None else decode_json(row[0], SessionMeta)

    def picker_info(self, session_id: str) -> SessionPickerInfo | None:
        """Read what a resume picker shows of a session."""
        return self.engine.read(lambda tx: picker_info(tx, self.sql, session_id))

    def tombstone(self, session_id: str, node_ids: list[str]) -> Future[None]:
        """Mark graph nodes dead."""
        return self.engine.write(lambda tx: tombstone_script(tx, self.sql, session_id, node_ids))

    def vacuum(self, session_id: str) -> Future[VacuumReport]:
        """Remove tombstoned nodes."""
        return self.engine.write(lambda tx: vacuum_script(tx, self.sql, session_id))

    def gc_unreachable(self) -> Future[GcReport]:
        """Delete blobs no head reaches."""
        return self.engine.write(lambda tx: gc_script(tx, self.sql))
