"""The `Context` a checkpoint holds: frozen items, tracked edits, copies on the way in."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from turnstore import Checkpoint, InvalidInput
from turnstore.errors import ContextItemImmutable
from turnstore.records.context import CLEAN, Context, FrozenDict, FrozenList, freeze

ITEM = {"role": "tool", "content": [{"type": "text", "text": "secret"}], "n": 1}

DICT_CHANGES: list[Callable[[Any], object]] = [
    lambda d: d.__setitem__("role", "x"),
    lambda d: d.__delitem__("role"),
    lambda d: d.clear(),
    lambda d: d.pop("role"),
    lambda d: d.popitem(),
    lambda d: d.setdefault("new", 1),
    lambda d: d.update(role="x"),
    lambda d: d.__ior__({"role": "x"}),
]
LIST_CHANGES: list[Callable[[Any], object]] = [
    lambda v: v.__setitem__(0, "x"),
    lambda v: v.__delitem__(0),
    lambda v: v.append("x"),
    lambda v: v.extend(["x"]),
    lambda v: v.insert(0, "x"),
    lambda v: v.pop(),
    lambda v: v.remove(v[0]),
    lambda v: v.clear(),
    lambda v: v.sort(key=str),
    lambda v: v.reverse(),
    lambda v: v.__iadd__(["x"]),
    lambda v: v.__imul__(2),
]


def _contexts() -> list[Context]:
    """A context built by appending, and one as `load` builds it (items reached lazily)."""
    appended = Context()
    appended.append(ITEM)
    return [appended, Context.stored([copy.deepcopy(ITEM)], None)]


@pytest.mark.parametrize("change", DICT_CHANGES)
@pytest.mark.parametrize("context", _contexts(), ids=["appended", "loaded"])
def test_an_item_refuses_changes_in_place(
    context: Context, change: Callable[[Any], object]
) -> None:
    """Every way of changing a held object in place raises ContextItemImmutable."""
    before = copy.deepcopy(list(context))
    with pytest.raises(ContextItemImmutable, match="assign a changed copy"):
        change(context[0])
    assert list(context) == before


@pytest.mark.parametrize("change", LIST_CHANGES)
@pytest.mark.parametrize("context", _contexts(), ids=["appended", "loaded"])
def test_a_nested_list_refuses_changes_in_place(
    context: Context, change: Callable[[Any], object]
) -> None:
    """Lists inside items are frozen too."""
    with pytest.raises(ContextItemImmutable):
        change(context[0]["content"])
    with pytest.raises(ContextItemImmutable):
        change(next(iter(context))["content"])
    assert context[0]["content"][0]["text"] == "secret"


def test_every_way_of_reaching_a_loaded_item_freezes_it() -> None:
    """Indexing, iterating, slicing, reversing and copying all hand out frozen items."""
    reached: list[Callable[[Context], Any]] = [
        lambda c: c[0],
        lambda c: c[-1],
        lambda c: list(c)[0],  # noqa: RUF015 (each builtin is a different way in)
        lambda c: c[:1][0],
        lambda c: next(reversed(c)),
        lambda c: c.copy()[0],
        lambda c: (c + [])[0],  # noqa: RUF005 (Context.__add__ is under test)
        lambda c: (c * 1)[0],
        lambda c: [*c][0],  # noqa: RUF015 (each builtin is a different way in)
        lambda c: tuple(c)[0],  # noqa: RUF015 (each builtin is a different way in)
        lambda c: c.pop(),
    ]
    for reach in reached:
        context = Context.stored([{"a": [1]}], None)
        item = reach(context)
        assert type(item) is FrozenDict
        assert type(item["a"]) is FrozenList


def test_appending_copies_so_the_callers_object_stays_separate() -> None:
    """An appended dict is copied: changing the caller's object later does not reach it."""
    mine = {"role": "user", "content": "hi"}
    context = Context([mine])
    context.append(mine)
    context.extend([mine])
    context += [mine]
    mine["content"] = "changed"
    assert [item["content"] for item in context] == ["hi"] * 4
    assert all(type(item) is FrozenDict for item in context)


def test_frozen_items_are_shared_not_copied() -> None:
    """A frozen item appended again is the same object (no copying cost)."""
    item = freeze(ITEM)
    context = Context([item])
    context.append(item)
    assert context[0] is item
    assert context[1] is item


