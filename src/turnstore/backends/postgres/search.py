"""PostgreSQL's text index: a `tsvector` column of `search_items` under a GIN index.

The insert computes the column from the item's words (`rules.search_text`), passed as a
parameter and kept nowhere else, so adding text asks nothing more and a deleted row leaves
the GIN index with its row. A query is one tsquery built from the terms' words, each term
parsed by the index's own parser, so no text a user types is read as an operator; newest
first walks the newest items before it reads the GIN index, best first ranks by
`ts_rank_cd`.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnstore.engine.protocol import Query, Statements, Tx, insert
from turnstore.records.search import HitRow, IndexedWords, IndexItem
from turnstore.rules.search import SearchQuery, Term

WALK_ITEMS = 4_096
"""Newest first: how many of the newest items a search tests one by one before it reads the
GIN index for the rest."""

_FILTERS = (
    " AND (CAST(? AS TEXT) IS NULL OR s.owner_id = ?)"
    " AND (CAST(? AS TEXT) IS NULL OR s.kind = ?)"
    " AND i.written_at_ms >= ? AND i.written_at_ms < ? AND i.item_id < ?"
)
_HIT = "i.item_id, i.session_id, s.kind, s.owner_id, i.sequence, i.item, i.written_at_ms"
# A prefix term: the phrase as the index's parser reads it, its last word marked `:*`.
_PREFIX = "(COALESCE(NULLIF(phraseto_tsquery('simple', ?)::text, '') || ':*', '')::tsquery)"


class TsvectorSql(Statements):
    """Statements of PostgreSQL's text search (the query itself is built per query)."""

    last_item = "SELECT COALESCE(MAX(item_id), 0) FROM search_items"
    # Positions are kept (no `strip`): phrases (and a CJK word's pairs) match by them, and
    # `ts_rank_cd` ranks by them.
    add = insert(
        IndexItem,
        "search_items",
        set_={"words": "to_tsvector('simple', ?)"},
        written_at_ms="{now_ms}",
    )


def tsquery(terms: Sequence[Term], any_of: bool = False) -> tuple[str, list[str]]:
    """The terms as one tsquery expression, parsed by the index's own parser, and its
    parameters: all terms required, or (`any_of`) any of them."""
    # The terms are the index's words, one space apart (`rules.search_text`). The phrase's
    # tsquery text is read back by the cast, not by `to_tsquery`, which would parse its
    # lexemes again. A term in which the parser still finds no word (a letter this
    # database's locale does not know) is an empty tsquery, never `:*` of nothing, which is
    # a syntax error: an empty term drops out of `&&` and `||`, as an empty phrase does in FTS5.
    phrase = "phraseto_tsquery('simple', ?)"
    parts = [_PREFIX if term.prefix else phrase for term in terms]
    return (" || " if any_of else " && ").join(parts), [term.text for term in terms]


def _sql(query: SearchQuery, expression: str, walk: bool) -> str:
    """The page query. `walk` tests the newest items by key until the page is full;
    otherwise the GIN index is read and its hits sorted (`+ 0` keeps the planner off the
    key's order). The query is written out where it is used, so its value is a constant the
    planner can weigh."""
    rank = "i.item_id" if not query.best else f"ts_rank_cd(i.words, {expression})"
    order = rank if walk or query.best else "i.item_id + 0"
    return (
        f"SELECT {_HIT} FROM search_items AS i"
        " JOIN sessions AS s ON s.session_id = i.session_id"
        f" WHERE i.words @@ ({expression}){_FILTERS} AND i.item_id > ?"
        f" ORDER BY {order} DESC, i.item_id DESC LIMIT ? OFFSET ?"
    )


class TsvectorAdding:
    """One transaction's additions: each row's vector is computed by its insert."""

    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def add(self, items: Sequence[IndexItem]) -> None:
        """Insert the items' rows, each with the vector of its words."""
        if items:
            self._tx.many(self._tx.sql(TsvectorSql).add, items)

    def done(self) -> None:
        """Nothing left: the inserts indexed their rows."""


class TsvectorSearch:
    """PostgreSQL's `TextSearch`: tsquery and `ts_rank_cd` over a GIN index."""

    removes_by_words = False

    def adding(self, tx: Tx) -> TsvectorAdding:
        """Rows are indexed as they are inserted."""
        return TsvectorAdding(tx)

    def remove(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """Nothing to do: a deleted row's vector goes with it."""

    def rebuild(self, tx: Tx, words: Sequence[IndexedWords]) -> None:
        """Nothing to do: the GIN index never holds a row that is gone."""

    def hits(self, tx: Tx, query: SearchQuery) -> list[HitRow]:
        """The page's rows, one more than the page when another follows."""
        owner, kind = query.owner_id, query.kind
        filters = [owner, owner, kind, kind, query.since_ms, query.until_ms]
        after = query.below
        expression, terms = tsquery(query.terms)
        ranked = terms if query.best else []

        def page(walk: bool, below: int, above: int, count: int) -> list[HitRow]:
            params = [*terms, *filters, below, above, *ranked, count, query.offset]
            return tx.rows(
                Query(tx.dialect.format(_sql(query, expression, walk)), HitRow._make), params
            )

        if query.best:
            return page(False, after, -1, query.fetch)
        # The planner cannot tell a rare term from a missing one, and a walk that finds
        # nothing reads every item: so the walk is bounded. A common term fills the page
        # within it; what it leaves is read through the GIN index, where the term is by then
        # rare.
        top = int(tx.value(tx.sql(TsvectorSql).last_item))
        floor = min(after - 1, top) - WALK_ITEMS
        tx.run("SET LOCAL enable_bitmapscan = off")
        rows = page(True, after, floor, query.fetch)
        tx.run("SET LOCAL enable_bitmapscan = on")
        if len(rows) < query.fetch and floor > 0:
            rows += page(False, floor + 1, -1, query.fetch - len(rows))
        return rows
