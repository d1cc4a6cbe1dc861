"""Contract: a value the store takes comes back equal; a value it refuses changes nothing.

For every kind of stored value (checkpoint fields, transcript items, execution records,
events, middleware state, and each runtime record: commits, queued drafts, session metadata,
attachment intents, blobs), on both backends and both faces: NUL characters inside content,
unicode, integers at the 64-bit edges, floats such as 1e308 and -0.0 and the deepest nesting
allowed come back equal (tuples come back as lists); NaN, infinities, bytes, sets, integers
past 64 bits, lone surrogates, circular values and nesting past the limit raise
`InvalidInput` and leave the database exactly as it was. The second part holds the calls that
once stored something else than they were given, or raised an untyped error.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from runtime_helpers import runtime
from store_dumps import dump_database

from turnstore import (
    ActivePath,
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    GraphAppend,
    HydratedSessionCheckpoint,
    InvalidInput,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionNodeRecord,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.events import TokenUsage, WarningEvent
from turnstore.records import (
    AgentFrameRecord,
    AttachmentIntent,
    ModelSpec,
    PersistedSessionConfig,
    SessionCursor,
    SessionMeta,
)
from turnstore.rules.values import MAX_DEPTH


def nested(levels: int) -> Any:
    """`levels` lists, one inside the other, around a 0."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def circular() -> list[Any]:
    """A list that holds itself."""
    value: list[Any] = []
    value.append(value)
    return value


def as_stored(value: Any) -> Any:
    """What JSON gives back for `value`: tuples become lists."""
    return msgspec.json.decode(msgspec.json.encode(value))


def same(loaded: Any, expected: Any) -> bool:
    """Equal, and equal as JSON text too (so -0.0 is not 0.0, nor 1.0 the integer 1)."""
    return bool(loaded == expected) and msgspec.json.encode(loaded) == msgspec.json.encode(expected)


TEXTS = [
    "a\x00b",
    "\x00",
    "é ☃ 🙂 \u2028 \u200b \ufffe \U0010ffff",
    "",
    "   ",
]
"""Content text the store keeps exactly: NUL inside, unicode, empty, blank."""
INTEGERS = [0, -1, 2**63 - 1, -(2**63), 2**64 - 1]
FLOATS = [1e308, sys.float_info.max, 5e-324, -0.0, 0.5, -2.5e-300]


def good_values(levels: int) -> list[Any]:
    """Values a free-form field with `levels` levels of nesting to spare keeps exactly."""
    return [
        *TEXTS,
        *INTEGERS,
        *FLOATS,
        True,
        None,
        {"k\x00é 🙂": [None, False, 1.5, {"": "x"}]},
        ("tuple", 1, ("inner",)),
        nested(levels),
    ]


A_RECORD = Event(msg=WarningEvent(message="a record where none is declared"))
"""A record where a free-form value is meant: it would come back as a dict."""


def bad_values(levels: int) -> list[Any]:
    """Values that would not come back equal, or at all."""
    return [
        math.nan,
        math.inf,
        -math.inf,
        b"bytes",
        bytearray(b"x"),
        {1, 2},
        frozenset({"a"}),
        2**64,
        -(2**63) - 1,
        "lone \ud800 surrogate",
        {"\udfff": 1},
        {1: "non-string key"},
        circular(),
        nested(levels + 1),
        complex(1, 2),
        A_RECORD,
    ]


# --- each kind of free-form value: how to store one, and how to read it back ---------------


@dataclass(frozen=True)
class Kind:
    """Where a caller's value is stored, and how many levels of nesting it has there."""

    levels: int
    put: Callable[[Any, str, Any], Awaitable[Any]]
    get: Callable[[Any, str], Awaitable[Any]]


async def put_state(store: Any, key: str, value: Any) -> None:
    await store.save_state("scope", key, value)


async def get_state(store: Any, key: str) -> Any:
    return await store.load_state("scope", key)


