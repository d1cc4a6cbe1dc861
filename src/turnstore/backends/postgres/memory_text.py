"""PostgreSQL's memory writes and their text index: a `tsvector` column under GIN (schemas 11,
12).

A put searched by its text writes the column, from the item's words
(`rules.search.value_words`), in its own statement, where SQLite leaves them to the indexer:
a second version of each row, written by the indexer, would cost PostgreSQL more than the
words do at the put (the row, its index entries and WAL again, then vacuum). An item not
searched by its text has none (NULL), and nothing waits for the indexer. A deleted or
expired row leaves the GIN index with its row, so a delete and a sweep are single
statements. The query is the conversation search's tsquery,
ranked by `ts_rank_cd`.
"""

from __future__ import annotations

from typing import NamedTuple

from turnstore.backends.postgres.search import tsquery
from turnstore.engine.protocol import Query, Statements, Tx, insert
from turnstore.records.memory import MemoryInsert, MemoryRow, MemoryTextQuery
from turnstore.rules.search import Term, stored_value_words

_ROW = (
    "namespace, item_key, value_json, created_at_ms, updated_at_ms, expires_at_ms, ttl_ms, owner_id"
)
_UNDER = "(CAST(? AS TEXT) IS NULL OR namespace = ? OR (namespace >= ? AND namespace < ?))"
_OWNED = "(CAST(? AS TEXT) IS NULL OR owner_id = ?)"
_LIVE = "(NOT ? OR expires_at_ms IS NULL OR expires_at_ms > {now_ms})"
# One time for a put's row: `{now_ms}` reads the clock at each use, so a new item's creation,
# update and expiry could fall a millisecond apart; the statement's start is one instant.
_PUT_NOW = "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)"


class ItemRow(NamedTuple):
    """A `memory_items` row as a put writes it here: with the words of its vector."""

    namespace: str
    item_key: str
    owner_id: str | None
    value_json: str
    ttl_ms: int | None
    expires_at_ms: int | None
    words: str | None


class TsvectorMemorySql(Statements):
    """Statements of memory's writes on PostgreSQL (the query is built per query)."""

    # An item put over one that expired (not yet swept) is created anew, its vectors gone.
    # The replaced row as the statement's snapshot holds it (`held`) says whether it had
    # expired, at the put's own instant. One statement: a put without vectors is a single
    # write (`Write.single`).
    put = (
        "WITH held AS (SELECT expires_at_ms <= "
        + _PUT_NOW
        + " AS expired FROM memory_items WHERE namespace = ? AND item_key = ?),"
        " dropped AS (DELETE FROM memory_vectors WHERE namespace = ? AND item_key = ?"
        " AND (SELECT expired FROM held)) "
        + insert(
            ItemRow,
            "memory_items",
            " ON CONFLICT (namespace, item_key) DO UPDATE SET owner_id = excluded.owner_id,"
            " created_at_ms = CASE WHEN memory_items.expires_at_ms <= excluded.updated_at_ms"
            " THEN excluded.created_at_ms ELSE memory_items.created_at_ms END,"
            " value_json = excluded.value_json, updated_at_ms = excluded.updated_at_ms,"
            " ttl_ms = excluded.ttl_ms, expires_at_ms = excluded.expires_at_ms,"
            " words = excluded.words",
            set_={"expires_at_ms": f"{_PUT_NOW} + ?", "words": "to_tsvector('simple', ?)"},
            created_at_ms=_PUT_NOW,
            updated_at_ms=_PUT_NOW,
        )
    )
    delete = "DELETE FROM memory_items WHERE namespace = ? AND item_key = ?"
    sweep = (
        "DELETE FROM memory_items WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= {now_ms}"
        " RETURNING 1"
    )


class TsvectorMemoryText:
    """PostgreSQL's `MemoryText`: the vector is written, and goes, with its row."""

    searched = "words IS NOT NULL"
    """An item put with `text` has a vector of its words (empty for a value without any)."""

    def put(self, tx: Tx, row: MemoryInsert, text: bool) -> None:
        """Write the item with the vector of its words (`text`) or none, in one statement."""
        held = (row.namespace, row.item_key)
        words = stored_value_words(row.value_json) if text else None
        item = ItemRow(*row, words=words)
        tx.run(tx.sql(TsvectorMemorySql).put, (*held, *held, *item))

    def delete(self, tx: Tx, namespace: str, key: str) -> None:
        """Delete the item (its vectors cascade)."""
        tx.run(tx.sql(TsvectorMemorySql).delete, (namespace, key))

    def sweep(self, tx: Tx) -> int:
        """Delete the expired items; how many there were."""
        return len(tx.values(tx.sql(TsvectorMemorySql).sweep))

    def index_pending(self, tx: Tx, limit: int) -> int:
        """Nothing waits: a put indexes its item's words."""
        return 0

    def has_pending(self, tx: Tx) -> bool:
        """Nothing waits: a put indexes its item's words."""
        return False

    def page(self, tx: Tx, query: MemoryTextQuery) -> list[MemoryRow]:
        """The page, ranked by `ts_rank_cd` (ties by namespace and key)."""
        expression, terms = tsquery(tuple(Term(*term) for term in query.terms), query.any_of)
        sql = (
            f"SELECT {_ROW} FROM memory_items WHERE words @@ ({expression})"
            f" AND {_UNDER} AND {_OWNED} AND {_LIVE}"
            f" ORDER BY ts_rank_cd(words, {expression}) DESC, namespace, item_key"
            " LIMIT ? OFFSET ?"
        )
        under = query.under or (None, None, None)
        owner = (query.owner_id, query.owner_id)
        params = (*terms, under[0], *under, *owner, query.live, *terms, query.limit, query.offset)
        return tx.rows(Query(tx.dialect.format(sql), MemoryRow._make), params)
