"""Contract: every refusal has the seed's message and type, and a refused write changes nothing.

Messages are the seed's (002/003) text. Where 002 renamed `pending_input` to
`pending_messages`, the queued-input messages follow the rename ("queued message(s)").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import turnstore
from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    InvalidInput,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.events import (
    MAX_MESSAGE_BYTES,
    MessageAuthor,
    SessionFileReference,
    WarningEvent,
)
from turnstore.records import (
    MAX_QUEUED_MESSAGES,
    ActiveModelStep,
    PendingApproval,
    QueuedMessage,
    SessionCursor,
    SteerBoundary,
    TurnBoundary,
)

I64_OVERFLOW = 2**63
LARGEST_I64 = 2**63 - 1


def queued(owner: str = "user", id: str = "message-1", **changes: Any) -> QueuedMessage:
    """A valid queued message, with `changes` applied."""
    message = QueuedMessage(
        owner=owner,
        id=id,
        boundary=TurnBoundary(),
        author=MessageAuthor(role="user"),
        message="hello",
    )
    return msgspec.structs.replace(message, **changes)


def active(**changes: Any) -> ActiveExecution:
    """A valid active execution started at 100 ms, with `changes` applied."""
    fields = {"submission_id": "submission", "turn_id": "turn", "started_at_ms": 100} | changes
    return ActiveExecution(**fields)


def step(**changes: Any) -> ActiveModelStep:
    """A valid active model step started at 150 ms, with `changes` applied."""
    fields = {"model_step_id": "step", "step_index": 0, "started_at_ms": 150} | changes
    return ActiveModelStep(**fields)


def record(session_id: str = "session", **changes: Any) -> ExecutionRecord:
    """A valid completed execution record, with `changes` applied."""
    fields = {
        "session_id": session_id,
        "submission_id": "submission",
        "turn_id": "turn",
        "started_at_ms": 100,
        "finished_at_ms": 150,
        "elapsed_ms": 50,
        "outcome": "completed",
        "tool_calls": 2,
        "failed_tool_calls": 1,
    } | changes
    return ExecutionRecord(**fields)


def approval() -> PendingApproval:
    """A pending approval of one shell call."""
    return PendingApproval(
        submission_id="submission",
        turn_id="turn",
        request_id="request",
        approval_call_ids=["call"],
        authorized_call_ids=[],
        calls=[],
        reason="runs a command",
        sandbox_mode="read_only",
        network_access="restricted",
    )


def warning(recorded_at_ms: int = 1) -> TimestampedEvent:
    """A durable warning event."""
    return TimestampedEvent(
        recorded_at_ms=recorded_at_ms, event=Event(msg=WarningEvent(message="w"))
    )


async def seeded(store) -> Checkpoint:
    """Save a session at sequence 1 with a transcript batch and one event; return its checkpoint."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.sequence = 1
    checkpoint.context = [{"role": "user", "content": "hello"}]
    await store.save_with_events(
        checkpoint, [{"role": "user", "content": "hello"}], None, [warning()]
    )
    return checkpoint


async def assert_unchanged(store, checkpoint: Checkpoint) -> None:
    """The session still holds exactly what `seeded` stored."""
    assert await store.load("session") == checkpoint
    transcript = await store.transcript_page("session", TranscriptPageRequest(max_batches=10))
    assert [(batch.sequence, batch.items) for batch in transcript.batches] == [
        (1, [{"role": "user", "content": "hello"}])
    ]
    executions = await store.execution_page("session", ExecutionPageRequest(limit=10))
    assert executions.executions == []
    events = await store.event_page("session", EventPageRequest(limit=10))
    assert (events.latest_sequence, [event.sequence for event in events.events]) == (1, [1])
    summary = await store.session_summary("session")
    assert summary.sequence == checkpoint.sequence


def too_large_message() -> QueuedMessage:
    """A queued message whose encoded event exceeds twice the message size limit."""
    attachments = [
        SessionFileReference(file_id=f"file-{index}", name="n" * 2_100) for index in range(64)
    ]
    return queued(message="x" * MAX_MESSAGE_BYTES, attachments=attachments)


Change = Callable[[Checkpoint], tuple[Checkpoint, ExecutionRecord | None]]


