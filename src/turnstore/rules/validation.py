"""Validation of checkpoints, execution records, queued messages and page bounds."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from turnstore.errors import ConfigError, InvalidInput, RecordDecodeError
from turnstore.records.base import I64_MAX, U64_MAX, decode_json, encode_json
from turnstore.records.checkpoint import (
    CHECKPOINT_VERSION,
    MAX_QUEUED_MESSAGES,
    Checkpoint,
    ExecutionRecord,
    QueuedMessage,
    QueuedMessageBoundary,
    SteerBoundary,
    boundary_delivery,
)
from turnstore.records.protocol import (
    MAX_MESSAGE_BYTES,
    MessageAuthor,
    MessageEvent,
    SessionFileReference,
)

MAX_QUEUED_OWNER_BYTES = 256
MAX_QUEUED_ID_BYTES = 4 * 1024
MAX_QUEUED_TURN_ID_BYTES = 4 * 1024
MAX_QUEUED_MESSAGE_BYTES = MAX_MESSAGE_BYTES * 2
MAX_ATTACHMENTS = 64
"""Most attachments one message may carry."""
MAX_SESSION_ID_BYTES = 1024
"""Longest session id, in UTF-8 bytes."""

R = TypeVar("R", bound=msgspec.Struct)


def revalidated(record: R) -> tuple[R, bytes]:
    """Return a type-checked copy of `record` and its JSON.

    Record constructors do not check types or ranges, so a record from a caller is encoded
    and decoded again: the decode enforces every annotated type and integer range.
    """
    try:
        data = encode_json(record)
    except (TypeError, ValueError, OverflowError) as error:
        raise RecordDecodeError(f"{type(record).__name__} is not encodable: {error}") from None
    return decode_json(data, type(record)), data


# Unicode White_Space, which Rust's `str::trim` strips; Python's `str.strip()` also strips the
# information separators U+001C..U+001F, which the seeds do not count as blank.
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _blank(value: str) -> bool:
    return not value.strip(_WHITE_SPACE)


def _too_long(value: str, limit: int) -> bool:
    # A Python string may hold lone surrogates, which no UTF-8 text (and no Rust string) can.
    try:
        return len(value.encode()) > limit
    except UnicodeEncodeError:
        return True


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is a usable session id, else raise `InvalidInput`."""
    if not isinstance(session_id, str) or _blank(session_id):
        raise InvalidInput("session ID cannot be empty")
    if _too_long(session_id, MAX_SESSION_ID_BYTES):
        raise InvalidInput("session ID is too long")
    return session_id


def validate_message_content(
    author: MessageAuthor, message: str, attachments: list[SessionFileReference]
) -> None:
    """Raise `ConfigError` when a message is empty, too large or has bad attachments."""
    if author.role not in ("user", "agent", "system"):
        raise ConfigError("message author is invalid")
    if _too_long(message, MAX_MESSAGE_BYTES):
        raise ConfigError("message exceeds the size limit")
    if _blank(message) and not attachments:
        raise ConfigError("message is empty")
    if len(attachments) > MAX_ATTACHMENTS:
        raise ConfigError("message has too many attachments")
    if any(_blank(item.file_id) or _blank(item.name) for item in attachments):
        raise ConfigError("message attachment is invalid")


def validate_queued_message(message: QueuedMessage) -> None:
    """Raise `ConfigError` when a queued message breaks a limit (the seed's checks, in order)."""
    if _blank(message.owner) or _too_long(message.owner, MAX_QUEUED_OWNER_BYTES):
        raise ConfigError("queued message owner is invalid")
    if _blank(message.id) or _too_long(message.id, MAX_QUEUED_ID_BYTES):
        raise ConfigError("queued message ID is invalid")
    boundary = message.boundary
    if isinstance(boundary, SteerBoundary) and (
        _blank(boundary.turn_id) or _too_long(boundary.turn_id, MAX_QUEUED_TURN_ID_BYTES)
    ):
        raise ConfigError("queued message turn ID is invalid")
    validate_message_content(message.author, message.message, message.attachments)
    if len(encode_json(message.event())) > MAX_QUEUED_MESSAGE_BYTES:
        raise ConfigError("queued message is invalid")


