"""Pydantic AI's `ConversationStore` on turnstore, proven against the framework's own store.

Pydantic AI ships no store tests, so the same scripted calls (`_pydantic_ai_script`) run on
its `InMemoryConversationStore` and on `TurnstoreConversationStore` on SQLite and PostgreSQL,
and every answer must be the same: written scripts for each method and edge, then programs
hypothesis draws. Then what only ours has: two writers racing on one revision, refused input
changing nothing, and a conversation read back through turnstore's catalog, view and search.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from _pydantic_ai_script import Pair, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    InMemoryConversationStore,
)

import turnstore
from sizes import pick
from turnstore.errors import InvalidInput
from turnstore.integrations.pydantic_ai import TurnstoreConversationStore
from turnstore.records import SearchRequest

pytestmark = pytest.mark.peers

EXAMPLES = pick(60, 12)
"""Programs hypothesis draws per backend."""


@pytest.fixture
async def ours(store_url: str) -> AsyncIterator[TurnstoreConversationStore]:
    async with turnstore.open(store_url, index_in_background=False) as store:
        conversations = TurnstoreConversationStore(store)
        yield conversations
        await conversations.aclose()


@pytest.fixture
def pair(ours: TurnstoreConversationStore) -> Pair:
    return Pair(InMemoryConversationStore(), ours)


async def same(pair: Pair, script: list[tuple[Any, ...]]) -> list[Any]:
    """Run the script on both; every step's answers must be equal. The reference's answers."""
    answers = []
    for step, reference, ours in await pair.run(script):
        assert ours == reference, step
        answers.append(reference)
    return answers


# --- written scripts ----------------------------------------------------------------------------

GROWING = [
    ("load", "h", "chat", None, None),
    ("new", "h", "chat"),
    ("turns", "h", (False,)),
    ("save", "h", "alice"),
    ("turns", "h", (True, False)),
    ("save", "h", None),
    ("save", "h", None),  # nothing new
    ("load", "h", "chat", None, None),
    ("load", "h2", "chat", 3, "alice"),
    ("load", "h3", "chat", None, "bob"),
    ("entries", "chat", 2, None),
    ("entries", "chat", -1, None),
    ("entry", "e1"),
    ("entry", "e99"),
    ("record", "chat"),
    ("record", "nobody"),
]


async def test_a_conversation_grows_loads_and_windows_as_on_the_reference(pair: Pair) -> None:
    """Saves append only what is new; loads, windows, entries and scopes answer alike."""
    answers = await same(pair, GROWING)
    assert answers[0] is None
    assert answers[-1] is None
    assert answers[9] is None  # another scope's conversation is one the store lacks
    assert answers[13] == "KeyError"


async def test_a_second_writer_with_a_stale_revision_conflicts_as_on_the_reference(
    pair: Pair,
) -> None:
    """Of two handles loaded at one revision, the second save conflicts; a fresh object for a
    stored id conflicts; after loading again it saves."""
    answers = await same(
        pair,
        [
            ("new", "a", "chat"),
            ("turns", "a", (False,)),
            ("save", "a", None),
            ("load", "b", "chat", None, None),
            ("turns", "a", (False,)),
            ("turns", "b", (True,)),
            ("save", "a", None),
            ("save", "b", None),
            ("new", "c", "chat"),
            ("turns", "c", (False,)),
            ("save", "c", None),
            ("load", "b", "chat", None, None),
            ("turns", "b", (False,)),
            ("save", "b", None),
            ("save", "a", "bob"),
        ],
    )
    assert answers[7] == answers[10] == answers[14] == "ConversationConflict"


async def test_branches_and_rewrites_as_on_the_reference(pair: Pair) -> None:
    """A branch keeps the history it leaves, a rewrite branches off, and branching back to a
    left tip finds it; bad `at`/`from_entry` and a stale revision are refused alike."""
    await same(
        pair,
        [
            ("new", "h", "chat"),
            ("turns", "h", (False, True, False)),
            ("save", "h", "alice"),
            ("branch", "h", "chat", 2, None, None),
            ("turns", "h", (False,)),
            ("save", "h", None),
            ("record", "chat"),
            ("branch", "h", "chat", None, "e8", "alice"),  # back to the left tip
            ("load", "h", "chat", None, None),
            ("rewrite", "h", 3),
            ("turns", "h", (False,)),
            ("save", "h", None),
            ("record", "chat"),
            ("branch", "h", "chat", 99, None, None),
            ("branch", "h", "chat", 1, "e1", None),
            ("branch", "h", "chat", None, "e404", None),
            ("branch", "h", "chat", None, None, None),
            ("branch", "h", "chat", 0, None, "bob"),
            ("branch", "old", "chat", 1, None, None),
            ("branch", "h", "chat", 0, None, None),
            ("load", "h", "chat", None, None),
        ],
    )


async def test_forks_share_history_and_outlive_their_source_as_on_the_reference(
    pair: Pair,
) -> None:
    """A fork keeps the history it was cut at (whole: with the usage), carries on alone, and
    stays whole when the conversation it came from is deleted."""
    answers = await same(
        pair,
        [
            ("new", "h", "chat"),
            ("turns", "h", (True, False)),
            ("save", "h", "alice"),
            ("fork", "f", "chat", 2, None, "partial", (None, None)),
            ("fork", "g", "chat", None, None, "whole", ("bob", "alice")),
            ("fork", "x", "chat", None, "e2", "by-entry", (None, None)),
            ("fork", "y", "chat", None, None, "whole", (None, None)),
            ("fork", "z", "chat", None, None, "other", (None, "bob")),
            ("fork", "z", "nobody", None, None, "other", (None, None)),
            ("turns", "f", (False,)),
            ("save", "f", None),
            ("delete", "chat", None),
            ("load", "f", "partial", None, None),
            ("load", "g", "whole", None, "bob"),
            ("entries", "by-entry", None, None),
            ("record", "partial"),
            ("list", None, None),
            ("new", "h", "chat"),
            ("turns", "h", (False,)),
            ("save", "h", "carol"),
            ("list", "carol", None),
        ],
    )
    assert answers[12] is not None
    assert len(answers[12]["messages"]) == 4


async def test_lists_updates_and_deletes_with_scopes_as_on_the_reference(pair: Pair) -> None:
    """Listing by scope and limit, titles and metadata (expected titles included), and
    deletes that keep to their scope."""
    script: list[tuple[Any, ...]] = []
    for n, scope in enumerate(["alice", "bob", "alice", None, "alice"]):
        script += [("new", f"h{n}", f"c{n}"), ("turns", f"h{n}", (False,))]
        script += [("save", f"h{n}", scope)]
    script += [
        ("list", None, None),
        ("list", "alice", 2),
        ("list", "alice", 0),
        ("list", "nobody", None),
        ("list", None, -1),
        ("update", "c0", {"title": "first", "expected_title": None}, None),
        ("update", "c0", {"title": "second", "expected_title": None}, None),
        ("update", "c1", {"metadata": {"model": "m", "n": [1, 2]}}, "bob"),
        ("update", "c1", {"title": "t"}, "alice"),
        ("update", "c1", {}, None),
        ("update", "gone", {"title": "t"}, None),
        ("load", "h1", "c1", None, None),
        ("turns", "h1", (False,)),
        ("save", "h1", None),  # a save keeps the update
        ("record", "c1"),
        ("list", None, 3),
        ("delete", "c2", "bob"),
        ("delete", "c2", "alice"),
        ("delete", "c2", None),
        ("record", "c2"),
        ("list", "alice", None),
        ("new", "h2", "c2"),
        ("turns", "h2", (True,)),
        ("save", "h2", "bob"),
        ("list", "bob", None),
    ]
    answers = await same(pair, script)
    assert [record["id"] for record in answers[15]] == ["c4", "c3", "c2", "c1", "c0"]
    assert [record["id"] for record in answers[16]] == ["c4", "c2"]


# --- programs hypothesis draws ---------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c"])
SCOPES = st.sampled_from([None, "alice", "bob"])
HANDLES = st.sampled_from(["h1", "h2"])
LIMITS = st.sampled_from([None, 0, 1, 3])
LABELS = st.sampled_from([f"e{n}" for n in range(1, 13)])
STEP = st.one_of(
    st.tuples(st.just("new"), HANDLES, IDS),
    st.tuples(st.just("turns"), HANDLES, st.lists(st.booleans(), min_size=1, max_size=2)),
    st.tuples(st.just("rewrite"), HANDLES, st.integers(0, 4)),
    st.tuples(st.just("load"), HANDLES, IDS, LIMITS, SCOPES),
    st.tuples(st.just("save"), HANDLES, SCOPES),
    st.tuples(
        st.just("branch"), HANDLES, IDS, st.one_of(st.none(), st.integers(0, 4)), st.none(), SCOPES
    ),
    st.tuples(st.just("branch"), HANDLES, IDS, st.none(), LABELS, SCOPES),
    st.tuples(
        st.just("fork"),
        HANDLES,
        IDS,
        st.sampled_from([None, 1]),
        st.none(),
        IDS,
        st.tuples(SCOPES, SCOPES),
    ),
    st.tuples(st.just("list"), SCOPES, LIMITS),
    st.tuples(st.just("update"), IDS, st.fixed_dictionaries({"title": IDS}), SCOPES),
    st.tuples(st.just("delete"), IDS, SCOPES),
    st.tuples(st.just("entries"), IDS, LIMITS, SCOPES),
    st.tuples(st.just("entry"), LABELS),
    st.tuples(st.just("record"), IDS),
)


PRELUDE: list[tuple[Any, ...]] = [
    ("new", "h1", "a"),
    ("turns", "h1", (False, True)),
    ("save", "h1", "alice"),
]
"""What every drawn program starts from: one stored conversation, held by `h1`."""


def _as_steps(drawn: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Drawn steps, lists made tuples (a step's tool flags)."""
    return [tuple(tuple(x) if isinstance(x, list) else x for x in step) for step in drawn]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(STEP, min_size=4, max_size=24))