def with_state(**changes: Any) -> Change:
    """The next checkpoint (sequence 2) with `changes`, saved without an execution record."""

    def change(base: Checkpoint) -> tuple[Checkpoint, ExecutionRecord | None]:
        return msgspec.structs.replace(base, **({"sequence": 2} | changes)), None

    return change


def with_record(checkpoint_changes: dict[str, Any] | None = None, **changes: Any) -> Change:
    """The next checkpoint (sequence 2) saved with an execution record carrying `changes`."""

    def change(base: Checkpoint) -> tuple[Checkpoint, ExecutionRecord | None]:
        nxt = msgspec.structs.replace(base, sequence=2, **(checkpoint_changes or {}))
        return nxt, record(**changes)

    return change


SAVE_REFUSALS = [
    pytest.param(with_state(version=16), "unsupported checkpoint version 16", id="version"),
    pytest.param(
        with_state(active_execution=active(submission_id=" ")),
        "active execution identifiers cannot be empty",
        id="active-submission-id",
    ),
    pytest.param(
        with_state(active_execution=active(turn_id="")),
        "active execution identifiers cannot be empty",
        id="active-turn-id",
    ),
    pytest.param(
        with_state(active_execution=active(started_at_ms=-1)),
        "active execution start time cannot be negative",
        id="active-start",
    ),
    pytest.param(
        with_state(active_execution=active(tool_calls=1, failed_tool_calls=2)),
        "active execution failed-tool count exceeds tool count",
        id="active-failed-tools",
    ),
    pytest.param(
        with_state(active_model_step=step()),
        "active model step has no active execution",
        id="step-without-execution",
    ),
    pytest.param(
        with_state(active_execution=active(), active_model_step=step(model_step_id="  ")),
        "active model-step identifier cannot be empty",
        id="step-id",
    ),
    pytest.param(
        with_state(active_execution=active(), active_model_step=step(started_at_ms=99)),
        "active model step predates its execution",
        id="step-predates-execution",
    ),
    pytest.param(
        with_state(pending_messages=[queued(id=f"m-{n}") for n in range(MAX_QUEUED_MESSAGES + 1)]),
        "queued messages exceed the durable item limit",
        id="pending-limit",
    ),
    pytest.param(
        with_state(pending_messages=[queued(id="m-1"), queued(id="m-2"), queued(id="m-1")]),
        "duplicate queued message `user/m-1`",
        id="pending-duplicate",
    ),
    pytest.param(
        with_state(pending_messages=[queued(owner=" ")]),
        "queued message owner is invalid",
        id="pending-owner-blank",
    ),
    pytest.param(
        with_state(pending_messages=[queued(owner="o" * 257)]),
        "queued message owner is invalid",
        id="pending-owner-long",
    ),
    pytest.param(
        with_state(pending_messages=[queued(id="")]),
        "queued message ID is invalid",
        id="pending-id",
    ),
    pytest.param(
        with_state(pending_messages=[queued(boundary=SteerBoundary(turn_id=" "))]),
        "queued message turn ID is invalid",
        id="pending-steer-turn-id",
    ),
    pytest.param(
        with_state(pending_messages=[too_large_message()]),
        "queued message is invalid",
        id="pending-too-large",
    ),
    pytest.param(
        with_record({"active_execution": active()}),
        "a terminal execution requires an idle checkpoint",
        id="execution-not-idle",
    ),
    pytest.param(
        with_record(session_id="another-session"),
        "execution record does not match its checkpoint",
        id="execution-other-session",
    ),
    pytest.param(
        with_record(submission_id=" "),
        "execution record identifiers cannot be empty",
        id="execution-submission-id",
    ),
    pytest.param(
        with_record(turn_id=""),
        "execution record identifiers cannot be empty",
        id="execution-turn-id",
    ),
    pytest.param(
        with_record(started_at_ms=-10, finished_at_ms=40, elapsed_ms=50),
        "execution record has invalid timestamps",
        id="execution-negative-start",
    ),
    pytest.param(
        with_record(started_at_ms=100, finished_at_ms=90, elapsed_ms=0),
        "execution record has invalid timestamps",
        id="execution-finished-before-start",
    ),
    pytest.param(
        with_record(elapsed_ms=49),
        "execution elapsed time does not match its timestamps",
        id="execution-elapsed",
    ),
    pytest.param(
        with_record(tool_calls=1, failed_tool_calls=2),
        "execution failed-tool count exceeds tool count",
        id="execution-failed-tools",
    ),
    pytest.param(
        with_state(sequence=I64_OVERFLOW),
        "checkpoint sequence exceeds SQLite INTEGER",
        id="sequence-overflow",
    ),
]


