"""validate_checkpoint, validate_execution(_record) and the other rules of rules/validation.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from record_samples import (
    I64_MAX,
    U64_MAX,
    active_execution,
    execution_record,
    full_checkpoint,
    queued_message,
)

from turnstore import (
    Checkpoint,
    ConfigError,
    EventPageRequest,
    InvalidInput,
    TurnstoreError,
)
from turnstore.errors import (
    CheckpointError,
    InvalidMessage,
    RecordDecodeError,
)
from turnstore.events import (
    MessageAuthor,
    SessionFileReference,
    TokenUsage,
    ToolCall,
)
from turnstore.records import (
    MAX_QUEUED_MESSAGES,
    ActiveModelStep,
    QueueBoundary,
    QueuedMessage,
    TurnBoundary,
)
from turnstore.rules.messages import validate_message_content, validate_queued_message
from turnstore.rules.pages import journal_query, page_limit
from turnstore.rules.validation import (
    validate_checkpoint,
    validate_execution,
    validate_execution_record,
    validate_session_id,
)
from turnstore.rules.values import revalidated, storage_integer


def _raises(kind: type[Exception], message: str, call: Any, *args: Any) -> None:
    """Assert `call(*args)` raises exactly `kind` with exactly `message`."""
    with pytest.raises(kind) as caught:
        call(*args)
    assert type(caught.value) is kind
    assert str(caught.value) == message


def _with_active(**changes: Any) -> Checkpoint:
    checkpoint = Checkpoint.empty("session-1")
    checkpoint.active_execution = active_execution(**changes)
    return checkpoint


# --- validate_checkpoint --------------------------------------------------------------------


def test_valid_checkpoints_pass() -> None:
    """An empty checkpoint and the fully filled sample both validate."""
    assert validate_checkpoint(Checkpoint.empty("s")) is None
    assert validate_checkpoint(full_checkpoint()) is None


@pytest.mark.parametrize("version", [0, 13, 16, 18])
def test_checkpoint_version_must_be_current(version: int) -> None:
    """Only CHECKPOINT_VERSION (17) is accepted; others name the version in the error."""
    checkpoint = Checkpoint.empty("s")
    checkpoint.version = version
    _raises(
        InvalidInput, f"unsupported checkpoint version {version}", validate_checkpoint, checkpoint
    )


def test_version_is_checked_first() -> None:
    """A wrong version is reported before any other problem."""
    checkpoint = Checkpoint.empty("")
    checkpoint.version = 16
    checkpoint.active_model_step = ActiveModelStep(model_step_id="", step_index=0, started_at_ms=0)
    _raises(InvalidInput, "unsupported checkpoint version 16", validate_checkpoint, checkpoint)


@pytest.mark.parametrize("session_id", ["", "   ", "\t\n"])
def test_checkpoint_session_id_cannot_be_blank(session_id: str) -> None:
    """A blank session id is refused."""
    _raises(
        InvalidInput,
        "session ID cannot be empty",
        validate_checkpoint,
        Checkpoint.empty(session_id),
    )


def test_checkpoint_session_id_length_is_bounded_in_bytes() -> None:
    """A session id of 1,024 UTF-8 bytes is accepted; 1,025 bytes is too long."""
    validate_checkpoint(Checkpoint.empty("s" * 1024))
    validate_checkpoint(Checkpoint.empty("é" * 512))
    _raises(
        InvalidInput, "session ID is too long", validate_checkpoint, Checkpoint.empty("s" * 1025)
    )
    _raises(
        InvalidInput,
        "session ID is too long",
        validate_checkpoint,
        Checkpoint.empty("é" * 512 + "x"),
    )


@pytest.mark.parametrize("value", [None, 5, b"bytes"])
def test_validate_session_id_refuses_non_strings(value: Any) -> None:
    """validate_session_id refuses anything but a string, saying so."""
    _raises(InvalidInput, "session ID must be a string", validate_session_id, value)


def test_validate_session_id_returns_the_id() -> None:
    """validate_session_id returns a usable id unchanged."""
    assert validate_session_id("abc") == "abc"


@pytest.mark.parametrize(
    "changes", [{"submission_id": ""}, {"submission_id": "  "}, {"turn_id": ""}, {"turn_id": " "}]
)
def test_active_execution_identifiers_cannot_be_blank(changes: dict[str, str]) -> None:
    """A blank submission or turn id of the active execution is refused."""
    _raises(
        InvalidInput,
        "active execution identifiers cannot be empty",
        validate_checkpoint,
        _with_active(**changes),
    )


def test_active_execution_start_cannot_be_negative() -> None:
    """The active execution's start time must be >= 0; 0 is fine."""
    validate_checkpoint(_with_active(started_at_ms=0))
    _raises(
        InvalidInput,
        "active execution start time cannot be negative",
        validate_checkpoint,
        _with_active(started_at_ms=-1),
    )


