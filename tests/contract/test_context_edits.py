"""An edit of an earlier context item is saved as a rewrite or refused loudly, never lost."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint, ContextRewriteRequired, SequenceConflict
from turnstore.errors import ContextItemImmutable

SESSION = "edits"


def _turn(step: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "input_text", "text": f"question {step}"}]},
        {"role": "tool", "content": f"tool output {step} with a secret"},
    ]


async def _saved(store: Any, turns: int = 3, *, plain: bool = False) -> Checkpoint:
    checkpoint = Checkpoint(session_id=SESSION, context=[] if plain else turnstore.Context())
    for step in range(1, turns + 1):
        checkpoint.sequence = step
        checkpoint.context.extend(_turn(step))
        await store.save(checkpoint, _turn(step))
    return checkpoint


def _rows(database: Any) -> tuple[list[tuple[object, ...]], ...]:
    return tuple(
        database.query(f"SELECT * FROM {table} WHERE session_id = ? ORDER BY 2", (SESSION,))
        for table in ("sessions", "context_chunks", "transcript_delta")
    )


async def test_an_edit_in_place_of_a_loaded_item_raises_and_changes_nothing(store, database):
    """`cp.context[1]["content"] = "redacted"` raises instead of being silently dropped."""
    await _saved(store)
    rows = _rows(database)
    loaded = await store.load(SESSION)
    with pytest.raises(ContextItemImmutable):
        loaded.context[1]["content"] = "[redacted]"
    with pytest.raises(ContextItemImmutable):
        loaded.context[0]["content"][0]["text"] = "[redacted]"
    assert loaded.context[1]["content"] == "tool output 1 with a secret"
    assert _rows(database) == rows


@pytest.mark.parametrize("source", ["loaded", "kept"])
async def test_a_replaced_item_is_saved_as_a_rewrite(store, source):
    """Assigning a changed copy through the context saves it; load returns what was saved."""
    kept = await _saved(store)
    checkpoint = await store.load(SESSION) if source == "loaded" else kept
    checkpoint.context[1] = {**checkpoint.context[1], "content": "[redacted]"}
    checkpoint.sequence += 1
    checkpoint.context.extend(_turn(4))
    await store.save(checkpoint, _turn(4))
    loaded = await store.load(SESSION)
    assert loaded == checkpoint
    assert loaded.context[1]["content"] == "[redacted]"
    assert len(loaded.context) == 8
    # The next save appends again from the rewritten context.
    checkpoint.sequence += 1
    checkpoint.context.extend(_turn(5))
    await store.save(checkpoint, _turn(5))
    assert await store.load(SESSION) == checkpoint


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.pop(0),
        lambda c: c.__delitem__(slice(2, None)),
        lambda c: c.insert(0, {"role": "system", "content": "be brief"}),
        lambda c: c.reverse(),
        lambda c: c.clear(),
        lambda c: c.__setitem__(slice(0, 2), [{"role": "summary", "content": "two turns"}]),
    ],
    ids=["pop", "delete-tail", "insert", "reverse", "clear", "summarise"],
)
async def test_every_edit_through_a_held_context_is_saved(store, edit):
    """Removing, inserting, reordering or summarising through the context: saved exactly."""
    checkpoint = await store.load(SESSION) if await _saved(store) else None
    assert checkpoint is not None
    edit(checkpoint.context)
    checkpoint.sequence += 1
    await store.save(checkpoint)
    assert await store.load(SESSION) == checkpoint


async def test_a_plain_list_edited_in_place_is_refused_until_the_epoch_changes(store, database):
    """A plain list cannot be watched: the save compares it and refuses a changed item."""
    checkpoint = await _saved(store, plain=True)
    rows = _rows(database)
    checkpoint.context[2]["content"][0]["text"] = "[redacted]"
    checkpoint.sequence += 1
    with pytest.raises(ContextRewriteRequired, match="item 2 changed"):
        await store.save(checkpoint)
    assert _rows(database) == rows
    checkpoint.context_epoch += 1
    await store.save(checkpoint)
    assert await store.load(SESSION) == checkpoint


async def test_the_same_items_in_another_key_order_are_not_an_edit(store):
    """A plain list rebuilt each turn with its keys in another order saves as an append."""
    await _saved(store, plain=True)
    loaded = await store.load(SESSION)
    rebuilt = [dict(reversed(list(copy.deepcopy(item).items()))) for item in loaded.context]
    checkpoint = Checkpoint(session_id=SESSION, sequence=4, context=[*rebuilt, *_turn(4)])
    await store.save(checkpoint, _turn(4))
    assert await store.load(SESSION) == checkpoint


async def test_an_appended_item_is_a_copy(store):
    """Changing the caller's dict after appending it does not change what is saved or held."""
    checkpoint = Checkpoint(session_id=SESSION, sequence=1)
    mine = {"role": "user", "content": "hi"}
    checkpoint.context.append(mine)
    mine["content"] = "changed after appending"
    await store.save(checkpoint)
    assert checkpoint.context == [{"role": "user", "content": "hi"}]
    assert await store.load(SESSION) == checkpoint