async def test_drawn_programs_answer_as_on_the_reference(
    ours: TurnstoreConversationStore, script: list[tuple[Any, ...]]
) -> None:
    """Any program of calls, on empty stores, gets the same answers from both."""
    pair = Pair(InMemoryConversationStore(), ours)
    try:
        await same(pair, PRELUDE + _as_steps(script))
    finally:
        await pair.forget_all()


# --- what only ours has -------------------------------------------------------------------------


async def test_writers_racing_on_one_revision_one_wins_the_rest_conflict(
    store_url: str,
) -> None:
    """Eight stores on one database (eight pools) save one loaded revision at once: the
    store's compare-and-set lets exactly one commit, and the history is the winner's."""
    stores = [TurnstoreConversationStore(store_url) for _ in range(8)]
    try:
        first = Conversation(conversation_id="raced", messages=turn())
        await stores[0].save(first)
        held = [await each.load("raced") for each in stores]
        extra = [turn() for _ in stores]
        for conversation, more in zip(held, extra, strict=True):
            assert conversation is not None
            conversation.messages = [*conversation.messages, *more]
        saves = [each.save(c) for each, c in zip(stores, held, strict=True)]  # type: ignore[arg-type]
        results = await asyncio.gather(*saves, return_exceptions=True)
        won = [n for n, result in enumerate(results) if not isinstance(result, BaseException)]
        assert len(won) == 1
        assert all(isinstance(results[n], ConversationConflict) for n in range(8) if n not in won)
        stored = await stores[0].load("raced")
        assert stored is not None
        assert stored.messages == [*first.messages, *extra[won[0]]]
    finally:
        for each in stores:
            await each.aclose()


