"""SQLite's text index: an FTS5 table without content over `search_items`, ranked by BM25.

The index keeps no text, and `search_items` no words: a row of `search_items` and its FTS5
row share a row id. The words a transaction adds go into FTS5 in one statement at its end
(FTS5 flushes its pending terms at every statement inside a savepoint, so a statement per
row costs it several times as much). SQLite 3.40 has no `contentless_delete`: to forget a
row, FTS5 is handed the words it was indexed by, which the scripts read again from the item
the row indexes (`scripts/search_words.py`). A query is FTS5's own syntax, built from quoted
terms only (the index's words, `rules.search_text`), so no text a user types is read as an
operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from turnstore.engine.protocol import Query, Statements, Tx, insert
from turnstore.records.search import HitRow, IndexedWords, IndexItem
from turnstore.rules.search import SearchQuery, Term

_FILTERS = (
    " AND (CAST(? AS TEXT) IS NULL OR s.owner_id = ?)"
    " AND (CAST(? AS TEXT) IS NULL OR s.kind = ?)"
    " AND i.written_at_ms >= ? AND i.written_at_ms < ? AND i.item_id < ?"
)
_HIT = "i.item_id, i.session_id, s.kind, s.owner_id, i.sequence, i.item, i.written_at_ms"
_SEARCH = (
    f"SELECT {_HIT} FROM search_fts JOIN search_items AS i ON i.item_id = search_fts.rowid"
    " JOIN sessions AS s ON s.session_id = i.session_id"
    f" WHERE search_fts MATCH ?{_FILTERS}"
)


class ItemRow(NamedTuple):
    """A `search_items` row as SQLite writes it: its id is its FTS5 row's id too."""

    item_id: int
    session_id: str
    sequence: int | None
    item: int
    in_context: bool


class Fts5Sql(Statements):
    """Statements of SQLite's FTS5 index."""

    last_item = "SELECT COALESCE(MAX(item_id), 0) FROM search_items"
    add_item = insert(ItemRow, "search_items", written_at_ms="{now_ms}")
    # Rows' words, a JSON array of [row id, words], into FTS5 or out of it in one statement.
    add_words = (
        "INSERT INTO search_fts (rowid, body) SELECT value ->> 0, value ->> 1 FROM json_each(?)"
    )
    forget_words = (
        "INSERT INTO search_fts (search_fts, rowid, body)"
        " SELECT 'delete', value ->> 0, value ->> 1 FROM json_each(?)"
    )
    forget_all = "INSERT INTO search_fts (search_fts) VALUES ('delete-all')"
    # FTS5 walks a term's hits by row id, backwards, itself: one query fits every term.
    newest = Query(f"{_SEARCH} ORDER BY search_fts.rowid DESC LIMIT ? OFFSET ?", HitRow._make)
    best = Query(
        f"{_SEARCH} ORDER BY search_fts.rank, i.item_id DESC LIMIT ? OFFSET ?", HitRow._make
    )


def fts5_query(terms: tuple[Term, ...], any_of: bool = False) -> str:
    """The terms as an FTS5 query: each a quoted phrase, all of them required (or any)."""
    return (" OR " if any_of else " ").join(
        '"' + term.text.replace('"', '""') + '"' + ("*" if term.prefix else "") for term in terms
    )


def _pairs(words: Sequence[IndexedWords]) -> str:
    """Rows' words as the JSON array the statements read."""
    return msgspec.json.encode([list(pair) for pair in words]).decode()


class Fts5Adding:
    """One transaction's additions: rows numbered from the newest on, words kept until `done`."""

    def __init__(self, tx: Tx) -> None:
        self._tx = tx
        self._next = int(tx.value(tx.sql(Fts5Sql).last_item)) + 1
        self._words: list[IndexedWords] = []

    def add(self, items: Sequence[IndexItem]) -> None:
        """Write the items' rows, numbered here so their words can go to FTS5 later by id."""
        if not items:
            return
        first, self._next = self._next, self._next + len(items)
        rows = [
            ItemRow(first + offset, item.session_id, item.sequence, item.item, item.in_context)
            for offset, item in enumerate(items)
        ]
        self._tx.many(self._tx.sql(Fts5Sql).add_item, rows)
        pairs = zip(rows, items, strict=True)
        self._words += [IndexedWords(row.item_id, item.words) for row, item in pairs]

    def done(self) -> None:
        """Every word added, into FTS5 in one statement."""
        if self._words:
            self._tx.run(self._tx.sql(Fts5Sql).add_words, (_pairs(self._words),))
            self._words = []


class Fts5Search:
    """SQLite's `TextSearch`: FTS5's MATCH and `bm25` rank; forgetting takes the words."""

    removes_by_words = True

    def adding(self, tx: Tx) -> Fts5Adding:
        """Number new rows from the newest on; their words reach FTS5 at `done`."""
        return Fts5Adding(tx)

    def remove(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """FTS5's 'delete' of each row with the words it was indexed by, in one statement.
        Other words would silently take the wrong terms out: the scripts read them again
        from the item, by the function that made them."""
        if words:
            tx.run(tx.sql(Fts5Sql).forget_words, (_pairs(words),))

    def rebuild(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """Empty FTS5 ('delete-all' needs no words) and add these rows' words again."""
        sql = tx.sql(Fts5Sql)
        tx.run(sql.forget_all)
        if words:
            tx.run(sql.add_words, (_pairs(words),))

    def hits(self, tx: Tx, query: SearchQuery) -> list[HitRow]:
        """The page's rows, one more than the page when another follows."""
        owner, kind = query.owner_id, query.kind
        params = [
            fts5_query(query.terms),
            *(owner, owner, kind, kind, query.since_ms, query.until_ms),
            query.below,
            query.fetch,
            query.offset,
        ]
        sql = tx.sql(Fts5Sql)
        return tx.rows(sql.best if query.best else sql.newest, params)
