"""SQLite's memory writes and their text index: an FTS5 table without content (schemas 11, 12).

An item's FTS5 row has the item's `item_id` as its row id. FTS5 keeps no text, and SQLite
3.40 has no `contentless_delete`: to forget a row, FTS5 is handed the words it was indexed
by. `text_indexed` says FTS5 holds a row of the item: with the words in `stale_words`, or,
when that is NULL, with its value's (`rules.search.value_words`, read again from the value).
A put searched by its text leaves the item's words to the indexer (`words_pending`), keeping
what FTS5 holds in `stale_words`, so that no FTS5 page is written on the put path (FTS5
writes its segment pages in every transaction that changes it); a put not searched by its
text, a delete and a sweep hand FTS5 the words it holds at once (what is erased cannot be
found). The query is FTS5's own syntax, built from quoted terms only, as the conversation
search's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from turnstore.backends.sqlite.search import fts5_query
from turnstore.engine.protocol import Query, Statements, Tx, insert
from turnstore.records.memory import MemoryInsert, MemoryRow, MemoryTextQuery
from turnstore.rules.search import Term, stored_value_words

_ROW = (
    "m.namespace, m.item_key, m.value_json, m.created_at_ms, m.updated_at_ms,"
    " m.expires_at_ms, m.ttl_ms, m.owner_id"
)
_UNDER = "(CAST(? AS TEXT) IS NULL OR m.namespace = ? OR (m.namespace >= ? AND m.namespace < ?))"
_OWNED = "(CAST(? AS TEXT) IS NULL OR m.owner_id = ?)"
_LIVE = "(? = 0 OR m.expires_at_ms IS NULL OR m.expires_at_ms > {now_ms})"


class ItemRow(NamedTuple):
    """A `memory_items` row as a put writes it here, with what FTS5 holds of it."""

    namespace: str
    item_key: str
    owner_id: str | None
    value_json: str
    ttl_ms: int | None
    expires_at_ms: int | None
    text_indexed: bool
    words_pending: bool
    stale_words: str | None


class Gone(NamedTuple):
    """An item a write removes: what FTS5 needs to forget it."""

    item_id: int
    value_json: str
    text_indexed: bool
    stale_words: str | None


class Held(NamedTuple):
    """The item a put replaces: what FTS5 holds of it, whether it had expired, its owner."""

    item_id: int
    value_json: str | None
    """Read only when FTS5 holds the words of this value."""
    text_indexed: bool
    stale_words: str | None
    expired: bool
    owner_id: str | None


class Pending(NamedTuple):
    """An item whose value's words wait for the indexer, and what FTS5 holds of it."""

    item_id: int
    value_json: str
    text_indexed: bool
    stale_words: str | None


_GONE = " RETURNING item_id, value_json, text_indexed, stale_words"


class Fts5MemorySql(Statements):
    """Statements of memory's writes and FTS5 index on SQLite."""

    put = insert(
        ItemRow,
        "memory_items",
        # An item put over one that expired (not yet swept) is created anew: whether it had
        # is `held`'s answer, passed in, so the put and its caller's vectors agree on it. The
        # owner is set apart (`owner`), only when it changes: SQLite rewrites an index entry
        # of every column an UPDATE assigns, changed or not, and the owner's index page
        # would be one more page for each put to write and sync.
        " ON CONFLICT (namespace, item_key) DO UPDATE SET"
        " created_at_ms = CASE WHEN ?"
        " THEN excluded.created_at_ms ELSE memory_items.created_at_ms END,"
        " value_json = excluded.value_json, updated_at_ms = excluded.updated_at_ms,"
        " ttl_ms = excluded.ttl_ms, expires_at_ms = excluded.expires_at_ms,"
        " text_indexed = excluded.text_indexed, words_pending = excluded.words_pending,"
        " stale_words = excluded.stale_words RETURNING item_id",
        set_={"expires_at_ms": "{now_ms} + ?"},
        created_at_ms="{now_ms}",
        updated_at_ms="{now_ms}",
    )
    # The value only where FTS5 holds its words: a put over any other item reads none.
    held = Query(
        "SELECT item_id, CASE WHEN text_indexed AND stale_words IS NULL THEN value_json END,"
        " text_indexed, stale_words, COALESCE(expires_at_ms <= {now_ms}, 0), owner_id"
        " FROM memory_items WHERE namespace = ? AND item_key = ?",
        Held._make,
    )
    owner = "UPDATE memory_items SET owner_id = ? WHERE item_id = ?"
    drop_vectors = "DELETE FROM memory_vectors WHERE namespace = ? AND item_key = ?"
    delete = Query(
        "DELETE FROM memory_items WHERE namespace = ? AND item_key = ?" + _GONE, Gone._make
    )
    sweep = Query(
        "DELETE FROM memory_items WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= {now_ms}"
        + _GONE,
        Gone._make,
    )
    # Read through the partial index of pending items, in row id order.
    pending = Query(
        "SELECT item_id, value_json, text_indexed, stale_words FROM memory_items"
        " WHERE words_pending = 1 ORDER BY item_id LIMIT ?",
        Pending._make,
    )
    any_pending = "SELECT 1 FROM memory_items WHERE words_pending = 1 LIMIT 1"
    indexed = (
        "UPDATE memory_items SET words_pending = 0, text_indexed = 1, stale_words = NULL"
        " WHERE item_id IN (SELECT value FROM json_each(?))"
    )
    # Rows' words into FTS5 (command NULL) or out of it ('delete'), in one statement: FTS5
    # flushes its pending terms at the end of every statement inside a savepoint.
    change_words = (
        "INSERT INTO memory_fts (memory_fts, rowid, words)"
        " SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?)"
    )
    # An item whose words wait is left out: FTS5 may still hold its old value's words.
    page = Query(
        f"SELECT {_ROW} FROM memory_fts JOIN memory_items AS m ON m.item_id = memory_fts.rowid"
        f" WHERE memory_fts MATCH ? AND m.words_pending = 0 AND {_UNDER} AND {_OWNED}"
        f" AND {_LIVE} ORDER BY memory_fts.rank, m.item_id LIMIT ? OFFSET ?",
        MemoryRow._make,
    )


