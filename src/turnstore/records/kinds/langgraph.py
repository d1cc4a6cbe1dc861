"""The kind of a LangGraph thread, written by `turnstore.integrations.langgraph`'s saver."""

from __future__ import annotations

from turnstore.records.kinds import SessionKind, Storage

CHANNEL = "messages"
"""The list channel that is a thread's conversation (LangGraph's `MessagesState`)."""
KIND = SessionKind(
    name="langgraph",
    storage=Storage.CHANNEL,
    integration="langgraph",
    channel=CHANNEL,
    id_prefix="langgraph/",
)
"""A thread: read, and searched, by the `CHANNEL` list of its newest root checkpoint."""