SEQUENCES = itertools.count(1)
"""Sequences for checkpoint saves: each is above the last, so no save conflicts."""


async def put_metadata(store: Any, session: str, value: Any) -> None:
    sequence = next(SEQUENCES)
    await store.save(Checkpoint(session_id=session, sequence=sequence, metadata={"k": value}))


async def get_metadata(store: Any, session: str) -> Any:
    return (await store.load(session)).metadata["k"]


async def put_context(store: Any, session: str, value: Any) -> None:
    await store.save(Checkpoint(session_id=session, sequence=next(SEQUENCES), context=[value]))


async def get_context(store: Any, session: str) -> Any:
    return (await store.load(session)).context[0]


async def put_transcript(store: Any, session: str, value: Any) -> None:
    await store.save(Checkpoint(session_id=session, sequence=next(SEQUENCES)), [value, "after"])


async def get_transcript(store: Any, session: str) -> Any:
    page = await store.transcript_page(session, TranscriptPageRequest(max_batches=1))
    items = page.batches[0].items
    assert items[1] == "after"
    return items[0]


async def commit(store: Any, session: str, **fields: Any) -> None:
    rt = await runtime(store, session)
    await rt.commit_runtime_state(RuntimeCommit(session_id=session, **fields))


async def loaded(store: Any, session: str) -> Any:
    return await (await runtime(store, session)).load_session()


async def put_payload(store: Any, session: str, value: Any) -> None:
    node = SessionNodeRecord(node_id="n1", payload=value)
    await commit(store, session, graph=GraphAppend(nodes=[node], leaf_node_id="n1"))


async def get_payload(store: Any, session: str) -> Any:
    return (await loaded(store, session)).graph.nodes[0].payload


async def put_tool_state(store: Any, session: str, value: Any) -> None:
    await commit(store, session, checkpoint=HydratedSessionCheckpoint(tool_state=value))


async def get_tool_state(store: Any, session: str) -> Any:
    return (await loaded(store, session)).checkpoint.tool_state


async def put_plugin_snapshot(store: Any, session: str, value: Any) -> None:
    await commit(store, session, checkpoint=HydratedSessionCheckpoint(plugin_snapshot=value))


async def get_plugin_snapshot(store: Any, session: str) -> Any:
    return (await loaded(store, session)).checkpoint.plugin_snapshot


async def put_model_parameter(store: Any, session: str, value: Any) -> None:
    config = PersistedSessionConfig(model=ModelSpec(name="m", parameters={"k": value}))
    await commit(store, session, config=config)


async def get_model_parameter(store: Any, session: str) -> Any:
    return (await loaded(store, session)).config.model.parameters["k"]


async def put_frame_state(store: Any, session: str, value: Any) -> None:
    frame = AgentFrameRecord(frame_id="main", agent_name="main", state={"k": value})
    await commit(store, session, agent_frames=[frame], current_agent_frame_id="main")


async def get_frame_state(store: Any, session: str) -> Any:
    return (await loaded(store, session)).agent_frames[0].state["k"]


async def put_queued_item(store: Any, session: str, value: Any) -> None:
    rt = await runtime(store, session)
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[value]))


async def get_queued_item(store: Any, session: str) -> Any:
    return (await (await runtime(store, session)).list_queued_work())[0].items[0]


KINDS = {
    "middleware-state": Kind(MAX_DEPTH, put_state, get_state),
    # A record's fields add no level; its `metadata` object is the first level.
    "checkpoint-metadata": Kind(MAX_DEPTH - 1, put_metadata, get_metadata),
    "context-item": Kind(MAX_DEPTH, put_context, get_context),
    "transcript-item": Kind(MAX_DEPTH, put_transcript, get_transcript),
    # A node sits in the commit's list of nodes, which is a level.
    "node-payload": Kind(MAX_DEPTH - 1, put_payload, get_payload),
    "tool-state-blob": Kind(MAX_DEPTH, put_tool_state, get_tool_state),
    "plugin-snapshot-blob": Kind(MAX_DEPTH, put_plugin_snapshot, get_plugin_snapshot),
    "model-parameter": Kind(MAX_DEPTH - 1, put_model_parameter, get_model_parameter),
    "agent-frame-state": Kind(MAX_DEPTH - 2, put_frame_state, get_frame_state),
    "queued-item": Kind(MAX_DEPTH - 1, put_queued_item, get_queued_item),
}


