"""Preparing a save or a fork: validate and encode everything before any I/O; then what a
save, a fork or a context edit refuses of the session row it read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import msgspec

from turnstore.errors import (
    InvalidInput,
    SequenceConflict,
    SessionExists,
    SessionNotFound,
    StateConflict,
    StorageError,
)
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import Checkpoint, ExecutionRecord, TimestampedEvent
from turnstore.records.context import CLEAN, Context, ContextMark
from turnstore.records.kinds.items import KIND as ITEMS
from turnstore.records.protocol import SessionContext
from turnstore.rules.context import digest
from turnstore.rules.journal import PreparedEvent, prepare_events
from turnstore.rules.messages import user_text
from turnstore.rules.search import items_kind
from turnstore.rules.validation import (
    display_text,
    identifier,
    is_clean_start,
    optional_identifier,
    validate_checkpoint,
    validate_execution,
    validate_session_id,
)
from turnstore.rules.values import (
    canonical,
    check_value,
    checked,
    collection,
    encoded_items,
    encoded_text,
    integer,
    is_blank,
    json_value,
    require,
    revalidated,
    storage_integer,
)

T = TypeVar("T")

FIRST_USER_SCAN = 64
"""Items of a save's transcript delta, then of its context, searched for a first user message."""
FIRST_USER_CHARS = 1_024
"""Longest first user message the catalog keeps when it is derived from the items."""


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
    context_mark: ContextMark | None
    context_edited: int
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


def first_user_text(items: Sequence[Any]) -> str | None:
    """The first non-blank user message text among the first items, cut to a catalog line."""
    for item in items[:FIRST_USER_SCAN]:
        text = user_text(item)
        if text is not None and not is_blank(text):
            return text[:FIRST_USER_CHARS]
    return None


def catalog_first_user_message(
    given: str | None, delta: Sequence[Any], context: Sequence[Any]
) -> str | None:
    """What the catalog shows as a session's first user message.

    The caller's `first_user_message` when it is not blank; otherwise the first user message
    of the transcript delta, then of the context. The session keeps the first one it gets.
    A NUL in it shows as U+FFFD (`display_text`); the checkpoint keeps the exact text.
    """
    if given is not None and not is_blank(given):
        return display_text(given)
    found = first_user_text(delta) or first_user_text(context)
    return None if found is None else display_text(found)


def catalog_line(text: str) -> str | None:
    """A first user message as the catalog keeps it: None when blank, else cut and NUL-safe."""
    return None if is_blank(text) else display_text(text[:FIRST_USER_CHARS])


def prepare_save(
    checkpoint: object,
    transcript_delta: Iterable[Any],
    execution: ExecutionRecord | None,
    events: Iterable[TimestampedEvent],
) -> PreparedSave:
    """Validate and encode one save before any I/O (all but the context delta)."""
    given = require(checkpoint, Checkpoint, "checkpoint")
    held = given.context if isinstance(given.context, Context) else None
    # A list copy, not iteration: a held context's unreached items stay unfrozen.
    context = list.copy(require(given.context, list, "checkpoint context"))
    if held is None:
        # Before any I/O, so a bad item is refused as such and not as a conflict; a held
        # context checked each item as it took it.
        for index, item in enumerate(context):
            check_value(item, f"checkpoint context[{index}]", record=False)
    state, state_json = revalidated(msgspec.structs.replace(given, context=[]))
    validate_checkpoint(state)
    execution_json = None
    if execution is not None:
        record, record_json = checked(execution, ExecutionRecord, "execution")
        validate_execution(state, record)
        execution_json = (record.started_at_ms, record_json.decode())
    storage_integer(state.sequence, "checkpoint sequence exceeds SQLite INTEGER")
    storage_integer(state.context_epoch, "checkpoint context epoch exceeds SQLite INTEGER")
    delta = collection(transcript_delta, "transcript_delta", ordered=True)
    prepared_events = prepare_events(collection(events, "events", ordered=True))
    return PreparedSave(
        session_id=state.session_id,
        sequence=state.sequence,
        state_json=state_json.decode(),
        context_epoch=state.context_epoch,
        context=context,
        context_mark=None if held is None else held.mark,
        context_edited=CLEAN if held is None else held.edited,
        session_context_json=state.session_context.to_json().decode(),
        owner_id=state.session_context.owner_id,
        execution_stats_json=state.execution_stats.to_json().decode(),
        catalog_visible=state.catalog_visible,
        first_user_message=catalog_first_user_message(state.first_user_message, delta, context),
        transcript_json=encoded_items(delta, "transcript delta").decode() if delta else None,
        execution=execution_json,
        events=prepared_events,
    )


