"""Item-level context edits: append, pop, clear and tail, on every backend and face.

- `append_context` creates a session at sequence 1 (owned as asked) and advances an existing
  one by one, with the items as its context and as one transcript batch, in one commit;
- `pop_context` removes the newest items and returns them oldest first; `clear_context`
  removes all; the transcript keeps every batch it journaled;
- `context_tail` reads only the newest items, equal to the list's tail for any limit;
- a random mix of edits and checkpoint saves agrees with a plain list after every step;
- a pop rewrites at most the one chunk holding the last kept item, never the history;
- an edit advances the sequence, so a writer holding an older checkpoint gets
  `SequenceConflict` instead of undoing it;
- concurrent appends to one session keep one total order and lose nothing;
- `context_window` reads any run of items with the sequence it read at, and
  `replace_context` swaps a suffix (dropping a prefix too, if asked) only while the session is
  still at that sequence: any write in between makes it return False and write nothing;
- bad arguments are `InvalidInput` and change nothing.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from turnstore import (
    Checkpoint,
    InvalidInput,
    SequenceConflict,
    SessionNotFound,
    StorageError,
    TranscriptPageRequest,
)

SESSION = "items"


def item(number: int) -> dict[str, Any]:
    """A context item holding its number."""
    return {"type": "message", "role": "user" if number % 2 else "assistant", "n": number}


async def transcript(store: Any, session_id: str) -> list[tuple[int, list[Any]]]:
    """Every transcript batch of a session, oldest first, as (sequence, items)."""
    page = await store.transcript_page(session_id, TranscriptPageRequest(max_batches=10_000))
    return [(batch.sequence, batch.items) for batch in reversed(page.batches)]


async def test_append_creates_the_session_then_advances_it_by_one(store):
    first = [{"role": "user", "content": "hello"}, item(1)]
    assert await store.append_context(SESSION, first, "alice") == 1
    assert await store.append_context(SESSION, [item(2)], "bob") == 2
    checkpoint = await store.load(SESSION)
    assert checkpoint.sequence == 2
    assert list(checkpoint.context) == [*first, item(2)]
    summary = await store.session_summary(SESSION)
    assert summary.sequence == 2
    assert summary.session_context.owner_id == "alice"  # the creator's owner is kept
    assert summary.first_user_message == "hello"
    assert await transcript(store, SESSION) == [(1, first), (2, [item(2)])]


async def test_pop_returns_the_newest_items_oldest_first_and_keeps_the_transcript(store):
    await store.append_context(SESSION, [item(1), item(2), item(3)])
    await store.append_context(SESSION, [item(4)])
    assert await store.pop_context(SESSION) == [item(4)]
    assert await store.pop_context(SESSION, 2) == [item(2), item(3)]
    assert await store.context_tail(SESSION) == [item(1)]
    assert await store.pop_context(SESSION, 5) == [item(1)]
    assert await store.pop_context(SESSION) == []  # nothing left to pop
    checkpoint = await store.load(SESSION)
    assert (checkpoint.sequence, list(checkpoint.context)) == (5, [])
    assert await transcript(store, SESSION) == [(1, [item(1), item(2), item(3)]), (2, [item(4)])]


async def test_clear_removes_every_item_and_the_session_stays(store):
    await store.append_context(SESSION, [item(1), item(2)])
    await store.append_context(SESSION, [item(3)])
    assert await store.clear_context(SESSION) is True
    assert await store.context_tail(SESSION) == []
    assert (await store.session_summary(SESSION)).sequence == 3
    assert await store.append_context(SESSION, [item(4)]) == 4
    assert await store.context_tail(SESSION) == [item(4)]
    assert [items for _, items in await transcript(store, SESSION)] == [
        [item(1), item(2)],
        [item(3)],
        [item(4)],
    ]


async def test_a_missing_session_reads_empty_and_is_not_created(store):
    assert await store.context_tail("nobody") == []
    assert await store.pop_context("nobody") == []
    assert await store.clear_context("nobody") is False
    assert await store.session_summary("nobody") is None


@pytest.mark.parametrize("limit", [None, 0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 100])
async def test_tail_is_the_lists_tail_for_any_limit(store, limit):
    items = [item(number) for number in range(10)]
    for start, end in ((0, 3), (3, 4), (4, 8), (8, 10)):  # chunks of 3, 1, 4 and 2 items
        await store.append_context(SESSION, items[start:end])
    expected = items if limit is None else items[len(items) - min(limit, len(items)) :]
    assert await store.context_tail(SESSION, limit) == expected


async def test_edits_and_saves_agree_with_a_list_after_every_step(store):
    """Appends, pops, clears and checkpoint saves in a random order, checked after each."""
    rng = random.Random(20261201)
    model: list[Any] = []
    batches: list[list[Any]] = []
    sequence = 0
    for step in range(150):
        action = rng.choice(["append"] * 5 + ["pop"] * 3 + ["clear", "save"])
        if action == "append":
            new = [item(step * 10 + n) for n in range(rng.randint(1, 4))]
            sequence = await store.append_context(SESSION, new)
            model += new
            batches.append(new)
        elif action == "pop":
            count = rng.randint(1, 5)
            removed = await store.pop_context(SESSION, count)
            assert removed == model[len(model) - min(count, len(model)) :]
            del model[len(model) - len(removed) :]
            sequence += 1 if removed else 0  # removing nothing writes nothing
        elif action == "clear":
            assert await store.clear_context(SESSION) is bool(sequence)
            sequence += 1 if model else 0
            model.clear()
        else:
            # A checkpoint save on top of item edits: the context as loaded plus two items.
            checkpoint = await store.load(SESSION) or Checkpoint.empty(SESSION)
            new = [item(step * 10), item(step * 10 + 1)]
            checkpoint.context.extend(new)
            checkpoint.sequence += 1
            await store.save(checkpoint, new)
            sequence = checkpoint.sequence
            model += new
            batches.append(new)
        loaded = await store.load(SESSION)
        if sequence == 0:
            assert loaded is None
            continue
        assert (loaded.sequence, list(loaded.context)) == (sequence, model), step
        limit = rng.randint(0, 8)
        newest = model[len(model) - min(limit, len(model)) :]
        assert await store.context_tail(SESSION, limit) == newest
    assert [items for _, items in await transcript(store, SESSION)] == batches


async def test_an_edit_refuses_a_writer_holding_an_older_checkpoint(store):
    await store.append_context(SESSION, [item(1), item(2)])
    stale = await store.load(SESSION)
    assert await store.pop_context(SESSION) == [item(2)]
    stale.context.append(item(3))
    stale.sequence += 1
    with pytest.raises(SequenceConflict) as refused:
        await store.save(stale, [item(3)])
    assert (refused.value.stored, refused.value.attempted) == (2, 2)
    fresh = await store.load(SESSION)
    assert list(fresh.context) == [item(1)]
    fresh.context.append(item(3))
    fresh.sequence += 1
    await store.save(fresh, [item(3)])
    assert await store.context_tail(SESSION) == [item(1), item(3)]


async def test_append_keeps_the_checkpoints_other_fields(store):
    checkpoint = Checkpoint.empty(SESSION)
    checkpoint.sequence = 1
    checkpoint.first_user_message = "kept"
    checkpoint.context.append(item(0))
    await store.save(checkpoint, [item(0)])
    assert await store.append_context(SESSION, [item(1)]) == 2
    loaded = await store.load(SESSION)
    assert loaded.first_user_message == "kept"
    assert list(loaded.context) == [item(0), item(1)]


def _chunk_versions(database: Any) -> dict[int, str]:
    """Each context chunk's start and physical row version (rewritten rows get a new one)."""
    version = "ctid::text" if database.backend == "postgres" else "CAST(rowid AS TEXT)"
    rows = database.query(
        f"SELECT start, {version} FROM context_chunks WHERE session_id = ?", (SESSION,)
    )
    return dict(rows)