@pytest.mark.parametrize("kind", KINDS.values(), ids=KINDS.keys())
async def test_an_accepted_value_comes_back_equal(store, kind):
    """Text with NUL, unicode, 64-bit edges, 1e308, -0.0 and the deepest nesting come back."""
    values = good_values(kind.levels)
    for index, value in enumerate(values):
        await kind.put(store, f"s{index}", value)
    for index, value in enumerate(values):
        back = await kind.get(store, f"s{index}")
        assert same(back, as_stored(value)), (value, back)
    negative_zero = next(i for i, v in enumerate(values) if str(v) == "-0.0")
    assert math.copysign(1, await kind.get(store, f"s{negative_zero}")) == -1


@pytest.mark.parametrize("kind", KINDS.values(), ids=KINDS.keys())
async def test_a_refused_value_changes_nothing(store, database, kind):
    """NaN, infinities, bytes, sets, big integers, surrogates, cycles, deep nesting: refused."""
    await kind.put(store, "kept", {"a": 1})
    before = dump_database(database)
    for value in bad_values(kind.levels):
        with pytest.raises(InvalidInput):
            await kind.put(store, "kept", value)
        with pytest.raises(InvalidInput):
            await kind.put(store, "new", value)
    assert dump_database(database) == before
    assert await kind.get(store, "kept") == {"a": 1}


async def test_a_record_as_a_context_item_is_refused(store):
    """A context item is a free-form value, so a record there is refused as elsewhere."""
    with pytest.raises(InvalidInput):
        await put_context(store, "s", A_RECORD)


async def test_a_refusal_names_the_path_to_the_bad_value(store):
    """The message leads to the value: the field, the keys and the indexes on the way."""
    with pytest.raises(InvalidInput, match=r"\$\.metadata\.a\[1\] is not a finite number"):
        await store.save(Checkpoint(session_id="s", metadata={"a": [1, math.nan]}))
    with pytest.raises(InvalidInput, match=r"transcript delta\[1\]: \$\.k is of type set"):
        await store.save(Checkpoint(session_id="s"), ["ok", {"k": {1}}])
    with pytest.raises(InvalidInput, match="nests deeper than 64 levels"):
        await store.save_state("scope", "key", circular())


# --- records with integer and text fields at their edges -----------------------------------


async def test_execution_records_and_events_come_back_equal(store):
    """Counters at the 64-bit edges, times at the signed edge, content text with NUL."""
    usage = TokenUsage(input_tokens=2**64 - 1, total_tokens=2**64 - 1)
    finished = ExecutionRecord(
        session_id="s",
        submission_id="submission é",
        turn_id="turn 🙂",
        started_at_ms=0,
        finished_at_ms=2**63 - 1,
        elapsed_ms=2**63 - 1,
        outcome="completed",
        usage=usage,
    )
    checkpoint = Checkpoint(session_id="s", sequence=1)
    assert checkpoint.execution_stats.checked_record(finished)
    warning = Event(msg=WarningEvent(message="a\x00b é 🙂"))
    stamped = TimestampedEvent(recorded_at_ms=2**63 - 1, event=warning)
    await store.save_with_events(checkpoint, [], finished, [stamped])
    assert (await store.execution_page("s", ExecutionPageRequest(limit=5))).executions == [finished]
    assert (await store.recent_executions(5)) == [finished]
    page = await store.event_page("s", EventPageRequest(limit=5))
    assert [(e.recorded_at_ms, e.event) for e in page.events] == [(2**63 - 1, warning)]
    assert (await store.load("s")).execution_stats.usage == usage