def prepare_fork(
    parent_session_id: object, parent_sequence: object, checkpoint: object
) -> PreparedFork:
    """Validate a fork: a distinct parent, a clean sequence-zero child, a storable sequence."""
    child = require(checkpoint, Checkpoint, "checkpoint")
    parent = validate_session_id(parent_session_id)
    if parent == child.session_id:
        raise InvalidInput("a session cannot fork itself")
    if not is_clean_start(child):
        raise InvalidInput("a fork must begin at a clean sequence-zero checkpoint")
    sequence = storage_integer(parent_sequence, "parent sequence exceeds SQLite INTEGER")
    # The child's starting context is its first transcript batch, so its history pages
    # show what it began with.
    return PreparedFork(parent, sequence, prepare_save(child, child.context, None, ()))


@dataclass(frozen=True, slots=True)
class PreparedAppend:
    """A validated append of context items, encoded before any I/O."""

    session_id: str
    owner_id: str | None
    items: list[Any]
    items_json: str | None
    tail_digest: bytes | None
    first_user_message: str | None
    expected_sequence: int | None
    state: list[tuple[str, str, str]]
    """Middleware state values written in the same commit: (scope, key, value JSON)."""
    kind: str = ITEMS.name
    """The kind of session the append creates if the session is missing."""
    expected_state: list[StateExpectation] = dataclasses.field(default_factory=list)
    """State values the session's lock must find before the append writes anything."""

    def creation(self) -> PreparedSave:
        """The save that creates the session when it does not exist yet.

        Sequence 1, owned by `owner_id`, the items as its context and first transcript batch.
        Built only when needed: every part of it was validated with the append.
        """
        empty = Checkpoint(
            session_id=self.session_id,
            sequence=1,
            session_context=SessionContext(owner_id=self.owner_id),
        )
        return dataclasses.replace(
            prepare_save(empty, (), None, ()),
            context=self.items,
            transcript_json=self.items_json if self.items else None,
            first_user_message=self.first_user_message,
        )


def prepare_append(
    session_id: object,
    items: object,
    owner_id: object,
    expected_sequence: object = None,
    state: object = (),
    kind: object = ITEMS.name,
    expected_state: object = (),
) -> PreparedAppend:
    """Validate an append: a session id, an ordered list of values, an owner or None, the
    sequence the session must be at (None: any; 0: it must not exist yet), state values, and
    the state values it expects (`state_expectations`).

    The items may be empty only when the append creates the session (`expected_sequence`
    0) or writes state.
    """
    session_id = validate_session_id(session_id)
    appended = collection(items, "items", ordered=True)
    expected = None
    if expected_sequence is not None:
        expected = integer(expected_sequence, "expected_sequence must be None or an integer >= 0")
    writes = [_state_write(entry) for entry in collection(state, "state", ordered=True)]
    if not appended and expected != 0 and not writes:
        raise InvalidInput(
            "items cannot be empty: an append writes at least one item, unless it creates"
            " the session (expected_sequence=0) or writes state"
        )
    items_json = encoded_items(appended, "items").decode() if appended else None
    return PreparedAppend(
        session_id=session_id,
        owner_id=optional_identifier(owner_id, "owner ID"),
        items=appended,
        items_json=items_json,
        tail_digest=digest(encode_json(appended[-1])) if appended else None,
        first_user_message=catalog_first_user_message(None, appended, ()),
        expected_sequence=expected,
        state=writes,
        kind=items_kind(kind),
        expected_state=state_expectations(expected_state),
    )


class StateExpectation(NamedTuple):
    """A middleware state value a write expects to find, as canonical JSON (`canonical`)."""

    scope: str
    key: str
    canonical: bytes


def state_expectations(entries: object) -> list[StateExpectation]:
    """Validate (scope, key, value) expectations: each value is what `load_state` must read.

    None is refused: only a stored row can be locked on PostgreSQL, so "no value" could not
    be held until the commit there. Sorted by scope and key, the order their rows are locked.
    """
    if isinstance(entries, tuple) and not entries:  # the default: every append, state write
        return []
    expected: dict[tuple[str, str], bytes] = {}
    for entry in collection(entries, "expected_state", ordered=True):
        if not isinstance(entry, tuple | list) or len(entry) != 3:
            raise InvalidInput("each expected state value must be a (scope, key, value) tuple")
        scope, key, value = entry
        place = (
            identifier(scope, "middleware state scope"),
            identifier(key, "middleware state key"),
        )
        if value is None:
            raise InvalidInput("an expected middleware state value cannot be None (no value)")
        value = json_value(value, "expected middleware state")
        check_value(value, "expected middleware state")
        encoded = canonical(value)
        if expected.setdefault(place, encoded) != encoded:
            raise InvalidInput(f"expected_state names {place[0]!r}/{place[1]!r} twice, apart")
    return [StateExpectation(*place, encoded) for place, encoded in sorted(expected.items())]


