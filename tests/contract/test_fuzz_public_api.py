"""Property: every public call ends in a legal result or a typed error; a refusal changes nothing.

Hypothesis drives every public method of `Store` and `RuntimeStore` with generated arguments,
good and bad: wrong types, NaN and infinities, bytes, sets, deep and circular values, huge and
negative integers, lone surrogates, NUL characters, path tricks in ids (`../x`, `/`, empty,
whitespace) and valid records with one bad field. Each call must return or raise a
`TurnstoreError`; any other exception fails the test. After every refusal the whole database
must equal its dump from before the call (SQLite: `iterdump()`; PostgreSQL: every row of every
table of the store's schema).

The blocking face on SQLite takes the bulk (over 20,000 inputs); the async face and PostgreSQL
take samples. Inputs are derandomized, so CI runs the same ones every time.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import math
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from store_dumps import Dumper

import sizes
import turnstore
from conftest import postgres_connection, postgres_store_url, require_postgres
from turnstore import (
    ActiveExecution,
    ActivePath,
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    GraphAppend,
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionContext,
    SessionNodeRecord,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
    TurnstoreError,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    MessageAuthor,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    SessionHistoryEvent,
    TokenCountEvent,
    TokenUsage,
    TurnStartedEvent,
    WarningEvent,
)
from turnstore.records import (
    AgentFrameRecord,
    AttachmentIntent,
    ConversationRequest,
    ForkRelation,
    FullGraph,
    GraphReplaceFull,
    GraphUnchanged,
    ModelSpec,
    PersistedSessionConfig,
    QueuedMessage,
    QueuedWorkClaim,
    QueuedWorkCompletion,
    RootRelation,
    SearchRequest,
    SessionCursor,
    SessionGraph,
    SessionMeta,
    TokenLedgerEntry,
    TurnBoundary,
)

SESSION = "s1"
"""The seeded session: journal, transcript, runtime head, queue, a live claim, an intent."""
CHILD = "s2"
"""A seeded fork of `SESSION`."""
SQLITE_EXAMPLES = 650
"""Inputs per method with arguments on SQLite's blocking face (about 20,000 in all)."""

# --- values -----------------------------------------------------------------------------------


def circular_list() -> list[Any]:
    """A list that contains itself."""
    value: list[Any] = []
    value.append(value)
    return value


def circular_dict() -> dict[str, Any]:
    """A dict that contains itself, one level down."""
    value: dict[str, Any] = {"a": []}
    value["a"].append(value)
    return value


def nested(depth: int) -> Any:
    """`depth` lists, one inside the other."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def choice(*strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value of one of `strategies`, each as likely as the others.

    (`st.one_of` flattens nested choices, so a strategy that is itself a choice of many
    would crowd out the others.)
    """
    return st.integers(0, len(strategies) - 1).flatmap(lambda index: strategies[index])


TRICKY_TEXT = [
    "",
    " ",
    "\t\n",
    "\u3000",
    "../x",
    "/",
    "..",
    "a/b",
    "a\\b",
    "x\x00y",
    "\x00",
    "\ud800",
    "a\udfffb",
    "é",
    "🙂",
    "\u2028",
    "\ufeff",
    "s1 ",
    "'; DROP TABLE sessions; --",
    "%s",
    "?",
]
TEXT = st.one_of(
    st.sampled_from(TRICKY_TEXT),
    st.text(st.characters(exclude_categories=()), max_size=8),
    st.integers(1020, 1030).map(lambda length: "x" * length),  # about the session id limit
)
"""Any text: tricky ids, lone surrogates, NUL, long strings."""
GOOD_TEXT = st.one_of(
    st.sampled_from(["a", "é", "🙂", "../x", "a/b", "x\x00y", "\u2028", "s1 "]),
    st.text(max_size=8),
)
"""Text any content field takes (NUL included, lone surrogates not)."""
GOOD_IDS = st.one_of(
    st.sampled_from([SESSION, CHILD, "absent", "n1", "b1", "b2", "a1"]),
    st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=6),
)
"""Identifiers the store takes: seeded ones and fresh ones."""
FRESH_IDS = st.text(st.characters(min_codepoint=65, max_codepoint=90), min_size=4, max_size=8)
"""Identifiers of sessions that most likely do not exist yet."""
IDS = choice(GOOD_IDS, TEXT)
EDGE_INTS = [0, 1, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]
INTS = st.one_of(st.integers(0, 60), st.sampled_from(EDGE_INTS), st.integers())
"""Any integer, the 64-bit edges and just past them included."""
SMALL = st.integers(0, 3)
"""A small count, sequence or revision, as a good argument."""
FLOATS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]), st.floats()
)
BAD_VALUES = st.one_of(
    st.binary(max_size=4),
    st.builds(bytearray, st.binary(max_size=4)),
    st.sets(st.integers(0, 3), max_size=2),
    st.frozensets(st.text(max_size=2), max_size=2),
    st.complex_numbers(max_magnitude=10),
    st.builds(object),
    st.builds(circular_list),
    st.builds(circular_dict),
    st.builds(nested, st.sampled_from([63, 64, 65, 200])),
    st.dictionaries(st.integers(), st.none(), min_size=1, max_size=2),
    st.just(Checkpoint.empty("record")),
    st.just(Event(msg=WarningEvent(message="record"))),
)
"""Values no store can keep as given."""


