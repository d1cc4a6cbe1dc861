"""Validation of identifiers (session ids and the rest), checkpoints and execution records."""

from __future__ import annotations

import re
from collections.abc import Iterable

from turnstore.errors import InvalidInput
from turnstore.records.base import U64_MAX
from turnstore.records.checkpoint import (
    CHECKPOINT_VERSION,
    MAX_QUEUED_MESSAGES,
    Checkpoint,
    ExecutionRecord,
    SteerBoundary,
)
from turnstore.rules.messages import validate_queued_message
from turnstore.rules.values import is_blank, too_long

MAX_SESSION_ID_BYTES = 1024
"""Longest session id, in UTF-8 bytes."""


NUL = "\x00"
"""The one character no identifier may hold: PostgreSQL text cannot store it, and SQLite's
JSON functions cut a string at it."""
REPLACEMENT_CHARACTER = "\ufffd"
"""What a NUL of display text (a catalog or picker line) becomes."""


def check_input(condition: bool, message: str) -> None:
    """Refuse a call's input with `InvalidInput` unless `condition` holds."""
    if not condition:
        raise InvalidInput(message)


def identifier(value: object, what: str) -> str:
    """Return `value` if it is a string a database can key rows by, else raise `InvalidInput`.

    An identifier is UTF-8 text without NUL; blank and length rules are the caller's, since
    they differ from one identifier to another.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if NUL in value:
        raise InvalidInput(f"{what} cannot contain NUL")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidInput(f"{what} is not UTF-8 text") from None
    # A str subclass could compare or hash unlike the text a database holds.
    return value if type(value) is str else str.__str__(value)


_TOP_FIELD = re.compile(r"[A-Za-z0-9_-]{1,255}")


def top_field_equal(field: object, value: object) -> tuple[str, str]:
    """A (field, text) condition a memory search may narrow by (`MemorySearch.equals`): one
    field name at the top of a value, as filters spell them, and an identifier's text; else
    `InvalidInput`."""
    if not isinstance(field, str) or not _TOP_FIELD.fullmatch(field):
        raise InvalidInput(f"a search's equal field must be a top-level name: {field!r}")
    return field, identifier(value, "a search's equal value")


def optional_identifier(value: object, what: str) -> str | None:
    """Return None, or `value` if it is an identifier (see `identifier`)."""
    return None if value is None else identifier(value, what)


def identifiers(values: Iterable[object], what: str) -> None:
    """Refuse, as `identifier` does, the first of `values` that is not an identifier."""
    for value in values:
        identifier(value, what)


def display_text(text: str) -> str:
    """A catalog or picker line as stored: the text with each NUL replaced by U+FFFD.

    The line is shown, not keyed by, and PostgreSQL text cannot hold NUL; the record it was
    taken from (a checkpoint, transcript items, graph nodes) keeps the exact text.
    """
    return text.replace(NUL, REPLACEMENT_CHARACTER)


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is a usable session id, else raise `InvalidInput`."""
    if not isinstance(session_id, str):
        raise InvalidInput("session ID must be a string")
    if is_blank(session_id):
        raise InvalidInput("session ID cannot be empty")
    session_id = identifier(session_id, "session ID")
    if too_long(session_id, MAX_SESSION_ID_BYTES):
        raise InvalidInput("session ID is too long")
    return session_id


def validate_session_ids(session_ids: object) -> list[str]:
    """Return a list of session ids, refusing one bare string where a sequence is meant."""
    if isinstance(session_ids, str):
        raise InvalidInput("session_ids must be a sequence of session IDs, not one string")
    if not isinstance(session_ids, Iterable):
        raise InvalidInput("session_ids must be a sequence of session IDs")
    return [validate_session_id(session_id) for session_id in session_ids]


def validate_checkpoint(checkpoint: Checkpoint) -> None:
    """Raise `InvalidInput` when a caller's checkpoint breaks a rule of the contract."""
    validate_stored_checkpoint(checkpoint)
    _check_checkpoint_ids(checkpoint)


def _check_checkpoint_ids(checkpoint: Checkpoint) -> None:
    """Refuse NUL (or non-UTF-8 text) in the identifiers a checkpoint carries."""
    context = checkpoint.session_context
    optional_identifier(context.owner_id, "session owner ID")
    optional_identifier(context.workspace_id, "session workspace ID")
    active = checkpoint.active_execution
    if active is not None:
        identifiers((active.submission_id, active.turn_id), "active execution identifier")
    step = checkpoint.active_model_step
    if step is not None:
        identifier(step.model_step_id, "active model-step identifier")
    approval = checkpoint.pending_approval
    if approval is not None:
        ids = (approval.submission_id, approval.turn_id, approval.request_id)
        identifiers(ids, "pending approval identifier")
        identifiers(approval.approval_call_ids, "pending approval call ID")
        identifiers(approval.authorized_call_ids, "pending approval call ID")
        identifiers((call.call_id for call in approval.calls), "pending approval call ID")
    identifiers((call.call_id for call in checkpoint.pending_tools), "pending tool call ID")
    for message in checkpoint.pending_messages:
        identifiers((message.owner, message.id), "queued message identifier")
        if isinstance(message.boundary, SteerBoundary):
            identifier(message.boundary.turn_id, "queued message turn ID")


def validate_stored_checkpoint(checkpoint: Checkpoint) -> None:
    """Raise `InvalidInput` when a checkpoint, as stored, breaks a rule of the contract.

    The rules of `validate_checkpoint` but the identifier rule, which a checkpoint stored
    before that rule existed may break and still load.
    """
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
        if is_blank(active.submission_id) or is_blank(active.turn_id):
            raise InvalidInput("active execution identifiers cannot be empty")
        if active.started_at_ms < 0:
            raise InvalidInput("active execution start time cannot be negative")
        if active.failed_tool_calls > active.tool_calls:
            raise InvalidInput("active execution failed-tool count exceeds tool count")
    step = checkpoint.active_model_step
    if step is not None:
        if active is None:
            raise InvalidInput("active model step has no active execution")
        if is_blank(step.model_step_id):
            raise InvalidInput("active model-step identifier cannot be empty")
        if step.started_at_ms < active.started_at_ms:
            raise InvalidInput("active model step predates its execution")


def is_clean_start(checkpoint: Checkpoint) -> bool:
    """Whether a checkpoint can begin a new session branch: sequence zero, nothing in flight."""
    return (
        checkpoint.sequence == 0
        and checkpoint.active_execution is None
        and checkpoint.pending_approval is None
        and not checkpoint.pending_messages
    )


def validate_execution(checkpoint: Checkpoint, execution: ExecutionRecord) -> None:
    """Raise `InvalidInput` unless `execution` may be journaled with `checkpoint`."""
    if checkpoint.active_execution is not None:
        raise InvalidInput("a terminal execution requires an idle checkpoint")
    if execution.session_id != checkpoint.session_id:
        raise InvalidInput("execution record does not match its checkpoint")
    validate_execution_record(execution)
    identifiers((execution.submission_id, execution.turn_id), "execution record identifier")


def validate_execution_record(execution: ExecutionRecord) -> None:
    """Raise `InvalidInput` when an execution record is inconsistent in itself."""
    if any(
        is_blank(value)
        for value in (execution.session_id, execution.submission_id, execution.turn_id)
    ):
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