@pytest.mark.parametrize(("change", "message"), SAVE_REFUSALS)
async def test_save_refuses_an_invalid_checkpoint_and_changes_nothing(store, change, message):
    """save refuses a checkpoint or record that breaks a rule, with the seed's message."""
    base = await seeded(store)
    checkpoint, execution = change(base)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.save(checkpoint, [{"role": "assistant"}], execution)
    assert str(caught.value) == message
    assert isinstance(caught.value, turnstore.TurnstoreError)
    await assert_unchanged(store, base)

    with pytest.raises(turnstore.InvalidInput) as batched:
        await store.save_with_events(checkpoint, [{"role": "assistant"}], execution, [warning()])
    assert str(batched.value) == message
    await assert_unchanged(store, base)


@pytest.mark.parametrize("sequence", [1, 0], ids=["equal", "lower"])
async def test_save_refuses_a_sequence_that_does_not_advance(store, sequence):
    """save refuses a checkpoint whose sequence is not above the stored one, changing nothing."""
    base = await seeded(store)
    stale = msgspec.structs.replace(base, sequence=sequence, model_route="stale")
    with pytest.raises(turnstore.SequenceConflict) as caught:
        await store.save_with_events(stale, [{"role": "assistant"}], None, [warning()])
    assert str(caught.value) == "checkpoint sequence did not advance"
    assert isinstance(caught.value, turnstore.TurnstoreError)
    await assert_unchanged(store, base)


async def test_a_refused_first_save_creates_no_session(store):
    """A refused save of a new session leaves no session behind."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.version = 16
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.save(checkpoint, [{"role": "user"}])
    assert str(caught.value) == "unsupported checkpoint version 16"
    assert await store.load("session") is None
    assert await store.session_summary("session") is None
    page = await store.list_sessions_page(SessionPageRequest(limit=10))
    assert page.sessions == []


async def test_save_with_events_refuses_a_negative_event_timestamp(store):
    """save_with_events refuses an event with a negative timestamp, changing nothing."""
    base = await seeded(store)
    nxt = msgspec.structs.replace(base, sequence=2)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.save_with_events(nxt, [{"role": "assistant"}], None, [warning(-1)])
    assert str(caught.value) == "event journal timestamp cannot be negative"
    await assert_unchanged(store, base)


# --- fork -------------------------------------------------------------------------------------


async def assert_no_child(store, parent: Checkpoint) -> None:
    """The parent is untouched and no child session exists."""
    assert await store.load("parent") == parent
    assert await store.load("child") is None
    assert await store.session_summary("child") is None
    page = await store.list_sessions_page(SessionPageRequest(limit=10))
    assert [session.session_id for session in page.sessions] == ["parent"]


async def saved_parent(store) -> Checkpoint:
    """A parent session at sequence 1."""
    parent = Checkpoint.empty("parent")
    parent.sequence = 1
    await store.save(parent, [{"role": "user", "content": "hello"}])
    return parent


async def test_fork_refuses_to_fork_a_session_into_itself(store):
    """A session cannot fork itself."""
    parent = await saved_parent(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", 0, Checkpoint.empty("parent"))
    assert str(caught.value) == "a session cannot fork itself"
    assert await store.load("parent") == parent


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"sequence": 1}, id="sequence-one"),
        pytest.param({"active_execution": active()}, id="active-execution"),
        pytest.param({"pending_approval": approval()}, id="pending-approval"),
        pytest.param({"pending_messages": [queued()]}, id="pending-messages"),
    ],
)
async def test_fork_refuses_an_unclean_child_checkpoint(store, changes):
    """A fork must begin at a clean sequence-zero checkpoint."""
    parent = await saved_parent(store)
    child = msgspec.structs.replace(Checkpoint.empty("child"), **changes)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", 1, child)
    assert str(caught.value) == "a fork must begin at a clean sequence-zero checkpoint"
    await assert_no_child(store, parent)


async def test_fork_refuses_a_missing_parent(store):
    """A fork of an absent parent is refused and creates nothing."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.fork("parent", 0, Checkpoint.empty("child"))
    assert str(caught.value) == "fork parent does not exist"
    assert await store.load("child") is None
    assert (await store.list_sessions_page(SessionPageRequest(limit=10))).sessions == []


