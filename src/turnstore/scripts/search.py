"""The search index: what removes text from it in a write's commit, the indexer that adds
text off the save path, the query, and the rebuild of a store written before it.

A session's kind decides what of it is searchable, by where it is stored
(`turnstore.records.kinds`). A session of checkpoint saves is searched by its transcript,
which keeps every batch it journaled; a LangGraph thread by its list channel. A session of
items (`items`, `openai-agents`, `adk`, …) is searched by its context, so popping, clearing or
replacing items removes their text from the index in the same commit. Deleting a session
deletes its rows by cascade (on SQLite, a trigger takes them out of the FTS5 index too).

Adding is left to the indexer (`catch_up_batch`): it finds the sessions changed since it
last looked (their `updated_at` from a bound it keeps, and a sequence its mark has not
reached), and indexes what each gained since its mark. A save pays nothing for search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from turnstore.engine.protocol import Statements, TextAdding, Tx, insert, select
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.checkpoint import Checkpoint
from turnstore.records.figures import Derived
from turnstore.records.kinds import SessionKind, Storage, kind_of, kinds
from turnstore.records.kinds.items import KIND as ITEMS
from turnstore.records.kinds.langgraph import KIND as LANGGRAPH
from turnstore.records.kinds.turnstore import KIND as CHECKPOINT
from turnstore.records.protocol import SessionContext
from turnstore.records.search import HitRow, IndexItem, ReindexProgress, SearchHit, SearchPage
from turnstore.rules import search_text
from turnstore.rules.pages import split_page
from turnstore.rules.search import (
    SearchQuery,
    index_texts,
    item_text,
    next_cursor,
    require_index_built,
    term_words,
)
from turnstore.scripts import context_reads, conversations, search_words
from turnstore.scripts.journals import JournalSql
from turnstore.scripts.search_words import Indexed, SearchWordsSql

CATCH_UP_SESSIONS = 100
"""Sessions the indexer looks at in one transaction."""
CATCH_UP_MARGIN_S = 60
"""How far before the time of its last pass the indexer looks again: a write stamps its
session's `updated_at` when its transaction begins, which may be before it commits."""


class IndexState(NamedTuple):
    """Whether the index is built, where an unfinished build goes on, and the indexer's bound."""

    built: bool
    resume_after: str | None
    caught_up_to: int


class Indexing(NamedTuple):
    """What the indexer reads of a session row, under its lock."""

    kind: str | None
    latest_sequence: int
    context_length: int
    checkpoint_state_json: str
    figures_json: str | None


class Mark(NamedTuple):
    """How far a session is indexed: its sequence then, and its context's length then."""

    session_id: str
    indexed_sequence: int
    indexed_length: int


_PENDING = (
    "FROM sessions AS s LEFT JOIN search_marks AS m ON m.session_id = s.session_id"
    " WHERE s.updated_at >= ? AND s.kind IS NOT NULL"
    " AND (m.indexed_sequence IS NULL OR m.indexed_sequence <> s.latest_sequence)"
)


class SearchSql(Statements):
    """Statements of the search index (its text index is the dialect's: `TextSearch`)."""

    drop_session = "DELETE FROM search_items WHERE session_id = ?"
    mark = select(Mark, "FROM search_marks WHERE session_id = ?")
    set_mark = insert(
        Mark,
        "search_marks",
        " ON CONFLICT (session_id) DO UPDATE SET indexed_sequence = excluded.indexed_sequence,"
        " indexed_length = excluded.indexed_length",
    )
    state = select(IndexState, "FROM search_index_state")
    set_state = "UPDATE search_index_state SET built = ?, resume_after = ?"
    set_caught_up = "UPDATE search_index_state SET caught_up_to = ? WHERE caught_up_to < ?"
    now = "SELECT {now}"
    pending = f"SELECT s.session_id {_PENDING} ORDER BY s.updated_at LIMIT ?"
    indexing = select(Indexing, "FROM sessions WHERE session_id = ?{lock}")
    # The indexer does not wait for a session a writer holds: it comes back to it.
    indexing_free = select(Indexing, "FROM sessions WHERE session_id = ?{lock_skip}")
    indexing_waited = select(Indexing, "FROM sessions WHERE session_id = ?{lock}")
    set_kind = "UPDATE sessions SET kind = ? WHERE session_id = ?"
    set_figures = "UPDATE sessions SET figures_json = ? WHERE session_id = ?"
    next_sessions = (
        "SELECT session_id FROM sessions WHERE session_id > ? ORDER BY session_id LIMIT ?"
    )
    first_sessions = "SELECT session_id FROM sessions ORDER BY session_id LIMIT ?"
    count_sessions = "SELECT COUNT(*) FROM sessions"
    count_done = "SELECT COUNT(*) FROM sessions WHERE session_id <= ?"
    langgraph_thread = "SELECT 1 FROM lg_checkpoints WHERE session_id = ? LIMIT 1"
    state_held = "SELECT 1 FROM middleware_state WHERE scope = ? AND key = ?"
    runtime_session = "SELECT 1 FROM runtime_heads WHERE session_id = ?"