async def test_a_pop_rewrites_at_most_the_chunk_holding_the_last_kept_item(store, database):
    for number in range(0, 200, 4):
        await store.append_context(SESSION, [item(number + n) for n in range(4)])
    before = _chunk_versions(database)
    assert await store.pop_context(SESSION) == [item(199)]  # inside the last chunk
    after = _chunk_versions(database)
    assert set(after) == set(before)
    assert {start for start in before if before[start] != after[start]} <= {196}
    assert await store.pop_context(SESSION, 3) == [item(196), item(197), item(198)]
    untouched = _chunk_versions(database)
    assert set(untouched) == set(before) - {196}  # the emptied chunk is gone, no other
    assert all(untouched[start] == before[start] for start in untouched)


async def test_concurrent_appends_keep_one_total_order(store):
    writers, rounds = 8, 10

    async def writer(number: int) -> list[int]:
        sequences = []
        for step in range(rounds):
            batch = [item(number * 1000 + step * 10 + n) for n in range(2)]
            sequences.append(await store.append_context(SESSION, batch))
        return sequences

    results = await asyncio.gather(*(writer(number) for number in range(writers)))
    sequences = sorted(sequence for result in results for sequence in result)
    assert sequences == list(range(1, writers * rounds + 1))  # each append got its own
    batches = await transcript(store, SESSION)
    assert [sequence for sequence, _ in batches] == sequences
    context = await store.context_tail(SESSION)
    assert context == [entry for _, items in batches for entry in items]  # the commit order


