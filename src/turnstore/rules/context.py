"""The append-only context rule that lets a save write only what changed.

Within one `context_epoch` a checkpoint's `context` may only grow by appending. A save in the
stored epoch therefore writes `context[stored_length:]`; a save in another epoch is a rewrite
and writes the whole new context once. Two cheap checks refuse a save that breaks the rule:
the context may not shrink within an epoch, and the item at the stored tail must encode to
the same bytes as the stored tail (its digest is kept beside the session row).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from turnstore.errors import ContextRewriteRequired
from turnstore.rules.values import encode


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


def digest(item_json: bytes) -> bytes:
    """Return the digest kept for the context's last item."""
    return hashlib.blake2b(item_json, digest_size=16).digest()


def _encode(value: object) -> bytes:
    return encode(value, "checkpoint context")


def plan_context_write(
    stored: StoredContext | None, epoch: int, context: Sequence[Any]
) -> ContextWrite:
    """Decide which context items a save writes, refusing a change that is not an append."""
    length = len(context)
    tail = digest(_encode(context[-1])) if context else None
    if stored is None or stored.epoch != epoch:
        items = _encode(context) if context else None
        return ContextWrite(True, 0, items, StoredContext(epoch, length, tail))
    if length < stored.length:
        raise ContextRewriteRequired("checkpoint context shrank without a context_epoch change")
    if stored.length and digest(_encode(context[stored.length - 1])) != stored.tail_digest:
        raise ContextRewriteRequired(
            "checkpoint context changed before its stored end without a context_epoch change"
        )
    appended = context[stored.length :]
    items = _encode(appended) if appended else None
    return ContextWrite(False, stored.length, items, StoredContext(epoch, length, tail))
