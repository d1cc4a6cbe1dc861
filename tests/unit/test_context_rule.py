"""The context rule: plan_context_write writes only what a save appended, and loses no edit."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_samples import json_values

from turnstore import ContextRewriteRequired, InvalidInput
from turnstore.records.base import encode_json
from turnstore.records.context import CLEAN
from turnstore.rules.context import (
    ContextWrite,
    StoredContext,
    Verify,
    digest,
    first_difference,
    plan_context_write,
)

ITEMS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, "note", 3]


def _stored(epoch: int, context: list[Any]) -> StoredContext:
    tail = digest(encode_json(context[-1])) if context else None
    return StoredContext(epoch, len(context), tail)


def _against(stored: list[Any], context: list[Any]) -> Verify:
    """A verifier comparing `context` with `stored` as the backend does, by value."""
    return lambda length: first_difference(context[:length], stored[:length])


def _untouched(length: int) -> int | None:
    raise AssertionError("a held context must not be compared")


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
    plan = plan_context_write(stored, 2, ITEMS, None, _against(ITEMS[:2], ITEMS))
    assert plan.reset is False
    assert plan.start == 2
    assert plan.items_json == encode_json(ITEMS[2:])
    assert plan.stored == _stored(2, ITEMS)


def test_a_held_context_is_not_compared() -> None:
    """A context the store holds, unedited, appends without comparing its stored items."""
    plan = plan_context_write(_stored(0, ITEMS[:2]), 0, ITEMS, CLEAN, _untouched)
    assert (plan.reset, plan.start, plan.items_json) == (False, 2, encode_json(ITEMS[2:]))


@pytest.mark.parametrize("edited", [0, 1])
def test_an_edit_of_a_held_context_is_saved_as_a_rewrite(edited: int) -> None:
    """An edit before the stored end of a held context rewrites it, in the same epoch."""
    context = [{"role": "user", "content": "[redacted]"}, *ITEMS[1:]]
    plan = plan_context_write(_stored(7, ITEMS[:2]), 7, context, edited, _untouched)
    assert plan == ContextWrite(True, 0, encode_json(context), _stored(7, context))


def test_an_edit_after_the_stored_end_only_appends() -> None:
    """Replacing an item appended since the last save is still an append."""
    plan = plan_context_write(_stored(0, ITEMS[:2]), 0, ITEMS, 3, _untouched)
    assert (plan.reset, plan.start) == (False, 2)


def test_same_epoch_without_change_writes_nothing() -> None:
    """An unchanged context in the same epoch writes no items and keeps the stored state."""
    stored = _stored(1, ITEMS)
    plan = plan_context_write(stored, 1, list(ITEMS), None, _against(ITEMS, ITEMS))
    assert plan == ContextWrite(reset=False, start=len(ITEMS), items_json=None, stored=stored)


def test_appending_to_an_empty_stored_context() -> None:
    """Items appended to an empty stored context are written from position 0 without a reset."""
    plan = plan_context_write(StoredContext(0, 0, None), 0, ITEMS[:1], None, _against([], []))
    assert (plan.reset, plan.start, plan.items_json) == (False, 0, encode_json(ITEMS[:1]))


def test_shrinking_within_an_epoch_requires_a_rewrite() -> None:
    """A plain context shorter than the stored one, in the same epoch, is refused."""
    with pytest.raises(ContextRewriteRequired) as caught:
        plan_context_write(_stored(0, ITEMS), 0, ITEMS[:-1], None, _against(ITEMS, ITEMS))
    assert str(caught.value) == "checkpoint context shrank without a context_epoch change"


@pytest.mark.parametrize("position", range(len(ITEMS)))
@pytest.mark.parametrize("appended", [[], ["more"]])
def test_any_changed_stored_item_requires_a_rewrite(position: int, appended: list[Any]) -> None:
    """Changing any stored item of a plain context, with or without appending, is refused."""
    changed = [*ITEMS[:position], 4.5, *ITEMS[position + 1 :], *appended]
    with pytest.raises(ContextRewriteRequired) as caught:
        plan_context_write(_stored(0, ITEMS), 0, changed, None, _against(ITEMS, changed))
    assert str(caught.value) == (
        f"checkpoint context item {position} changed before its stored end without a"
        " context_epoch change"
    )


def test_the_same_item_in_another_key_order_is_unchanged() -> None:
    """Items compare by value: the same object with its keys in another order is no edit."""
    stored = [{"a": 1, "b": [{"x": 1, "y": 2}]}]
    again = [{"b": [{"y": 2, "x": 1}], "a": 1}, "new"]
    plan = plan_context_write(_stored(0, stored), 0, again, None, _against(stored, again))
    assert (plan.reset, plan.start, plan.items_json) == (False, 1, b'["new"]')


@pytest.mark.parametrize(
    ("before", "after"), [(True, 1), (1, 1.0), (0, False), (None, 0), ("1", 1), ([1], (1,))]
)
def test_values_compare_by_json_type(before: Any, after: Any) -> None:
    """`True` and `1`, `1` and `1.0` are different values; a tuple is the list it stores as."""
    verify = _against([before], [after])
    if msgspec.json.encode(before) == msgspec.json.encode(after):
        assert verify(1) is None
    else:
        assert verify(1) == 0


@pytest.mark.parametrize(
    "context",
    [ITEMS[:1], [], ["entirely", "different", "items", "and", "longer"], ITEMS],
    ids=["shorter", "empty", "different", "same"],
)
def test_epoch_change_resets_with_every_item(context: list[Any]) -> None:
    """In a new epoch the save resets and writes the whole context, whatever it holds."""
    plan = plan_context_write(_stored(1, ITEMS), 2, context, None, _untouched)
    assert plan == ContextWrite(
        reset=True,
        start=0,
        items_json=encode_json(context) if context else None,
        stored=_stored(2, context),
    )


def test_epoch_may_go_down_as_a_change() -> None:
    """Any epoch other than the stored one is a rewrite, including a smaller one."""
    assert plan_context_write(_stored(5, ITEMS), 4, ITEMS[:1], None, _untouched).reset is True


def test_values_json_would_change_are_refused() -> None:
    """A context item that would not come back equal is refused, naming where it is."""
    with pytest.raises(InvalidInput, match=r"^checkpoint context\[0\]: \$ is of type object"):
        plan_context_write(None, 0, [object()])
    with pytest.raises(InvalidInput, match=r"context\[1\]: \$\.x is not a finite number"):
        plan_context_write(None, 0, ["a", {"x": float("nan")}])


def test_context_rewrite_required_is_invalid_input() -> None:
    """ContextRewriteRequired is an InvalidInput."""
    assert issubclass(ContextRewriteRequired, InvalidInput)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(json_values, max_size=3)),
        st.tuples(st.just("rewrite"), st.lists(json_values, max_size=3)),
        st.tuples(st.just("edit"), st.lists(json_values, min_size=1, max_size=1)),
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
        edited = CLEAN
        if op == "append":
            context = [*context, *items]
        elif op == "edit" and context:
            context = [*items, *context[1:]]
            edited = 0
        else:
            epoch += 1
            context = list(items)
        plan = plan_context_write(stored, epoch, context, edited, _untouched)
        if plan.reset:
            rows = []
        assert plan.start == len(rows)
        if plan.items_json is not None:
            rows.extend(msgspec.json.decode(plan.items_json))
        stored = plan.stored
        assert stored.length == len(context)
        assert stored.epoch == epoch
        assert rows == msgspec.json.decode(encode_json(context))
