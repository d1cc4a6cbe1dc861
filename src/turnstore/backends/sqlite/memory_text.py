"""SQLite's memory writes and their text index: an FTS5 table without content (schema 11).

An item's FTS5 row has the item's `item_id` as its row id. FTS5 keeps no text, and SQLite
3.40 has no `contentless_delete`: to forget a row, FTS5 is handed the words it was indexed
by, read again from the item's value (`rules.search.value_words`) before a put replaces it,
a delete removes it or a sweep expires it; `text_indexed` says which items FTS5 holds. The
query is FTS5's own syntax, built from quoted terms only, as the conversation search's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from turnstore.backends.sqlite.search import fts5_query
from turnstore.engine.protocol import Query, Statements, Tx, insert
from turnstore.records.memory import MemoryInsert, MemoryRow, MemoryTextQuery
from turnstore.rules.search import Term, value_words

_ROW = (
    "m.namespace, m.item_key, m.value_json, m.created_at_ms, m.updated_at_ms,"
    " m.expires_at_ms, m.ttl_ms"
)
_UNDER = "(CAST(? AS TEXT) IS NULL OR m.namespace = ? OR (m.namespace >= ? AND m.namespace < ?))"
_LIVE = "(? = 0 OR m.expires_at_ms IS NULL OR m.expires_at_ms > {now_ms})"


class ItemRow(NamedTuple):
    """A `memory_items` row as a put writes it here: whether FTS5 holds its words too."""

    namespace: str
    item_key: str
    owner_id: str | None
    value_json: str
    ttl_ms: int | None
    expires_at_ms: int | None
    text_indexed: bool


class Gone(NamedTuple):
    """An item a write replaces or removes: what FTS5 needs to forget it."""

    item_id: int
    value_json: str
    text_indexed: bool


class Held(NamedTuple):
    """The item a put replaces: what FTS5 needs to forget it, whether it had expired, and its
    owner."""

    item_id: int
    value_json: str | None
    """Read only when FTS5 holds the item's words."""
    text_indexed: bool
    expired: bool
    owner_id: str | None


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
        " text_indexed = excluded.text_indexed RETURNING item_id",
        set_={"expires_at_ms": "{now_ms} + ?"},
        created_at_ms="{now_ms}",
        updated_at_ms="{now_ms}",
    )
    # The value only of an item FTS5 holds: a put over one it does not reads none.
    held = Query(
        "SELECT item_id, CASE WHEN text_indexed THEN value_json END, text_indexed,"
        " COALESCE(expires_at_ms <= {now_ms}, 0), owner_id FROM memory_items"
        " WHERE namespace = ? AND item_key = ?",
        Held._make,
    )
    owner = "UPDATE memory_items SET owner_id = ? WHERE item_id = ?"
    drop_vectors = "DELETE FROM memory_vectors WHERE namespace = ? AND item_key = ?"
    delete = Query(
        "DELETE FROM memory_items WHERE namespace = ? AND item_key = ?"
        " RETURNING item_id, value_json, text_indexed",
        Gone._make,
    )
    sweep = Query(
        "DELETE FROM memory_items WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= {now_ms}"
        " RETURNING item_id, value_json, text_indexed",
        Gone._make,
    )
    # Rows' words into FTS5 (command NULL) or out of it ('delete'), in one statement: FTS5
    # flushes its pending terms at the end of every statement inside a savepoint.
    change_words = (
        "INSERT INTO memory_fts (memory_fts, rowid, words)"
        " SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?)"
    )
    page = Query(
        f"SELECT {_ROW} FROM memory_fts JOIN memory_items AS m ON m.item_id = memory_fts.rowid"
        f" WHERE memory_fts MATCH ? AND {_UNDER} AND {_LIVE}"
        " ORDER BY memory_fts.rank, m.item_id LIMIT ? OFFSET ?",
        MemoryRow._make,
    )


def _change(tx: Tx, changes: list[list[object]]) -> None:
    """Hand FTS5 these [command, row id, words] in one statement."""
    if changes:
        tx.run(tx.sql(Fts5MemorySql).change_words, (msgspec.json.encode(changes).decode(),))


def _forgotten(gone: Sequence[Gone]) -> list[list[object]]:
    """The deletes that take these items' words out of FTS5, read again from their values."""
    return [
        ["delete", row.item_id, value_words(row.value_json)] for row in gone if row.text_indexed
    ]


class Fts5MemoryText:
    """SQLite's `MemoryText`: FTS5 is handed an item's words to add it and to forget it."""

    def put(self, tx: Tx, row: MemoryInsert, words: str | None) -> None:
        """Write the item; FTS5 forgets the words of the item it replaces and adds its own
        (nothing, when they are the same words). An expired item replaced loses its vectors."""
        sql = tx.sql(Fts5MemorySql)
        held = tx.rows(sql.held, (row.namespace, row.item_key))
        expired = bool(held) and bool(held[0].expired)
        item_id = tx.value(sql.put, (*ItemRow(*row, text_indexed=words is not None), expired))
        if expired:
            tx.run(sql.drop_vectors, (row.namespace, row.item_key))
        if held and held[0].owner_id != row.owner_id:
            tx.run(sql.owner, (row.owner_id, item_id))
        changes = _forgotten(
            [Gone(one.item_id, one.value_json or "", one.text_indexed) for one in held]
        )
        if not (changes and changes[0][2] == words):
            _change(tx, changes + ([[None, item_id, words]] if words is not None else []))

    def delete(self, tx: Tx, namespace: str, key: str) -> None:
        """Delete the item (its vectors cascade) and forget its words."""
        _change(tx, _forgotten(tx.rows(tx.sql(Fts5MemorySql).delete, (namespace, key))))

    def sweep(self, tx: Tx) -> int:
        """Delete the expired items and forget their words; how many there were."""
        gone = tx.rows(tx.sql(Fts5MemorySql).sweep)
        _change(tx, _forgotten(gone))
        return len(gone)

    def page(self, tx: Tx, query: MemoryTextQuery) -> list[MemoryRow]:
        """The page, ranked by FTS5's BM25 (ties by the oldest item first)."""
        match = fts5_query(tuple(Term(*term) for term in query.terms))
        under = query.under or (None, None, None)
        params = (match, under[0], *under, query.live, query.limit, query.offset)
        return tx.rows(tx.sql(Fts5MemorySql).page, params)
