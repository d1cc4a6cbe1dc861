"""A session's context read by index: the chunks from the one holding an index on, a window.

Below every script that edits a context or the search index, so the search index can read
again the items it is about to forget (`search_words.py`) before an edit changes them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from turnstore.engine.protocol import Statements, Tx, select
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ContextWindow
from turnstore.rules.stored import check_chunk_start, check_context_length


class StoredChunk(NamedTuple):
    """One stored run of context items, starting at context index `start`."""

    start: int
    items_json: str


class Window(NamedTuple):
    """The session-row columns a window read needs."""

    latest_sequence: int
    context_length: int


class ContextReadSql(Statements):
    """Statements reading a context by index."""

    window = select(Window, "FROM sessions WHERE session_id = ?")
    # The chunks from the one holding context index ? on: a tail read or a truncation
    # touches these and no earlier chunk.
    chunks_from = select(
        StoredChunk,
        "FROM context_chunks WHERE session_id = ? AND start >= (SELECT COALESCE(MAX(start), 0)"
        " FROM context_chunks WHERE session_id = ? AND start <= ?) ORDER BY start",
    )


def runs_from(tx: Tx, session_id: str, index: int) -> list[tuple[int, list[Any]]]:
    """The context chunks from the one holding `index` on, decoded: (start, items) each."""
    runs = []
    expected = None
    for run in tx.rows(tx.sql(ContextReadSql).chunks_from, (session_id, session_id, index)):
        check_chunk_start(expected, run.start, session_id)
        items = decode_stored(run.items_json, list[Any], "checkpoint context", session_id)
        runs.append((run.start, items))
        expected = run.start + len(items)
    return runs


def ending_at(runs: list[tuple[int, list[Any]]], length: int, session_id: str) -> None:
    """Refuse chunks that do not end where the session row says the context ends."""
    check_context_length(runs[-1][0] + len(runs[-1][1]) if runs else 0, length, session_id)


def window(tx: Tx, session_id: str, before: int | None, limit: int | None) -> ContextWindow:
    """The newest `limit` items (all when None) before index `before` (the end when None)."""
    row = tx.row(tx.sql(ContextReadSql).window, (session_id,))
    if row is None:
        return ContextWindow(items=[], start=0, length=0, sequence=0)
    length = row.context_length
    end = length if before is None else min(before, length)
    first = 0 if limit is None else max(0, end - limit)
    items: list[Any] = []
    if end > first:
        runs = runs_from(tx, session_id, first)
        ending_at(runs, length, session_id)
        items = [item for _, run in runs for item in run][first - runs[0][0] : end - runs[0][0]]
    return ContextWindow(items=items, start=first, length=length, sequence=row.latest_sequence)


def tail(tx: Tx, session_id: str, limit: int | None) -> list[Any]:
    """The newest `limit` context items (all when None), oldest first; [] without a session."""
    return window(tx, session_id, None, limit).items