def test_active_execution_failed_tools_cannot_exceed_tools() -> None:
    """failed_tool_calls may equal but not exceed tool_calls."""
    validate_checkpoint(_with_active(tool_calls=2, failed_tool_calls=2))
    _raises(
        InvalidInput,
        "active execution failed-tool count exceeds tool count",
        validate_checkpoint,
        _with_active(tool_calls=2, failed_tool_calls=3),
    )


def test_active_model_step_needs_an_active_execution() -> None:
    """A model step without an active execution is refused."""
    checkpoint = Checkpoint.empty("s")
    checkpoint.active_model_step = ActiveModelStep(model_step_id="m", step_index=0, started_at_ms=5)
    _raises(
        InvalidInput, "active model step has no active execution", validate_checkpoint, checkpoint
    )


@pytest.mark.parametrize("step_id", ["", "  "])
def test_active_model_step_identifier_cannot_be_blank(step_id: str) -> None:
    """A blank model-step id is refused."""
    checkpoint = _with_active()
    checkpoint.active_model_step = ActiveModelStep(
        model_step_id=step_id, step_index=0, started_at_ms=2_000
    )
    _raises(
        InvalidInput,
        "active model-step identifier cannot be empty",
        validate_checkpoint,
        checkpoint,
    )


def test_active_model_step_cannot_predate_its_execution() -> None:
    """A model step may start with its execution but not before it."""
    checkpoint = _with_active(started_at_ms=1_000)
    checkpoint.active_model_step = ActiveModelStep(
        model_step_id="m", step_index=0, started_at_ms=1_000
    )
    validate_checkpoint(checkpoint)
    checkpoint.active_model_step.started_at_ms = 999
    _raises(
        InvalidInput, "active model step predates its execution", validate_checkpoint, checkpoint
    )


def test_pending_messages_are_limited() -> None:
    """1,024 queued messages are accepted; 1,025 exceed the durable item limit."""
    template = queued_message()
    checkpoint = Checkpoint.empty("s")
    checkpoint.pending_messages = [
        QueuedMessage(
            owner="owner",
            id=f"m-{index}",
            boundary=QueueBoundary(),
            author=template.author,
            message="x",
        )
        for index in range(MAX_QUEUED_MESSAGES)
    ]
    validate_checkpoint(checkpoint)
    checkpoint.pending_messages.append(
        QueuedMessage(
            owner="owner",
            id="one-more",
            boundary=QueueBoundary(),
            author=MessageAuthor(),
            message="x",
        )
    )
    _raises(
        InvalidInput,
        "queued messages exceed the durable item limit",
        validate_checkpoint,
        checkpoint,
    )


def test_pending_messages_must_be_unique_per_owner_and_id() -> None:
    """Two queued messages with the same owner and id are refused; same id, other owner is fine."""
    checkpoint = Checkpoint.empty("s")
    checkpoint.pending_messages = [
        queued_message("alice", "m-1"),
        queued_message("bob", "m-1"),
        queued_message("alice", "m-2"),
    ]
    validate_checkpoint(checkpoint)
    checkpoint.pending_messages.append(queued_message("alice", "m-1", QueueBoundary()))
    _raises(InvalidInput, "duplicate queued message `alice/m-1`", validate_checkpoint, checkpoint)


def test_pending_messages_are_validated() -> None:
    """An invalid queued message makes the checkpoint invalid with the message's InvalidMessage."""
    checkpoint = Checkpoint.empty("s")
    checkpoint.pending_messages = [
        QueuedMessage(
            owner=" ", id="m", boundary=TurnBoundary(), author=MessageAuthor(), message="x"
        )
    ]
    _raises(InvalidMessage, "queued message owner is invalid", validate_checkpoint, checkpoint)


def test_validate_checkpoint_does_not_change_the_checkpoint() -> None:
    """Validation reads the checkpoint only."""
    checkpoint = full_checkpoint()
    before = copy.deepcopy(checkpoint)
    validate_checkpoint(checkpoint)
    assert checkpoint == before


def test_validation_errors_are_checkpoint_errors() -> None:
    """InvalidInput is the seed's Error::Checkpoint: a CheckpointError and a ValueError."""
    assert issubclass(InvalidInput, CheckpointError)
    assert issubclass(InvalidInput, ValueError)
    assert issubclass(InvalidMessage, InvalidInput)


def test_configuration_errors_are_not_checkpoint_errors() -> None:
    """A bad store URL is a ConfigError: a TurnstoreError and a ValueError, not a rule refusal."""
    assert issubclass(ConfigError, TurnstoreError)
    assert issubclass(ConfigError, ValueError)
    assert not issubclass(ConfigError, CheckpointError)


# --- validate_execution / validate_execution_record -----------------------------------------


