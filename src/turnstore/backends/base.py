"""What a backend implements: blocking reads, and writes answered by a future after commit."""

from __future__ import annotations

from concurrent.futures import Future
from typing import NamedTuple, Protocol

from turnstore.records.checkpoint import JournalEvent
from turnstore.records.runtime import (
    AttachmentIntent,
    AttachmentManifestEntry,
    GcReport,
    PersistedSessionRead,
    QueuedWorkBatch,
    QueuedWorkBatchDraft,
    QueuedWorkClaim,
    QueuedWorkClaimBoundary,
    RuntimeCommitResult,
    SessionMeta,
    SessionNodeRecord,
    SessionPickerInfo,
    SessionReadScope,
    VacuumReport,
)
from turnstore.rules.events import PreparedEvent
from turnstore.rules.runtime import PreparedCommit
from turnstore.rules.saves import PreparedFork, PreparedSave


class SessionRow(NamedTuple):
    """The catalog columns of one session row, still JSON-encoded where they are records."""

    session_id: str
    parent_session_id: str | None
    parent_sequence: int | None
    sequence: int
    catalog_visible: bool
    first_user_message: str | None
    session_context_json: str
    execution_stats_json: str
    created_at: int
    updated_at: int


class LoadedCheckpoint(NamedTuple):
    """The stored pieces of a checkpoint: its state JSON and its context chunks in order."""

    sequence: int
    state_json: str
    context_length: int
    context_chunks: list[str]


class EventRows(NamedTuple):
    """A session's event high-water and one newest-first slice of its journal rows."""

    latest_sequence: int
    rows: list[tuple[int, int, str, str]]


class WriterStats(NamedTuple):
    """Counters of the write path: committed transactions and the writes they carried."""

    transactions: int
    writes: int


class RuntimeBackend(Protocol):
    """A storage engine for the runtime face; every call names its session."""

    def load_session(
        self, session_id: str, scope: SessionReadScope
    ) -> PersistedSessionRead | None: ...
    def load_node(self, session_id: str, node_id: str) -> SessionNodeRecord | None: ...
    def commit(self, prepared: PreparedCommit) -> Future[RuntimeCommitResult]: ...
    def enqueue(self, draft: QueuedWorkBatchDraft) -> Future[QueuedWorkBatch]: ...
    def claim(
        self,
        session_id: str,
        owner_id: str,
        boundary: QueuedWorkClaimBoundary,
        lease_ttl_ms: int,
        max_batches: int,
        exact_ids: list[str] | None,
    ) -> Future[QueuedWorkClaim | None]: ...
    def renew(self, claim: QueuedWorkClaim, lease_ttl_ms: int) -> Future[QueuedWorkClaim]: ...
    def abandon(self, claim: QueuedWorkClaim) -> Future[None]: ...
    def cancel(self, session_id: str, batch_id: str) -> Future[QueuedWorkBatch | None]: ...
    def list_batches(self, session_id: str, pending_only: bool) -> list[QueuedWorkBatch]: ...
    def record_intent(self, intent: AttachmentIntent) -> Future[None]: ...
    def commit_refs(self, session_id: str, attachment_ids: list[str]) -> Future[None]: ...
    def list_uncommitted(
        self, session_id: str, older_than_ms: int
    ) -> list[AttachmentManifestEntry]: ...
    def forget(self, session_id: str, attachment_id: str) -> Future[bool]: ...
    def save_meta(self, meta: SessionMeta) -> Future[None]: ...
    def load_meta(self, session_id: str) -> SessionMeta | None: ...
    def picker_info(self, session_id: str) -> SessionPickerInfo | None: ...
    def tombstone(self, session_id: str, node_ids: list[str]) -> Future[None]: ...
    def vacuum(self, session_id: str) -> Future[VacuumReport]: ...
    def gc_unreachable(self) -> Future[GcReport]: ...


class Backend(Protocol):
    """A storage engine for the checkpoint contract; SQL and connections live only here."""

    @property
    def runtime(self) -> RuntimeBackend:
        """The runtime face's storage on the same database."""

    def load(self, session_id: str) -> LoadedCheckpoint | None:
        """Read the latest checkpoint's stored pieces."""

    def session_row(self, session_id: str) -> SessionRow | None:
        """Read one session's catalog row."""

    def session_rows(
        self, owner_id: str | None, cursor: tuple[int, int, str] | None, limit: int
    ) -> list[SessionRow]:
        """Read catalog rows newest first, strictly after `cursor`."""

    def transcript_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, int, str]]:
        """Read (sequence, created_at, items_json) newest first."""

    def execution_rows(
        self, session_id: str, before: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Read (sequence, record_json) newest first."""

    def recent_execution_rows(self, limit: int) -> list[str]:
        """Read record_json of the most recently started executions across sessions."""

    def event_rows(self, session_id: str, before: int | None, limit: int) -> EventRows | None:
        """Read the event high-water and journal rows newest first; None if no session."""

    def load_state(self, scope: str, key: str) -> str | None:
        """Read one middleware state value's JSON."""

    def save(self, save: PreparedSave) -> Future[list[JournalEvent]]:
        """Commit a checkpoint, its transcript delta, execution record and events."""

    def append_event(self, session_id: str, event: PreparedEvent) -> Future[JournalEvent]:
        """Commit one event."""

    def fork(self, fork: PreparedFork) -> Future[SessionRow]:
        """Commit a child session branched from a parent."""

    def delete_sessions(self, session_ids: list[str]) -> Future[bool]:
        """Delete session trees atomically; False, deleting nothing, if any id is absent."""

    def save_state(self, scope: str, key: str, value_json: str) -> Future[None]:
        """Replace one middleware state value."""

    def writer_stats(self) -> WriterStats:
        """Return write-path counters."""

    def close(self) -> None:
        """Finish queued writes and release every connection."""