def json(leaves: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """JSON-like values built from `leaves` (tuples included)."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner, inner),
            st.dictionaries(keys, inner, max_size=3),
        ),
        max_leaves=6,
    )


GOOD_JSON = json(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        GOOD_TEXT,
    ),
    GOOD_TEXT,
)
"""Values the store keeps and gives back equal (tuples as lists)."""
MIXED_JSON = json(st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT, BAD_VALUES), TEXT)
"""JSON-like values that may hide a bad leaf anywhere."""


VALUES = choice(GOOD_JSON, MIXED_JSON, BAD_VALUES)
"""What a caller may put where the store takes any JSON value."""
WRONG = st.one_of(
    st.none(), st.booleans(), INTS, FLOATS, TEXT, BAD_VALUES, MIXED_JSON, st.lists(TEXT, max_size=2)
)
"""A value of the wrong type for most parameters (sometimes, by chance, the right one)."""
BAD_ITEMS = choice(MIXED_JSON, BAD_VALUES)
SPOILERS = choice(
    WRONG,
    st.lists(BAD_ITEMS, min_size=1, max_size=2),
    st.dictionaries(GOOD_TEXT, BAD_ITEMS, min_size=1, max_size=2),
)
"""What replaces a record's field: a wrong value, or a list or dict holding one."""


@st.composite
def spoiled(draw: st.DrawFn, good: st.SearchStrategy[Any], odds: int = 5) -> Any:
    """A record from `good`, one time in `odds` with one field replaced by a wrong value."""
    value = draw(good)
    fields = isinstance(value, msgspec.Struct) and value.__struct_fields__
    # Not `== 0`: Hypothesis draws the simplest value, zero, more often than the others.
    if fields and draw(st.integers(0, odds - 1)) == odds - 1:
        name = draw(st.sampled_from(value.__struct_fields__))
        value = msgspec.structs.replace(value, **{name: draw(SPOILERS)})
    return value


def record(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A record argument: valid, valid but for one field, or not a record at all."""
    return choice(spoiled(good, 2), spoiled(good, 2), WRONG)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """None or a value of `strategy`."""
    return st.one_of(st.none(), strategy)


@dataclass(frozen=True)
class Param:
    """A parameter's good values and its bad ones."""

    good: st.SearchStrategy[Any]
    bad: st.SearchStrategy[Any] = WRONG

    @property
    def any(self) -> st.SearchStrategy[Any]:
        """A good value two times in three, else a bad one."""
        return choice(self.good, self.good, self.bad)


def rec(good: st.SearchStrategy[Any]) -> Param:
    """A record parameter: bad values are the record with one bad field, or not a record."""
    return Param(good, choice(spoiled(good, 1), WRONG))


# --- records ----------------------------------------------------------------------------------

USAGE = spoiled(st.builds(TokenUsage, input_tokens=SMALL, total_tokens=SMALL))
EVENT_MSGS = st.one_of(
    st.builds(WarningEvent, message=GOOD_TEXT),
    st.builds(TurnStartedEvent, turn_id=GOOD_IDS, started_at_ms=maybe(SMALL)),
    st.builds(
        AgentMessageContentDeltaEvent,
        session_id=GOOD_IDS,
        turn_id=GOOD_IDS,
        model_step_id=GOOD_IDS,
        delta=GOOD_TEXT,
        phase=st.sampled_from(["commentary", "final_answer", "bogus"]),
    ),
    st.builds(
        ModelStepCompletedEvent,
        session_id=GOOD_IDS,
        turn_id=GOOD_IDS,
        model_step_id=GOOD_IDS,
        step_index=SMALL,
        started_at_ms=SMALL,
        completed_at_ms=SMALL,
        outcome=spoiled(st.builds(ModelStepCompleted, end_turn=st.booleans(), usage=USAGE)),
    ),
    st.builds(SessionHistoryEvent, session_id=GOOD_IDS, items=st.lists(GOOD_JSON, max_size=2)),
    st.builds(TokenCountEvent, total_usage=USAGE),
)
EVENTS = st.builds(Event, submission_id=maybe(GOOD_IDS), msg=spoiled(EVENT_MSGS))
TIMESTAMPED = record(st.builds(TimestampedEvent, recorded_at_ms=SMALL, event=record(EVENTS)))
QUEUED_MESSAGES = spoiled(
    st.builds(
        QueuedMessage,
        owner=GOOD_IDS,
        id=GOOD_IDS,
        boundary=st.just(TurnBoundary()),
        author=st.just(MessageAuthor()),
        message=GOOD_TEXT,
    )
)


def checkpoints(sequence: st.SearchStrategy[int], *, clean: bool = False) -> Param:
    """Checkpoints at `sequence`, with content of every kind, some with one bad field.

    A `clean` one is a new session with nothing in flight, as a fork's child must be. Bad
    ones also include checkpoints valid but for one item of their context.
    """
    ids = FRESH_IDS if clean else GOOD_IDS
    bad_context = st.builds(
        Checkpoint, session_id=ids, sequence=sequence, context=st.lists(BAD_ITEMS, min_size=1)
    )
    param = rec(
        st.builds(
            Checkpoint,
            session_id=ids,
            sequence=sequence,
            session_context=spoiled(st.builds(SessionContext, owner_id=maybe(GOOD_IDS))),
            metadata=st.dictionaries(GOOD_TEXT, GOOD_JSON, max_size=2),
            first_user_message=maybe(GOOD_TEXT),
            context=st.lists(GOOD_JSON, max_size=2),
            pending_messages=st.lists(QUEUED_MESSAGES, max_size=0 if clean else 1),
            active_execution=st.none()
            if clean
            else maybe(
                spoiled(
                    st.builds(
                        ActiveExecution,
                        submission_id=GOOD_IDS,
                        turn_id=GOOD_IDS,
                        started_at_ms=SMALL,
                    )
                )
            ),
            total_usage=USAGE,
        )
    )
    return Param(param.good, choice(param.bad, bad_context))


CHECKPOINTS = checkpoints(st.integers(0, 1_000_000))


@st.composite
def consistent_executions(draw: st.DrawFn) -> ExecutionRecord:
    """An execution record whose elapsed time matches its timestamps."""
    started = draw(st.integers(0, 10**6))
    finished = started + draw(st.integers(0, 10**6))
    return ExecutionRecord(
        session_id=draw(GOOD_IDS),
        submission_id=draw(GOOD_IDS),
        turn_id=draw(GOOD_IDS),
        started_at_ms=started,
        finished_at_ms=finished,
        elapsed_ms=finished - started,
        outcome=draw(st.sampled_from(["completed", "aborted", "failed", "bogus"])),
        usage=draw(USAGE),
    )


EXECUTIONS = Param(
    maybe(consistent_executions()), choice(spoiled(consistent_executions(), 1), WRONG)
)
SESSION_PAGES = rec(
    st.builds(
        SessionPageRequest,
        owner_id=maybe(GOOD_IDS),
        cursor=maybe(
            spoiled(st.builds(SessionCursor, updated_at=INTS, sequence=SMALL, session_id=GOOD_IDS))
        ),
        limit=st.integers(1, 5),
        id_prefix=maybe(st.one_of(st.sampled_from(["", "s", SESSION, "\U0010ffff"]), GOOD_IDS)),
    )
)
CONVERSATIONS = rec(
    st.builds(
        ConversationRequest,
        before=maybe(SMALL),
        limit=st.integers(1, 5),
        channel=maybe(st.sampled_from(["messages", "other"])),
    )
)
"""Conversation pages: by index or batch, any limit, a LangGraph channel or none."""
SEARCHES = rec(
    st.builds(
        SearchRequest,
        query=choice(
            st.sampled_from(["a", "s*", '"a b"', "é", '"', "*", "x\x00", "-", " "]), GOOD_TEXT
        ),
        owner_id=maybe(GOOD_IDS),
        kind=maybe(st.sampled_from(["turnstore", "items", "adk"])),
        since_ms=maybe(INTS),
        until_ms=maybe(INTS),
        order=st.sampled_from(["newest", "best"]),
        limit=st.integers(1, 5),
        cursor=maybe(st.sampled_from(["n5", "b2", "x", "n", "b-1"])),
    )
)
KINDS = Param(
    st.sampled_from(["items", "adk", "openai-agents"]),
    choice(WRONG, st.sampled_from(["turnstore", "langgraph", "", " ", "x\x00", "k" * 65])),
)
NODES = spoiled(
    st.builds(
        SessionNodeRecord,
        node_id=GOOD_IDS,
        parent_node_id=maybe(GOOD_IDS),
        kind=GOOD_TEXT,
        payload=GOOD_JSON,
        timestamp=maybe(SMALL),
    )
)
GRAPHS = spoiled(
    st.one_of(
        st.builds(GraphUnchanged, leaf_node_id=maybe(GOOD_IDS)),
        st.builds(GraphAppend, nodes=st.lists(NODES, max_size=2), leaf_node_id=maybe(GOOD_IDS)),
        st.builds(
            GraphReplaceFull,
            graph=spoiled(
                st.builds(
                    SessionGraph, nodes=st.lists(NODES, max_size=2), leaf_node_id=maybe(GOOD_IDS)
                )
            ),
        ),
    )
)
HYDRATED = spoiled(
    st.builds(
        HydratedSessionCheckpoint,
        tool_state=GOOD_JSON,
        plugin_snapshot=GOOD_JSON,
        plugin_snapshot_revision=maybe(SMALL),
        execution_state=maybe(st.binary(max_size=8)),
    )
)


def commits(bound: str) -> Param:
    """Runtime commits for the session `bound`, some with one bad field."""
    return rec(
        st.builds(
            RuntimeCommit,
            session_id=st.one_of(st.just(bound), st.just(bound), GOOD_IDS),
            expected_head_revision=choice(st.none(), SMALL),
            config=spoiled(
                st.builds(
                    PersistedSessionConfig,
                    provider_id=GOOD_TEXT,
                    model=spoiled(
                        st.builds(
                            ModelSpec,
                            name=GOOD_TEXT,
                            parameters=st.dictionaries(GOOD_TEXT, GOOD_JSON, max_size=2),
                        )
                    ),
                )
            ),
            agent_frames=st.lists(
                spoiled(
                    st.builds(
                        AgentFrameRecord,
                        frame_id=GOOD_IDS,
                        agent_name=GOOD_TEXT,
                        state=st.dictionaries(GOOD_TEXT, GOOD_JSON, max_size=2),
                    )
                ),
                max_size=1,
            ),
            graph=GRAPHS,
            checkpoint=HYDRATED,
            usage_deltas=st.lists(
                spoiled(st.builds(TokenLedgerEntry, turn_id=maybe(GOOD_IDS), recorded_at_ms=SMALL)),
                max_size=1,
            ),
            completed_queue_claims=st.lists(
                spoiled(
                    st.builds(QueuedWorkCompletion, claim_id=GOOD_IDS, batch_ids=st.lists(GOOD_IDS))
                ),
                max_size=1,
            ),
            committed_attachment_ids=st.lists(GOOD_IDS, max_size=2),
        )
    )


DRAFTS = rec(
    st.builds(
        QueuedWorkBatchDraft,
        batch_id=maybe(GOOD_IDS),
        boundary=st.sampled_from(["turn", "steer", "queue"]),
        items=st.lists(GOOD_JSON, max_size=3),
    )
)


def intents(bound: str) -> Param:
    """Attachment intents for the session `bound`, some with one bad field."""
    return rec(
        st.builds(
            AttachmentIntent,
            attachment_id=GOOD_IDS,
            session_id=st.one_of(st.just(bound), GOOD_IDS),
            canonical_uri=GOOD_TEXT,
            intent_at_epoch_ms=st.one_of(SMALL, st.sampled_from([2**63 - 1, 2**63, 2**64 - 1])),
        )
    )


def metas(bound: str) -> Param:
    """Session metadata for the session `bound`, some with one bad field."""
    return rec(
        st.builds(
            SessionMeta,
            session_id=st.one_of(st.just(bound), GOOD_IDS),
            session_name=GOOD_TEXT,
            created_at=GOOD_TEXT,
            model=GOOD_TEXT,
            cwd=maybe(GOOD_TEXT),
            relation=spoiled(
                st.one_of(
                    st.builds(RootRelation), st.builds(ForkRelation, parent_session_id=GOOD_IDS)
                )
            ),
        )
    )


ID_LISTS = choice(
    st.lists(GOOD_IDS, max_size=3),
    st.lists(IDS, max_size=3),
    st.tuples(IDS),
    st.sets(IDS, max_size=2),
    st.dictionaries(IDS, st.none(), max_size=2),
    TEXT,
    WRONG,
)
SCOPES = Param(
    choice(st.none(), st.builds(FullGraph), st.builds(ActivePath, leaf_node_id=maybe(GOOD_IDS))),
    choice(spoiled(st.builds(ActivePath), 1), WRONG),
)


# --- the seeded store -------------------------------------------------------------------------


@dataclass
class Seeded:
    """What a test needs of the seeded state: a live claim on `SESSION`'s queue."""

    claim: QueuedWorkClaim


def seed(store: turnstore.BlockingStore) -> Seeded:
    """Give `store` a session with every kind of row, a fork, state, a queue and an intent."""
    warning = TimestampedEvent(recorded_at_ms=5, event=Event(msg=WarningEvent(message="w")))
    started = ExecutionRecord(
        session_id=SESSION,
        submission_id="sub",
        turn_id="t1",
        started_at_ms=1,
        finished_at_ms=3,
        elapsed_ms=2,
        outcome="completed",
    )
    checkpoint = Checkpoint(session_id=SESSION, sequence=1, context=[{"role": "user"}])
    assert checkpoint.execution_stats.checked_record(started)
    store.save_with_events(checkpoint, [{"role": "user", "content": "hi"}], started, [warning])
    store.fork(SESSION, 1, Checkpoint.empty(CHILD))
    store.save_state("scope", "key", {"a": [1, 2.5, None]})
    runtime = store.runtime(SESSION)
    node = SessionNodeRecord(node_id="n1", payload={"role": "user", "parts": []})
    runtime.commit_runtime_state(
        RuntimeCommit(
            session_id=SESSION,
            graph=GraphAppend(nodes=[node], leaf_node_id="n1"),
            checkpoint=HydratedSessionCheckpoint(tool_state={"cwd": "/"}, execution_state=b"x"),
        )
    )
    runtime.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=[{"text": "a"}]))
    runtime.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b2", items=["b"]))
    claim = runtime.claim_ready_queued_work("worker", "turn", 3_600_000, 1)
    assert claim is not None
    runtime.record_intent(
        AttachmentIntent(
            attachment_id="a1", session_id=SESSION, canonical_uri="file:///a1", intent_at_epoch_ms=1
        )
    )
    runtime.save_session_meta(SessionMeta(session_id=SESSION, cwd="/work"))
    return Seeded(claim)


