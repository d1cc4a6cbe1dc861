"""Validation of session ids, checkpoints and execution records."""

from __future__ import annotations

from collections.abc import Iterable

from turnstore.errors import InvalidInput
from turnstore.records.base import U64_MAX
from turnstore.records.checkpoint import (
    CHECKPOINT_VERSION,
    MAX_QUEUED_MESSAGES,
    Checkpoint,
    ExecutionRecord,
)
from turnstore.rules.messages import validate_queued_message
from turnstore.rules.values import is_blank, too_long

MAX_SESSION_ID_BYTES = 1024
"""Longest session id, in UTF-8 bytes."""


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is a usable session id, else raise `InvalidInput`."""
    if not isinstance(session_id, str) or is_blank(session_id):
        raise InvalidInput("session ID cannot be empty")
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
