"""SQLite's text index: an FTS5 table over the words of `search_items`, ranked by BM25.

The rows a transaction adds go into FTS5 in one statement at its end; a trigger takes deleted
rows out (`schema.py`). A query is FTS5's own syntax, built from quoted terms only (the
index's words, `rules.search_text`), so no text a user types is read as an operator.
"""

from __future__ import annotations

from collections.abc import Callable

from turnstore.engine.protocol import Query, Statements, Tx
from turnstore.records.search import HitRow
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


class Fts5Sql(Statements):
    """Statements of SQLite's FTS5 index."""

    last_item = "SELECT COALESCE(MAX(item_id), 0) FROM search_items"
    # The rows a transaction added, into the FTS5 index in one statement.
    add = (
        "INSERT INTO search_fts (rowid, body) SELECT item_id, body FROM search_items"
        " WHERE item_id > ?"
    )
    # FTS5 walks a term's hits by row id, backwards, itself: one query fits every term.
    newest = Query(f"{_SEARCH} ORDER BY search_fts.rowid DESC LIMIT ? OFFSET ?", HitRow._make)
    best = Query(
        f"{_SEARCH} ORDER BY search_fts.rank, i.item_id DESC LIMIT ? OFFSET ?", HitRow._make
    )


def fts5_query(terms: tuple[Term, ...]) -> str:
    """The terms as an FTS5 query: each a quoted phrase, all of them required."""
    return " ".join(
        '"' + term.text.replace('"', '""') + '"' + ("*" if term.prefix else "") for term in terms
    )


class Fts5Search:
    """SQLite's `TextSearch`: FTS5's MATCH and `bm25` rank."""

    def adding(self, tx: Tx) -> Callable[[], None]:
        """Note the newest item now; the call returned puts every row after it into FTS5."""
        after = int(tx.value(tx.sql(Fts5Sql).last_item))
        return lambda: tx.run(tx.sql(Fts5Sql).add, (after,))

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
