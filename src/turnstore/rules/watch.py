"""Watching a session's events: the forward page's cursor and limit, and a wait's time-out."""

from __future__ import annotations

from dataclasses import dataclass

from turnstore.errors import InvalidInput
from turnstore.rules.pages import page_limit
from turnstore.rules.validation import validate_session_id
from turnstore.rules.values import integer

MAX_WAIT_S = 3600.0
"""Longest time one `wait_for_events` call may wait; a longer watch is a loop of calls."""


@dataclass(frozen=True, slots=True)
class AfterQuery:
    """A validated forward page request: events after `after`, at most `limit` of them."""

    session_id: str
    after: int
    limit: int


def event_cursor(after_sequence: object) -> int:
    """Validate a forward cursor: an event sequence, 0 before the first event."""
    return integer(after_sequence, "event journal cursor exceeds SQLite INTEGER")


def after_query(session_id: object, after_sequence: object, limit: object) -> AfterQuery:
    """Validate `events_after`'s arguments, limit as `event_page`'s."""
    session = validate_session_id(session_id)
    after = event_cursor(after_sequence)
    return AfterQuery(session, after, page_limit(limit, "event journal page"))


def wait_timeout(timeout: object) -> float:
    """Validate a wait's time-out: finite seconds from 0 to `MAX_WAIT_S`."""
    # The chained comparison is False for NaN and compares a huge int without overflow.
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not (0 <= timeout <= MAX_WAIT_S)
    ):
        raise InvalidInput(f"wait timeout must be a number of seconds from 0 to {MAX_WAIT_S:g}")
    return float(timeout)