def test_valid_execution_passes() -> None:
    """A consistent record for an idle checkpoint of the same session validates."""
    assert validate_execution(Checkpoint.empty("session-1"), execution_record()) is None


def test_execution_requires_an_idle_checkpoint() -> None:
    """A terminal execution cannot be journaled with a checkpoint that still runs a turn."""
    _raises(
        InvalidInput,
        "a terminal execution requires an idle checkpoint",
        validate_execution,
        _with_active(),
        execution_record(),
    )


def test_execution_must_belong_to_its_checkpoint() -> None:
    """The record's session id must be the checkpoint's."""
    _raises(
        InvalidInput,
        "execution record does not match its checkpoint",
        validate_execution,
        Checkpoint.empty("other"),
        execution_record(),
    )


def test_validate_execution_checks_the_record_itself() -> None:
    """validate_execution also applies validate_execution_record."""
    _raises(
        InvalidInput,
        "execution failed-tool count exceeds tool count",
        validate_execution,
        Checkpoint.empty("session-1"),
        execution_record(tool_calls=0, failed_tool_calls=1),
    )


def test_finish_execution_records_validate() -> None:
    """A record produced by finish_execution passes validate_execution with the idle checkpoint."""
    checkpoint = _with_active()
    record = checkpoint.finish_execution("completed", 900)
    validate_execution(checkpoint, record)


INVALID_RECORDS: list[tuple[str, dict[str, Any], str]] = [
    ("blank-session", {"session_id": " "}, "execution record identifiers cannot be empty"),
    ("blank-submission", {"submission_id": ""}, "execution record identifiers cannot be empty"),
    ("blank-turn", {"turn_id": "\n"}, "execution record identifiers cannot be empty"),
    (
        "negative-start",
        {"started_at_ms": -1, "finished_at_ms": 0, "elapsed_ms": 1},
        "execution record has invalid timestamps",
    ),
    (
        "finish-before-start",
        {"started_at_ms": 100, "finished_at_ms": 99, "elapsed_ms": 0},
        "execution record has invalid timestamps",
    ),
    (
        "elapsed-beyond-u64",
        {"started_at_ms": 0, "finished_at_ms": 2**64, "elapsed_ms": 0},
        "execution elapsed time is unsupported",
    ),
    (
        "elapsed-mismatch",
        {"started_at_ms": 100, "finished_at_ms": 125, "elapsed_ms": 24},
        "execution elapsed time does not match its timestamps",
    ),
    (
        "failed-tools-exceed-tools",
        {"tool_calls": 1, "failed_tool_calls": 2},
        "execution failed-tool count exceeds tool count",
    ),
]


@pytest.mark.parametrize(
    ("changes", "message"),
    [(changes, message) for _, changes, message in INVALID_RECORDS],
    ids=[name for name, _, _ in INVALID_RECORDS],
)
def test_execution_record_rules(changes: dict[str, Any], message: str) -> None:
    """validate_execution_record refuses blank ids, bad timestamps, elapsed mismatch, bad counts."""
    _raises(InvalidInput, message, validate_execution_record, execution_record(**changes))


def test_execution_record_limits_are_inclusive() -> None:
    """A zero-length turn at time 0, one spanning the i64 range, and failed == tools validate."""
    validate_execution_record(execution_record(started_at_ms=0, finished_at_ms=0, elapsed_ms=0))
    validate_execution_record(
        execution_record(started_at_ms=0, finished_at_ms=I64_MAX, elapsed_ms=I64_MAX)
    )
    validate_execution_record(execution_record(tool_calls=4, failed_tool_calls=4))


# --- blank means Rust's trim ----------------------------------------------------------------


SEPARATORS = "\x1c\x1d\x1e\x1f"
"""U+001C..U+001F: whitespace to Python's str.isspace, not Unicode White_Space (Rust's trim)."""


@pytest.mark.parametrize(
    "check",
    ["session-id", "queued-owner", "queued-id", "execution-record"],
)
def test_blank_means_unicode_white_space_as_rusts_trim(check: str) -> None:
    """A value of U+001C..U+001F is not blank: the seed's trim() strips only White_Space."""
    if check == "session-id":
        validate_checkpoint(Checkpoint.empty(SEPARATORS))
    elif check == "queued-owner":
        validate_queued_message(queued_message(owner=SEPARATORS))
    elif check == "queued-id":
        validate_queued_message(queued_message(id=SEPARATORS))
    else:
        validate_execution_record(execution_record(turn_id=SEPARATORS))


# --- message content --------------------------------------------------------------------------