class Harness:
    """A seeded store of one backend and face, and a dumper of its database.

    `check` runs one call: it must return or raise a `TurnstoreError`, and a refusal must leave
    the database equal to its dump from before the call.
    """

    def __init__(self, url: str, dumper: Dumper, face: str) -> None:
        with turnstore.open_blocking(url) as blocking:
            self.seeded = seed(blocking)
        self.loop = asyncio.new_event_loop() if face == "async" else None
        # No background indexer: its commits would land between a refusal and its check.
        self.store: Any = (
            turnstore.open(url, index_in_background=False)
            if face == "async"
            else turnstore.open_blocking(url, index_in_background=False)
        )
        self.dumper = dumper
        self._before: object = None
        self.calls = 0
        self.refusals = 0

    def close(self) -> None:
        """Close the store, the loop and the dumper's connection."""
        if self.loop is not None:
            self.loop.run_until_complete(self.store.close())
            self.loop.close()
        else:
            self.store.close()
        self.dumper.close()

    def invoke(self, case: Case, args: tuple[Any, ...]) -> Any:
        """Call the case's method with `args` (a runtime case's first one is the bound id)."""
        if case.runtime:
            bound, *rest = args
            target = self.store.runtime(bound)
        else:
            target, rest = self.store.upkeep if case.upkeep else self.store, list(args)
        split = len(rest) - len(case.keywords)
        keywords = dict(zip(case.keywords, rest[split:], strict=True))
        result = getattr(target, case.name)(*rest[:split], **keywords)
        if inspect.isawaitable(result):
            assert self.loop is not None
            result = self.loop.run_until_complete(result)
        return result

    def check(self, case: Case, args: tuple[Any, ...]) -> None:
        """Run one call and hold it to the property."""
        if self._before is None:
            self._before = self.dumper.dump()
        self.calls += 1
        refusal: TurnstoreError | None = None
        try:
            result = self.invoke(case, args)
        except TurnstoreError as error:
            refusal = error
        except Exception as error:  # what this test exists to catch
            raise AssertionError(
                f"{case.name}{args!r:.400} raised an untyped {type(error).__name__}: {error}"
            ) from error
        if refusal is not None:
            self.refusals += 1
            assert self.dumper.dump() == self._before, (
                f"{case.name} refused with {refusal!r} but changed the database"
            )
            return
        self._before = None  # a success may have written
        if case.after is not None:
            case.after(self, args, result)


