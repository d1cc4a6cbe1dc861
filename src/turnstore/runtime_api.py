"""The runtime face: a handle bound to one session, async and blocking, over `core_runtime`."""

from __future__ import annotations

from typing import Protocol, TypeVar

from turnstore.core import Steps
from turnstore.core_runtime import RuntimeCore
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

T = TypeVar("T")


class _AsyncRunner(Protocol):
    async def _run(self, steps: Steps[T]) -> T: ...


class _BlockingRunner(Protocol):
    def _run(self, steps: Steps[T]) -> T: ...


class _RuntimeFace:
    def __init__(self, core: RuntimeCore) -> None:
        self._core = core

    @property
    def session_id(self) -> str:
        """The session this handle is bound to."""
        return self._core.session_id

    def durability_tier(self) -> DurabilityTier:
        """`inline`: a commit is durable (fsynced, or committed on a server) when it returns."""
        return self._core.durability_tier()


class RuntimeStore(_RuntimeFace):
    """The runtime face of one session, awaitable: graph, commits, queue, attachments, blobs."""

    def __init__(self, core: RuntimeCore, store: _AsyncRunner) -> None:
        super().__init__(core)
        self._store = store

    async def load_session(
        self, scope: SessionReadScope | None = None
    ) -> PersistedSessionRead | None:
        """Load head, graph (FullGraph, or ActivePath to a leaf), checkpoint and token ledger."""
        return await self._store._run(self._core.load_session(scope))

    async def load_node(self, node_id: str) -> SessionNodeRecord | None:
        """Load one live node of the session graph."""
        return await self._store._run(self._core.load_node(node_id))

    async def commit_runtime_state(self, commit: RuntimeCommit) -> RuntimeCommitResult:
        """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
        return await self._store._run(self._core.commit_runtime_state(commit))

    async def enqueue_queued_work(self, batch: QueuedWorkBatchDraft) -> QueuedWorkBatch:
        """Append a batch of input to the session's durable queue."""
        return await self._store._run(self._core.enqueue_queued_work(batch))

    async def claim_ready_queued_work(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
    ) -> QueuedWorkClaim | None:
        """Lease the next ready group of batches for `owner_id`, or None."""
        return await self._store._run(
            self._core.claim_ready_queued_work(
                session_id, owner_id, boundary, lease_ttl_ms, max_batches
            )
        )

    async def claim_ready_queued_work_by_batch_ids(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        batch_ids: list[str],
    ) -> QueuedWorkClaim | None:
        """Claim exactly these batches if they are the next ready group, else None."""
        return await self._store._run(
            self._core.claim_ready_queued_work_by_batch_ids(
                session_id, owner_id, boundary, lease_ttl_ms, batch_ids
            )
        )

    async def renew_queued_work_claim(
        self, claim: QueuedWorkClaim, lease_ttl_ms: int
    ) -> QueuedWorkClaim:
        """Extend a live claim's lease; an expired one raises QueuedWorkClaimExpired."""
        return await self._store._run(self._core.renew_queued_work_claim(claim, lease_ttl_ms))

    async def abandon_queued_work_claim(self, claim: QueuedWorkClaim) -> None:
        """Release a claim without completing it; its batches are ready again."""
        await self._store._run(self._core.abandon_queued_work_claim(claim))

    async def cancel_queued_work_batch(
        self, session_id: str, batch_id: str
    ) -> QueuedWorkBatch | None:
        """Remove an unclaimed batch; None when missing or held by a live claim."""
        return await self._store._run(self._core.cancel_queued_work_batch(session_id, batch_id))

    async def list_queued_work(self, session_id: str) -> list[QueuedWorkBatch]:
        """List the session's queued batches in order."""
        return await self._store._run(self._core.list_queued_work(session_id, False))

    async def list_pending_queued_work(self, session_id: str) -> list[QueuedWorkBatch]:
        """List batches no live claim holds (expired claims count as pending)."""
        return await self._store._run(self._core.list_queued_work(session_id, True))

    async def record_intent(self, intent: AttachmentIntent) -> None:
        """Record an attachment write before its bytes land."""
        await self._store._run(self._core.record_intent(intent))

    async def commit_refs(self, session_id: str, attachment_ids: list[str]) -> None:
        """Stamp attachments committed outside a runtime commit."""
        await self._store._run(self._core.commit_refs(session_id, attachment_ids))

    async def list_uncommitted(self, older_than_epoch_ms: int) -> list[AttachmentManifestEntry]:
        """List intents older than a time that no commit referenced."""
        return await self._store._run(self._core.list_uncommitted(older_than_epoch_ms))

    async def forget(self, attachment_id: str) -> bool:
        """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
        return await self._store._run(self._core.forget(attachment_id))

    async def save_session_meta(self, meta: SessionMeta) -> None:
        """Replace the session's metadata."""
        await self._store._run(self._core.save_session_meta(meta))

    async def load_session_meta(self) -> SessionMeta | None:
        """Load the session's metadata."""
        return await self._store._run(self._core.load_session_meta())

    async def picker_info(self) -> SessionPickerInfo | None:
        """What a resume picker shows of the session."""
        return await self._store._run(self._core.picker_info())

    async def tombstone_nodes(self, ids: list[str]) -> None:
        """Mark graph nodes dead; loads skip them until vacuum removes them."""
        await self._store._run(self._core.tombstone_nodes(ids))

    async def vacuum(self) -> VacuumReport:
        """Physically remove this session's tombstoned nodes."""
        return await self._store._run(self._core.vacuum())

    async def gc_unreachable(self) -> GcReport:
        """Delete every blob that no session head reaches."""
        return await self._store._run(self._core.gc_unreachable())


