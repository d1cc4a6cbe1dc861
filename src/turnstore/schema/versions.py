"""What each schema version adds, the same on every backend (a test holds them to it)."""

from __future__ import annotations

SCHEMA_STEPS: tuple[str, ...] = (
    "the checkpoint store: sessions, context chunks, transcript, execution and event journals",
    "the runtime face: heads, graph nodes, turn commits, queued work, attachments, blobs",
    "attachment entries looked up by payload URI",
    "LangGraph checkpoints, channel values, list lineages and pending writes",
    "the model-step index narrowed to streamed deltas, so other events write no entry in it",
    "event batches: a save's events that no later save deletes are stored as one row",
    "conversation search: each session's kind, and a text index of its items (reindex to fill)",
)
"""One line per migration: `SCHEMA_STEPS[n - 1]` describes what version `n` adds."""
