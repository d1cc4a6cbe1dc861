"""What a backend implements: blocking reads, and writes answered by a future after commit."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from turnstore.records.checkpoint import JournalEvent
from turnstore.rules.events import PreparedEvent


@dataclass(frozen=True, slots=True)
class PreparedSave:
    """One validated save, encoded before any I/O except the context delta.

    The context delta is encoded by the backend inside its transaction, because only there
    is the stored context length known.
    """

    session_id: str
    sequence: int
    state_json: str
    context_epoch: int
    context: list[Any]
    session_context_json: str
    owner_id: str | None
    execution_stats_json: str
    catalog_visible: bool
    first_user_message: str | None
    transcript_json: str | None
    execution: tuple[int, str] | None
    events: list[PreparedEvent]


@dataclass(frozen=True, slots=True)
class PreparedFork:
    """A validated fork: the child's save plus the parent it branches from."""

    parent_session_id: str
    parent_sequence: int
    child: PreparedSave


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


class Backend(Protocol):
    """A storage engine for the checkpoint contract; SQL and connections live only here."""

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
