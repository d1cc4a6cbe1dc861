"""Watching event journals: the forward read and the high-water reads (waiters: `waiters`).

`events_after` reads a session's journal oldest first from a cursor; `latest_event` and
`latest_marks` read high-water marks, the second for a poll of many sessions at once.
"""

from __future__ import annotations

from typing import NamedTuple

from turnstore.engine.protocol import Statements, Tx, select
from turnstore.records.checkpoint import EventPage
from turnstore.rules.journal import journal_latest
from turnstore.rules.watch import AfterQuery
from turnstore.scripts.journals import _journal_event, events_from


class Mark(NamedTuple):
    """A session's event high-water mark."""

    session_id: str
    latest_event_sequence: int


class WatchSql(Statements):
    """Statements of the forward event read and the high-water marks."""

    latest_event = "SELECT latest_event_sequence FROM sessions WHERE session_id = ?"
    latest_marks = select(Mark, "FROM sessions WHERE {ids:session_id}")


def events_after(tx: Tx, query: AfterQuery) -> EventPage:
    """A session's journal events after a cursor, oldest first, with its high-water mark."""
    sql = tx.sql(WatchSql)
    latest = journal_latest(tx.value(sql.latest_event, (query.session_id,)), query.session_id)
    rows = events_from(tx, query.session_id, query.after, query.limit)
    return EventPage(
        latest_sequence=latest,
        events=[_journal_event(query.session_id, row) for row in rows],
        next_before_sequence=None,
    )


def latest_event(tx: Tx, session_id: str) -> int:
    """A session's event high-water mark; 0 for an absent session (it may yet be created)."""
    latest = tx.value(tx.sql(WatchSql).latest_event, (session_id,))
    return 0 if latest is None else int(latest)


def latest_marks(tx: Tx, session_ids: list[str]) -> dict[str, int]:
    """The event high-water marks of the present sessions among `session_ids`."""
    rows = tx.rows(tx.sql(WatchSql).latest_marks, (tx.dialect.id_list(session_ids),))
    return {row.session_id: row.latest_event_sequence for row in rows}