class BlockingRuntimeStore(_RuntimeFace):
    """The blocking twin of `RuntimeStore`: the same operations for scripts and threads."""

    def __init__(self, core: RuntimeCore, store: _BlockingRunner) -> None:
        super().__init__(core)
        self._store = store

    def load_session(self, scope: SessionReadScope | None = None) -> PersistedSessionRead | None:
        """Load head, graph (FullGraph, or ActivePath to a leaf), checkpoint and token ledger."""
        return self._store._run(self._core.load_session(scope))

    def load_node(self, node_id: str) -> SessionNodeRecord | None:
        """Load one live node of the session graph."""
        return self._store._run(self._core.load_node(node_id))

    def commit_runtime_state(self, commit: RuntimeCommit) -> RuntimeCommitResult:
        """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
        return self._store._run(self._core.commit_runtime_state(commit))

    def enqueue_queued_work(self, batch: QueuedWorkBatchDraft) -> QueuedWorkBatch:
        """Append a batch of input to the session's durable queue."""
        return self._store._run(self._core.enqueue_queued_work(batch))

    def claim_ready_queued_work(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
    ) -> QueuedWorkClaim | None:
        """Lease the next ready group of batches for `owner_id`, or None."""
        return self._store._run(
            self._core.claim_ready_queued_work(
                session_id, owner_id, boundary, lease_ttl_ms, max_batches
            )
        )

    def claim_ready_queued_work_by_batch_ids(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        batch_ids: list[str],
    ) -> QueuedWorkClaim | None:
        """Claim exactly these batches if they are the next ready group, else None."""
        return self._store._run(
            self._core.claim_ready_queued_work_by_batch_ids(
                session_id, owner_id, boundary, lease_ttl_ms, batch_ids
            )
        )

    def renew_queued_work_claim(self, claim: QueuedWorkClaim, lease_ttl_ms: int) -> QueuedWorkClaim:
        """Extend a live claim's lease; an expired one raises QueuedWorkClaimExpired."""
        return self._store._run(self._core.renew_queued_work_claim(claim, lease_ttl_ms))

    def abandon_queued_work_claim(self, claim: QueuedWorkClaim) -> None:
        """Release a claim without completing it; its batches are ready again."""
        self._store._run(self._core.abandon_queued_work_claim(claim))

    def cancel_queued_work_batch(self, session_id: str, batch_id: str) -> QueuedWorkBatch | None:
        """Remove an unclaimed batch; None when missing or held by a live claim."""
        return self._store._run(self._core.cancel_queued_work_batch(session_id, batch_id))

    def list_queued_work(self, session_id: str) -> list[QueuedWorkBatch]:
        """List the session's queued batches in order."""
        return self._store._run(self._core.list_queued_work(session_id, False))

    def list_pending_queued_work(self, session_id: str) -> list[QueuedWorkBatch]:
        """List batches no live claim holds (expired claims count as pending)."""
        return self._store._run(self._core.list_queued_work(session_id, True))

    def record_intent(self, intent: AttachmentIntent) -> None:
        """Record an attachment write before its bytes land."""
        self._store._run(self._core.record_intent(intent))

    def commit_refs(self, session_id: str, attachment_ids: list[str]) -> None:
        """Stamp attachments committed outside a runtime commit."""
        self._store._run(self._core.commit_refs(session_id, attachment_ids))

    def list_uncommitted(self, older_than_epoch_ms: int) -> list[AttachmentManifestEntry]:
        """List intents older than a time that no commit referenced."""
        return self._store._run(self._core.list_uncommitted(older_than_epoch_ms))

    def forget(self, attachment_id: str) -> bool:
        """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
        return self._store._run(self._core.forget(attachment_id))

    def save_session_meta(self, meta: SessionMeta) -> None:
        """Replace the session's metadata."""
        self._store._run(self._core.save_session_meta(meta))

    def load_session_meta(self) -> SessionMeta | None:
        """Load the session's metadata."""
        return self._store._run(self._core.load_session_meta())

    def picker_info(self) -> SessionPickerInfo | None:
        """What a resume picker shows of the session."""
        return self._store._run(self._core.picker_info())

    def tombstone_nodes(self, ids: list[str]) -> None:
        """Mark graph nodes dead; loads skip them until vacuum removes them."""
        self._store._run(self._core.tombstone_nodes(ids))

    def vacuum(self) -> VacuumReport:
        """Physically remove this session's tombstoned nodes."""
        return self._store._run(self._core.vacuum())

    def gc_unreachable(self) -> GcReport:
        """Delete every blob that no session head reaches."""
        return self._store._run(self._core.gc_unreachable())
