"""The kind of a session written by checkpoint saves (`store.save`): turnstore's own loop."""

from __future__ import annotations

from turnstore.records.figures import FIGURES
from turnstore.records.kinds import SessionKind, Storage

KIND = SessionKind(name="turnstore", storage=Storage.TRANSCRIPT, counts=frozenset(FIGURES))
"""Read, and searched, by its transcript, which keeps every batch it journaled."""