async def test_a_stale_write_record_conflicts_and_changes_nothing(
    ours: TurnstoreConversationStore,
) -> None:
    """`write_record` with a revision that is no longer stored writes neither the record nor
    its entries."""
    conversation = Conversation(conversation_id="stale", messages=turn())
    await ours.save(conversation)
    before = await ours.read_record("stale")
    assert before is not None
    entry = ConversationEntry(parent_id=before.head_id, message=turn()[0])
    moved = dataclasses.replace(before, head_id=entry.id, revision="new")
    with pytest.raises(ConversationConflict):
        await ours.write_record(moved, new_entries=[entry], expected_revision="not-it")
    assert await ours.read_record("stale") == before
    with pytest.raises(KeyError):
        await ours.read_entry(entry.id)


def _new(conversation_id: str = "other") -> Conversation:
    return Conversation(conversation_id=conversation_id, messages=turn())


BAD_CALLS = [
    pytest.param(lambda s, c: s.save(_new("x" * 10_000)), id="id too long"),
    pytest.param(lambda s, c: s.update("bad", metadata={"n": float("nan")}), id="nan metadata"),
    pytest.param(lambda s, c: s.update("bad", metadata={"n": 2**70}), id="huge int metadata"),
    pytest.param(lambda s, c: s.load("\x00"), id="nul id"),
    pytest.param(lambda s, c: s.update("bad", metadata={"n": (1, 2)}), id="tuple metadata"),
]


