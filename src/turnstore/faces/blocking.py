"""The blocking faces: `BlockingStore` and `BlockingRuntimeStore`, for scripts.

Generated from `turnstore.faces.aio` by `tools/async_to_sync.py`; do not edit by hand.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import IO, Any, Self

from turnstore.backends.sql.engine import Engine
from turnstore.backends.sql.transfer import OnConflict
from turnstore.backends.urls import open_engine
from turnstore.faces.blocking_langgraph import BlockingLangGraphTables
from turnstore.ops import checkpoint as checkpoint_ops
from turnstore.ops import runtime as runtime_ops
from turnstore.ops import upkeep as upkeep_ops
from turnstore.ops import watch as watch_ops
from turnstore.ops.upkeep import Progress
from turnstore.records.base import WriterStats
from turnstore.records.checkpoint import (
    Checkpoint,
    ContextWindow,
    EventPage,
    EventPageRequest,
    ExecutionPage,
    ExecutionPageRequest,
    ExecutionRecord,
    ForkTree,
    JournalEvent,
    SessionPage,
    SessionPageRequest,
    SessionSummary,
    TimestampedEvent,
    TranscriptPage,
    TranscriptPageRequest,
)
from turnstore.records.protocol import Event
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
from turnstore.records.upkeep import (
    BackupReport,
    DoctorReport,
    PruneReport,
    StoreStats,
    TransferReport,
    VacuumDatabaseReport,
)
from turnstore.rules.runtime import DURABILITY_TIER
from turnstore.rules.validation import validate_session_id
from turnstore.steps import BlockingDriver


def open_blocking(
    url: str | os.PathLike[str], *, read_only: bool = False, create_dirs: bool = False
) -> BlockingStore:
    """Open the blocking store at `url`: `sqlite:///relative.db`, `postgresql://…` or a path.

    A SQLite path may start with `~`; its folder must exist, unless `create_dirs` asks to
    create it (PostgreSQL ignores `create_dirs`). A mistyped URL, a missing folder or a file
    this process cannot write is a `ConfigError` naming the fix.

    `read_only` opens an existing database without creating, migrating or writing it, and
    creates no file beside it: it reads a read-only folder, a file this process cannot write,
    and a database a live writer is using.
    """
    return BlockingStore(open_engine(url, read_only=read_only, create_dirs=create_dirs))


class BlockingStore:
    """The blocking store: every operation of the checkpoint contract; `langgraph`, its tables."""

    def __init__(self, engine: Engine | BlockingDriver) -> None:
        self._driver = engine if isinstance(engine, BlockingDriver) else BlockingDriver(engine)
        self.langgraph = BlockingLangGraphTables(self._driver)

    def writer_stats(self) -> WriterStats:
        """Counters of the write path: committed transactions and writes."""
        return self._driver.writer_stats()

    def runtime(self, session_id: str) -> BlockingRuntimeStore:
        """The blocking runtime face bound to one session (graph, turn commits, queue, blobs)."""
        self._driver.check_open()
        return BlockingRuntimeStore(self._driver, validate_session_id(session_id))

    def load(self, session_id: str) -> Checkpoint | None:
        """Load the latest checkpoint of a session, or None."""
        return self._driver.run(checkpoint_ops.load(session_id))

    def save(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
    ) -> None:
        """Atomically replace the checkpoint, append transcript items, record a finished turn."""
        self._driver.run(
            checkpoint_ops.save_with_events(checkpoint, transcript_delta, execution, ())
        )

    def save_with_events(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
        events: Iterable[TimestampedEvent] = (),
    ) -> list[JournalEvent]:
        """Save as `save` and journal events in the same commit; return them after commit."""
        return self._driver.run(
            checkpoint_ops.save_with_events(checkpoint, transcript_delta, execution, events)
        )

    def append_event(self, session_id: str, recorded_at_ms: int, event: Event) -> JournalEvent:
        """Assign the next session-local sequence to one event and journal it."""
        return self._driver.run(checkpoint_ops.append_event(session_id, recorded_at_ms, event))

    def event_page(self, session_id: str, request: EventPageRequest) -> EventPage:
        """Load one newest-first page of a session's journal events."""
        return self._driver.run(checkpoint_ops.event_page(session_id, request))

    def event_turn_page(self, session_id: str, before_sequence: int | None = None) -> EventPage:
        """Load the newest whole turn of events before `before_sequence`."""
        return self._driver.run(checkpoint_ops.event_turn_page(session_id, before_sequence))

    def session_summary(self, session_id: str) -> SessionSummary | None:
        """Load one session's catalog entry without decoding its checkpoint."""
        return self._driver.run(checkpoint_ops.session_summary(session_id))

    def list_sessions_page(self, request: SessionPageRequest) -> SessionPage:
        """List one newest-first page of the session catalog (by owner or id prefix, if asked)."""
        return self._driver.run(checkpoint_ops.list_sessions_page(request))

    def transcript_page(self, session_id: str, request: TranscriptPageRequest) -> TranscriptPage:
        """Load one newest-first page of transcript batches."""
        return self._driver.run(checkpoint_ops.transcript_page(session_id, request))

    def execution_page(self, session_id: str, request: ExecutionPageRequest) -> ExecutionPage:
        """Load one newest-first page of a session's finished turns."""
        return self._driver.run(checkpoint_ops.execution_page(session_id, request))

    def recent_executions(
        self, limit: int, *, owner_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Load the most recently started finished turns of all sessions, or of one owner's."""
        return self._driver.run(checkpoint_ops.recent_executions(limit, owner_id))

    def fork_tree(self, session_id: str, *, limit: int = 1000) -> ForkTree | None:
        """Load the fork tree holding a session: root first, then breadth-first; None if absent."""
        return self._driver.run(checkpoint_ops.fork_tree(session_id, limit))

    def fork(
        self, parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
    ) -> SessionSummary:
        """Create a child session at an exact durable parent sequence."""
        return self._driver.run(checkpoint_ops.fork(parent_session_id, parent_sequence, checkpoint))

    def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        """Delete session trees and their state atomically; False if any id is absent."""
        return self._driver.run(checkpoint_ops.delete_sessions(session_ids))

    def list_uncommitted_attachments(
        self, older_than_epoch_ms: int
    ) -> list[AttachmentManifestEntry]:
        """Every session's uncommitted attachment intents older than a time, deleted ones too."""
        return self._driver.run(runtime_ops.list_every_uncommitted(older_than_epoch_ms))

    def append_context(
        self,
        session_id: str,
        items: Iterable[Any],
        owner_id: str | None = None,
        expected_sequence: int | None = None,
        state: Iterable[tuple[str, str, Any]] = (),
    ) -> int:
        """Append items to a session's context and transcript in one commit; the new sequence.

        A missing session is created at sequence 1, owned by `owner_id`; an existing one
        keeps its owner. With `expected_sequence`, the session must be at that sequence (0:
        it must not exist yet), else `SequenceConflict` (`SessionNotFound` when it is gone).
        `state` holds (scope, key, value) middleware state writes of the same commit.
        """
        return self._driver.run(
            checkpoint_ops.append_context(session_id, items, owner_id, expected_sequence, state)
        )

    def pop_context(self, session_id: str, count: int = 1) -> list[Any]:
        """Remove a session's newest `count` context items; return them, oldest first."""
        return self._driver.run(checkpoint_ops.pop_context(session_id, count))

    def clear_context(self, session_id: str) -> bool:
        """Remove every context item of a session; False if there is no such session."""
        return self._driver.run(checkpoint_ops.clear_context(session_id))

    def context_tail(self, session_id: str, limit: int | None = None) -> list[Any]:
        """Load a session's newest `limit` context items (all when None), oldest first."""
        return self._driver.run(checkpoint_ops.context_tail(session_id, limit))

    def context_window(
        self, session_id: str, before: int | None = None, limit: int | None = None
    ) -> ContextWindow:
        """Load the newest `limit` context items before index `before`, with the sequence."""
        return self._driver.run(checkpoint_ops.context_window(session_id, before, limit))

    def replace_context(
        self,
        session_id: str,
        sequence: int,
        start: int,
        items: Iterable[Any],
        drop_prefix: int = 0,
    ) -> bool:
        """Replace the context from `start` on with `items`, if still at `sequence`.

        Also drops the context's first `drop_prefix` items. False, writing nothing, when any
        write moved the session past `sequence` (compare-and-set, as for a compaction).
        """
        return self._driver.run(
            checkpoint_ops.replace_context(session_id, sequence, start, items, drop_prefix)
        )

    def tree(self, session_id: str) -> list[str]:
        """The session and every fork below it (what deleting it removes), sorted; [] if absent."""
        return self._driver.run(upkeep_ops.tree(session_id))

    def prune(
        self,
        updated_before: int,
        *,
        owner_id: str | None = None,
        dry_run: bool = False,
        batch_size: int = 100,
    ) -> PruneReport:
        """Delete every tree whose sessions were all last updated before a Unix time.

        Trees go `batch_size` to a transaction, so writers wait at most one batch; with
        `owner_id`, only trees whose root that owner holds; `dry_run` only reports.
        """
        return self._driver.run(upkeep_ops.prune(updated_before, owner_id, dry_run, batch_size))

    def stats(self) -> StoreStats:
        """Counts of sessions, turns, events, tokens and blobs, and the database's size."""
        return self._driver.run(upkeep_ops.stats())

    def doctor(self) -> DoctorReport:
        """Check the store's health: schema, integrity, WAL, orphans, blobs, indexes, bloat."""
        return self._driver.run(upkeep_ops.doctor())

    def collect_garbage(self) -> GcReport:
        """Delete every blob that no session head reaches."""
        return self._driver.run(upkeep_ops.collect_garbage())

    def vacuum_database(self) -> VacuumDatabaseReport:
        """Remove every session's tombstoned nodes, then VACUUM the database."""
        return self._driver.run(upkeep_ops.vacuum_database())

    def backup(self, destination: str | os.PathLike[str]) -> BackupReport:
        """Copy a SQLite database, consistently while writers run, to a new `0600` file.

        On PostgreSQL this raises `ConfigError`: back up the server with pg_dump.
        """
        return self._driver.run(upkeep_ops.backup(destination))

    def export_trees(
        self,
        out: IO[bytes],
        *,
        session_ids: Sequence[str] | None = None,
        owner_id: str | None = None,
        progress: Progress | None = None,
    ) -> TransferReport:
        """Write session trees to `out` in the export format (JSON Lines), one tree at a time.

        The trees of `session_ids` (a fork's whole tree, from its root), of an owner, or of
        every session; each tree is read in one snapshot, so memory stays flat.
        """
        return self._driver.run(upkeep_ops.export_trees(out, session_ids, owner_id, progress))

    def import_trees(
        self,
        source: IO[bytes],
        *,
        on_conflict: OnConflict = "fail",
        progress: Progress | None = None,
    ) -> TransferReport:
        """Write the trees of an export, one transaction each; identical trees are skipped.

        A tree whose sessions exist with other content raises `SessionExists` under
        `fail` (trees before it stay imported), is kept under `skip`, and replaced under
        `replace`. A damaged or cut-off file raises `InvalidInput` at the tree it damages.
        """
        return self._driver.run(upkeep_ops.import_trees(source, on_conflict, progress))

    def load_state(self, scope: str, key: str) -> Any:
        """Load one middleware state value, or None."""
        return self._driver.run(checkpoint_ops.load_state(scope, key))

    def load_state_scope(self, scope: str) -> dict[str, Any]:
        """Load every middleware state value of one scope, by key."""
        return self._driver.run(checkpoint_ops.load_state_scope(scope))

    def save_state(self, scope: str, key: str, value: Any) -> None:
        """Durably replace one middleware state value."""
        self._driver.run(checkpoint_ops.save_state(scope, key, value))

    def events_after(self, session_id: str, after_sequence: int, limit: int) -> EventPage:
        """Load the stored events after a sequence, oldest first (compacted deltas are absent)."""
        return self._driver.run(watch_ops.events_after(session_id, after_sequence, limit))

    def wait_for_events(self, session_id: str, after_sequence: int, timeout: float) -> int:  # noqa: ASYNC109, RUF100
        """Wait up to `timeout` s for events past `after_sequence`; return the latest sequence."""
        return self._driver.run(watch_ops.wait_for_events(session_id, after_sequence, timeout))

    def close(self) -> None:
        """Commit queued writes and release connections and threads."""
        self._driver.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


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
        return self._driver.run(runtime_ops.load_session(self._session_id, scope))

    def load_node(self, node_id: str) -> SessionNodeRecord | None:
        """Load one live node of the session graph."""
        return self._driver.run(runtime_ops.load_node(self._session_id, node_id))

    def commit_runtime_state(self, commit: RuntimeCommit) -> RuntimeCommitResult:
        """Commit graph, checkpoint, usage, queue completions and attachments atomically."""
        return self._driver.run(runtime_ops.commit_runtime_state(self._session_id, commit))

    def enqueue_queued_work(self, batch: QueuedWorkBatchDraft) -> QueuedWorkBatch:
        """Append a batch of input to the session's durable queue."""
        return self._driver.run(runtime_ops.enqueue_queued_work(self._session_id, batch))

    def claim_ready_queued_work(
        self,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
    ) -> QueuedWorkClaim | None:
        """Lease the next ready group of batches for `owner_id`, or None."""
        return self._driver.run(
            runtime_ops.claim_ready_queued_work(
                self._session_id, owner_id, boundary, lease_ttl_ms, max_batches
            )
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
            )
        )

    def renew_queued_work_claim(self, claim: QueuedWorkClaim, lease_ttl_ms: int) -> QueuedWorkClaim:
        """Extend a live claim's lease; an expired one raises QueuedWorkClaimExpired."""
        return self._driver.run(
            runtime_ops.renew_queued_work_claim(self._session_id, claim, lease_ttl_ms)
        )

    def abandon_queued_work_claim(self, claim: QueuedWorkClaim) -> None:
        """Release a claim without completing it; its batches are ready again."""
        self._driver.run(runtime_ops.abandon_queued_work_claim(self._session_id, claim))

    def cancel_queued_work_batch(self, batch_id: str) -> QueuedWorkBatch | None:
        """Remove an unclaimed batch; None when missing or held by a live claim."""
        return self._driver.run(runtime_ops.cancel_queued_work_batch(self._session_id, batch_id))

    def list_queued_work(self) -> list[QueuedWorkBatch]:
        """List the session's queued batches in order."""
        return self._driver.run(runtime_ops.list_queued_work(self._session_id, False))

    def list_pending_queued_work(self) -> list[QueuedWorkBatch]:
        """List batches no live claim holds (expired claims count as pending)."""
        return self._driver.run(runtime_ops.list_queued_work(self._session_id, True))

    def record_intent(self, intent: AttachmentIntent) -> None:
        """Record an attachment write before its bytes land."""
        self._driver.run(runtime_ops.record_intent(self._session_id, intent))

    def commit_refs(self, attachment_ids: list[str]) -> None:
        """Stamp attachments committed outside a runtime commit."""
        self._driver.run(runtime_ops.commit_refs(self._session_id, attachment_ids))

    def list_uncommitted(self, older_than_epoch_ms: int) -> list[AttachmentManifestEntry]:
        """List intents older than a time that no commit referenced."""
        return self._driver.run(runtime_ops.list_uncommitted(self._session_id, older_than_epoch_ms))

    def forget(self, attachment_id: str) -> bool:
        """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
        return self._driver.run(runtime_ops.forget(self._session_id, attachment_id))

    def canonical_uri_in_use(self, canonical_uri: str) -> bool:
        """Whether any attachment entry of any session, committed or not, names this URI."""
        return self._driver.run(runtime_ops.canonical_uri_in_use(canonical_uri))

    def save_session_meta(self, meta: SessionMeta) -> None:
        """Replace the session's metadata."""
        self._driver.run(runtime_ops.save_session_meta(self._session_id, meta))

    def load_session_meta(self) -> SessionMeta | None:
        """Load the session's metadata."""
        return self._driver.run(runtime_ops.load_session_meta(self._session_id))

    def picker_info(self) -> SessionPickerInfo | None:
        """What a resume picker shows of the session."""
        return self._driver.run(runtime_ops.picker_info(self._session_id))

    def tombstone_nodes(self, ids: list[str]) -> None:
        """Mark graph nodes dead; loads skip them until vacuum removes them.

        Ids that are not live nodes of the session are ignored. Every live node keeps its
        path to the root, so the call is refused with `InvalidInput`, changing nothing, when
        a node is the head's leaf (commit another leaf first; otherwise `load_session` would
        return a leaf that is no node and an empty active path) or has a live child that is
        not tombstoned with it (tombstone a node together with all of its descendants).
        """
        self._driver.run(runtime_ops.tombstone_nodes(self._session_id, ids))

    def vacuum(self) -> VacuumReport:
        """Physically remove this session's tombstoned nodes."""
        return self._driver.run(runtime_ops.vacuum(self._session_id))

    def gc_unreachable(self) -> GcReport:
        """Delete every blob that no session head reaches."""
        return self._driver.run(runtime_ops.gc_unreachable())
