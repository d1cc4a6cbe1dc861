"""Internal: a checkpoint's context as the store hands it out: frozen items, and a record of edits.

The store saves a context by appending what is new since its last save, so it must know
that nothing before that point changed. A `Context` makes that cheap and certain: its items
are immutable values (`FrozenDict` and `FrozenList` read as a dict and a list, and raise
`ContextItemImmutable` when changed in place), and any replacement, removal or reordering
through the context itself is recorded, so the next save rewrites the context instead of
losing the edit. A plain list is accepted too; the store then compares it with what it
holds, at a cost that grows with the context.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, SupportsIndex, overload

from turnstore.errors import ContextItemImmutable
from turnstore.records.values import check_value, item_list

CLEAN = sys.maxsize
"""The edit mark of a context with no edit before its end."""


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise ContextItemImmutable(
        "context items cannot be changed in place: assign a changed copy through the context"
        " (context[i] = {**context[i], ...}), which the next save stores as a rewrite"
    )


class FrozenDict(dict[str, Any]):
    """A JSON object held by a context: a dict that refuses changes in place."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        thawed: dict[str, Any] = thaw(self)
        return thawed

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[Any]):
    """A JSON array held by a context: a list that refuses changes in place."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _refuse
    clear = sort = reverse = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        thawed: list[Any] = thaw(self)
        return thawed

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """An immutable copy of a JSON value (tuples become lists); frozen parts are shared."""
    kind = type(value)
    # Plain dicts, lists and text first, text not even called for: they are nearly every
    # node of an agent's items.
    if kind is dict:
        return FrozenDict(
            {key: item if type(item) is str else freeze(item) for key, item in value.items()}
        )
    if kind is list:
        return FrozenList([item if type(item) is str else freeze(item) for item in value])
    if kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(item) for item in value])
    return value


def thaw(value: Any) -> Any:
    """An ordinary, editable deep copy of a JSON value."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class ContextMark:
    """Which stored context a `Context` matches: store, session, sequence, epoch and length."""

    origin: object
    session_id: str
    sequence: int
    epoch: int
    length: int