def new_queued_message(
    owner: str, id: str, boundary: QueuedMessageBoundary, event: MessageEvent
) -> QueuedMessage:
    """Build a queued message from an event whose delivery matches the boundary."""
    if event.delivery != boundary_delivery(boundary) or event.message_target is not None:
        raise ConfigError("queued message event is inconsistent")
    queued = QueuedMessage(
        owner=owner,
        id=id,
        boundary=boundary,
        author=event.author,
        message=event.text,
        attachments=list(event.attachments),
        reply=event.reply,
    )
    validate_queued_message(queued)
    return queued


def validate_checkpoint(checkpoint: Checkpoint) -> None:
    """Raise `InvalidInput` when a checkpoint breaks a rule of the contract."""
    if checkpoint.version != CHECKPOINT_VERSION:
        raise InvalidInput(f"unsupported checkpoint version {checkpoint.version}")
    validate_session_id(checkpoint.session_id)
    _validate_active_turn(checkpoint)
    if len(checkpoint.pending_messages) > MAX_QUEUED_MESSAGES:
        raise InvalidInput("queued messages exceed the durable item limit")
    seen: set[tuple[str, str]] = set()
    for message in checkpoint.pending_messages:
        validate_queued_message(message)
        key = (message.owner, message.id)
        if key in seen:
            raise InvalidInput(f"duplicate queued message `{message.owner}/{message.id}`")
        seen.add(key)


def _validate_active_turn(checkpoint: Checkpoint) -> None:
    active = checkpoint.active_execution
    if active is not None:
        if _blank(active.submission_id) or _blank(active.turn_id):
            raise InvalidInput("active execution identifiers cannot be empty")
        if active.started_at_ms < 0:
            raise InvalidInput("active execution start time cannot be negative")
        if active.failed_tool_calls > active.tool_calls:
            raise InvalidInput("active execution failed-tool count exceeds tool count")
    step = checkpoint.active_model_step
    if step is not None:
        if active is None:
            raise InvalidInput("active model step has no active execution")
        if _blank(step.model_step_id):
            raise InvalidInput("active model-step identifier cannot be empty")
        if step.started_at_ms < active.started_at_ms:
            raise InvalidInput("active model step predates its execution")


def validate_execution(checkpoint: Checkpoint, execution: ExecutionRecord) -> None:
    """Raise `InvalidInput` unless `execution` may be journaled with `checkpoint`."""
    if checkpoint.active_execution is not None:
        raise InvalidInput("a terminal execution requires an idle checkpoint")
    if execution.session_id != checkpoint.session_id:
        raise InvalidInput("execution record does not match its checkpoint")
    validate_execution_record(execution)


def validate_execution_record(execution: ExecutionRecord) -> None:
    """Raise `InvalidInput` when an execution record is inconsistent in itself."""
    if _blank(execution.session_id) or _blank(execution.submission_id) or _blank(execution.turn_id):
        raise InvalidInput("execution record identifiers cannot be empty")
    if execution.started_at_ms < 0 or execution.finished_at_ms < execution.started_at_ms:
        raise InvalidInput("execution record has invalid timestamps")
    elapsed_ms = execution.finished_at_ms - execution.started_at_ms
    if elapsed_ms > U64_MAX:
        raise InvalidInput("execution elapsed time is unsupported")
    if execution.elapsed_ms != elapsed_ms:
        raise InvalidInput("execution elapsed time does not match its timestamps")
    if execution.failed_tool_calls > execution.tool_calls:
        raise InvalidInput("execution failed-tool count exceeds tool count")


def storage_integer(value: object, message: str) -> int:
    """Return `value` if it is a non-negative integer that fits a signed 64-bit column."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= I64_MAX:
        raise InvalidInput(message)
    return value


def page_limit(limit: object, what: str) -> int:
    """Return the row count to query (limit + 1, to detect a next page) for a page request."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise InvalidInput(f"{what} limit must be positive")
    if limit + 1 > I64_MAX:
        raise InvalidInput(f"{what} limit is too large")
    return limit + 1


def optional_cursor(value: object, message: str) -> int | None:
    """Return a page cursor, or None, refusing values outside the storage integer range."""
    return None if value is None else storage_integer(value, message)