def state_comes_back(harness: Harness, args: tuple[Any, ...], result: Any) -> None:
    """A middleware state value the store took loads back equal (tuples as lists)."""
    scope, key, value = args
    loaded = harness.invoke(CASES["load_state"], (scope, key))
    assert loaded == msgspec.json.decode(msgspec.json.encode(value))


def items_come_back(harness: Harness, args: tuple[Any, ...], result: Any) -> None:
    """Items an append took are the newest of the session's context, equal (tuples as lists)."""
    session_id, items, *_ = args
    tail = harness.invoke(CASES["context_tail"], (session_id, len(items)))
    assert tail == msgspec.json.decode(msgspec.json.encode(items))


Part = Param | Callable[[str], Param]
"""A parameter, or a function of the bound session id that gives one."""


@dataclass(frozen=True)
class Case:
    """One public method and its parameters (after the bound session id, on the runtime face)."""

    name: str
    params: tuple[Part, ...] = ()
    runtime: bool = False
    upkeep: bool = False
    """Whether the method is on the operators' face, `store.upkeep`."""
    examples: int = SQLITE_EXAMPLES
    after: Callable[[Harness, tuple[Any, ...], Any], None] | None = None
    keywords: tuple[str, ...] = ()
    """The names of the last parameters, which the method takes by keyword only."""

    @property
    def args(self) -> st.SearchStrategy[tuple[Any, ...]]:
        """Argument tuples: all good but one, or each good or bad independently."""
        return arguments(self)


