"""The context rule that lets a save write only what changed, without losing an edit.

Within one `context_epoch` a save writes `context[stored_length:]`: it must therefore know that
the first `stored_length` items are the ones stored. A `Context` the store handed out (by
`load`, or after a save) knows it: its items are frozen, and any edit before its end is
recorded, in which case the save rewrites the whole context once. Any other context (a plain
list, or a `Context` another store or writer has moved on from) is compared item by item with
the stored one, and a change before the stored end is refused with `ContextRewriteRequired`.
A save in another epoch is a rewrite and writes the whole new context.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from turnstore.errors import ContextRewriteRequired
from turnstore.records.base import encode_json
from turnstore.rules.values import canonical, check_value


@dataclass(frozen=True, slots=True)
class StoredContext:
    """What the store remembers of a session's context: its epoch, length and tail digest."""

    epoch: int
    length: int
    tail_digest: bytes | None


@dataclass(frozen=True, slots=True)
class ContextWrite:
    """The context rows one save writes: `items_json` starting at `start`, after a reset if any."""

    reset: bool
    start: int
    items_json: bytes | None
    stored: StoredContext


Verify = Callable[[int], int | None]
"""Compares a context's first `n` items with the stored ones: the first that differs, or None."""


def digest(item_json: bytes) -> bytes:
    """Return the digest kept for the context's last item."""
    return hashlib.blake2b(item_json, digest_size=16).digest()


def _encode(items: list[Any], start: int, checked: bool) -> bytes:
    if not checked:
        for offset, item in enumerate(items):
            check_value(item, f"checkpoint context[{start + offset}]", record=False)
    return encode_json(items)


def first_difference(ours: Sequence[Any], theirs: Sequence[Any]) -> int | None:
    """The first index where two runs of items differ in value or JSON type, or None."""
    for index, (mine, stored) in enumerate(zip(ours, theirs, strict=False)):
        if canonical(mine) != canonical(stored):
            return index
    if len(ours) != len(theirs):
        return min(len(ours), len(theirs))
    return None


def _unverifiable(length: int) -> int | None:
    raise AssertionError("a new session's context has nothing stored to compare")


def plan_context_write(
    stored: StoredContext | None,
    epoch: int,
    context: Sequence[Any],
    edited: int | None = None,
    verify: Verify = _unverifiable,
    *,
    checked: bool = False,
) -> ContextWrite:
    """Decide which context items a save writes, refusing a change it cannot see as an edit.

    `edited` is the lowest index a held `Context` changed other than by appending (`CLEAN`
    for none), or None when the context is not known to match the stored one. `checked`
    says every item already passed `check_value` before any I/O (a prepared save's have):
    they are then not walked again inside the write transaction.
    """
    length = len(context)
    if stored is None or stored.epoch != epoch or (edited is not None and edited < stored.length):
        items = _encode(list(context), 0, checked) if context else None
        return ContextWrite(True, 0, items, StoredContext(epoch, length, _tail(context)))
    if edited is None:
        if length < stored.length:
            raise ContextRewriteRequired("checkpoint context shrank without a context_epoch change")
        changed = verify(stored.length)
        if changed is not None:
            raise ContextRewriteRequired(
                f"checkpoint context item {changed} changed before its stored end without a"
                " context_epoch change"
            )
    appended = list(context[stored.length :])
    items = _encode(appended, stored.length, checked) if appended else None
    return ContextWrite(False, stored.length, items, StoredContext(epoch, length, _tail(context)))


def _tail(context: Sequence[Any]) -> bytes | None:
    # Every item was checked when it was appended or compared with the stored one.
    return digest(encode_json(context[-1])) if context else None