BAD_CALLS = [
    ("append_context", (SESSION, "abc"), "items must be a list"),
    ("append_context", (SESSION, {"a": 1}), "items must be a list"),
    ("append_context", (SESSION, []), "items cannot be empty"),
    ("append_context", (SESSION, [], None, 1), "items cannot be empty"),
    ("append_context", (SESSION, [float("nan")]), "not a finite number"),
    ("append_context", (SESSION, [b"x"]), r"items\[0\]: \$ is of type bytes"),
    ("append_context", (SESSION, [item(1)], 7), "owner ID must be a string"),
    ("append_context", (SESSION, [item(1)], None, -1), "expected_sequence must be None"),
    ("append_context", (SESSION, [item(1)], None, None, [("a", "b")]), r"\(scope, key, value\)"),
    ("append_context", (SESSION, [item(1)], None, None, [("a", "k\x00", 1)]), "state key"),
    ("append_context", (SESSION, [], None, None, [("a", "b", {1})]), "middleware state"),
    ("load_state_scope", ("a\x00",), "scope"),
    ("append_context", ("", [item(1)]), "session ID"),
    ("append_context", ("a\x00b", [item(1)]), "NUL"),
    ("pop_context", (SESSION, 0), "count must be an integer of at least 1"),
    ("pop_context", (SESSION, True), "count must be an integer"),
    ("pop_context", (SESSION, "1"), "count must be an integer"),
    ("clear_context", (7,), "session ID"),
    ("context_tail", (SESSION, -1), "limit must be None or a non-negative integer"),
    ("context_tail", (SESSION, 1.5), "limit must be None or a non-negative integer"),
    ("context_window", (SESSION, -1, None), "before must be None or a non-negative integer"),
    ("context_window", (SESSION, None, "2"), "limit must be None or a non-negative integer"),
    ("replace_context", (SESSION, -1, 0, []), "sequence must be a non-negative integer"),
    ("replace_context", (SESSION, 1, None, []), "start must be a non-negative integer"),
    ("replace_context", (SESSION, 1, 0, "ab"), "items must be a list"),
    ("replace_context", (SESSION, 1, 0, [float("inf")]), "not a finite number"),
    ("replace_context", (SESSION, 1, 0, [], -2), "drop_prefix must be a non-negative integer"),
]


@pytest.mark.parametrize(("method", "args", "message"), BAD_CALLS)
async def test_bad_arguments_are_refused_and_change_nothing(store, database, method, args, message):
    await store.append_context(SESSION, [item(1)])
    before = database.query("SELECT start, items_json FROM context_chunks ORDER BY start")
    with pytest.raises(InvalidInput, match=message):
        await getattr(store, method)(*args)
    assert database.query("SELECT start, items_json FROM context_chunks ORDER BY start") == before
    assert (await store.session_summary(SESSION)).sequence == 1


async def test_deleting_the_session_removes_its_items(store, database):
    await store.append_context(SESSION, [item(1), item(2)])
    assert await store.delete_sessions([SESSION]) is True
    assert await store.context_tail(SESSION) == []
    assert database.count("context_chunks") == 0
    assert database.count("transcript_delta") == 0


