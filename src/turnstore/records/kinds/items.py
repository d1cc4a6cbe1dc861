"""The kind `store.append_context` gives a session it creates unless told another."""

from __future__ import annotations

from turnstore.records.kinds import SessionKind, Storage

KIND = SessionKind(name="items", storage=Storage.CONTEXT)
"""A session of items: read, and searched, by its context."""
