"""The error hierarchy: every failure a caller can see is a `TurnstoreError`.

Errors carry the ids their message names as typed attributes (declared on each class), so a
caller can act on a conflict without parsing text; `str(error)` stays the contract's message.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ContextItemImmutable",
    "ContextRewriteRequired",
    "CorruptRecord",
    "HeadRevisionConflict",
    "InvalidInput",
    "InvalidMessage",
    "MemoryItemExists",
    "NotFound",
    "NotJsonValue",
    "OutcomeUnknown",
    "QueuedWorkClaimExpired",
    "ReadOnlyStore",
    "RecordDecodeError",
    "RuntimeConflict",
    "RuntimeTurnCommitConflict",
    "SchemaError",
    "SearchIndexNotBuilt",
    "SequenceConflict",
    "SessionBindingMismatch",
    "SessionExists",
    "SessionNotFound",
    "StateConflict",
    "StorageError",
    "StoreClosed",
    "TurnstoreError",
    "UnsupportedRecordSchemaVersion",
]


def _attribute_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        if issubclass(klass, TurnstoreError):
            names.extend(
                name
                for name in inspect.get_annotations(klass)
                if name != "message" and name not in names
            )
    return names


class TurnstoreError(Exception):
    """Base class of every error turnstore raises; `str(error)` is the contract's message."""

    message: str

    def __init__(self, message: str, **attributes: Any) -> None:
        super().__init__(message)
        for name in _attribute_names(type(self)):
            setattr(self, name, attributes.pop(name, getattr(type(self), name, None)))
        self.message = message
        if attributes:
            raise TypeError(f"{type(self).__name__} has no attributes {sorted(attributes)}")

    def __reduce__(self) -> tuple[type[TurnstoreError], tuple[str], dict[str, object]]:
        # Keep errors picklable (for process pools) with their attributes and notes.
        return (type(self), (self.message,), dict(self.__dict__))

    def __repr__(self) -> str:
        """The class, the message and every attribute that is set, as a constructor call."""
        named = (
            f", {name}={value!r}"
            for name in _attribute_names(type(self))
            if (value := getattr(self, name)) is not None
        )
        return f"{type(self).__name__}({self.message!r}{''.join(named)})"


class CheckpointError(TurnstoreError):
    """A rule of the checkpoint contract (or a rule both contracts share) refused the call."""


class RuntimeConflict(TurnstoreError):
    """The runtime contract refused a write that conflicts with what the store holds now."""


class InvalidInput(CheckpointError, ValueError):
    """The caller's input breaks a rule of the contract; nothing was written."""


class NotJsonValue(InvalidInput, TypeError):
    """A value holds what JSON cannot (bytes, a set, an object, a key that is not text): an
    `InvalidInput` that is also the `TypeError` `json.dumps` raises for it."""


class InvalidMessage(InvalidInput):
    """A message or queued message breaks a limit or is empty."""


class RecordDecodeError(InvalidInput):
    """A value from the caller does not decode into (or encode from) the expected record."""


class NotFound(CheckpointError, LookupError):
    """The call needs a row that does not exist."""


class SessionNotFound(NotFound):
    """The session the call names (`session_id`) does not exist."""

    session_id: str | None


class SequenceConflict(CheckpointError):
    """The sequence did not advance: `attempted` is not above the `stored` one.

    `str(error)` is the contract's message; the exception's notes (PEP 678, printed with a
    traceback) name the session and both sequences, then the `hint` the raiser gave.
    """

    session_id: str | None
    stored: int | None
    attempted: int | None

    def __init__(self, message: str, *, hint: str | None = None, **attributes: Any) -> None:
        super().__init__(message, **attributes)
        if self.session_id is not None and self.stored is not None:
            self.add_note(
                f"session {self.session_id!r} is at stored sequence {self.stored}; "
                f"this call gave sequence {self.attempted}"
            )
        if hint is not None:
            self.add_note(f"hint: {hint}")


class StateConflict(CheckpointError):
    """A middleware state value (`scope`, `key`) was not the value the write expected."""

    scope: str | None
    key: str | None


class SessionExists(CheckpointError):
    """A session with this id (`session_id`) already exists."""

    session_id: str | None


class MemoryItemExists(CheckpointError):
    """A memory item (`namespace`, `key`) already exists with other content (an import)."""

    namespace: str | None
    key: str | None


class ContextRewriteRequired(InvalidInput):
    """The context changed other than by appending, without a `context_epoch` bump."""


class ContextItemImmutable(CheckpointError, TypeError):
    """A context item the store holds was changed in place; assign a changed copy instead."""


class CorruptRecord(CheckpointError):
    """A stored row does not decode or does not match its index (`session_id` when known)."""

    session_id: str | None


class UnsupportedRecordSchemaVersion(CorruptRecord):
    """A stored record has a `schema_version` (`actual`) this build does not read."""

    record_kind: str | None
    actual: int | None
    expected: int | None


class SessionBindingMismatch(InvalidInput):
    """A runtime handle bound to one session was used for another."""

    bound_session_id: str | None
    attempted_session_id: str | None


# The runtime conflicts are also `CheckpointError`s until 0.2 (deprecated, see CHANGELOG):
# code written against 0.1's first drafts caught them as one; catch `RuntimeConflict` instead.
class HeadRevisionConflict(RuntimeConflict, CheckpointError):
    """The session head moved: `expected` (None for a new session) is not `actual`."""

    session_id: str | None
    expected: int | None
    actual: int | None


class RuntimeTurnCommitConflict(RuntimeConflict, CheckpointError):
    """A turn (`turn_id`) was already committed with different content."""

    session_id: str | None
    turn_id: str | None


class QueuedWorkClaimExpired(RuntimeConflict, CheckpointError):
    """A queued-work claim (`claim_id`) is missing or its lease ran out."""

    session_id: str | None
    claim_id: str | None


class ConfigError(TurnstoreError, ValueError):
    """The store URL or an option of it is wrong; nothing was opened."""


class SchemaError(TurnstoreError):
    """The database schema is not one this build can use."""


class StorageError(TurnstoreError):
    """The database failed underneath the store; `retryable` says whether a retry may succeed."""

    retryable: bool = False
    sqlstate: str | None = None
    """PostgreSQL's five-character error code (`"40P01"`), as psycopg's errors carry it; None
    on SQLite and where the server gave none (a lost connection)."""
    detail: str | None = None
    """PostgreSQL's DETAIL line, with the URL's secrets removed; it may quote the row's values,
    so the server's HTTP answers and turnstore's logs never show it."""


class OutcomeUnknown(StorageError):
    """A PostgreSQL write lost its connection after COMMIT was sent: it may or may not have
    committed. Read back what it wrote, then retry or not (SQLite commits cannot end so)."""


class ReadOnlyStore(TurnstoreError):
    """A write was attempted on a store opened read-only."""


class StoreClosed(TurnstoreError, RuntimeError):
    """The store was closed before or during the call (a `RuntimeError`, as closed sessions
    of the OpenAI Agents SDK raise)."""


class SearchIndexNotBuilt(TurnstoreError):
    """The store's search index is not built yet (a store migrated from before schema 7):
    `turnstore reindex URL` or `store.upkeep.reindex()` builds it."""