async def test_a_failed_save_keeps_the_edit_for_the_next(store):
    """An edit whose save failed is still saved by the next save."""
    checkpoint = await store.load(SESSION) if await _saved(store) else None
    assert checkpoint is not None
    checkpoint.context[0] = {"role": "user", "content": "[redacted]"}
    with pytest.raises(SequenceConflict):
        await store.save(checkpoint)
    checkpoint.sequence += 1
    await store.save(checkpoint)
    assert (await store.load(SESSION)).context[0] == {"role": "user", "content": "[redacted]"}


async def test_a_context_another_writer_moved_on_from_is_compared(store_url):
    """A context held by one store is compared again once another store changed the session."""
    with turnstore.open_blocking(store_url) as first, turnstore.open_blocking(store_url) as second:
        checkpoint = Checkpoint(session_id=SESSION, sequence=1)
        checkpoint.context.extend(_turn(1))
        first.save(checkpoint)
        other = second.load(SESSION)
        assert other is not None
        other.context[0] = {"role": "user", "content": "rewritten by another writer"}
        other.sequence = 2
        second.save(other)
        # `checkpoint` still says it matches what `first` saved at sequence 1; it does not.
        checkpoint.sequence = 3
        checkpoint.context.extend(_turn(3))
        with pytest.raises(ContextRewriteRequired, match="item 0 changed"):
            first.save(checkpoint)
        assert first.load(SESSION) == other


async def test_a_context_moved_to_another_session_is_compared(store):
    """A context held for one session, saved under another id, is not trusted blindly."""
    checkpoint = await _saved(store)
    other = Checkpoint(session_id="other", sequence=1, context=checkpoint.context)
    await store.save(other)
    assert await store.load("other") == other
    other.context[0] = {"role": "user", "content": "[redacted]"}
    other.sequence = 2
    await store.save(other)
    assert (await store.load("other")).context[0]["content"] == "[redacted]"
    assert (await store.load(SESSION)).context[0]["content"][0]["text"] == "question 1"


@pytest.mark.parametrize("stale", [False, True], ids=["next-sequence", "stale-sequence"])
async def test_a_bad_item_in_a_plain_list_is_refused_before_any_read(store, database, stale):
    """A value JSON would change is refused as such, even where the save would also conflict."""
    checkpoint = await _saved(store, plain=True)
    rows = _rows(database)
    checkpoint.sequence += 0 if stale else 1
    checkpoint.context[0] = {"role": "user", "content": float("nan")}
    with pytest.raises(turnstore.InvalidInput, match=r"checkpoint context\[0\]: \$\.content"):
        await store.save(checkpoint)
    checkpoint.context[0] = {"role": "user", "content": turnstore.Checkpoint(session_id="x")}
    with pytest.raises(turnstore.InvalidInput, match=r"checkpoint context\[0\]: \$\.content"):
        await store.save(checkpoint)
    checkpoint.context[0] = turnstore.Checkpoint(session_id="x")
    with pytest.raises(turnstore.InvalidInput, match=r"checkpoint context\[0\]: \$ is of type"):
        await store.save(checkpoint)
    assert _rows(database) == rows