# --- adding text, off the save path ------------------------------------------------------------


def _index_session(
    tx: Tx, adding: TextAdding, session_id: str, row: Indexing, kind: SessionKind, mark: Mark | None
) -> int:
    """Index what a session gained since `mark` (all of it without one), and derive the
    figures it carries (`SessionKind.figures`); items indexed."""
    added = 0
    length = row.context_length
    gained = Gained()
    if kind.storage is Storage.CHANNEL:
        assert kind.channel is not None  # a kind stored in a channel names it
        length, gained = _index_thread(tx, session_id, kind.channel, mark)
    elif kind.storage is Storage.CONTEXT:
        start = 0 if mark is None else mark.indexed_length
        if row.context_length > start:
            end = row.context_length
            # The item before them too: a figure may span items (an ADK run's time).
            before = 1 if start > 0 and kind.figures is not None else 0
            items = context_reads.window(tx, session_id, end, end - start + before).items
            gained = Gained(items[before:], start, items[0] if before else None)
    else:
        after = -1 if mark is None else mark.indexed_sequence
        batches = tx.rows(tx.sql(JournalSql).transcript_after, (session_id, after))
        for batch in batches:
            items = decode_stored(batch.items_json, list[Any], "transcript", session_id)
            rows = [
                IndexItem(session_id, batch.sequence, index, False, words)
                for index, words in index_texts(items, kind)
            ]
            adding.add(rows)
            added += len(rows)
    if gained.start is not None:
        rows = [
            IndexItem(session_id, None, gained.start + index, True, words)
            for index, words in index_texts(gained.items, kind)
        ]
        adding.add(rows)
        added += len(rows)
    _derive(tx, session_id, row, kind, mark, gained)
    done = Mark(session_id, row.latest_sequence, length)
    tx.run(tx.sql(SearchSql).set_mark, done)
    return added


class Gained(NamedTuple):
    """The items a session of items or a thread gained since the indexer's mark."""

    items: Sequence[Any] = ()
    start: int | None = None
    """Where the first of them is in the context or list; None: nothing gained."""
    before: Any = None
    """The item before them, for a kind whose figures span items; None at the start."""
    waiting: list[str] | None = None
    """The nodes a thread runs next; None for a session that is not a thread."""


def _derive(
    tx: Tx, session_id: str, row: Indexing, kind: SessionKind, mark: Mark | None, gained: Gained
) -> None:
    """Add the figures the gained items carry to those already derived (anew without a
    mark), and keep a thread's waiting nodes; written only when they change."""
    if kind.figures is None and gained.waiting is None:
        return
    derived = Derived()
    if mark is not None and row.figures_json is not None:
        derived = decode_stored(row.figures_json, Derived, "figures", session_id)
    more = Derived() if kind.figures is None else kind.figures(gained.items, gained.before)
    more.waiting = gained.waiting or []
    if not derived.add(more):
        derived.waiting = more.waiting  # the figures stay where they stopped growing
    encoded = derived.to_json().decode()
    if encoded != row.figures_json:
        tx.run(tx.sql(SearchSql).set_figures, (encoded, session_id))


def _index_thread(tx: Tx, session_id: str, channel: str, mark: Mark | None) -> tuple[int, Gained]:
    """The messages a LangGraph thread's newest checkpoint added to its list `channel` since
    `mark`, and the nodes it runs next; how far the list is read."""
    since = 0 if mark is None else mark.indexed_length
    checkpoint = conversations.newest_root(tx, session_id)
    if checkpoint is None:
        return since, Gained()
    window = conversations.list_window(tx, checkpoint, channel, None, None, since)
    waiting = conversations.next_nodes(tx, checkpoint)
    return max(since, window.length), Gained(window.items, window.start, None, waiting)


def catch_up_batch(tx: Tx, sessions: int, wait: bool = False) -> int:
    """Index the sessions changed since the indexer last looked, at most `sessions` of them;
    how many it looked at (fewer than `sessions`: it has caught up).

    The background indexer skips a session whose row another transaction holds (a writer, or
    a search's catch-up): the next pass takes it. A search's catch-up `wait`s for the holder
    instead, or it would answer without a write committed before it began: one transaction
    per row, each a turnstore write of one commit, taken in id order as writers take them."""
    sql = tx.sql(SearchSql)
    state = tx.row(sql.state)
    if state is None:
        return 0
    now = int(tx.value(sql.now))
    adding = tx.dialect.text_search.adding(tx)
    # In id order: the row locks are taken in the order every other multi-row write takes them.
    ids = sorted(tx.values(sql.pending, (state.caught_up_to, sessions)))
    held = 0
    for session_id in ids:
        row = tx.row(sql.indexing_waited if wait else sql.indexing_free, (session_id,))
        if row is None:
            # Held by a writer (or deleted meanwhile): the next pass looks again, so the
            # bound stays where it is.
            held += 1
        elif row.kind is not None:
            mark = tx.row(sql.mark, (session_id,))
            _index_session(tx, adding, session_id, row, kind_of(row.kind), mark)
    adding.done()
    if len(ids) < sessions and not held:
        bound = now - CATCH_UP_MARGIN_S
        tx.run(sql.set_caught_up, (bound, bound))
    return len(ids)