class Context(list[Any]):
    """A checkpoint's context: a list of frozen JSON values whose edits are tracked.

    Appending freezes a copy of the item (so later changes to the caller's own object do not
    reach the context); replacing, deleting, inserting, sorting or reversing is recorded and
    makes the next save a rewrite. `copy.deepcopy(item)` gives an editable copy of an item.
    """

    __slots__ = ("_edited", "_mark", "_raw")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(_checked(items, 0))
        self._edited = CLEAN
        self._mark: ContextMark | None = None
        self._raw = False

    @classmethod
    def stored(cls, items: list[Any], mark: ContextMark | None) -> Context:
        """A context of items just read from the store, frozen lazily as they are reached."""
        context = cls.__new__(cls)
        list.extend(context, items)
        context._edited = CLEAN
        context._mark = mark
        context._raw = True
        return context

    # --- what the store reads --------------------------------------------------------------

    @property
    def mark(self) -> ContextMark | None:
        """The stored context this one matched when it was last loaded or saved."""
        return self._mark

    @property
    def edited(self) -> int:
        """The lowest index changed other than by appending since the mark, or `CLEAN`."""
        return self._edited

    def begin_save(self) -> int:
        """Start counting edits afresh for a save; return the count to restore if it fails."""
        edited, self._edited = self._edited, CLEAN
        return edited

    def saved(self, mark: ContextMark) -> None:
        """Record that the store now holds this context up to `mark.length`."""
        self._mark = mark

    def save_failed(self, edited: int) -> None:
        """Undo `begin_save` after a save that did not commit."""
        self._edited = min(self._edited, edited)

    # --- reading: every item a caller can reach is frozen -----------------------------------

    def _item(self, index: int) -> Any:
        item = list.__getitem__(self, index)
        kind = type(item)
        if kind is dict or kind is list:
            item = freeze(item)
            list.__setitem__(self, index, item)
        return item

    def _reach_all(self) -> None:
        if self._raw:
            for index in range(len(self)):
                self._item(index)
            self._raw = False

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            self._reach_all()
            return list.__getitem__(self, index)
        return self._item(index.__index__())

    def __iter__(self) -> Iterator[Any]:
        self._reach_all()
        return list.__iter__(self)

    def __reversed__(self) -> Iterator[Any]:
        self._reach_all()
        return list.__reversed__(self)

    def copy(self) -> list[Any]:
        """A plain list of the same frozen items."""
        self._reach_all()
        return list(list.__iter__(self))

    def __add__(self, other: list[Any]) -> list[Any]:
        return self.copy() + list(other)

    def __mul__(self, count: SupportsIndex) -> list[Any]:
        return self.copy() * count

    __rmul__ = __mul__

    # --- appending: items are checked and frozen on the way in -----------------------------

    def append(self, item: Any) -> None:
        """Append a frozen copy of `item`."""
        list.append(self, _checked_one(item, len(self)))

    def extend(self, items: Iterable[Any]) -> None:
        """Append a frozen copy of each item."""
        list.extend(self, _checked(items, len(self)))

    def __iadd__(self, items: Iterable[Any]) -> Context:
        self.extend(items)
        return self

    # --- other changes: recorded, so the next save rewrites --------------------------------

    def _edit(self, index: int) -> None:
        self._edited = min(self._edited, max(0, index))

    @overload
    def __setitem__(self, index: SupportsIndex, item: Any) -> None: ...
    @overload
    def __setitem__(self, index: slice, item: Iterable[Any]) -> None: ...
    def __setitem__(self, index: SupportsIndex | slice, item: Any) -> None:
        if isinstance(index, slice):
            start = index.indices(len(self))[0]
            self._reach_all()
            self._edit(start)
            list.__setitem__(self, index, _checked(item, start))
            return
        position = _position(index.__index__(), len(self))
        self._edit(position)
        list.__setitem__(self, position, _checked_one(item, position))

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        if isinstance(index, slice):
            self._edit(index.indices(len(self))[0])
        else:
            self._edit(_position(index.__index__(), len(self)))
        list.__delitem__(self, index)

    def insert(self, index: SupportsIndex, item: Any) -> None:
        """Insert a frozen copy of `item` before `index` (an edit unless at the end)."""
        position = min(max(0, _position(index.__index__(), len(self), clamp=True)), len(self))
        checked = _checked_one(item, position)
        if position < len(self):
            self._edit(position)
        list.insert(self, position, checked)

    def pop(self, index: SupportsIndex = -1) -> Any:
        """Remove and return an item (an edit: the context no longer only grows)."""
        position = _position(index.__index__(), len(self))
        item = self._item(position)
        self._edit(position)
        list.__delitem__(self, position)
        return item

    def remove(self, item: Any) -> None:
        """Remove the first item equal to `item`."""
        self._reach_all()
        position = list.index(self, item)
        self._edit(position)
        list.__delitem__(self, position)

    def clear(self) -> None:
        """Remove every item."""
        self._edit(0)
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        """Sort in place (an edit)."""
        self._reach_all()
        self._edit(0)
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        """Reverse in place (an edit)."""
        self._edit(0)
        list.reverse(self)

    def __imul__(self, count: SupportsIndex) -> Context:
        times = count.__index__()
        if times <= 0:
            self.clear()
        else:
            self._reach_all()
            list.__imul__(self, times)
        return self

    def __reduce__(self) -> tuple[type[Context], tuple[list[Any]]]:
        return (Context, (self.copy(),))


def _position(index: int, length: int, *, clamp: bool = False) -> int:
    position = index + length if index < 0 else index
    if not clamp and not 0 <= position < length:
        raise IndexError("context index out of range")
    return position


def _checked_one(item: Any, index: int) -> Any:
    # Frozen items are checked too: a FrozenDict can be built by hand around anything.
    check_value(item, f"context[{index}]", record=False)
    return freeze(item)


def _checked(items: Iterable[Any], start: int) -> list[Any]:
    frozen = []
    for offset, item in enumerate(item_list(items, "context items")):
        frozen.append(_checked_one(item, start + offset))
    return frozen
