"""The kind of a Google ADK session, written by `turnstore.integrations.adk`'s service."""

from __future__ import annotations

from turnstore.records.kinds import SessionKind, Storage

SESSION_KEY = "adk-session"
"""The middleware state key of an ADK session's own record, in the scope of its id."""
KIND = SessionKind(
    name="adk",
    storage=Storage.CONTEXT,
    integration="adk",
    state_key=SESSION_KEY,
    id_prefix="adk/",
)
"""A session of items, one ADK event each: read, and searched, by its context."""
