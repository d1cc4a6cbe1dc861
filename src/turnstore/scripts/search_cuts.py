"""The search index's removals, made in the commit of the write that removes the text.

A session of items is searched by its context: popping, clearing or replacing items takes
their rows out of `search_items` and moves the session's indexing mark back, so the indexer
(`search.py`) indexes what replaced them. Each removal first hands the text index the words
of what it removes, read from the items while they are still stored (`search_words.py`):
every caller cuts before it changes the rows the items are read from.

A LangGraph thread is searched by the `messages` list of its newest checkpoint. A checkpoint
that extends the list flags the thread's mark for the indexer; one that changes it otherwise
(a message removed, a run resumed from an earlier checkpoint) unindexes what it does not keep.
"""

from __future__ import annotations

import json

from turnstore.engine.protocol import Statements, Tx
from turnstore.records.kinds.langgraph import KIND as THREAD
from turnstore.records.langgraph import PutRequest
from turnstore.scripts.langgraph import LangGraphSql, versions_of
from turnstore.scripts.search_words import SearchWordsSql, forget_where

Place = tuple[int, bool]
"""Where a put writes a list: its lineage, and whether the put makes that lineage."""


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
    rewritten by a save), before the context itself changes."""
    sql = tx.sql(SearchCutSql)
    forget_where(tx, tx.sql(SearchWordsSql).context_from, (session_id, True, keep))
    tx.run(sql.cut_context, (session_id, True, keep))
    tx.run(sql.cut_mark, (keep, keep, session_id))


def drop_context_prefix(tx: Tx, session_id: str, drop: int) -> None:
    """Unindex a context's first `drop` items and renumber the rest from 0 (their rows keep
    their ids, so the text index keeps their words)."""
    sql = tx.sql(SearchCutSql)
    forget_where(tx, tx.sql(SearchWordsSql).context_before, (session_id, True, drop))
    tx.run(sql.drop_context_prefix, (session_id, True, drop))
    tx.run(sql.shift_context, (drop, session_id, True))
    tx.run(sql.shift_mark, (drop, drop, session_id))


def drop_sessions(tx: Tx, session_ids: list[str]) -> None:
    """Before sessions are deleted: their items' words leave the text index (their rows go
    with the sessions, by cascade)."""
    ids = tx.dialect.id_list(session_ids)
    forget_where(tx, tx.sql(SearchWordsSql).of_sessions, (ids,))


def langgraph_put(tx: Tx, request: PutRequest, places: dict[str, Place | None]) -> None:
    """Before a thread's root checkpoint is written: have the indexer look at the thread
    again, unindexing first what of its list the checkpoint does not keep in place. `places`:
    where each list the put writes goes (its lineage, and whether the put makes it)."""
    channel = THREAD.channel
    assert channel is not None  # a kind stored in a channel names it
    keep = _thread_keeps(tx, request, channel, places.get(channel))
    if keep is not None:
        cut_context(tx, request.session_id, keep)
    tx.run(tx.sql(SearchCutSql).flag_mark, (request.session_id,))


def _thread_keeps(tx: Tx, request: PutRequest, channel: str, place: Place | None) -> int | None:
    """How many items of the list the index read (the newest root checkpoint's) the put
    keeps in place; None: all of them (the list is the same, or grows in its lineage)."""
    sql = tx.sql(LangGraphSql)
    newest = tx.row(sql.latest, (request.session_id, request.checkpoint_ns))
    if newest is None or request.checkpoint_id < newest.checkpoint_id:
        return None  # nothing read yet, or the newest checkpoint stays the newest
    version = versions_of(newest).get(channel)
    if version == json.loads(request.versions_json).get(channel):
        return None
    write = next((write for write in request.lists if write.channel == channel), None)
    params = (newest.session_id, newest.checkpoint_ns, channel, version)
    read = None if version is None else tx.row(sql.blob, params)
    if write is None or place is None or read is None or read.length is None:
        return 0
    lineage, made = place
    # Another lineage (a rewrite, or a run resumed from an older checkpoint) may differ at
    # any index; in one lineage an index holds one item for good.
    if made or lineage != read.lineage:
        return 0
    length = write.start + len(write.items)
    return None if length >= read.length else length


def langgraph_reset(tx: Tx, session_id: str) -> None:
    """Before a thread's newest root checkpoint goes (its run deleted) or another thread's
    checkpoints join it (a copy): its list is unindexed whole, and read again."""
    cut_context(tx, session_id, 0)
    tx.run(tx.sql(SearchCutSql).flag_mark, (session_id,))