# --- windows and conditional replacement ---------------------------------------------------


async def _filled(store: Any, count: int, batch: int = 3) -> list[Any]:
    items = [item(number) for number in range(count)]
    for start in range(0, count, batch):
        await store.append_context(SESSION, items[start : start + batch])
    return items


@pytest.mark.parametrize(
    ("before", "limit"), [(None, None), (None, 4), (5, 2), (5, None), (0, 3), (7, 0), (99, 3)]
)
async def test_a_window_is_the_lists_slice_with_the_sequence(store, before, limit):
    items = await _filled(store, 10)
    window = await store.context_window(SESSION, before, limit)
    end = len(items) if before is None else min(before, len(items))
    first = 0 if limit is None else max(0, end - limit)
    assert (window.items, window.start, window.length) == (items[first:end], first, 10)
    assert window.sequence == (await store.session_summary(SESSION)).sequence == 4
    missing = await store.context_window("nobody", None, 3)
    assert (missing.items, missing.start, missing.length, missing.sequence) == ([], 0, 0, 0)


async def test_replace_swaps_the_suffix_in_one_commit(store):
    items = await _filled(store, 10)
    window = await store.context_window(SESSION, None, 4)
    summary = {"type": "compaction", "summary": "of items 6 to 9"}
    assert await store.replace_context(SESSION, window.sequence, 6, [summary]) is True
    loaded = await store.load(SESSION)
    assert list(loaded.context) == [*items[:6], summary]
    assert loaded.sequence == window.sequence + 1
    assert (await transcript(store, SESSION))[-1] == (loaded.sequence, [summary])
    # The same read again is stale now: nothing is written.
    assert await store.replace_context(SESSION, window.sequence, 6, [item(99)]) is False
    assert list((await store.load(SESSION)).context) == [*items[:6], summary]


async def test_any_write_after_the_read_makes_a_replace_fail(store):
    items = await _filled(store, 6)
    for write in ("append", "pop", "clear", "save"):
        window = await store.context_window(SESSION, None, None)
        if write == "append":
            await store.append_context(SESSION, [item(50)])
        elif write == "pop":
            await store.pop_context(SESSION)
        elif write == "clear":
            await store.clear_context(SESSION)
            await store.append_context(SESSION, items)
        else:
            checkpoint = await store.load(SESSION)
            checkpoint.sequence += 1
            await store.save(checkpoint)
        before = list((await store.load(SESSION)).context)
        assert await store.replace_context(SESSION, window.sequence, 0, [item(77)]) is False
        assert list((await store.load(SESSION)).context) == before, write


async def test_replace_with_a_dropped_prefix_rewrites_the_rest_once(store, database):
    items = await _filled(store, 10)
    window = await store.context_window(SESSION, None, 3)
    summary = {"type": "compaction", "summary": "of 7 to 9"}
    assert await store.replace_context(SESSION, window.sequence, 7, [summary], 2) is True
    loaded = await store.load(SESSION)
    assert list(loaded.context) == [*items[2:7], summary]
    assert loaded.context_epoch == 1  # the stored indexes start at 0 again
    assert database.count("context_chunks", "session_id = ?", (SESSION,)) == 1
    # Every journaled batch is still whole, then the replacement.
    batches = [entry for _, entry in await transcript(store, SESSION)]
    assert batches == [items[0:3], items[3:6], items[6:9], items[9:10], [summary]]
    # Edits go on from there as from any context.
    await store.append_context(SESSION, [item(20)])
    assert await store.pop_context(SESSION, 2) == [summary, item(20)]
    assert await store.context_tail(SESSION) == items[2:7]


@pytest.mark.parametrize(("start", "drop"), [(0, 0), (3, 0), (4, 0), (10, 0), (10, 10), (5, 5)])
async def test_replace_at_any_boundary_agrees_with_the_list(store, start, drop):
    items = await _filled(store, 10, batch=4)  # chunks start at 0, 4 and 8
    sequence = (await store.context_window(SESSION)).sequence
    new = [item(100), item(101)]
    assert await store.replace_context(SESSION, sequence, start, new, drop) is True
    expected = items[drop:start] + new
    assert await store.context_tail(SESSION) == expected
    assert list((await store.load(SESSION)).context) == expected
    assert await store.context_tail(SESSION, 3) == expected[-3:]