def check_expected_state(expected: StateExpectation, value_json: str | None) -> None:
    """Refuse with `StateConflict` unless the stored value (its JSON; None: no value) is the
    expected one."""
    if (
        value_json is None
        or canonical(decode_stored(value_json, Any, "middleware state")) != expected.canonical
    ):
        raise StateConflict(
            f"middleware state {expected.scope!r}/{expected.key!r} is not the value this"
            " write expected",
            scope=expected.scope,
            key=expected.key,
        )


def _state_write(entry: object) -> tuple[str, str, str]:
    """One (scope, key, value) state write of an append, its value encoded."""
    if not isinstance(entry, tuple | list) or len(entry) != 3:
        raise InvalidInput("each state write must be a (scope, key, value) tuple")
    scope, key, value = entry
    return (
        identifier(scope, "middleware state scope"),
        identifier(key, "middleware state key"),
        encoded_text(json_value(value, "middleware state"), "middleware state"),
    )


def pop_count(count: object) -> int:
    """The number of items a pop removes: an integer of at least 1."""
    return integer(count, "count must be an integer of at least 1", low=1)


def tail_limit(limit: object) -> int | None:
    """How many newest context items a tail read returns: None (all) or an integer >= 0."""
    return window_bound(limit, "limit")


@dataclass(frozen=True, slots=True)
class PreparedReplace:
    """A validated conditional replacement of a context's newest items."""

    session_id: str
    expected_sequence: int
    start: int
    drop_prefix: int
    items: list[Any]
    items_json: str | None


def prepare_replace(
    session_id: object, expected_sequence: object, start: object, items: object, drop_prefix: object
) -> PreparedReplace:
    """Validate a replacement: storable integers, an ordered list of values (maybe empty)."""
    replacement = collection(items, "items", ordered=True)
    encoded = encoded_items(replacement, "items").decode() if replacement else None
    return PreparedReplace(
        session_id=validate_session_id(session_id),
        expected_sequence=integer(expected_sequence, "sequence must be a non-negative integer"),
        start=integer(start, "start must be a non-negative integer"),
        drop_prefix=integer(drop_prefix, "drop_prefix must be a non-negative integer"),
        items=replacement,
        items_json=encoded,
    )


def window_bound(value: object, name: str) -> int | None:
    """A window read's `before` or `limit`: None or an integer >= 0."""
    if value is None:
        return None
    return integer(value, f"{name} must be None or a non-negative integer")


# --- what a write refuses of the rows it read ---------------------------------------------------


def relocked(row: T | None, doing: str) -> T:
    """The session row locked again after another writer created it (None: gone again)."""
    if row is None:
        raise StorageError(
            f"the session was created and deleted during this {doing}", retryable=True
        )
    return row


def check_advance(save: PreparedSave, stored: int) -> None:
    """Refuse a save whose sequence is not above the `stored` one."""
    if save.sequence <= stored:
        raise SequenceConflict(
            "checkpoint sequence did not advance",
            session_id=save.session_id,
            stored=stored,
            attempted=save.sequence,
            hint="give each save a higher sequence (`checkpoint.sequence += 1` before `save`); "
            "if another writer saved this session meanwhile, `load` it again",
        )


def check_fork_parent(fork: PreparedFork, parent_sequence: int | None) -> None:
    """Refuse a fork of a missing parent (None) or from past the parent's `parent_sequence`."""
    if parent_sequence is None:
        raise SessionNotFound("fork parent does not exist", session_id=fork.parent_session_id)
    if fork.parent_sequence > parent_sequence:
        raise InvalidInput("fork point is newer than the parent checkpoint")


def check_fork_created(fork: PreparedFork, inserted: bool) -> None:
    """Refuse a fork whose child row was not inserted: the child session exists."""
    if not inserted:
        raise SessionExists("fork child session already exists", session_id=fork.child.session_id)


def check_append_creates(append: PreparedAppend) -> None:
    """Refuse an append to a missing session unless it may create it (any sequence, or 0)."""
    if append.expected_sequence not in (None, 0):
        raise SessionNotFound(
            "the session to append to does not exist", session_id=append.session_id
        )


def check_append_sequence(append: PreparedAppend, stored: int) -> None:
    """Refuse an append expecting another sequence than the `stored` one."""
    expected = append.expected_sequence
    if expected is not None and stored != expected:
        raise SequenceConflict(
            "the session moved on since the sequence this append expects",
            session_id=append.session_id,
            stored=stored,
            attempted=expected,
            hint="another writer changed the session since it was read; read it again",
        )


def check_replace_start(start: int, drop_prefix: int, length: int) -> None:
    """Refuse a replacement starting past a context's `length` items or in its dropped prefix."""
    if not drop_prefix <= start <= length:
        raise InvalidInput(
            f"a replacement must start within the context ({start} of {length} items)"
            f" and after the dropped prefix ({drop_prefix})"
        )
