"""Every operation of the runtime face, written once as steps both faces drive.

A runtime handle is bound to one session, as the seed's store is: every call that names a
session (a commit, a batch, a claim, an intent, metadata) must name the bound one.
"""

from __future__ import annotations

from turnstore.backends.base import RuntimeBackend
from turnstore.core import Read, Steps, Write
from turnstore.errors import InvalidInput
from turnstore.records.runtime import (
    ActivePath,
    AttachmentIntent,
    AttachmentManifestEntry,
    DurabilityTier,
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
from turnstore.rules.runtime import check_binding, check_lease, prepare_commit, prepare_enqueue
from turnstore.rules.saves import type_check
from turnstore.rules.validation import revalidated, storage_integer, validate_session_id


def _claim(value: QueuedWorkClaim) -> QueuedWorkClaim:
    type_check(value, QueuedWorkClaim, "claim")
    claim, _ = revalidated(value)
    return claim


def _ids(values: list[str], what: str) -> list[str]:
    if isinstance(values, str) or not all(isinstance(v, str) and v.strip() for v in values):
        raise InvalidInput(f"{what} must be a list of non-empty strings")
    return list(values)


class RuntimeCore:
    """The runtime operations of one session."""

    def __init__(self, backend: RuntimeBackend, session_id: str) -> None:
        self.backend = backend
        self.session_id = validate_session_id(session_id)

    def _bound(self, session_id: object) -> str:
        check_binding(self.session_id, validate_session_id(session_id))
        return self.session_id

    def durability_tier(self) -> DurabilityTier:
        """Commits are on disk (fsynced, or on the server) before they return."""
        return "inline"

    def load_session(self, scope: SessionReadScope | None) -> Steps[PersistedSessionRead | None]:
        """Load the head, the graph (or one path of it), the checkpoint and the token ledger."""
        scope = FullGraph() if scope is None else scope
        if not isinstance(scope, FullGraph | ActivePath):
            raise InvalidInput("scope must be FullGraph() or ActivePath(leaf_node_id=...)")
        found: PersistedSessionRead | None = yield Read(
            lambda: self.backend.load_session(self.session_id, scope)
        )
        return found

    def load_node(self, node_id: str) -> Steps[SessionNodeRecord | None]:
        """Load one live node of the graph."""
        type_check(node_id, str, "node_id")
        node: SessionNodeRecord | None = yield Read(
            lambda: self.backend.load_node(self.session_id, node_id)
        )
        return node

    def commit_runtime_state(self, commit: RuntimeCommit) -> Steps[RuntimeCommitResult]:
        """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
        prepared = prepare_commit(self.session_id, commit)
        result: RuntimeCommitResult = yield Write(lambda: self.backend.commit(prepared))
        return result

    def enqueue_queued_work(self, batch: QueuedWorkBatchDraft) -> Steps[QueuedWorkBatch]:
        """Append a batch of input to the session's durable queue."""
        draft = prepare_enqueue(self.session_id, batch)
        stored: QueuedWorkBatch = yield Write(lambda: self.backend.enqueue(draft))
        return stored

    def claim_ready_queued_work(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
        exact_ids: list[str] | None = None,
    ) -> Steps[QueuedWorkClaim | None]:
        """Lease the next ready group of batches for `owner_id`, or None."""
        bound = self._bound(session_id)
        if not isinstance(owner_id, str) or not owner_id.strip():
            raise InvalidInput("queued work owner cannot be empty")
        if boundary not in ("turn", "steer"):
            raise InvalidInput("queued work boundary must be `turn` or `steer`")
        ttl = check_lease(lease_ttl_ms)
        limit = storage_integer(max_batches, "max_batches must be a positive integer")
        if limit == 0:
            raise InvalidInput("max_batches must be a positive integer")
        claim: QueuedWorkClaim | None = yield Write(
            lambda: self.backend.claim(bound, owner_id, boundary, ttl, limit, exact_ids)
        )
        return claim

    def claim_ready_queued_work_by_batch_ids(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        batch_ids: list[str],
    ) -> Steps[QueuedWorkClaim | None]:
        """Claim exactly these batches if they are the next ready group, else None."""
        ids = _ids(batch_ids, "batch_ids")
        if not ids:
            self._bound(session_id)
            return None
        claim: QueuedWorkClaim | None = yield from self.claim_ready_queued_work(
            session_id, owner_id, boundary, lease_ttl_ms, len(ids), ids
        )
        return claim

    def renew_queued_work_claim(
        self, claim: QueuedWorkClaim, lease_ttl_ms: int
    ) -> Steps[QueuedWorkClaim]:
        """Extend a live claim's lease; an expired claim raises QueuedWorkClaimExpired."""
        checked = _claim(claim)
        self._bound(checked.session_id)
        ttl = check_lease(lease_ttl_ms)
        renewed: QueuedWorkClaim = yield Write(lambda: self.backend.renew(checked, ttl))
        return renewed

    def abandon_queued_work_claim(self, claim: QueuedWorkClaim) -> Steps[None]:
        """Release a claim without completing it; its batches are ready again."""
        checked = _claim(claim)
        self._bound(checked.session_id)
        yield Write(lambda: self.backend.abandon(checked))

    def cancel_queued_work_batch(
        self, session_id: str, batch_id: str
    ) -> Steps[QueuedWorkBatch | None]:
        """Remove an unclaimed batch; None when missing or held by a live claim."""
        bound = self._bound(session_id)
        type_check(batch_id, str, "batch_id")
        removed: QueuedWorkBatch | None = yield Write(lambda: self.backend.cancel(bound, batch_id))
        return removed

    def list_queued_work(self, session_id: str, pending_only: bool) -> Steps[list[QueuedWorkBatch]]:
        """List the queue in order; pending leaves out batches a live claim holds."""
        bound = self._bound(session_id)
        batches: list[QueuedWorkBatch] = yield Read(
            lambda: self.backend.list_batches(bound, pending_only)
        )
        return batches

    def record_intent(self, intent: AttachmentIntent) -> Steps[None]:
        """Record an attachment write before its bytes land."""
        type_check(intent, AttachmentIntent, "intent")
        checked, _ = revalidated(intent)
        self._bound(checked.session_id)
        yield Write(lambda: self.backend.record_intent(checked))

    def commit_refs(self, session_id: str, attachment_ids: list[str]) -> Steps[None]:
        """Stamp attachments committed outside a runtime commit."""
        bound = self._bound(session_id)
        ids = _ids(attachment_ids, "attachment_ids")
        yield Write(lambda: self.backend.commit_refs(bound, ids))

    def list_uncommitted(self, older_than_epoch_ms: int) -> Steps[list[AttachmentManifestEntry]]:
        """List this session's intents older than a time that no commit referenced."""
        older = storage_integer(older_than_epoch_ms, "older_than_epoch_ms must be a time in ms")
        entries: list[AttachmentManifestEntry] = yield Read(
            lambda: self.backend.list_uncommitted(self.session_id, older)
        )
        return entries

    def forget(self, attachment_id: str) -> Steps[bool]:
        """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
        type_check(attachment_id, str, "attachment_id")
        removed: bool = yield Write(lambda: self.backend.forget(self.session_id, attachment_id))
        return removed

    def save_session_meta(self, meta: SessionMeta) -> Steps[None]:
        """Replace the session's metadata."""
        type_check(meta, SessionMeta, "meta")
        checked, _ = revalidated(meta)
        self._bound(checked.session_id)
        yield Write(lambda: self.backend.save_meta(checked))

    def load_session_meta(self) -> Steps[SessionMeta | None]:
        """Load the session's metadata."""
        meta: SessionMeta | None = yield Read(lambda: self.backend.load_meta(self.session_id))
        return meta

    def picker_info(self) -> Steps[SessionPickerInfo | None]:
        """What a resume picker shows: folder, relation, first user message, message count."""
        info: SessionPickerInfo | None = yield Read(
            lambda: self.backend.picker_info(self.session_id)
        )
        return info

    def tombstone_nodes(self, node_ids: list[str]) -> Steps[None]:
        """Mark graph nodes dead; loads skip them until `vacuum` removes them."""
        ids = _ids(node_ids, "node_ids")
        yield Write(lambda: self.backend.tombstone(self.session_id, ids))

    def vacuum(self) -> Steps[VacuumReport]:
        """Physically remove this session's tombstoned nodes."""
        report: VacuumReport = yield Write(lambda: self.backend.vacuum(self.session_id))
        return report

    def gc_unreachable(self) -> Steps[GcReport]:
        """Delete every blob no session head reaches (blobs are shared by content)."""
        report: GcReport = yield Write(self.backend.gc_unreachable)
        return report
