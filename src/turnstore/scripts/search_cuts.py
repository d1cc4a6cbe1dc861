"""The search index's removals, made in the commit of the write that removes the text.

A session of items is searched by its context: popping, clearing or replacing items takes
their rows out of `search_items` (on SQLite a trigger takes them out of FTS5) and moves the
session's indexing mark back, so the indexer (`search.py`) indexes what replaced them.

A LangGraph thread is searched by the `messages` list of its newest checkpoint. A checkpoint
that extends the list flags the thread's mark for the indexer; one that rewrites it (a
message removed, a run resumed from an earlier checkpoint) unindexes the old list first.
"""

from __future__ import annotations

from turnstore.engine.protocol import Statements, Tx


class SearchCutSql(Statements):
    """Statements removing a session's context items from the search index."""

    cut_context = "DELETE FROM search_items WHERE session_id = ? AND in_context = ? AND item >= ?"
    drop_context_prefix = (
        "DELETE FROM search_items WHERE session_id = ? AND in_context = ? AND item < ?"
    )
    shift_context = (
        "UPDATE search_items SET item = item - ? WHERE session_id = ? AND in_context = ?"
    )
    cut_mark = (
        "UPDATE search_marks SET indexed_length = CASE WHEN indexed_length > ? THEN ?"
        " ELSE indexed_length END WHERE session_id = ?"
    )
    flag_mark = "UPDATE search_marks SET indexed_sequence = -1 WHERE session_id = ?"
    shift_mark = (
        "UPDATE search_marks SET indexed_length = CASE WHEN indexed_length > ?"
        " THEN indexed_length - ? ELSE 0 END WHERE session_id = ?"
    )


def cut_context(tx: Tx, session_id: str, keep: int) -> None:
    """Unindex the context items from index `keep` on (popped, cleared, replaced, or, from 0,
    rewritten by a save)."""
    sql = tx.sql(SearchCutSql)
    tx.run(sql.cut_context, (session_id, True, keep))
    tx.run(sql.cut_mark, (keep, keep, session_id))


def drop_context_prefix(tx: Tx, session_id: str, drop: int) -> None:
    """Unindex a context's first `drop` items and renumber the rest from 0."""
    sql = tx.sql(SearchCutSql)
    tx.run(sql.drop_context_prefix, (session_id, True, drop))
    tx.run(sql.shift_context, (drop, session_id, True))
    tx.run(sql.shift_mark, (drop, drop, session_id))


def langgraph_put(tx: Tx, session_id: str, rewritten: bool) -> None:
    """Have the indexer look at a thread again, unindexing its list first if `rewritten`."""
    if rewritten:
        cut_context(tx, session_id, 0)
    tx.run(tx.sql(SearchCutSql).flag_mark, (session_id,))
