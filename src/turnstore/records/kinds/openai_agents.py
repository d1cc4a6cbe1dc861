"""The kind of an OpenAI Agents SDK session, written by `turnstore.integrations.openai_agents`."""

from __future__ import annotations

from turnstore.records.kinds import SessionKind, Storage

KIND = SessionKind(name="openai-agents", storage=Storage.CONTEXT, integration="openai_agents")
"""A session of items, the SDK's session items: read, and searched, by its context."""
