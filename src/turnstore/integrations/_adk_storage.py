"""Internal: ADK's JSON as the ADK service stores it, so every value ADK stores comes back.

ADK's `DatabaseSessionService` writes state and events with Python's `json` module, which also
holds what strict JSON cannot: NaN and infinities, integers beyond 64 bits, lone surrogates.
turnstore stores strict JSON, so such a value (and a value nested deeper than `PLAIN_DEPTH`)
is stored as its `json.dumps` text under the single key `WRAPPED`, and read back with
`json.loads`, as ADK reads it. Plain values, nearly all of them, are stored as they are.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Iterable
from typing import Any

from turnstore.integrations._adk_order import in_order, order_key
from turnstore.records.kinds.adk import WRAPPED

KEY_ESCAPE = "adk-key:"
"""Starts an app or user state key stored as JSON text (a key that holds NUL, say)."""
EVENT_KEY = "adk-event/"
"""Starts the middleware state key that records one stored event id in its session's scope."""
PLAIN_DEPTH = 32
"""Deepest nesting stored as plain JSON; deeper values are stored as text (the store allows 64)."""
_LOW, _HIGH = -(2**63), 2**64 - 1


def _text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def plain(value: object, depth: int = 0) -> bool:
    """Whether strict JSON holds `value` exactly (nested at most `PLAIN_DEPTH` levels)."""
    kind = type(value)
    if kind is str:
        return _text(value)  # type: ignore[arg-type]
    if value is None or kind is bool:
        return True
    if kind is int:
        return _LOW <= value <= _HIGH  # type: ignore[operator]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if depth >= PLAIN_DEPTH:
        return False
    if kind is dict:
        return all(
            type(key) is str and _text(key) and plain(item, depth + 1)
            for key, item in value.items()  # type: ignore[attr-defined]
        )
    if kind is list:
        return all(plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    return False


def _wrapped(value: object) -> bool:
    return type(value) is dict and len(value) == 1 and type(value.get(WRAPPED)) is str


def stored(value: Any, depth: int = 0) -> Any:
    """`value` as stored at `depth` in a stored record: itself if plain, else its JSON text.

    A plain object that looks wrapped is wrapped too, so it reads back as itself.
    """
    if plain(value, depth) and not _wrapped(value):
        return value
    return {WRAPPED: json.dumps(value)}


def loaded(value: Any) -> Any:
    """A value as it was before `stored`."""
    return json.loads(value[WRAPPED]) if _wrapped(value) else value


def stored_key(key: str) -> str:
    """An app or user state key as a middleware state key (which cannot hold NUL)."""
    if "\x00" in key or key.startswith(KEY_ESCAPE):
        return KEY_ESCAPE + json.dumps(key)
    return key


def loaded_key(key: str) -> str:
    """A state key as it was before `stored_key`."""
    return str(json.loads(key[len(KEY_ESCAPE) :])) if key.startswith(KEY_ESCAPE) else key


def loaded_scope(values: dict[str, Any]) -> dict[str, Any]:
    """A scope of app or user state, keys and values as they were before they were stored."""
    return {loaded_key(key): loaded(value) for key, value in values.items()}


def event_key(event_id: str) -> str:
    """The middleware state key that records a stored event id (hashed: an id may hold NUL)."""
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).hexdigest()
    return EVENT_KEY + digest


def next_record(
    record: dict[str, Any], delta: dict[str, Any], at: float, event_id: str, sequence: int
) -> dict[str, Any]:
    """A session's record after an append of the event `event_id` written `at`: its stored
    state with the event's delta, and whether its events are still in `order_key` order.

    Changes made to `session.state` directly are not stored, as in ADK's own services.
    """
    own = dict(loaded(record["state"]))
    own.update(delta)
    key = order_key(at, event_id)
    newest = record.get("newest")
    still = (
        in_order(record)
        and isinstance(key[0], int)
        and (newest is None or key > (newest[0], newest[1]))
    )
    return {
        **record,
        "state": stored(own, 1),
        "last_update_time": at,
        "sequence": sequence,
        # Once out of order, always (no event is ever taken out): every read then orders them.
        "in_order": still,
        "newest": list(key) if still else None,
    }


def new_record(state: dict[str, Any], at: float, created: float | None = None) -> dict[str, Any]:
    """A new session's record: its own state, created at `created` (default `at`) and last
    updated at `at`, at sequence 1, no event yet.

    `create_session` makes one at the current time; a move, at the source's times.
    """
    return {
        "state": stored(state, 1),
        "create_time": at if created is None else created,
        "last_update_time": at,
        "sequence": 1,
        # A session deleted and created again is another incarnation: a `Session` read
        # from the old one must not write to the new one at an equal sequence.
        "incarnation": uuid.uuid4().hex,
        # No event is out of order yet: reads take the newest events alone while it holds.
        "in_order": True,
        "newest": None,
    }


def moved_record(
    record: dict[str, Any],
    state: dict[str, Any],
    updated: float,
    events: Iterable[tuple[float, str]],
    sequence: int,
) -> dict[str, Any]:
    """A session's record after a move appended `events` (time, id) in one commit: the
    source's own state and update time as they are, whatever the events' deltas say, and
    whether the events are still in `order_key` order (as `next_record` keeps it)."""
    still, newest = in_order(record), record.get("newest")
    for at, event_id in events:
        key = order_key(at, event_id)
        still = still and isinstance(key[0], int) and (newest is None or key > tuple(newest))
        newest = list(key) if still else None
    return {
        **record,
        "state": stored(state, 1),
        "last_update_time": updated,
        "sequence": sequence,
        "in_order": still,
        "newest": newest if still else None,
    }