async def test_replace_with_nothing_new_only_shortens(store):
    items = await _filled(store, 5)
    sequence = (await store.context_window(SESSION)).sequence
    assert await store.replace_context(SESSION, sequence, 5, []) is True  # changes nothing
    assert (await store.context_window(SESSION)).sequence == sequence
    assert await store.replace_context(SESSION, sequence, 2, []) is True
    assert await store.context_tail(SESSION) == items[:2]


@pytest.mark.parametrize(
    ("start", "drop", "message"),
    [(11, 0, "within the context"), (3, 4, "after the dropped prefix")],
)
async def test_a_replacement_outside_the_context_is_refused(store, database, start, drop, message):
    await _filled(store, 10)
    sequence = (await store.context_window(SESSION)).sequence
    before = database.query("SELECT start, items_json FROM context_chunks ORDER BY start")
    with pytest.raises(InvalidInput, match=message):
        await store.replace_context(SESSION, sequence, start, [item(1)], drop)
    assert database.query("SELECT start, items_json FROM context_chunks ORDER BY start") == before


# --- appends that expect a sequence and write state ----------------------------------------


async def test_an_append_expecting_a_sequence_refuses_a_session_that_moved_on(store, database):
    assert await store.append_context(SESSION, [], None, 0) == 1  # created, no items yet
    with pytest.raises(SequenceConflict) as refused:
        await store.append_context(SESSION, [item(1)], None, 0)  # it exists now
    assert (refused.value.session_id, refused.value.stored, refused.value.attempted) == (
        SESSION,
        1,
        0,
    )
    assert await store.append_context(SESSION, [item(1)], None, 1) == 2
    before = database.query("SELECT start, items_json FROM context_chunks ORDER BY start")
    with pytest.raises(SequenceConflict):
        await store.append_context(SESSION, [item(2)], None, 1, [("scope", "k", 1)])
    assert database.query("SELECT start, items_json FROM context_chunks ORDER BY start") == before
    assert await store.load_state("scope", "k") is None  # the refused append wrote no state
    with pytest.raises(SessionNotFound):
        await store.append_context("gone", [item(1)], None, 3)
    assert await store.session_summary("gone") is None


async def test_an_append_writes_its_state_in_the_same_commit(store, database):
    writes = [("app:x", "color", "blue"), ("user:x:ada", "n", 1), (SESSION, "k", [1, 2])]
    assert await store.append_context(SESSION, [item(1)], "ada", None, writes) == 1
    assert await store.load_state_scope("app:x") == {"color": "blue"}
    assert await store.load_state_scope("user:x:ada") == {"n": 1}
    assert await store.append_context(SESSION, [], None, 1, [("app:x", "size", None)]) == 2
    assert await store.load_state_scope("app:x") == {"color": "blue", "size": None}
    assert await store.context_tail(SESSION) == [item(1)]  # a state-only append adds no item
    # A failing commit writes neither the items nor the state.
    database.fail_inserts_into("context_chunks")
    with pytest.raises(StorageError):
        await store.append_context(SESSION, [item(2)], None, 2, [("app:x", "color", "red")])
    database.stop_failing_inserts_into("context_chunks")
    assert await store.load_state_scope("app:x") == {"color": "blue", "size": None}
    assert await store.context_tail(SESSION) == [item(1)]
    # Session-scoped state goes with the session.
    assert await store.delete_sessions([SESSION]) is True
    assert await store.load_state_scope(SESSION) == {}
    assert await store.load_state_scope("app:x") == {"color": "blue", "size": None}


async def test_concurrent_appends_expecting_one_sequence_let_exactly_one_win(store):
    await store.append_context(SESSION, [item(0)])
    results = await asyncio.gather(
        *(store.append_context(SESSION, [item(n)], None, 1) for n in range(1, 7)),
        return_exceptions=True,
    )
    assert sorted(type(result).__name__ for result in results) == ["SequenceConflict"] * 5 + ["int"]
    assert len(await store.context_tail(SESSION)) == 2