@pytest.mark.parametrize("call", BAD_CALLS)
async def test_bad_input_is_a_typed_error_and_changes_nothing(
    ours: TurnstoreConversationStore, call: Any
) -> None:
    """What turnstore cannot store is `InvalidInput` before any write: the stored record,
    history and catalog stay as they were."""
    conversation = Conversation(conversation_id="bad", messages=turn(tool=True))
    await ours.save(conversation, scope="alice")
    before = (await ours.read_record("bad"), await ours.load_entries("bad"))
    conversation.messages = [*conversation.messages, *turn()]
    with pytest.raises(InvalidInput):
        await call(ours, conversation)
    assert (await ours.read_record("bad"), await ours.load_entries("bad")) == before
    assert [r.conversation_id for r in await ours.list_conversations()] == ["bad"]


async def test_a_conversation_reads_back_through_the_catalog_view_and_search(
    ours: TurnstoreConversationStore,
) -> None:
    """In turnstore's own faces a conversation is a session of kind `pydantic-ai`, owned by
    its scope, read as user, assistant and tool messages, found by its words, and its figures
    are the responses' usage; turnstore's own delete erases it."""
    conversation = Conversation(conversation_id="shown", messages=turn(tool=True))
    await ours.save(conversation, scope="alice")
    store = ours.store
    summary = await store.session_summary("pydantic-ai/shown")
    assert summary is not None
    assert summary.kind == "pydantic-ai"
    assert summary.session_context.owner_id == "alice"
    assert summary.first_user_message is not None
    assert summary.first_user_message.startswith("question")
    page = await store.conversation("pydantic-ai/shown")
    assert page is not None
    assert [m.role for m in page.messages] == ["user", "assistant", "tool", "assistant"]
    assert [c.name for c in page.messages[1].tool_calls] == ["lookup"]
    assert page.messages[2].tool_call_id == page.messages[1].tool_calls[0].call_id
    said = page.messages[3].text
    hits = await store.search(SearchRequest(query=said, limit=10))
    assert [hit.session_id for hit in hits.hits] == ["pydantic-ai/shown"]
    # Pydantic AI's message JSON is not searched again: its parent ids, part kinds and
    # run ids are not words of the conversation (`KIND.unsearched`).
    call = page.messages[1].item
    for unsaid in (call["parent_id"], call["message"]["run_id"], "tool-call", "user-prompt"):
        assert (await store.search(SearchRequest(query=f'"{unsaid}"'))).hits == [], unsaid
    summary = await store.session_summary("pydantic-ai/shown")
    assert summary is not None
    assert "tokens" in summary.measured
    assert summary.execution_stats.model_calls == 2
    assert summary.execution_stats.tool_calls == 1
    assert summary.execution_stats.usage.input_tokens > 0
    assert await store.delete_sessions(["pydantic-ai/shown"])
    assert await ours.load("shown") is None
    assert (await store.search(SearchRequest(query=said, limit=10))).hits == []
