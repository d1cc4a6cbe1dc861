"""Kinds of session: what wrote a session, and so how its conversation is stored and read.

Every session of the catalog has a kind, which the store keeps beside it. The kind decides
where its conversation is (`SessionKind.storage`): the transcript journal of checkpoint saves,
the context of a session of items, or one channel of a LangGraph thread. The conversation
view, the search index and the item-level edits read a session by its kind's storage.

Each kind is declared in a module of this package (`turnstore.records.kinds.adk`, …) as its
`KIND`, with the names it stores that the store must recognise; the registry finds the
modules itself, so a framework's kind is one more module here.
"""

from __future__ import annotations

import enum
import importlib
import pkgutil
from dataclasses import dataclass

from turnstore.records.figures import Figure, FigureReader


class Storage(enum.Enum):
    """Where a kind of session keeps its conversation."""

    TRANSCRIPT = "transcript"
    """The transcript journal: the batches checkpoint saves journal (`store.save`)."""
    CONTEXT = "context"
    """The context: a session of items (`store.append_context` and the item-level edits)."""
    CHANNEL = "channel"
    """One list channel of a LangGraph thread's newest root checkpoint (`SessionKind.channel`)."""


@dataclass(frozen=True, slots=True)
class SessionKind:
    """A kind of session: its name in the catalog, and how its conversation is stored."""

    name: str
    """The kind as the catalog, search and the conversation view show it."""
    storage: Storage
    """Where its conversation is: what the conversation view reads and search indexes."""
    integration: str | None = None
    """The module of `turnstore.integrations` that writes sessions of this kind; None for
    turnstore's own kinds."""
    channel: str | None = None
    """The list channel that is the conversation, for a kind stored in a channel."""
    state_key: str | None = None
    """The middleware state key, in the scope of the session's id, under which the integration
    keeps each session's own record: a session written before schema 7 (which named no kind)
    that holds it is of this kind."""
    id_prefix: str | None = None
    """What the integration puts before the framework's own id to make a session id
    (`langgraph/` + a thread id), so a lookup by the bare id can suggest the stored one."""
    counts: frozenset[Figure] = frozenset()
    """The figures the store counts as this kind's sessions are written (a checkpoint save
    counts every one; the LangGraph saver counts runs)."""
    figures: FigureReader | None = None
    """Reads the figures the kind's items carry, which the indexer adds (None: they carry
    none, and a figure the store does not count is unrecorded)."""
    unsearched: frozenset[str] = frozenset()
    """Keys of this kind's items that search skips besides every kind's (ids, times and
    copies of the message its view already shows). Part of how the index was made, and read
    again to take words out of it: changing it once sessions of the kind are indexed needs a
    migration that builds the text index anew."""

    def __post_init__(self) -> None:
        if (self.storage is Storage.CHANNEL) != (self.channel is not None):
            raise ValueError(f"session kind {self.name!r} names a channel only if stored in one")

    @property
    def stored_names(self) -> tuple[str, ...]:
        """The names this kind writes into the store: its own, its channel and state key."""
        names = (self.name, self.channel, self.state_key)
        return tuple(name for name in names if name is not None)


def _declared() -> dict[str, SessionKind]:
    """The `KIND` of each module of this package, by name."""
    found: dict[str, SessionKind] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        kind = getattr(importlib.import_module(module.name), "KIND", None)
        if not isinstance(kind, SessionKind) or kind.name in found:
            raise RuntimeError(f"{module.name} declares no KIND, or a kind declared before")
        found[kind.name] = kind
    return found


_KINDS = _declared()
_UNNAMED = [kind for kind in _KINDS.values() if kind.storage is Storage.TRANSCRIPT]
if len(_UNNAMED) != 1:
    raise RuntimeError("exactly one kind of session is stored in the transcript")


def kind_of(name: str | None) -> SessionKind:
    """The kind of this name; a name no module declares is a session of items.

    None (a session written before schema 7 whose kind is not yet named) is the kind of
    checkpoint saves, as the store has always read such a session.
    """
    if name is None:
        return _UNNAMED[0]
    found = _KINDS.get(name)
    # Any name `append_context` was given is a session of items: the store reads its context.
    return found if found is not None else SessionKind(name=name, storage=Storage.CONTEXT)


def kinds() -> tuple[SessionKind, ...]:
    """Every declared kind of session, by name."""
    return tuple(_KINDS[name] for name in sorted(_KINDS))


def prefixed_ids(session_id: str) -> list[str]:
    """The ids a framework's session of this bare id would be stored under (`lg-tides` ->
    `langgraph/lg-tides`): what to suggest when `session_id` itself is not stored."""
    return [
        kind.id_prefix + session_id
        for kind in kinds()
        if kind.id_prefix is not None and not session_id.startswith(kind.id_prefix)
    ]


__all__ = ["SessionKind", "Storage", "kind_of", "kinds", "prefixed_ids"]
