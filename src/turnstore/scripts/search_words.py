"""The words indexed items were indexed by, read again from the items themselves.

Neither backend keeps a copy of the words. SQLite's FTS5 table has no content and, at 3.40,
no `contentless_delete`: to forget a row it must be handed the very words it was indexed by,
or it silently takes other terms out. So before rows leave `search_items`, and before the
rows that hold their items change, the same transaction reads those items where the store
keeps them (a transcript batch, the context, a thread's list) and makes their words by the
function that made them at indexing (`rules.search.index_texts`). An item that can no longer
be read (gone, or with no words now) cannot be forgotten that way: the text index is then
rebuilt from every item it still indexes, in the same transaction (`_rebuild`).

PostgreSQL's GIN index forgets a row with the row: there nothing is read.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from turnstore.engine.protocol import Query, Statements, Tx, matching, select
from turnstore.records.base import decode_stored
from turnstore.records.kinds import Storage, kind_of
from turnstore.records.search import IndexedWords
from turnstore.rules.search import item_text
from turnstore.rules.search_text import index_text
from turnstore.scripts import context_reads, conversations
from turnstore.scripts.journals import JournalSql

logger = logging.getLogger("turnstore.search")


class Indexed(NamedTuple):
    """Where an indexed item is: its row id, and its batch and index or its context index."""

    item_id: int
    session_id: str
    sequence: int | None
    item: int
    in_context: bool


class ItemKey(NamedTuple):
    """A `search_items` row by its id."""

    item_id: int


class SearchWordsSql(Statements):
    """Statements reading which items the index holds, before they leave it."""

    kind = "SELECT kind FROM sessions WHERE session_id = ?"
    of_session = select(Indexed, "FROM search_items WHERE session_id = ?")
    of_sessions = select(Indexed, "FROM search_items WHERE {ids:session_id}")
    context_from = select(
        Indexed, "FROM search_items WHERE session_id = ? AND in_context = ? AND item >= ?"
    )
    context_before = select(
        Indexed, "FROM search_items WHERE session_id = ? AND in_context = ? AND item < ?"
    )
    indexed_sessions = "SELECT DISTINCT session_id FROM search_items ORDER BY session_id"
    drop_item = matching(ItemKey, "DELETE FROM search_items")


def forget_where(tx: Tx, query: Query[Indexed], params: Sequence[Any]) -> None:
    """Before the rows `query` picks leave `search_items`: their words leave the text index
    (read only where the index needs them)."""
    if tx.dialect.text_search.removes_by_words:
        forget(tx, tx.rows(query, params))


def forget(tx: Tx, rows: Sequence[Indexed]) -> None:
    """Take these rows' words out of the text index, read again from their items; rebuild
    the index when some item cannot be read. The rows themselves are the caller's to delete."""
    search = tx.dialect.text_search
    if not rows or not search.removes_by_words:
        return
    words: list[IndexedWords] = []
    for session_id, session_rows in _by_session(rows):
        known, lost = words_of(tx, session_id, list(session_rows))
        if lost:
            # Each write removes its items before it changes them: this is a store changed
            # behind turnstore's back, or words read differently than when they were indexed.
            logger.warning(
                "search index rebuilt: %d indexed item(s) of session %r could not be read again",
                len(lost),
                session_id,
            )
            _rebuild(tx, {row.item_id for row in rows})
            return
        words += known
    search.remove(tx, words)


def _by_session(rows: Sequence[Indexed]) -> Any:
    return itertools.groupby(sorted(rows, key=lambda row: row.session_id), lambda r: r.session_id)


def words_of(
    tx: Tx, session_id: str, rows: Sequence[Indexed]
) -> tuple[list[IndexedWords], list[Indexed]]:
    """The words of one session's indexed rows, and the rows whose item has none to give."""
    kind = tx.value(tx.sql(SearchWordsSql).kind, (session_id,))
    items = sources(tx, session_id, kind, rows)
    read_as = kind_of(kind)
    known: list[IndexedWords] = []
    lost: list[Indexed] = []
    for row in rows:
        item = items.get(row.item_id)
        words = "" if item is None else index_text(item_text(item, read_as))
        if words:
            known.append(IndexedWords(row.item_id, words))
        else:
            lost.append(row)
    return known, lost


def sources(tx: Tx, session_id: str, kind: str | None, rows: Sequence[Indexed]) -> dict[int, Any]:
    """The items one session's rows index, by row id, read where the store keeps them: a row
    whose item is gone is left out."""
    found: dict[int, Any] = {}
    batches = sorted({row.sequence for row in rows if row.sequence is not None})
    for sequence in batches:
        batch = tx.row(tx.sql(JournalSql).transcript_batch, (session_id, sequence))
        if batch is None:
            continue
        items = decode_stored(batch.items_json, list[Any], "transcript", session_id)
        for row in rows:
            if row.sequence == sequence and row.item < len(items):
                found[row.item_id] = items[row.item]
    held = [row for row in rows if row.sequence is None]
    if held:
        low, high = min(row.item for row in held), max(row.item for row in held) + 1
        items, start = _context(tx, session_id, kind, low, high)
        for row in held:
            if 0 <= row.item - start < len(items):
                found[row.item_id] = items[row.item - start]
    return found


def _context(
    tx: Tx, session_id: str, kind: str | None, low: int, high: int
) -> tuple[list[Any], int]:
    """A session's context items (a thread's list items) from `low` to `high`, and where the
    first is: fewer when the context is shorter."""
    stored = kind_of(kind)
    if stored.storage is Storage.CHANNEL and stored.channel is not None:
        checkpoint = conversations.newest_root(tx, session_id)
        if checkpoint is None:
            return [], 0
        listed = conversations.list_window(tx, checkpoint, stored.channel, high, high - low)
        return listed.items, listed.start
    window = context_reads.window(tx, session_id, high, high - low)
    return window.items, window.start


def _rebuild(tx: Tx, leaving: set[int]) -> None:
    """The text index anew from every item it indexes but the `leaving` rows; a row whose
    item is gone leaves `search_items` too (there is nothing left to find by it)."""
    sql = tx.sql(SearchWordsSql)
    words: list[IndexedWords] = []
    for session_id in tx.values(sql.indexed_sessions):
        rows = [row for row in tx.rows(sql.of_session, (session_id,)) if row.item_id not in leaving]
        known, lost = words_of(tx, session_id, rows)
        words += known
        if lost:
            tx.many(sql.drop_item, [ItemKey(row.item_id) for row in lost])
    tx.dialect.text_search.rebuild(tx, words)