@st.composite
def arguments(draw: st.DrawFn, case: Case) -> tuple[Any, ...]:
    """One argument tuple of `case`; a runtime case's first value is the bound session id.

    Half of the time one argument is bad and the others good, so that each check is reached
    past the checks before it; otherwise each argument is good or bad by itself.
    """
    count = len(case.params) + case.runtime
    one_bad = count > 0 and draw(st.booleans())
    focus = draw(st.integers(0, count - 1)) if one_bad else -1

    def value(index: int, param: Param) -> Any:
        if focus == -1:
            return draw(param.any)
        return draw(param.bad if index == focus else param.good)

    values: list[Any] = []
    session = SESSION
    if case.runtime:
        values.append(value(0, BOUND))
        session = values[0] if isinstance(values[0], str) else SESSION
    for index, part in enumerate(case.params, start=case.runtime):
        values.append(value(index, part if isinstance(part, Param) else part(session)))
    return tuple(values)


def claims(session: str) -> Param:
    """A claim: the seeded live one, a made-up one, either with one bad field, or not a claim."""

    @st.composite
    def build(draw: st.DrawFn) -> QueuedWorkClaim:
        claim = draw(st.sampled_from(SEEDED_CLAIMS))
        if claim is not None:
            return claim
        return QueuedWorkClaim(
            session_id=session,
            claim_id=draw(GOOD_IDS),
            owner_id=draw(GOOD_IDS),
            boundary="turn",
            batches=[],
            lease_expires_at_ms=draw(SMALL),
        )

    return rec(build())


