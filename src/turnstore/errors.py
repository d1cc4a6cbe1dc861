"""The error hierarchy: every failure a caller can see is a `TurnstoreError`."""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ContextRewriteRequired",
    "CorruptRecord",
    "HeadRevisionConflict",
    "InvalidInput",
    "NotFound",
    "QueuedWorkClaimExpired",
    "ReadOnlyStore",
    "RecordDecodeError",
    "RuntimeTurnCommitConflict",
    "SchemaError",
    "SequenceConflict",
    "SessionBindingMismatch",
    "SessionExists",
    "SessionNotFound",
    "StorageError",
    "StoreClosed",
    "TurnstoreError",
    "UnsupportedRecordSchemaVersion",
]


class TurnstoreError(Exception):
    """Base class of every error turnstore raises; `str(error)` is the seed's message text."""

    __module__ = "turnstore"

    def __init__(self, message: str, **context: object) -> None:
        super().__init__(message)
        self.message = message
        # The domain ids the message names, as attributes (e.g. `expected`, `actual`).
        self.__dict__.update(context)

    def __reduce__(self) -> tuple[type[TurnstoreError], tuple[str], dict[str, object]]:
        # Keep errors picklable (for process pools) with their extra attributes.
        return (type(self), (self.message,), dict(self.__dict__))


class CheckpointError(TurnstoreError):
    """A checkpoint-store rule refused the call (the seed's `Error::Checkpoint`)."""

    __module__ = "turnstore"


class InvalidInput(CheckpointError, ValueError):
    """The caller's input breaks a rule of the contract; nothing was written."""

    __module__ = "turnstore"


class ConfigError(InvalidInput):
    """A queued message or other configuration value is invalid (the seed's `Error::Config`)."""

    __module__ = "turnstore"


class RecordDecodeError(InvalidInput):
    """JSON did not decode into the expected record type."""

    __module__ = "turnstore"


class NotFound(CheckpointError, LookupError):
    """The call needs a row that does not exist."""

    __module__ = "turnstore"


class SessionNotFound(NotFound):
    """The session the call names does not exist."""

    __module__ = "turnstore"


class SequenceConflict(CheckpointError):
    """The checkpoint sequence did not advance past the stored one."""

    __module__ = "turnstore"


class SessionExists(CheckpointError):
    """A session with this id already exists."""

    __module__ = "turnstore"


class ContextRewriteRequired(InvalidInput):
    """The context changed other than by appending, without a `context_epoch` bump."""

    __module__ = "turnstore"


class CorruptRecord(CheckpointError):
    """A stored row does not decode or does not match its index."""

    __module__ = "turnstore"


class SchemaError(TurnstoreError):
    """The database schema is not one this build can use."""

    __module__ = "turnstore"


class StorageError(TurnstoreError):
    """The database failed underneath the store; `retryable` says whether a retry may succeed."""

    __module__ = "turnstore"

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class SessionBindingMismatch(InvalidInput):
    """A runtime handle bound to one session was used for another (`bound_session_id`, ...)."""

    __module__ = "turnstore"


class HeadRevisionConflict(CheckpointError):
    """The session head moved: `expected` (None for a new session) is not `actual`."""

    __module__ = "turnstore"


class RuntimeTurnCommitConflict(CheckpointError):
    """A turn was already committed with different content (`session_id`, `turn_id`)."""

    __module__ = "turnstore"


class QueuedWorkClaimExpired(CheckpointError):
    """A queued-work claim is missing or its lease ran out (`session_id`, `claim_id`)."""

    __module__ = "turnstore"


class UnsupportedRecordSchemaVersion(CorruptRecord):
    """A stored record has a `schema_version` this build does not read."""

    __module__ = "turnstore"


class ReadOnlyStore(TurnstoreError):
    """A write was attempted on a store opened read-only."""

    __module__ = "turnstore"


class StoreClosed(TurnstoreError):
    """The store was closed before or during the call."""

    __module__ = "turnstore"
