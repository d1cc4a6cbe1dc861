"""Internal: the order ADK's `DatabaseSessionService` gives a session's events.

By time to the microsecond (its timestamp column's), then by event id; its in-memory service
keeps append order instead. A session record says whether its events were appended in this
order (`in_order`), so a read of the newest events can take them alone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def instant(timestamp: float) -> int | float:
    """An event time in whole microseconds, rounded as ADK's database service rounds it.

    That service orders and filters events by a microsecond column made with
    `datetime.fromtimestamp`, so times closer than a microsecond tie there; this rounds alike.
    A time that `datetime` cannot hold (ADK's service cannot store it) keeps its order as a
    float.
    """
    try:
        return (datetime.fromtimestamp(timestamp, UTC) - _EPOCH) // _MICROSECOND
    except (OverflowError, OSError, ValueError):
        return timestamp * 1e6


def order_key(timestamp: float, event_id: str) -> tuple[int | float, str]:
    """Where an event comes in a session: by time, ties broken by id, as ADK's
    `DatabaseSessionService` orders them (its in-memory service keeps append order)."""
    return instant(timestamp), event_id


def in_order(record: dict[str, Any]) -> bool:
    """Whether the session's events were appended in the order `order_key` returns them.

    `in_order` stays true while each event appended comes after the `newest` before it. A
    record written by an earlier turnstore has none: its events are ordered on every read.
    """
    return record.get("in_order") is True