@pytest.mark.parametrize(
    ("edit", "edited"),
    [
        (lambda c: c.__setitem__(1, "x"), 1),
        (lambda c: c.__setitem__(-1, "x"), 2),
        (lambda c: c.__setitem__(slice(1, 2), ["x"]), 1),
        (lambda c: c.__delitem__(0), 0),
        (lambda c: c.__delitem__(slice(2, None)), 2),
        (lambda c: c.insert(1, "x"), 1),
        (lambda c: c.pop(), 2),
        (lambda c: c.pop(0), 0),
        (lambda c: c.remove("b"), 1),
        (lambda c: c.clear(), 0),
        (lambda c: c.sort(), 0),
        (lambda c: c.reverse(), 0),
        (lambda c: c.__imul__(0), 0),
    ],
)
def test_edits_through_the_context_are_recorded(
    edit: Callable[[Context], object], edited: int
) -> None:
    """Replacing, removing, inserting, reordering: the lowest index touched is recorded."""
    context = Context(["a", "b", "c"])
    assert context.edited == CLEAN
    edit(context)
    assert context.edited == edited


@pytest.mark.parametrize(
    "grow",
    [
        lambda c: c.append("x"),
        lambda c: c.extend(["x"]),
        lambda c: c.__iadd__(["x"]),
        lambda c: c.insert(3, "x"),
        lambda c: c.insert(99, "x"),
        lambda c: c.__imul__(2),
    ],
)
def test_appending_is_not_an_edit(grow: Callable[[Context], object]) -> None:
    """Growing at the end leaves the stored part untouched."""
    context = Context(["a", "b", "c"])
    grow(context)
    assert context.edited == CLEAN
    assert context[:3] == ["a", "b", "c"]


def test_a_failed_save_keeps_the_edit() -> None:
    """begin_save starts afresh; save_failed brings the earlier edit back."""
    context = Context(["a", "b"])
    context[0] = "z"
    edited = context.begin_save()
    assert (edited, context.edited) == (0, CLEAN)
    context.append("c")
    context.save_failed(edited)
    assert context.edited == 0


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        ({"x": float("nan")}, r"context\[1\]: \$\.x is not a finite number"),
        ({"x": b"bytes"}, r"context\[1\]: \$\.x is of type bytes"),
        ({1: "int key"}, r"context\[1\]: \$ has a key that is not a string"),
        ({"x": {1, 2}}, r"context\[1\]: \$\.x is of type set"),
    ],
)
def test_values_json_would_change_are_refused_on_append(bad: Any, path: str) -> None:
    """Appending checks the value first and names its place; nothing is appended."""
    context = Context(["a"])
    with pytest.raises(InvalidInput, match=path):
        context.append(bad)
    with pytest.raises(InvalidInput, match=path):
        context.extend([bad])
    assert context == ["a"]


def test_text_or_a_dict_is_not_a_list_of_items() -> None:
    """extend("abc") would add three letters: refused."""
    for bad in ("abc", b"abc", {"a": 1}, 5):
        with pytest.raises(InvalidInput, match="must be a list of items"):
            Context().extend(bad)


def test_copies_are_editable_and_encodings_unchanged() -> None:
    """deepcopy and dict() give editable copies; JSON, msgspec and pickle see the same value."""
    context = Context([ITEM])
    editable = copy.deepcopy(context[0])
    editable["content"][0]["text"] = "[redacted]"
    assert type(editable) is dict
    assert context[0] == ITEM
    shallow = dict(context[0])
    shallow["role"] = "user"
    assert context[0]["role"] == "tool"
    assert json.loads(json.dumps(context)) == [ITEM]
    assert msgspec.json.decode(msgspec.json.encode(context)) == [ITEM]
    again = pickle.loads(pickle.dumps(context))
    assert type(again) is Context
    assert again == [ITEM]
    assert type(again[0]) is FrozenDict


def test_a_checkpoint_starts_with_a_context() -> None:
    """A checkpoint built without a context gets a `Context`; a plain list stays the caller's."""
    assert type(Checkpoint(session_id="s").context) is Context
    mine: list[Any] = []
    assert Checkpoint(session_id="s", context=mine).context is mine
