"""The append-only context rule: plan_context_write writes only what a save appended."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_samples import json_values

from turnstore import (
    ContextRewriteRequired,
    InvalidInput,
)
from turnstore.errors import (
    RecordDecodeError,
)
from turnstore.records.base import encode_json
from turnstore.rules.context import ContextWrite, StoredContext, digest, plan_context_write

ITEMS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, "note", 3]


def _stored(epoch: int, context: list[Any]) -> StoredContext:
    tail = digest(encode_json(context[-1])) if context else None
    return StoredContext(epoch, len(context), tail)


def test_first_save_writes_every_item() -> None:
    """With nothing stored, the save resets and writes the whole context from 0."""
    plan = plan_context_write(None, 0, ITEMS)
    assert plan == ContextWrite(
        reset=True, start=0, items_json=encode_json(ITEMS), stored=_stored(0, ITEMS)
    )


def test_first_save_of_an_empty_context() -> None:
    """An empty first context resets with nothing to write and no tail digest."""
    plan = plan_context_write(None, 5, [])
    assert plan == ContextWrite(
        reset=True, start=0, items_json=None, stored=StoredContext(5, 0, None)
    )


def test_same_epoch_appends_only_the_tail() -> None:
    """In the stored epoch, the save writes context[stored.length:] starting at stored.length."""
    stored = plan_context_write(None, 2, ITEMS[:2]).stored
    plan = plan_context_write(stored, 2, ITEMS)
    assert plan.reset is False
    assert plan.start == 2
    assert plan.items_json == encode_json(ITEMS[2:])
    assert plan.stored == _stored(2, ITEMS)


def test_same_epoch_without_change_writes_nothing() -> None:
    """An unchanged context in the same epoch writes no items and keeps the stored state."""
    stored = _stored(1, ITEMS)
    plan = plan_context_write(stored, 1, list(ITEMS))
    assert plan == ContextWrite(reset=False, start=len(ITEMS), items_json=None, stored=stored)


def test_same_epoch_empty_context_stays_empty() -> None:
    """An empty stored context and an empty context in the same epoch write nothing."""
    stored = StoredContext(0, 0, None)
    assert plan_context_write(stored, 0, []) == ContextWrite(False, 0, None, stored)


def test_appending_to_an_empty_stored_context() -> None:
    """Items appended to an empty stored context are written from position 0 without a reset."""
    plan = plan_context_write(StoredContext(0, 0, None), 0, ITEMS[:1])
    assert (plan.reset, plan.start, plan.items_json) == (False, 0, encode_json(ITEMS[:1]))


def test_shrinking_within_an_epoch_requires_a_rewrite() -> None:
    """A context shorter than the stored one, in the same epoch, is refused."""
    with pytest.raises(ContextRewriteRequired) as caught:
        plan_context_write(_stored(0, ITEMS), 0, ITEMS[:-1])
    assert str(caught.value) == "checkpoint context shrank without a context_epoch change"


def test_clearing_within_an_epoch_requires_a_rewrite() -> None:
    """Emptying a non-empty context without an epoch bump is refused."""
    with pytest.raises(ContextRewriteRequired, match="shrank"):
        plan_context_write(_stored(3, ITEMS), 3, [])


@pytest.mark.parametrize("appended", [[], ["more"]])
def test_modified_stored_tail_requires_a_rewrite(appended: list[Any]) -> None:
    """Changing the item at the stored end, with or without appending, is refused."""
    changed = [*ITEMS[:-1], 4, *appended]
    with pytest.raises(ContextRewriteRequired) as caught:
        plan_context_write(_stored(0, ITEMS), 0, changed)
    assert str(caught.value) == (
        "checkpoint context changed before its stored end without a context_epoch change"
    )


def test_tail_comparison_is_by_encoded_json() -> None:
    """A tail item that encodes differently (key order) counts as modified."""
    stored = _stored(0, [{"a": 1, "b": 2}])
    with pytest.raises(ContextRewriteRequired):
        plan_context_write(stored, 0, [{"b": 2, "a": 1}])
    plan_context_write(stored, 0, [{"a": 1, "b": 2}])


@pytest.mark.parametrize(
    "context",
    [ITEMS[:1], [], ["entirely", "different", "items", "and", "longer"], ITEMS],
    ids=["shorter", "empty", "different", "same"],
)
def test_epoch_change_resets_with_every_item(context: list[Any]) -> None:
    """In a new epoch the save resets and writes the whole context, whatever it holds."""
    plan = plan_context_write(_stored(1, ITEMS), 2, context)
    assert plan == ContextWrite(
        reset=True,
        start=0,
        items_json=encode_json(context) if context else None,
        stored=_stored(2, context),
    )


def test_epoch_may_go_down_as_a_change() -> None:
    """Any epoch other than the stored one is a rewrite, including a smaller one."""
    assert plan_context_write(_stored(5, ITEMS), 4, ITEMS[:1]).reset is True


def test_unencodable_items_are_refused() -> None:
    """A context item JSON cannot encode is refused as RecordDecodeError."""
    with pytest.raises(RecordDecodeError, match=r"^checkpoint context is not encodable"):
        plan_context_write(None, 0, [object()])
    with pytest.raises(RecordDecodeError):
        plan_context_write(_stored(0, ITEMS), 0, [*ITEMS, {1j}])


def test_context_rewrite_required_is_invalid_input() -> None:
    """ContextRewriteRequired is an InvalidInput."""
    assert issubclass(ContextRewriteRequired, InvalidInput)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(json_values, max_size=3)),
        st.tuples(st.just("rewrite"), st.lists(json_values, max_size=3)),
    ),
    min_size=1,
    max_size=8,
)


@given(_ops)
def test_applied_writes_rebuild_the_context(ops: list[tuple[str, list[Any]]]) -> None:
    """Applying each planned write to a stored copy always reproduces the saved context."""
    epoch = 0
    context: list[Any] = []
    stored: StoredContext | None = None
    rows: list[Any] = []
    for op, items in ops:
        if op == "append":
            context = [*context, *items]
        else:
            epoch += 1
            context = list(items)
        plan = plan_context_write(stored, epoch, context)
        if plan.reset:
            rows = []
        assert plan.start == len(rows)
        if plan.items_json is not None:
            rows.extend(msgspec.json.decode(plan.items_json))
        stored = plan.stored
        assert stored.length == len(context)
        assert stored.epoch == epoch
        assert rows == msgspec.json.decode(encode_json(context))
