"""The operations of the runtime face, for the one session a handle is bound to.

Every operation takes the bound session id first; a record that names a session (a commit,
a claim, an intent, metadata) must name that one.
"""

from __future__ import annotations

import logging
from typing import cast

from turnstore.drivers.steps import Steps, origin, read, write
from turnstore.engine.protocol import Engine
from turnstore.errors import InvalidInput
from turnstore.records.runtime import (
    ActivePath,
    AttachmentIntent,
    AttachmentManifestEntry,
    FullGraph,
    GcReport,
    PersistedSessionRead,
    QueuedWorkBatch,
    QueuedWorkBatchDraft,
    QueuedWorkClaim,
    QueuedWorkClaimBoundary,
    RuntimeCommit,
    RuntimeCommitResult,
    SessionMeta,
    SessionNodeRecord,
    SessionPickerInfo,
    SessionReadScope,
    VacuumReport,
)
from turnstore.rules.queue import (
    PreparedClaim,
    check_lease,
    checked_claim,
    prepare_claim,
    prepare_claim_of,
    prepare_enqueue,
)
from turnstore.rules.runtime import check_binding, prepare_commit
from turnstore.rules.validation import identifier, validate_session_id
from turnstore.rules.values import checked, nonblank_list, storage_integer, text
from turnstore.scripts import attachments, queue, runtime_commit, runtime_reads, runtime_upkeep

logger = logging.getLogger("turnstore.runtime")


def load_session(
    session_id: str, scope: SessionReadScope | None
) -> Steps[PersistedSessionRead | None]:
    """Load the head, the graph (or one path of it), the checkpoint and the token ledger."""
    scope = FullGraph() if scope is None else scope
    if not isinstance(scope, FullGraph | ActivePath):
        raise InvalidInput("scope must be FullGraph() or ActivePath(leaf_node_id=...)")
    if isinstance(scope, ActivePath) and scope.leaf_node_id is not None:
        scope = ActivePath(leaf_node_id=text(scope.leaf_node_id, "leaf_node_id"))
    return (yield from read(lambda tx: runtime_reads.load_session(tx, session_id, scope)))


def load_node(session_id: str, node_id: str) -> Steps[SessionNodeRecord | None]:
    """Load one live node of the graph."""
    node_id = text(node_id, "node_id")
    return (yield from read(lambda tx: runtime_reads.load_node(tx, session_id, node_id)))


def commit_runtime_state(session_id: str, commit: RuntimeCommit) -> Steps[RuntimeCommitResult]:
    """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
    prepared = prepare_commit(session_id, commit)
    return (yield from write(lambda tx: runtime_commit.commit(tx, prepared)))


def enqueue_queued_work(session_id: str, batch: QueuedWorkBatchDraft) -> Steps[QueuedWorkBatch]:
    """Append a batch of input to the session's durable queue."""
    draft = prepare_enqueue(batch)
    return (yield from write(lambda tx: queue.enqueue(tx, session_id, draft)))


def claim_ready_queued_work(
    session_id: str,
    owner_id: str,
    boundary: QueuedWorkClaimBoundary,
    lease_ttl_ms: int,
    max_batches: int,
) -> Steps[QueuedWorkClaim | None]:
    """Lease the next ready group of batches for `owner_id`, or None."""
    claim = prepare_claim(owner_id, boundary, lease_ttl_ms, max_batches)
    text(claim.owner_id, "owner_id")
    return (yield from _lease(session_id, claim))


def claim_ready_queued_work_by_batch_ids(
    session_id: str,
    owner_id: str,
    boundary: QueuedWorkClaimBoundary,
    lease_ttl_ms: int,
    batch_ids: list[str],
) -> Steps[QueuedWorkClaim | None]:
    """Claim exactly these batches if they are the next ready group, else None."""
    ids = nonblank_list(batch_ids, "batch_ids", ordered=True)
    claim = prepare_claim_of(owner_id, boundary, lease_ttl_ms, ids)
    if claim is None:
        return None
    text(claim.owner_id, "owner_id")
    return (yield from _lease(session_id, claim))


def _lease(session_id: str, request: PreparedClaim) -> Steps[QueuedWorkClaim | None]:
    """Claim, then tell of any expired lease the claim took over (a recovery)."""
    leased = yield from write(lambda tx: queue.claim(tx, session_id, request))
    if leased.expired:
        # The engine that ran the claim counts on its own telemetry; asking costs no thread.
        engine = cast(Engine, (yield from origin()))
        if engine.telemetry is not None:
            engine.telemetry.leases_expired("reclaimed", len(leased.expired))
        logger.info(
            "session %r: %d expired lease(s) re-leased to owner %r",
            session_id,
            len(leased.expired),
            request.owner_id,
        )
    return leased.claim


def _bound_claim(session_id: str, claim: object) -> QueuedWorkClaim:
    found = checked_claim(claim)
    check_binding(session_id, validate_session_id(found.session_id))
    return found