SEEDED_CLAIMS: list[QueuedWorkClaim | None] = [None]
"""The seeded claim, set by `run` (a claim is minted by the store it was made in)."""
BOUND = Param(choice(st.just(SESSION), FRESH_IDS), IDS)
"""The session a runtime handle is bound to: the seeded one, a new one, or any text."""
FEW = 8
"""Inputs for a method without arguments (only the bound session id varies)."""


def page(request: type, limit: str) -> Param:
    """A journal page request of type `request`."""
    return rec(st.builds(request, before_sequence=maybe(SMALL), **{limit: st.integers(1, 5)}))


def p(good: st.SearchStrategy[Any]) -> Param:
    """A parameter whose bad values are values of the wrong type."""
    return Param(good)


ITEMS = Param(
    st.lists(GOOD_JSON, max_size=3),
    choice(
        st.lists(VALUES, min_size=1, max_size=3),
        st.tuples(BAD_VALUES),
        st.text(max_size=3),
        st.dictionaries(st.text(max_size=2), VALUES, max_size=2),
        WRONG,
    ),
)
"""A transcript delta or other list of items: good ones, or bad items, or not a list."""
EVENT_LISTS = Param(
    st.lists(st.builds(TimestampedEvent, recorded_at_ms=SMALL, event=EVENTS), max_size=2),
    choice(st.lists(TIMESTAMPED, min_size=1, max_size=2), st.text(max_size=2), WRONG),
)
ID_COLLECTIONS = Param(st.lists(GOOD_IDS, max_size=3), ID_LISTS)
STATE_VALUES = Param(GOOD_JSON, choice(MIXED_JSON, BAD_VALUES))
STATE_WRITES = Param(
    st.lists(st.tuples(GOOD_IDS, GOOD_IDS, GOOD_JSON), max_size=2),
    choice(
        st.lists(st.tuples(IDS, IDS, choice(MIXED_JSON, BAD_VALUES)), min_size=1, max_size=2),
        st.lists(st.tuples(GOOD_IDS), min_size=1, max_size=1),
        st.text(max_size=2),
        WRONG,
    ),
)
"""An append's state writes: (scope, key, value) tuples, good ones or bad ones."""
BOUNDARY = p(st.sampled_from(["turn", "steer"]))
WAIT_TIMEOUTS = Param(
    st.sampled_from([0, 0.0, 0.001, 0.005]),
    # Never a valid time-out longer than a few milliseconds: a wait past the journal's end
    # sleeps all of it.
    choice(
        st.sampled_from([-1, -0.5, math.nan, math.inf, -math.inf, 3600.5, 1e308, 2**64, True]),
        st.integers(max_value=-1),
        st.none(),
        TEXT,
        BAD_VALUES,
    ),
)
"""A wait's time-out: a few milliseconds, or refused."""
LEASE = p(st.integers(1, 3_600_000))

EXPORTS = [
    b"",
    b"not json\n",
    b'{"kind":"turnstore_export","format_version":1,"schema_version":4}\n'
    b'{"kind":"end","tree_count":0,"row_count":0}\n',
    b'{"kind":"turnstore_export","format_version":1,"schema_version":4}\n'
    b'{"kind":"tree","root":"x","session_ids":["x"],"row_count":1,"digest":"0"}\n',
    b'{"kind":"turnstore_export","format_version":2,"schema_version":12}\n'
    b'{"kind":"memory","item_count":1,"row_count":1,"digest":"0"}\n'
    b'{"kind":"memory_items","namespace":"a","item_key":"k","owner_id":null,"value_json":{},'
    b'"created_at_ms":1,"updated_at_ms":1,"ttl_ms":null,"expires_at_ms":null,"searched":true}\n'
    b'{"kind":"end","tree_count":0,"row_count":1,"memory_item_count":1}\n',
]
"""Import inputs: empty, not JSON, an empty export, one cut off after its tree line, a memory
section whose digest is wrong."""
BACKUP_PATHS = st.builds(lambda: str(Path(tempfile.mkdtemp(prefix="fuzz-backup-")) / "copy.db"))
"""A new backup file in a new folder (relative text would write into the working folder)."""

