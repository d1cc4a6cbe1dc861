"""Internal: the JSON bodies the API answers with, where a store record is not already the body."""

from __future__ import annotations

import msgspec

from turnstore.records import (
    ExecutionRecord,
    QueuedWorkBatch,
    SessionNodeRecord,
    SessionSummary,
)


class CatalogBody(msgspec.Struct, kw_only=True):
    """One catalog page, newest first; `next_cursor` fetches the next page."""

    sessions: list[SessionSummary]
    next_cursor: str | None


class RecentExecutionsBody(msgspec.Struct, kw_only=True):
    """Finished turns across sessions, most recently started first."""

    executions: list[ExecutionRecord]


class GraphBody(msgspec.Struct, kw_only=True):
    """The runtime graph's active path, root first; no head and no nodes without one."""

    session_id: str
    head_revision: int | None
    current_agent_frame_id: str | None
    nodes: list[SessionNodeRecord]


class QueueBody(msgspec.Struct, kw_only=True):
    """A session's durable queued work, in queue order."""

    batches: list[QueuedWorkBatch]


class HealthBody(msgspec.Struct, kw_only=True):
    """What `/api/health` reports: the version and the owner scope, if any."""

    status: str
    version: str
    owner_scope: str | None
    read_only: bool = True


class ErrorBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every error: a message, the error's type name and its notes (PEP 678), if any."""

    error: str
    type: str
    notes: list[str] = msgspec.field(default_factory=list)
    did_you_mean: list[str] = msgspec.field(default_factory=list)
    """For a session not found: the framework sessions stored under that bare id."""