def test_validate_message_content_messages() -> None:
    """Message content is refused as invalid author, too large, empty, too many or bad files."""
    user = MessageAuthor()
    file = SessionFileReference(file_id="f", name="n")
    validate_message_content(user, "hi", [])
    validate_message_content(user, "", [file])
    _raises(
        InvalidMessage,
        "message author is invalid",
        validate_message_content,
        MessageAuthor(role="bot"),
        "hi",
        [],
    )  # type: ignore[arg-type]
    _raises(
        InvalidMessage,
        "message exceeds the size limit",
        validate_message_content,
        user,
        "x" * (128 * 1024 + 1),
        [],
    )
    _raises(InvalidMessage, "message is empty", validate_message_content, user, " ", [])
    _raises(
        InvalidMessage,
        "message has too many attachments",
        validate_message_content,
        user,
        "hi",
        [file] * 65,
    )
    _raises(
        InvalidMessage,
        "message attachment is invalid",
        validate_message_content,
        user,
        "hi",
        [SessionFileReference(file_id="f", name=" ")],
    )


def test_validate_queued_message_refuses_an_empty_message() -> None:
    """validate_queued_message applies the message content rules to a queued message."""
    queued = QueuedMessage(
        owner="o", id="i", boundary=TurnBoundary(), author=MessageAuthor(), message=""
    )
    _raises(InvalidMessage, "message is empty", validate_queued_message, queued)


# --- revalidated, storage integers, page bounds -----------------------------------------------


def test_revalidated_returns_a_checked_copy_and_its_json() -> None:
    """revalidated decodes the record's own JSON back, equal but not the same object."""
    checkpoint = full_checkpoint()
    checked, data = revalidated(checkpoint)
    assert checked == checkpoint
    assert checked is not checkpoint
    assert data == checkpoint.to_json()


def test_revalidated_refuses_out_of_range_values() -> None:
    """A constructed record with a negative u64 is refused by the decode with RecordDecodeError."""
    with pytest.raises(RecordDecodeError, match="TokenUsage"):
        revalidated(TokenUsage(input_tokens=-1))


def test_revalidated_refuses_wrong_types() -> None:
    """A constructed record with a wrong field type is refused."""
    with pytest.raises(RecordDecodeError):
        revalidated(ToolCall(call_id="c", name=5, arguments="{}"))  # type: ignore[arg-type]


def test_revalidated_refuses_unencodable_values() -> None:
    """A record holding a value that is not JSON is refused, naming the value's path."""
    checkpoint = Checkpoint.empty("s")
    checkpoint.metadata["bad"] = object()
    with pytest.raises(InvalidInput, match=r"^Checkpoint: \$\.metadata\.bad is of type object"):
        revalidated(checkpoint)


@pytest.mark.parametrize("value", [0, 1, I64_MAX])
def test_storage_integer_accepts_the_signed_64_bit_range(value: int) -> None:
    """storage_integer returns non-negative integers up to 2**63-1."""
    assert storage_integer(value, "bad") == value


@pytest.mark.parametrize("value", [-1, I64_MAX + 1, U64_MAX, True, 1.0, "1", None])
def test_storage_integer_refuses_the_rest(value: Any) -> None:
    """storage_integer refuses negatives, values above 2**63-1, bools and non-integers."""
    _raises(
        InvalidInput,
        "cursor exceeds SQLite INTEGER",
        storage_integer,
        value,
        "cursor exceeds SQLite INTEGER",
    )


@pytest.mark.parametrize(("limit", "rows"), [(1, 2), (100, 101), (I64_MAX - 1, I64_MAX)])
def test_page_queries_ask_for_one_extra_row(limit: int, rows: int) -> None:
    """A page query reads limit + 1 rows so a page can tell whether another follows."""
    assert page_limit(limit, "event journal page") == limit
    query = journal_query("s", EventPageRequest(limit=limit), EventPageRequest)
    assert (query.limit, query.fetch) == (limit, rows)


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, None])
def test_page_limit_must_be_positive(limit: Any) -> None:
    """A zero, negative or non-integer limit is refused."""
    _raises(
        InvalidInput,
        "event journal page limit must be positive",
        page_limit,
        limit,
        "event journal page",
    )


@pytest.mark.parametrize("limit", [I64_MAX, U64_MAX])
def test_page_limit_must_fit_after_adding_one(limit: int) -> None:
    """A limit whose row count (limit + 1) exceeds 2**63-1 is too large."""
    _raises(InvalidInput, "transcript limit is too large", page_limit, limit, "transcript")


def test_page_cursors_are_optional_storage_integers() -> None:
    """A page cursor may be None or an in-range integer; the rest is refused with the message."""

    def before(cursor: Any) -> int | None:
        request = EventPageRequest(before_sequence=cursor, limit=1)
        return journal_query("s", request, EventPageRequest).before

    assert before(None) is None
    assert before(7) == 7
    message = "event journal cursor exceeds SQLite INTEGER"
    _raises(InvalidInput, message, before, -7)
    _raises(InvalidInput, message, before, 2**63)