async def test_runtime_records_come_back_equal(store):
    """Session metadata with NUL and unicode, an intent at the time edge, bytes in a blob."""
    rt = await runtime(store, "r")
    meta = SessionMeta(session_id="r", session_name="name\x00é", model="m 🙂", cwd="/tmp/é")
    await rt.save_session_meta(meta)
    assert await rt.load_session_meta() == meta
    intent = AttachmentIntent(
        attachment_id="a1", session_id="r", canonical_uri="file:///é", intent_at_epoch_ms=2**63 - 2
    )
    await rt.record_intent(intent)
    entries = await rt.list_uncommitted(2**63 - 1)
    assert [(e.attachment_id, e.canonical_uri, e.intent_at_epoch_ms) for e in entries] == [
        ("a1", "file:///é", 2**63 - 2)
    ]
    state = bytes(range(256))
    await rt.commit_runtime_state(
        RuntimeCommit(session_id="r", checkpoint=HydratedSessionCheckpoint(execution_state=state))
    )
    assert (await rt.load_session()).checkpoint.execution_state == state


# --- calls that once changed what they stored, or raised an untyped error ------------------


async def seeded(store: Any) -> Any:
    """A session with a transcript, state, a graph, a queued batch; its runtime handle."""
    await store.save(Checkpoint(session_id="s", sequence=1), [{"role": "user", "content": "hi"}])
    await store.save_state("scope", "key", [1])
    rt = await runtime(store, "s")
    node = SessionNodeRecord(node_id="n1", payload={"role": "user", "parts": []})
    await rt.commit_runtime_state(
        RuntimeCommit(session_id="s", graph=GraphAppend(nodes=[node], leaf_node_id="n1"))
    )
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=["x"]))
    return rt


SURROGATE = "\ud800"