async def test_fork_refuses_a_fork_point_newer_than_the_parent(store):
    """A fork point newer than the parent checkpoint is refused."""
    parent = await saved_parent(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", 2, Checkpoint.empty("child"))
    assert str(caught.value) == "fork point is newer than the parent checkpoint"
    await assert_no_child(store, parent)


async def test_fork_refuses_an_existing_child(store):
    """A fork into an existing session id is refused and leaves that session as it was."""
    parent = await saved_parent(store)
    existing = Checkpoint.empty("child")
    existing.sequence = 3
    existing.context = [{"role": "user", "content": "mine"}]
    await store.save(existing, [{"role": "user", "content": "mine"}])
    replacement = Checkpoint.empty("child")
    replacement.context = [{"role": "user", "content": "theirs"}]

    with pytest.raises(turnstore.errors.SessionExists) as caught:
        await store.fork("parent", 1, replacement)
    assert str(caught.value) == "fork child session already exists"
    assert isinstance(caught.value, turnstore.TurnstoreError)
    assert await store.load("child") == existing
    summary = await store.session_summary("child")
    assert (summary.parent_session_id, summary.parent_sequence) == (None, None)
    page = await store.transcript_page("child", TranscriptPageRequest(max_batches=10))
    assert [batch.sequence for batch in page.batches] == [3]
    assert await store.load("parent") == parent


async def test_fork_refuses_a_parent_sequence_beyond_sqlite_integer(store):
    """A parent sequence above the signed 64-bit range is refused."""
    parent = await saved_parent(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", I64_OVERFLOW, Checkpoint.empty("child"))
    assert str(caught.value) == "parent sequence exceeds SQLite INTEGER"
    await assert_no_child(store, parent)


async def test_fork_refuses_an_invalid_child_checkpoint(store):
    """A fork validates the child checkpoint as save does."""
    parent = await saved_parent(store)
    child = Checkpoint.empty("child")
    child.version = 16
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", 1, child)
    assert str(caught.value) == "unsupported checkpoint version 16"
    await assert_no_child(store, parent)


# --- the event journal ----------------------------------------------------------------------


async def test_event_page_refuses_an_absent_session(store):
    """event_page of an absent session is refused as not found."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.event_page("missing", EventPageRequest(before_sequence=None, limit=10))
    assert str(caught.value) == "event journal session does not exist"
    assert isinstance(caught.value, turnstore.TurnstoreError)


async def test_event_turn_page_refuses_an_absent_session(store):
    """event_turn_page of an absent session is refused as not found."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.event_turn_page("missing", None)
    assert str(caught.value) == "event journal session does not exist"


async def test_append_event_refuses_an_absent_session(store):
    """append_event to an absent session is refused and creates no session."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.append_event("missing", 1, Event(msg=WarningEvent(message="lost")))
    assert str(caught.value) == "event journal session does not exist"
    assert await store.load("missing") is None
    assert await store.session_summary("missing") is None


async def test_append_event_refuses_a_negative_timestamp(store):
    """append_event refuses a negative timestamp without consuming a sequence."""
    base = await seeded(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.append_event("session", -1, Event(msg=WarningEvent(message="lost")))
    assert str(caught.value) == "event journal timestamp cannot be negative"
    await assert_unchanged(store, base)
    appended = await store.append_event("session", 2, Event(msg=WarningEvent(message="next")))
    assert appended.sequence == 2


# --- page bounds ------------------------------------------------------------------------------

PAGE_REFUSALS = [
    pytest.param(
        lambda store: store.event_page("session", EventPageRequest(limit=0)),
        "event journal page limit must be positive",
        id="event-limit-zero",
    ),
    pytest.param(
        lambda store: store.event_page("session", EventPageRequest(limit=LARGEST_I64)),
        "event journal page limit is too large",
        id="event-limit-large",
    ),
    pytest.param(
        lambda store: store.event_page(
            "session", EventPageRequest(limit=10, before_sequence=I64_OVERFLOW)
        ),
        "event journal cursor exceeds SQLite INTEGER",
        id="event-cursor",
    ),
    pytest.param(
        lambda store: store.list_sessions_page(SessionPageRequest(limit=0)),
        "session page limit must be positive",
        id="session-limit-zero",
    ),
    pytest.param(
        lambda store: store.list_sessions_page(SessionPageRequest(limit=LARGEST_I64)),
        "session page limit is too large",
        id="session-limit-large",
    ),
    pytest.param(
        lambda store: store.list_sessions_page(
            SessionPageRequest(
                limit=2,
                cursor=SessionCursor(updated_at=0, sequence=I64_OVERFLOW, session_id="session"),
            )
        ),
        "session cursor sequence exceeds SQLite INTEGER",
        id="session-cursor",
    ),
    pytest.param(
        lambda store: store.transcript_page("session", TranscriptPageRequest(max_batches=0)),
        "transcript page limit must be positive",
        id="transcript-limit-zero",
    ),
    pytest.param(
        lambda store: store.transcript_page(
            "session", TranscriptPageRequest(max_batches=LARGEST_I64)
        ),
        "transcript page limit is too large",
        id="transcript-limit-large",
    ),
    pytest.param(
        lambda store: store.transcript_page(
            "session", TranscriptPageRequest(max_batches=2, before_sequence=I64_OVERFLOW)
        ),
        "transcript cursor exceeds SQLite INTEGER",
        id="transcript-cursor",
    ),
    pytest.param(
        lambda store: store.execution_page("session", ExecutionPageRequest(limit=0)),
        "execution page limit must be positive",
        id="execution-limit-zero",
    ),
    pytest.param(
        lambda store: store.execution_page("session", ExecutionPageRequest(limit=LARGEST_I64)),
        "execution page limit is too large",
        id="execution-limit-large",
    ),
    pytest.param(
        lambda store: store.execution_page(
            "session", ExecutionPageRequest(limit=2, before_sequence=I64_OVERFLOW)
        ),
        "execution cursor exceeds SQLite INTEGER",
        id="execution-cursor",
    ),
    pytest.param(
        lambda store: store.recent_executions(0),
        "recent execution limit must be positive",
        id="recent-limit-zero",
    ),
    pytest.param(
        lambda store: store.recent_executions(I64_OVERFLOW),
        "recent execution limit is too large",
        id="recent-limit-large",
    ),
]


@pytest.mark.parametrize(("call", "message"), PAGE_REFUSALS)
async def test_page_requests_refuse_out_of_range_bounds(store, call, message):
    """Page limits must be positive and fit SQLite; cursors must fit SQLite INTEGER."""
    await seeded(store)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await call(store)
    assert str(caught.value) == message
    assert isinstance(caught.value, turnstore.TurnstoreError)


@pytest.mark.parametrize(
    "request_",
    [
        SessionPageRequest(limit=1, owner_id=5),  # type: ignore[arg-type]
        SessionPageRequest(
            limit=1, cursor=SessionCursor(updated_at=2**70, sequence=0, session_id="a")
        ),
        SessionPageRequest(
            limit=1, cursor=SessionCursor(updated_at=True, sequence=0, session_id="a")
        ),
        SessionPageRequest(limit=1, cursor=SessionCursor(updated_at=1, sequence=0, session_id=3)),  # type: ignore[arg-type]
    ],
    ids=["owner-not-text", "updated-at-too-large", "updated-at-bool", "session-id-not-text"],
)
async def test_a_malformed_catalog_request_is_refused_with_a_typed_error(store, request_):
    """Catalog requests with a wrongly typed owner or cursor raise InvalidInput."""
    await store.save(Checkpoint.empty("a"))
    with pytest.raises(InvalidInput):
        await store.list_sessions_page(request_)


async def test_recent_executions_accepts_the_largest_sqlite_limit(store):
    """recent_executions takes any limit that fits SQLite INTEGER (it asks for no extra row)."""
    base = await seeded(store)
    nxt = msgspec.structs.replace(base, sequence=2)
    finished = record(tool_calls=0, failed_tool_calls=0)
    assert nxt.execution_stats.checked_record(finished)
    await store.save(nxt, [], finished)
    assert await store.recent_executions(LARGEST_I64) == [finished]
