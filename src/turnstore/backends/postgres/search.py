"""PostgreSQL's text index: a generated `tsvector` column of `search_items` under a GIN index.

The column is computed by the insert itself, so adding text asks nothing more. A query is
one tsquery built from quoted terms, each parsed by the index's own parser, so no text a
user types is read as an operator; newest first walks the newest items before it reads the
GIN index, best first ranks by `ts_rank_cd`.
"""

from __future__ import annotations

from collections.abc import Callable

from turnstore.engine.protocol import Query, Statements, Tx
from turnstore.records.search import HitRow
from turnstore.rules.search import MARK_END, MARK_START, SearchQuery

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
_HOLDS_WORD = "length(to_tsvector('simple', {})) > 0"
# One run of words around the first match, as FTS5's snippet shows: fragment mode
# (`MaxFragments`) left out the text's last word, and `ShortWord` would drop short words at
# the run's ends, which FTS5 keeps.
_HEADLINE = f"'StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=24, MinWords=20, ShortWord=0'"
# A headline is a run of the text; FTS5's snippet says with `…` where it cut the text, and
# so does this one: where the text before or after the run holds a word, as the index's own
# parser reads it. The run is found in the text verbatim, but for the HTML tags the
# headline writes as one space each: where the run is not found, it is found with every
# `<…>` of both read as a space; failing that (`at` 0), it is shown as it is.
_SHOWN = (
    f"CASE WHEN found.at > 1 AND {_HOLDS_WORD.format('left(found.whole, found.at - 1)')}"
    " THEN '…' ELSE '' END || shown.headline || CASE WHEN found.at > 0 AND"
    f" {_HOLDS_WORD.format('substr(found.whole, found.at + length(found.run))')}"
    " THEN '…' ELSE '' END"
)
_UNTAGGED = "regexp_replace({}, '<[^<>]*>', ' ', 'g')"
_FOUND = (
    "LATERAL (SELECT whole, run, strpos(whole, run) AS at FROM (SELECT hits.body AS whole,"
    " shown.plain AS run WHERE strpos(hits.body, shown.plain) > 0"
    f" UNION ALL SELECT {_UNTAGGED.format('hits.body')}, {_UNTAGGED.format('shown.plain')}"
    " WHERE strpos(hits.body, shown.plain) = 0) AS unmarked) AS found"
)


class TsvectorSql(Statements):
    """Statements of PostgreSQL's text search (the query itself is built per query)."""

    last_item = "SELECT COALESCE(MAX(item_id), 0) FROM search_items"


def _tsquery(query: SearchQuery) -> tuple[str, list[str]]:
    """The terms as one tsquery expression, parsed by the index's own parser."""
    # The phrase's tsquery text is read back by the cast, not by `to_tsquery`, which would
    # parse its lexemes again (`'foo-bar'` into three). A term in which the parser finds no
    # word (an HTML tag, a letter this database's locale does not know) is an empty tsquery,
    # never `:*` of nothing, which is a syntax error: an empty term drops out of `&&`, as an
    # empty phrase does in FTS5, and a query of nothing else matches nothing.
    phrase = "phraseto_tsquery('simple', ?)"
    parts = [_PREFIX if term.prefix else phrase for term in query.terms]
    return " && ".join(parts), [term.text for term in query.terms]


def _sql(query: SearchQuery, expression: str, walk: bool) -> str:
    """The page query. `walk` tests the newest items by key until the page is full;
    otherwise the GIN index is read and its hits sorted (`+ 0` keeps the planner off the
    key's order). The query is written out where it is used, so its value is a constant the
    planner can weigh."""
    rank = "i.item_id" if not query.best else f"ts_rank_cd(i.body_vector, {expression})"
    order = "rank" if walk or query.best else "i.item_id + 0"
    # The headline re-reads each hit's text: only the page's rows get one.
    return (
        f"WITH hits AS (SELECT {_HIT}, i.body, {rank} AS rank FROM search_items AS i"
        " JOIN sessions AS s ON s.session_id = i.session_id"
        f" WHERE i.body_vector @@ ({expression}){_FILTERS} AND i.item_id > ?"
        f" ORDER BY {order} DESC, i.item_id DESC LIMIT ? OFFSET ?)"
        " SELECT item_id, session_id, kind, owner_id, sequence, item, written_at_ms,"
        f" {_SHOWN} FROM hits, LATERAL (SELECT headline,"
        f" translate(headline, '{MARK_START}{MARK_END}', '') AS plain FROM ts_headline('simple',"
        f" hits.body, {expression}, {_HEADLINE}) AS headline) AS shown,"
        f" {_FOUND}"
        " ORDER BY rank DESC, item_id DESC"
    )


def _nothing() -> None:
    """The generated column indexed the rows as they were inserted."""


class TsvectorSearch:
    """PostgreSQL's `TextSearch`: tsquery, `ts_rank_cd` and `ts_headline` over a GIN index."""

    def adding(self, tx: Tx) -> Callable[[], None]:
        """Nothing to do: each row's `tsvector` is generated by its insert."""
        return _nothing

    def hits(self, tx: Tx, query: SearchQuery) -> list[HitRow]:
        """The page's rows, one more than the page when another follows."""
        owner, kind = query.owner_id, query.kind
        filters = [owner, owner, kind, kind, query.since_ms, query.until_ms]
        after = query.below
        expression, terms = _tsquery(query)
        ranked = terms if query.best else []

        def page(walk: bool, below: int, above: int, count: int) -> list[HitRow]:
            params = [*ranked, *terms, *filters, below, above, count, query.offset, *terms]
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
