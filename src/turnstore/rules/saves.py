"""Preparing a save: validate and encode everything before any I/O."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from turnstore.errors import InvalidInput, RecordDecodeError
from turnstore.records.base import encode_json
from turnstore.records.checkpoint import Checkpoint, ExecutionRecord, TimestampedEvent
from turnstore.rules.events import PreparedEvent, prepare_event
from turnstore.rules.validation import (
    revalidated,
    storage_integer,
    validate_checkpoint,
    validate_execution,
)


@dataclass(frozen=True, slots=True)
class PreparedSave:
    """One validated save, encoded before any I/O except the context delta.

    The context delta is encoded by the backend inside its transaction, because only there
    is the stored context length known.
    """

    session_id: str
    sequence: int
    state_json: str
    context_epoch: int
    context: list[Any]
    session_context_json: str
    owner_id: str | None
    execution_stats_json: str
    catalog_visible: bool
    first_user_message: str | None
    transcript_json: str | None
    execution: tuple[int, str] | None
    events: list[PreparedEvent]


@dataclass(frozen=True, slots=True)
class PreparedFork:
    """A validated fork: the child's save plus the parent it branches from."""

    parent_session_id: str
    parent_sequence: int
    child: PreparedSave


def type_check(value: object, type_: type, name: str) -> None:
    if not isinstance(value, type_):
        raise InvalidInput(f"{name} must be a {type_.__name__}")


def encode_values(values: Sequence[Any], what: str) -> str:
    try:
        return encode_json(values).decode()
    except (TypeError, ValueError, OverflowError) as error:
        raise RecordDecodeError(f"{what} is not encodable: {error}") from None


def prepare_save(
    checkpoint: Checkpoint,
    transcript_delta: Iterable[Any],
    execution: ExecutionRecord | None,
    events: Iterable[TimestampedEvent],
) -> PreparedSave:
    """Validate and encode one save before any I/O (all but the context delta)."""
    type_check(checkpoint, Checkpoint, "checkpoint")
    context = list(checkpoint.context)
    state, state_json = revalidated(msgspec.structs.replace(checkpoint, context=[]))
    validate_checkpoint(state)
    execution_json = None
    if execution is not None:
        type_check(execution, ExecutionRecord, "execution")
        execution, execution_bytes = revalidated(execution)
        validate_execution(state, execution)
        execution_json = (execution.started_at_ms, execution_bytes.decode())
    storage_integer(state.sequence, "checkpoint sequence exceeds SQLite INTEGER")
    storage_integer(state.context_epoch, "checkpoint context epoch exceeds SQLite INTEGER")
    delta = list(transcript_delta)
    prepared_events = [prepare_event(_checked_event(event)) for event in events]
    return PreparedSave(
        session_id=state.session_id,
        sequence=state.sequence,
        state_json=state_json.decode(),
        context_epoch=state.context_epoch,
        context=context,
        session_context_json=state.session_context.to_json().decode(),
        owner_id=state.session_context.owner_id,
        execution_stats_json=state.execution_stats.to_json().decode(),
        catalog_visible=state.catalog_visible,
        first_user_message=state.first_user_message,
        transcript_json=encode_values(delta, "transcript delta") if delta else None,
        execution=execution_json,
        events=prepared_events,
    )


def _checked_event(event: object) -> TimestampedEvent:
    type_check(event, TimestampedEvent, "event")
    assert isinstance(event, TimestampedEvent)
    return event