CASE_LIST = [
    Case("runtime", (p(GOOD_IDS),)),
    Case("load", (p(GOOD_IDS),)),
    Case("save", (CHECKPOINTS, ITEMS, EXECUTIONS)),
    Case("save_with_events", (CHECKPOINTS, ITEMS, EXECUTIONS, EVENT_LISTS)),
    Case("append_event", (p(GOOD_IDS), p(SMALL), rec(EVENTS))),
    Case("event_page", (p(GOOD_IDS), page(EventPageRequest, "limit"))),
    Case("event_turn_page", (p(GOOD_IDS), p(maybe(SMALL)))),
    Case("events_after", (p(GOOD_IDS), p(SMALL), p(st.integers(1, 5)))),
    Case("wait_for_events", (p(GOOD_IDS), p(SMALL), WAIT_TIMEOUTS), examples=200),
    Case("session_summary", (p(GOOD_IDS),)),
    Case("list_sessions_page", (SESSION_PAGES,)),
    Case("transcript_page", (p(GOOD_IDS), page(TranscriptPageRequest, "max_batches"))),
    Case("execution_page", (p(GOOD_IDS), page(ExecutionPageRequest, "limit"))),
    Case("recent_executions", (p(st.integers(1, 5)), p(maybe(GOOD_IDS))), keywords=("owner_id",)),
    Case(
        "fork_tree",
        (p(choice(st.sampled_from([SESSION, CHILD]), GOOD_IDS)), p(st.integers(1, 3))),
        keywords=("limit",),
    ),
    Case(
        "fork",
        (
            p(choice(st.just(SESSION), GOOD_IDS)),
            p(st.integers(0, 1)),
            checkpoints(st.just(0), clean=True),
        ),
    ),
    Case("delete_sessions", (ID_COLLECTIONS,)),
    Case(
        "append_context",
        (p(GOOD_IDS), ITEMS, p(maybe(GOOD_IDS)), p(maybe(st.integers(0, 3))), STATE_WRITES, KINDS),
        after=items_come_back,
        keywords=("kind",),
    ),
    Case("search", (SEARCHES,)),
    Case("conversation", (p(GOOD_IDS), CONVERSATIONS)),
    Case("load_state_scope", (p(GOOD_IDS),)),
    Case(
        "load_session_states",
        (p(GOOD_IDS), p(GOOD_IDS), p(maybe(GOOD_IDS)), p(st.integers(1, 5))),
        keywords=("after", "limit"),
    ),
    Case("pop_context", (p(GOOD_IDS), p(st.integers(1, 3)))),
    Case("clear_context", (p(GOOD_IDS),)),
    Case("context_tail", (p(GOOD_IDS), p(maybe(st.integers(0, 5))))),
    Case("context_window", (p(GOOD_IDS), p(maybe(st.integers(0, 5))), p(maybe(st.integers(0, 5))))),
    Case(
        "replace_context",
        (p(GOOD_IDS), p(st.integers(0, 3)), p(st.integers(0, 4)), ITEMS, p(st.integers(0, 2))),
    ),
    Case("load_state", (p(GOOD_IDS), p(GOOD_IDS))),
    Case("load_states", (ID_COLLECTIONS, p(GOOD_IDS))),
    Case("save_state", (p(GOOD_IDS), p(GOOD_IDS), STATE_VALUES), after=state_comes_back),
    Case("load_session", (SCOPES,), runtime=True),
    Case("load_node", (p(GOOD_IDS),), runtime=True),
    Case("commit_runtime_state", (commits,), runtime=True),
    Case("enqueue_queued_work", (DRAFTS,), runtime=True),
    Case(
        "claim_ready_queued_work",
        (p(GOOD_IDS), BOUNDARY, LEASE, p(st.integers(1, 3))),
        runtime=True,
    ),
    Case(
        "claim_ready_queued_work_by_batch_ids",
        (p(GOOD_IDS), BOUNDARY, LEASE, ID_COLLECTIONS),
        runtime=True,
    ),
    Case("renew_queued_work_claim", (claims, LEASE), runtime=True),
    Case("abandon_queued_work_claim", (claims,), runtime=True),
    Case("cancel_queued_work_batch", (p(GOOD_IDS),), runtime=True),
    Case("record_intent", (intents,), runtime=True),
    Case("commit_refs", (ID_COLLECTIONS,), runtime=True),
    Case("list_uncommitted", (p(st.integers(0, 10)),), runtime=True),
    Case("forget", (p(GOOD_IDS),), runtime=True),
    Case("canonical_uri_in_use", (p(GOOD_TEXT),), runtime=True),
    Case("save_session_meta", (metas,), runtime=True),
    Case("tombstone_nodes", (ID_COLLECTIONS,), runtime=True),
    Case("list_uncommitted_attachments", (p(st.integers(0, 10)),), upkeep=True),
    Case("tree", (p(GOOD_IDS),), upkeep=True),
    Case(
        "reindex",
        (p(st.booleans()), p(st.integers(1, 3))),
        keywords=("restart", "batch_sessions"),
        upkeep=True,
        examples=FEW,
    ),
    # Long ago: a prune that deleted the seeded sessions would leave the other cases nothing.
    Case(
        "prune",
        (Param(st.integers(0, 10**9), choice(st.none(), FLOATS, TEXT, BAD_VALUES)),),
        upkeep=True,
    ),
    # Owners nobody seeded: erasing one the other cases use would leave them nothing.
    Case(
        "erase_owner",
        (
            Param(
                FRESH_IDS.map(lambda name: f"erase-{name}"),
                choice(BAD_VALUES, st.sampled_from(["", "  ", "a\x00b"])),
            ),
            p(st.booleans()),
        ),
        keywords=("dry_run",),
        upkeep=True,
        examples=FEW * 4,
    ),
    Case("export_trees", (Param(st.builds(io.BytesIO)),), upkeep=True),
    Case("import_trees", (Param(st.sampled_from(EXPORTS).map(io.BytesIO)),), upkeep=True),
    Case(
        "backup", (Param(BACKUP_PATHS, choice(st.none(), INTS, FLOATS, BAD_VALUES)),), upkeep=True
    ),
    Case("gauges", (Param(maybe(GOOD_IDS), IDS),), upkeep=True, examples=FEW),
    # Without arguments there is one input to try.
    *(
        Case(name, examples=1, upkeep=True)
        for name in ("stats", "doctor", "gc_unreachable", "vacuum")
    ),
    *(
        Case(name, runtime=True, examples=FEW)
        for name in (
            "list_queued_work",
            "list_pending_queued_work",
            "load_session_meta",
            "picker_info",
            "vacuum",
            "gc_unreachable",
        )
    ),
]
CASES = {case.name: case for case in CASE_LIST if not case.upkeep}
"""The agent loop's and the runtime's cases by name (upkeep shares `vacuum`, `gc_unreachable`)."""


