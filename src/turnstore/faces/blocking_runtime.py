"""The runtime contract's blocking face, `BlockingRuntimeStore`: one session's graph and queue.

Generated from `turnstore.faces.aio_runtime` by `tools/async_to_sync.py`; do not edit.
"""

from __future__ import annotations

from turnstore.drivers.steps import BlockingDriver
from turnstore.ops import runtime as runtime_ops
from turnstore.records.runtime import (
    AttachmentIntent,
    AttachmentManifestEntry,
    DurabilityTier,
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
from turnstore.rules.runtime import DURABILITY_TIER


class BlockingRuntimeStore:
    """The blocking runtime face of one session: graph, commits, queue, attachments, blobs."""

    def __init__(self, driver: BlockingDriver, session_id: str) -> None:
        self._driver = driver
        self._session_id = session_id

    @property
    def session_id(self) -> str:
        """The session this handle is bound to."""
        return self._session_id

    def durability_tier(self) -> DurabilityTier:
        """`inline`: a commit is durable (fsynced, or committed on a server) when it returns."""
        return DURABILITY_TIER

    def load_session(self, scope: SessionReadScope | None = None) -> PersistedSessionRead | None:
        """Load head, graph (FullGraph, or ActivePath to a leaf), checkpoint and token ledger."""
        return self._driver.run(runtime_ops.load_session(self._session_id, scope), self._session_id)

    def load_node(self, node_id: str) -> SessionNodeRecord | None:
        """Load one live node of the session graph."""
        return self._driver.run(runtime_ops.load_node(self._session_id, node_id), self._session_id)

    def commit_runtime_state(self, commit: RuntimeCommit) -> RuntimeCommitResult:
        """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
        return self._driver.run(
            runtime_ops.commit_runtime_state(self._session_id, commit), self._session_id
        )

    def enqueue_queued_work(self, batch: QueuedWorkBatchDraft) -> QueuedWorkBatch:
        """Append a batch of input to the session's durable queue."""
        return self._driver.run(
            runtime_ops.enqueue_queued_work(self._session_id, batch), self._session_id
        )

    def claim_ready_queued_work(
        self, owner_id: str, boundary: QueuedWorkClaimBoundary, lease_ttl_ms: int, max_batches: int
    ) -> QueuedWorkClaim | None:
        """Lease the next ready group of batches for `owner_id`, or None."""
        return self._driver.run(
            runtime_ops.claim_ready_queued_work(
                self._session_id, owner_id, boundary, lease_ttl_ms, max_batches
            ),
            self._session_id,
        )

    def claim_ready_queued_work_by_batch_ids(
        self,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        batch_ids: list[str],
    ) -> QueuedWorkClaim | None:
        """Claim exactly these batches if they are the next ready group, else None."""
        return self._driver.run(
            runtime_ops.claim_ready_queued_work_by_batch_ids(
                self._session_id, owner_id, boundary, lease_ttl_ms, batch_ids
            ),
            self._session_id,
        )

    def renew_queued_work_claim(self, claim: QueuedWorkClaim, lease_ttl_ms: int) -> QueuedWorkClaim:
        """Extend a live claim's lease; an expired one raises QueuedWorkClaimExpired."""
        return self._driver.run(
            runtime_ops.renew_queued_work_claim(self._session_id, claim, lease_ttl_ms),
            self._session_id,
        )

    def abandon_queued_work_claim(self, claim: QueuedWorkClaim) -> None:
        """Release a claim without completing it; its batches are ready again."""
        self._driver.run(
            runtime_ops.abandon_queued_work_claim(self._session_id, claim), self._session_id
        )

    def cancel_queued_work_batch(self, batch_id: str) -> QueuedWorkBatch | None:
        """Remove an unclaimed batch; None when missing or held by a live claim."""
        return self._driver.run(
            runtime_ops.cancel_queued_work_batch(self._session_id, batch_id), self._session_id
        )

    def list_queued_work(self) -> list[QueuedWorkBatch]:
        """List the session's queued batches in order."""
        return self._driver.run(
            runtime_ops.list_queued_work(self._session_id, False), self._session_id
        )

    def list_pending_queued_work(self) -> list[QueuedWorkBatch]:
        """List batches no live claim holds (expired claims count as pending)."""
        return self._driver.run(
            runtime_ops.list_queued_work(self._session_id, True), self._session_id
        )

    def record_intent(self, intent: AttachmentIntent) -> None:
        """Record an attachment write before its bytes land."""
        self._driver.run(runtime_ops.record_intent(self._session_id, intent), self._session_id)

    def commit_refs(self, attachment_ids: list[str]) -> None:
        """Stamp attachments committed outside a runtime commit."""
        self._driver.run(
            runtime_ops.commit_refs(self._session_id, attachment_ids), self._session_id
        )

    def list_uncommitted(self, older_than_epoch_ms: int) -> list[AttachmentManifestEntry]:
        """List intents older than a time that no commit referenced."""
        return self._driver.run(
            runtime_ops.list_uncommitted(self._session_id, older_than_epoch_ms), self._session_id
        )

    def forget(self, attachment_id: str) -> bool:
        """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
        return self._driver.run(
            runtime_ops.forget(self._session_id, attachment_id), self._session_id
        )

    def canonical_uri_in_use(self, canonical_uri: str) -> bool:
        """Whether any attachment entry of any session, committed or not, names this URI."""
        return self._driver.run(runtime_ops.canonical_uri_in_use(canonical_uri))

    def save_session_meta(self, meta: SessionMeta) -> None:
        """Replace the session's metadata."""
        self._driver.run(runtime_ops.save_session_meta(self._session_id, meta), self._session_id)

    def load_session_meta(self) -> SessionMeta | None:
        """Load the session's metadata."""
        return self._driver.run(runtime_ops.load_session_meta(self._session_id), self._session_id)

    def picker_info(self) -> SessionPickerInfo | None:
        """What a resume picker shows of the session."""
        return self._driver.run(runtime_ops.picker_info(self._session_id), self._session_id)

    def tombstone_nodes(self, ids: list[str]) -> None:
        """Mark graph nodes dead; loads skip them until vacuum removes them.

        Ids that are not live nodes of the session are ignored. Every live node keeps its
        path to the root, so the call is refused with `InvalidInput`, changing nothing, when
        a node is the head's leaf (commit another leaf first; otherwise `load_session` would
        return a leaf that is no node and an empty active path) or has a live child that is
        not tombstoned with it (tombstone a node together with all of its descendants).
        """
        self._driver.run(runtime_ops.tombstone_nodes(self._session_id, ids), self._session_id)

    def vacuum(self) -> VacuumReport:
        """Physically remove this session's tombstoned nodes."""
        return self._driver.run(runtime_ops.vacuum(self._session_id), self._session_id)

    def gc_unreachable(self) -> GcReport:
        """Delete every blob that no session head reaches."""
        return self._driver.run(runtime_ops.gc_unreachable())