def has_pending(tx: Tx) -> bool:
    """Whether some session changed since the indexer last looked."""
    sql = tx.sql(SearchSql)
    state = tx.row(sql.state)
    return state is not None and bool(tx.values(sql.pending, (state.caught_up_to, 1)))


# --- the query ---------------------------------------------------------------------------------


def search(tx: Tx, query: SearchQuery) -> SearchPage:
    """One page of hits; `SearchIndexNotBuilt` while a migrated store's index is unbuilt."""
    state = tx.row(tx.sql(SearchSql).state)
    require_index_built(state is not None and state.built)
    rows, last = split_page(tx.dialect.text_search.hits(tx, query), query.limit)
    words = [term_words(term) for term in query.terms]
    hits = []
    for row in rows:
        # The index keeps words: the snippet is cut from the item as the store keeps it.
        snippet, marks = search_text.snippet(_source_text(tx, row), words)
        hits.append(
            SearchHit(
                session_id=row.session_id,
                kind=row.kind,
                owner_id=row.owner_id,
                sequence=row.sequence,
                item=row.item,
                written_at_ms=row.written_at_ms,
                snippet=snippet,
                marks=marks,
            )
        )
    cursor = None if last is None else next_cursor(query, last.item_id)
    return SearchPage(hits=hits, next_cursor=cursor)


def _source_text(tx: Tx, row: HitRow) -> str:
    """The searchable text of a hit's item, read from where the store keeps the item: its
    transcript batch, its session's context, or its thread's list; "" if it is gone."""
    where = Indexed(row.item_id, row.session_id, row.sequence, row.item, row.sequence is None)
    found = search_words.sources(tx, row.session_id, row.kind, [where])
    return item_text(found[row.item_id], kind_of(row.kind)) if row.item_id in found else ""


# --- building the index of sessions written before it ------------------------------------------


def _guessed_kind(tx: Tx, session_id: str, row: Indexing) -> str:
    """The kind of a session written before schema 7, from what it holds."""
    sql = tx.sql(SearchSql)
    if tx.value(sql.langgraph_thread, (session_id,)) is not None:
        return LANGGRAPH.name
    for kind in kinds():
        key = kind.state_key
        if key is not None and tx.value(sql.state_held, (session_id, key)) is not None:
            return kind.name
    if tx.value(sql.runtime_session, (session_id,)) is not None:
        return CHECKPOINT.name
    stored = decode_stored(row.checkpoint_state_json, Checkpoint, "checkpoint", session_id)
    # A session of items keeps the empty checkpoint it was created with (but its owner);
    # saves fill it in.
    bare = msgspec.structs.replace(stored, sequence=0, session_context=SessionContext())
    if encode_json(bare) == encode_json(Checkpoint.empty(session_id)):
        return ITEMS.name
    return CHECKPOINT.name


def rebuild_session(tx: Tx, session_id: str) -> int:
    """Index one session anew from what it holds, naming its kind if unnamed; items indexed."""
    sql = tx.sql(SearchSql)
    row = tx.row(sql.indexing, (session_id,))
    if row is None:
        return 0
    kind = row.kind
    if kind is None:
        kind = _guessed_kind(tx, session_id, row)
        tx.run(sql.set_kind, (kind, session_id))
    search_words.forget_where(tx, tx.sql(SearchWordsSql).of_session, (session_id,))
    tx.run(sql.drop_session, (session_id,))
    adding = tx.dialect.text_search.adding(tx)
    added = _index_session(tx, adding, session_id, row, kind_of(kind), None)
    adding.done()
    return added


def reindex_batch(tx: Tx, sessions: int, restart: bool) -> ReindexProgress:
    """Index the next `sessions` sessions in id order (from the first, on `restart`)."""
    sql = tx.sql(SearchSql)
    state = tx.row(sql.state) or IndexState(False, None, 0)
    if restart:
        state = IndexState(False, None, state.caught_up_to)
    total = int(tx.value(sql.count_sessions))
    if state.built:
        return ReindexProgress(
            sessions_done=total, sessions_total=total, items_indexed=0, built=True
        )
    if state.resume_after is None:
        ids = tx.values(sql.first_sessions, (sessions,))
    else:
        ids = tx.values(sql.next_sessions, (state.resume_after, sessions))
    items = sum(rebuild_session(tx, session_id) for session_id in ids)
    built = len(ids) < sessions
    resume = ids[-1] if ids else state.resume_after
    tx.run(sql.set_state, (built, None if built else resume))
    done = total if built else int(tx.value(sql.count_done, (resume,)))
    return ReindexProgress(
        sessions_done=done, sessions_total=total, items_indexed=items, built=built
    )