REFUSED = {
    "bytes-session-id": lambda s, rt: s.save(Checkpoint(session_id=b"x")),
    "nan-metadata": lambda s, rt: s.save(Checkpoint(session_id="n", metadata={"x": math.nan})),
    "set-metadata": lambda s, rt: s.save(Checkpoint(session_id="n", metadata={"x": {1}})),
    "delta-as-text": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), "hello"),
    "delta-as-bytes": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), b"hi"),
    "delta-as-dict": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), {"a": 1}),
    "delta-as-set": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), {"a"}),
    "delta-not-iterable": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), 5),
    "events-not-iterable": lambda s, rt: s.save_with_events(
        Checkpoint(session_id="s", sequence=2), [], None, 5
    ),
    "events-as-text": lambda s, rt: s.save_with_events(
        Checkpoint(session_id="s", sequence=2), [], None, "e"
    ),
    "circular-delta": lambda s, rt: s.save(Checkpoint(session_id="s", sequence=2), [circular()]),
    "delete-a-dict": lambda s, rt: s.delete_sessions({"s": 1}),
    "delete-a-string": lambda s, rt: s.delete_sessions("s"),
    "delete-bytes": lambda s, rt: s.delete_sessions(b"s"),
    "delete-not-iterable": lambda s, rt: s.delete_sessions(5),
    "state-scope-surrogate": lambda s, rt: s.save_state(SURROGATE, "k", 1),
    "state-key-surrogate": lambda s, rt: s.save_state("scope", SURROGATE, 1),
    "load-state-surrogate": lambda s, rt: s.load_state("scope", SURROGATE),
    "state-a-record": lambda s, rt: s.save_state("scope", "key", Checkpoint.empty("x")),
    "state-circular": lambda s, rt: s.save_state("scope", "key", circular()),
    "catalog-owner-surrogate": lambda s, rt: s.list_sessions_page(
        SessionPageRequest(owner_id=SURROGATE, limit=5)
    ),
    "catalog-cursor-surrogate": lambda s, rt: s.list_sessions_page(
        SessionPageRequest(
            cursor=SessionCursor(updated_at=0, sequence=0, session_id=SURROGATE), limit=5
        )
    ),
    "node-id-surrogate": lambda s, rt: rt.load_node(SURROGATE),
    "leaf-surrogate": lambda s, rt: rt.load_session(ActivePath(leaf_node_id=SURROGATE)),
    "leaf-not-text": lambda s, rt: rt.load_session(ActivePath(leaf_node_id=5)),
    "cancel-surrogate": lambda s, rt: rt.cancel_queued_work_batch(SURROGATE),
    "forget-surrogate": lambda s, rt: rt.forget(SURROGATE),
    "claim-owner-surrogate": lambda s, rt: rt.claim_ready_queued_work(SURROGATE, "turn", 1000, 1),
    "claim-ids-a-set": lambda s, rt: rt.claim_ready_queued_work_by_batch_ids(
        "w", "turn", 1000, {"b1"}
    ),
    "claim-ids-surrogate": lambda s, rt: rt.claim_ready_queued_work_by_batch_ids(
        "w", "turn", 1000, [SURROGATE]
    ),
    "commit-refs-a-dict": lambda s, rt: rt.commit_refs({"a1": 1}),
    "commit-refs-surrogate": lambda s, rt: rt.commit_refs([SURROGATE]),
    "tombstone-not-iterable": lambda s, rt: rt.tombstone_nodes(5),
    "tombstone-surrogate": lambda s, rt: rt.tombstone_nodes([SURROGATE]),
    "intent-past-signed-64-bits": lambda s, rt: rt.record_intent(
        AttachmentIntent(
            attachment_id="a", session_id="s", canonical_uri="file:///a", intent_at_epoch_ms=2**63
        )
    ),
    "payload-circular": lambda s, rt: rt.commit_runtime_state(
        RuntimeCommit(
            session_id="s",
            expected_head_revision=1,
            graph=GraphAppend(nodes=[SessionNodeRecord(node_id="n2", payload=circular())]),
        )
    ),
    "queued-item-nan": lambda s, rt: rt.enqueue_queued_work(
        QueuedWorkBatchDraft(items=[{"x": math.inf}])
    ),
}


@pytest.mark.parametrize("call", REFUSED.values(), ids=REFUSED.keys())
async def test_a_wrong_argument_is_refused_and_changes_nothing(store, database, call):
    """Each raised an untyped error or stored something else before; now InvalidInput."""
    rt = await seeded(store)
    before = dump_database(database)
    with pytest.raises(InvalidInput):
        await call(store, rt)
    assert dump_database(database) == before


async def test_a_transcript_delta_is_any_iterable_of_items(store):
    """A tuple or a generator of items is a transcript delta (a string is not)."""
    await store.save(Checkpoint(session_id="s", sequence=1), ("a", {"b": 1}))
    await store.save(Checkpoint(session_id="s", sequence=2), (item for item in ["c"]))
    page = await store.transcript_page("s", TranscriptPageRequest(max_batches=5))
    assert [batch.items for batch in reversed(page.batches)] == [["a", {"b": 1}], ["c"]]


@pytest.mark.parametrize(
    "ids",
    [["a", "b"], ("a", "b"), {"a", "b"}, frozenset({"a", "b"})],
    ids=["list", "tuple", "set", "frozenset"],
)
async def test_delete_sessions_takes_a_list_tuple_or_set(store, ids):
    """Any collection of session ids but a string, bytes or a mapping."""
    for session in ("a", "b", "c"):
        await store.save(Checkpoint.empty(session))
    assert await store.delete_sessions(ids) is True
    assert [await store.session_summary(s) is None for s in ("a", "b", "c")] == [
        True,
        True,
        False,
    ]
