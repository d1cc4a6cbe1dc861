"""turnstore: durable, transactional storage for AI-agent sessions.

The names here are what an agent loop needs: `open` / `open_blocking`, the stores (with the
operators' face, `Upkeep`, and the runtime face), the records it builds, and the errors it
catches. Every record is in `turnstore.records`, every
protocol event type in `turnstore.events`, every error in `turnstore.errors`.
"""

# The namespaces of the rest, reachable as attributes after `import turnstore`.
from turnstore import errors as errors
from turnstore import events as events
from turnstore import records as records
from turnstore.attachments import FileAttachmentStore
from turnstore.backends.urls import migrate
from turnstore.errors import (
    ConfigError,
    ContextRewriteRequired,
    CorruptRecord,
    HeadRevisionConflict,
    InvalidInput,
    QueuedWorkClaimExpired,
    RuntimeTurnCommitConflict,
    SequenceConflict,
    SessionNotFound,
    StorageError,
    StoreClosed,
    TurnstoreError,
)
from turnstore.faces.aio_runtime import RuntimeStore
from turnstore.faces.aio_store import Store, open
from turnstore.faces.aio_upkeep import Upkeep
from turnstore.faces.blocking_runtime import BlockingRuntimeStore
from turnstore.faces.blocking_store import BlockingStore, open_blocking
from turnstore.faces.blocking_upkeep import BlockingUpkeep
from turnstore.records.checkpoint import (
    ActiveExecution,
    Checkpoint,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.records.context import Context
from turnstore.records.protocol import Event, SessionContext
from turnstore.records.runtime import (
    ActivePath,
    GraphAppend,
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionNodeRecord,
)
from turnstore.rules.messages import new_queued_message

__version__ = "0.1.0"

__all__ = [
    "ActiveExecution",
    "ActivePath",
    "BlockingRuntimeStore",
    "BlockingStore",
    "BlockingUpkeep",
    "Checkpoint",
    "ConfigError",
    "Context",
    "ContextRewriteRequired",
    "CorruptRecord",
    "Event",
    "EventPageRequest",
    "ExecutionPageRequest",
    "ExecutionRecord",
    "FileAttachmentStore",
    "GraphAppend",
    "HeadRevisionConflict",
    "HydratedSessionCheckpoint",
    "InvalidInput",
    "QueuedWorkBatchDraft",
    "QueuedWorkClaimExpired",
    "RuntimeCommit",
    "RuntimeStore",
    "RuntimeTurnCommitConflict",
    "SequenceConflict",
    "SessionContext",
    "SessionNodeRecord",
    "SessionNotFound",
    "SessionPageRequest",
    "StorageError",
    "Store",
    "StoreClosed",
    "TimestampedEvent",
    "TranscriptPageRequest",
    "TurnstoreError",
    "Upkeep",
    "migrate",
    "new_queued_message",
    "open",
    "open_blocking",
]