def renew_queued_work_claim(
    session_id: str, claim: QueuedWorkClaim, lease_ttl_ms: int
) -> Steps[QueuedWorkClaim]:
    """Extend a live claim's lease; an expired claim raises QueuedWorkClaimExpired."""
    found = _bound_claim(session_id, claim)
    ttl = check_lease(lease_ttl_ms)
    return (yield from write(lambda tx: queue.renew(tx, found, ttl)))


def abandon_queued_work_claim(session_id: str, claim: QueuedWorkClaim) -> Steps[None]:
    """Release a claim without completing it; its batches are ready again."""
    found = _bound_claim(session_id, claim)
    yield from write(lambda tx: queue.abandon(tx, found))


def cancel_queued_work_batch(session_id: str, batch_id: str) -> Steps[QueuedWorkBatch | None]:
    """Remove an unclaimed batch; None when missing or held by a live claim."""
    batch_id = text(batch_id, "batch_id")
    return (yield from write(lambda tx: queue.cancel(tx, session_id, batch_id)))


def list_queued_work(session_id: str, pending_only: bool) -> Steps[list[QueuedWorkBatch]]:
    """List the queue in order; pending leaves out batches a live claim holds."""
    return (yield from read(lambda tx: queue.listed(tx, session_id, pending_only)))


def record_intent(session_id: str, intent: AttachmentIntent) -> Steps[None]:
    """Record an attachment write before its bytes land."""
    found, _ = checked(intent, AttachmentIntent, "intent")
    check_binding(session_id, validate_session_id(found.session_id))
    storage_integer(found.intent_at_epoch_ms, "intent_at_epoch_ms must be a time in ms")
    yield from write(lambda tx: attachments.record_intent(tx, found))


def commit_refs(session_id: str, attachment_ids: list[str]) -> Steps[None]:
    """Stamp attachments committed outside a runtime commit."""
    ids = nonblank_list(attachment_ids, "attachment_ids")
    yield from write(lambda tx: attachments.commit(tx, session_id, ids))


def list_uncommitted(
    session_id: str, older_than_epoch_ms: int
) -> Steps[list[AttachmentManifestEntry]]:
    """List this session's intents older than a time that no commit referenced."""
    older = storage_integer(older_than_epoch_ms, "older_than_epoch_ms must be a time in ms")
    return (yield from read(lambda tx: attachments.uncommitted(tx, session_id, older)))


def forget(session_id: str, attachment_id: str) -> Steps[bool]:
    """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
    attachment_id = text(attachment_id, "attachment_id")
    return (yield from write(lambda tx: attachments.forget(tx, session_id, attachment_id)))


def list_every_uncommitted(older_than_epoch_ms: int) -> Steps[list[AttachmentManifestEntry]]:
    """List every session's intents older than a time that no commit referenced.

    Deleting a session makes its entries uncommitted and older than any time, so this lists
    what a store-wide sweep reclaims after `delete_sessions`.
    """
    older = storage_integer(older_than_epoch_ms, "older_than_epoch_ms must be a time in ms")
    return (yield from read(lambda tx: attachments.every_uncommitted(tx, older)))


def canonical_uri_in_use(canonical_uri: str) -> Steps[bool]:
    """Whether any attachment entry, of any session, committed or not, names this URI."""
    uri = identifier(canonical_uri, "canonical_uri")
    return (yield from read(lambda tx: attachments.uri_named(tx, uri)))


def save_session_meta(session_id: str, meta: SessionMeta) -> Steps[None]:
    """Replace the session's metadata."""
    found, _ = checked(meta, SessionMeta, "meta")
    check_binding(session_id, validate_session_id(found.session_id))
    yield from write(lambda tx: runtime_upkeep.save_meta(tx, found))


def load_session_meta(session_id: str) -> Steps[SessionMeta | None]:
    """Load the session's metadata."""
    return (yield from read(lambda tx: runtime_reads.load_meta(tx, session_id)))


def picker_info(session_id: str) -> Steps[SessionPickerInfo | None]:
    """What a resume picker shows: folder, relation, first user message, message count."""
    return (yield from read(lambda tx: runtime_reads.picker_info(tx, session_id)))


def tombstone_nodes(session_id: str, node_ids: list[str]) -> Steps[None]:
    """Mark graph nodes dead; loads skip them until `vacuum` removes them."""
    ids = nonblank_list(node_ids, "node_ids")
    yield from write(lambda tx: runtime_upkeep.tombstone(tx, session_id, ids))


def vacuum(session_id: str) -> Steps[VacuumReport]:
    """Physically remove this session's tombstoned nodes."""
    return (yield from write(lambda tx: runtime_upkeep.vacuum(tx, session_id)))


def gc_unreachable() -> Steps[GcReport]:
    """Delete every blob no session head reaches (blobs are shared by content)."""
    return (yield from write(runtime_upkeep.gc_unreachable))