def _held_words(value_json: str | None, text_indexed: bool, stale: str | None) -> str | None:
    """The words FTS5 holds of an item; None when it holds no row of it."""
    if not text_indexed:
        return None
    return stale if stale is not None else stored_value_words(value_json or "")


def _change(tx: Tx, changes: list[list[object]]) -> None:
    """Hand FTS5 these [command, row id, words] in one statement."""
    if changes:
        tx.run(tx.sql(Fts5MemorySql).change_words, (msgspec.json.encode(changes).decode(),))


def _forgotten(gone: Sequence[Gone]) -> list[list[object]]:
    """The deletes that take these items' words out of FTS5."""
    changes: list[list[object]] = []
    for row in gone:
        words = _held_words(row.value_json, row.text_indexed, row.stale_words)
        if words is not None:
            changes.append(["delete", row.item_id, words])
    return changes


class Fts5MemoryText:
    """SQLite's `MemoryText`: FTS5 is handed an item's words to add it and to forget it."""

    searched = "(text_indexed = 1 OR words_pending = 1)"
    """An item put with `text` waits for the indexer, or FTS5 holds its words."""

    def put(self, tx: Tx, row: MemoryInsert, text: bool) -> None:
        """Write the item. Searched by its `text`, its words wait for the indexer and FTS5 is
        left as it is (what it holds of the item is kept in `stale_words`); not searched, FTS5
        forgets what it held of the item now. An expired item replaced loses its vectors."""
        sql = tx.sql(Fts5MemorySql)
        found = tx.rows(sql.held, (row.namespace, row.item_key))
        held = found[0] if found else None
        holds, expired = None, False
        if held is not None:
            holds = _held_words(held.value_json, held.text_indexed, held.stale_words)
            expired = bool(held.expired)
        if text:
            item = ItemRow(*row, holds is not None, True, holds)
        else:
            item = ItemRow(*row, False, False, None)
        item_id = tx.value(sql.put, (*item, expired))
        if expired:
            tx.run(sql.drop_vectors, (row.namespace, row.item_key))
        if held is not None and held.owner_id != row.owner_id:
            tx.run(sql.owner, (row.owner_id, item_id))
        if not text and holds is not None:
            _change(tx, [["delete", item_id, holds]])

    def delete(self, tx: Tx, namespace: str, key: str) -> None:
        """Delete the item (its vectors cascade) and forget its words."""
        _change(tx, _forgotten(tx.rows(tx.sql(Fts5MemorySql).delete, (namespace, key))))

    def sweep(self, tx: Tx) -> int:
        """Delete the expired items and forget their words; how many there were."""
        gone = tx.rows(tx.sql(Fts5MemorySql).sweep)
        _change(tx, _forgotten(gone))
        return len(gone)

    def index_pending(self, tx: Tx, limit: int) -> int:
        """Index up to `limit` pending items, oldest row first; how many."""
        sql = tx.sql(Fts5MemorySql)
        rows = tx.rows(sql.pending, (limit,))
        changes: list[list[object]] = []
        for one in rows:
            words = stored_value_words(one.value_json)
            holds = _held_words(one.value_json, one.text_indexed, one.stale_words)
            if holds != words:
                forget = [] if holds is None else [["delete", one.item_id, holds]]
                changes += [*forget, [None, one.item_id, words]]
        _change(tx, changes)
        ids = [one.item_id for one in rows]
        if ids:
            tx.run(sql.indexed, (msgspec.json.encode(ids).decode(),))
        return len(rows)

    def has_pending(self, tx: Tx) -> bool:
        """Whether some item's words wait for the indexer."""
        return bool(tx.values(tx.sql(Fts5MemorySql).any_pending))

    def page(self, tx: Tx, query: MemoryTextQuery) -> list[MemoryRow]:
        """The page, ranked by FTS5's BM25 (ties by the oldest item first)."""
        match = fts5_query(tuple(Term(*term) for term in query.terms), query.any_of)
        under = query.under or (None, None, None)
        owner = (query.owner_id, query.owner_id)
        params = (match, under[0], *under, *owner, query.live, query.limit, query.offset)
        return tx.rows(tx.sql(Fts5MemorySql).page, params)