def test_every_public_method_is_fuzzed() -> None:
    """The cases cover every public method of every face that takes or binds an argument."""

    def public(cls: type) -> set[str]:
        return {
            name
            for name, member in vars(cls).items()
            if not name.startswith("_") and inspect.isfunction(member)
        }

    no_input = {"writer_stats", "close", "durability_tier", "deferred_durability"}
    for cls in (turnstore.Store, turnstore.BlockingStore):
        assert public(cls) - no_input == {
            c.name for c in CASE_LIST if not c.runtime and not c.upkeep
        }
    for cls in (turnstore.Upkeep, turnstore.BlockingUpkeep):
        assert public(cls) == {c.name for c in CASE_LIST if c.upkeep}
    for cls in (turnstore.RuntimeStore, turnstore.BlockingRuntimeStore):
        assert public(cls) - no_input == {c.name for c in CASE_LIST if c.runtime}


def test_sqlite_inputs_reach_the_budget() -> None:
    """CI runs at least 20,000 inputs on SQLite's blocking face."""
    assert sum(case.examples for case in CASE_LIST) >= 20_000


# --- running ------------------------------------------------------------------------------------


@contextmanager
def harness(backend: str, face: str) -> Iterator[Harness]:
    """A seeded store on a fresh database of `backend`, through `face`."""
    if backend == "postgres":
        require_postgres()
        schema = f"fuzz_{uuid.uuid4().hex}"
        url = postgres_store_url(schema)
        opened = None
        try:
            with turnstore.open_blocking(url):  # creates the schema before the dumper connects
                pass
            opened = Harness(url, Dumper("postgres", schema=schema), face)
            yield opened
        finally:
            if opened is not None:
                opened.close()
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.sqlite3"
        with turnstore.open_blocking(path):
            pass
        opened = Harness(str(path), Dumper("sqlite", path=path), face)
        try:
            yield opened
        finally:
            opened.close()


def run(opened: Harness, strategy: st.SearchStrategy[tuple[Case, tuple[Any, ...]]], n: int) -> None:
    """Check `n` derandomized inputs drawn from `strategy` against `opened`."""
    SEEDED_CLAIMS[:] = [None, opened.seeded.claim]

    @settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def check(drawn: tuple[Case, tuple[Any, ...]]) -> None:
        opened.check(*drawn)

    check()


def one(case: Case) -> st.SearchStrategy[tuple[Case, tuple[Any, ...]]]:
    """Inputs of one case, paired with it."""
    return st.tuples(st.just(case), case.args)


ANY_CASE = st.sampled_from(CASE_LIST).flatmap(one)


@pytest.mark.parametrize(
    "case", CASE_LIST, ids=lambda case: f"upkeep.{case.name}" if case.upkeep else case.name
)
def test_blocking_face_on_sqlite(case: Case) -> None:
    """Every input to one method of the blocking face ends well, and a refusal changes nothing."""
    with harness("sqlite", "blocking") as opened:
        examples = sizes.share(case.examples, sizes.FUZZ_SHARE)
        run(opened, one(case), examples)
        assert opened.calls >= examples


def test_async_face_on_sqlite() -> None:
    """A sample of inputs to every method, through the async face."""
    with harness("sqlite", "async") as opened:
        run(opened, ANY_CASE, sizes.FUZZ_ASYNC_SQLITE)


@pytest.mark.parametrize("face", ["blocking", "async"])
def test_postgres(face: str) -> None:
    """A sample of inputs to every method on PostgreSQL, through each face."""
    with harness("postgres", face) as opened:
        n = sizes.FUZZ_POSTGRES_BLOCKING if face == "blocking" else sizes.FUZZ_POSTGRES_ASYNC
        run(opened, ANY_CASE, n)


def test_the_harness_fails_on_an_untyped_exception() -> None:
    """An exception that is not a TurnstoreError fails the check (so the property can fail)."""
    with harness("sqlite", "blocking") as opened, pytest.raises(AssertionError, match="untyped"):
        opened.check(Case("load", st.nothing()), (SESSION, "extra argument"))
