"""Long-term memory: items by (namespace, key) in `memory_items`, their vectors beside them.

Times come from the database's clock (`{now_ms}`), so every host writing one PostgreSQL store
agrees on what has expired. A namespace is stored as its labels joined by `SEPARATOR`, which
no label holds: the items under a prefix are that namespace and a byte range after it, which
the primary key's b-tree reads in order on both databases. Puts, deletes and sweeps go through
the database's `MemoryText`, which keeps the items' text index: a delete or a sweep takes an
item's words out in its own transaction; a put's words go in at once (PostgreSQL) or wait
for `index_pending` (SQLite: the search indexer's, or a search by words first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from turnstore.engine.protocol import Query, Statements, Tx, insert, select
from turnstore.records.base import I64_MAX
from turnstore.records.memory import (
    SEPARATOR,
    MemoryCatalogPage,
    MemoryCatalogRequest,
    MemoryDelete,
    MemoryFindPage,
    MemoryFindRequest,
    MemoryGet,
    MemoryHit,
    MemoryInsert,
    MemoryNamespace,
    MemoryPut,
    MemoryRow,
    MemorySearch,
    MemoryTextQuery,
    MemoryVector,
    MemoryWrite,
    SearchedRow,
    namespace_of,
    namespace_text,
)
from turnstore.rules import search_text
from turnstore.rules.search import Term, item_text, memory_terms, memory_value, term_words

_AFTER = chr(ord(SEPARATOR) + 1)
"""The character after the separator: `prefix + SEPARATOR <= namespace < prefix + _AFTER`
holds for exactly the namespaces below `prefix`."""
_LIVE = "(expires_at_ms IS NULL OR expires_at_ms > {now_ms})"
_UNDER = "(namespace = ? OR (namespace >= ? AND namespace < ?))"


class VectorInsert(NamedTuple):
    """A `memory_vectors` row."""

    namespace: str
    item_key: str
    field: str
    vector: bytes


class OwnedItem(NamedTuple):
    """An item an owner holds: where it is."""

    namespace: str
    item_key: str


class VectorRow(NamedTuple):
    """A stored vector of an item the search read."""

    namespace: str
    item_key: str
    field: str
    vector: bytes


_ROW = {"key": "item_key"}
_AFTER_ROW = (
    "(updated_at_ms < ? OR (updated_at_ms = ?"
    " AND (namespace < ? OR (namespace = ? AND item_key < ?))))"
)


def _page(*, under: bool, live: bool, after: bool, narrow: str = "") -> Query[MemoryRow]:
    """A page of a search, newest update first (ties broken by namespace and key, so a page
    after another starts exactly where it stopped), of the rows `narrow` keeps, if given."""
    where = [_UNDER] if under else []
    where += [_LIVE] if live else []
    where += [_AFTER_ROW] if after else []
    where += [narrow] if narrow else []
    rest = "FROM memory_items" + (" WHERE " + " AND ".join(where) if where else "")
    rest += " ORDER BY updated_at_ms DESC, namespace DESC, item_key DESC LIMIT ?"
    return select(MemoryRow, rest, **_ROW)


class CatalogRow(NamedTuple):
    """A namespace of the catalog as read: its stored text, live items, newest update."""

    namespace: str
    items: int
    updated_at_ms: int


# A prefix's namespaces as one range of the key (the prefix itself up to the character after
# its separator), then the ones in that range that are below it: a page in the key's order
# reads the range alone, where `_UNDER`'s two ranges would have the planner walk the index
# from its start for the order's sake.
_SPAN = "namespace >= ? AND namespace < ? AND (namespace = ? OR namespace >= ?)"


def _catalog(*, owner: bool, under: bool, after: bool) -> Query[CatalogRow]:
    """A page of namespaces with live items: of one owner (read through the owner's index)
    or of everyone (in the key's order), under a prefix or everywhere, first or after one."""
    where = [_LIVE] + (["owner_id = ?"] if owner else []) + ([_SPAN] if under else [])
    where += ["namespace > ?"] if after else []
    return Query(
        "SELECT namespace, COUNT(*), MAX(updated_at_ms) FROM memory_items WHERE "
        + " AND ".join(where)
        + " GROUP BY namespace ORDER BY namespace LIMIT ?",
        CatalogRow._make,
    )


class MemorySql(Statements):
    """The memory tables' statements."""

    drop_vectors = "DELETE FROM memory_vectors WHERE namespace = ? AND item_key = ?"
    # Read through the owners' partial index.
    owned = Query(
        "SELECT namespace, item_key FROM memory_items WHERE owner_id = ? LIMIT ?", OwnedItem._make
    )
    owned_count = "SELECT COUNT(*) FROM memory_items WHERE owner_id = ?"
    add_vector = insert(VectorInsert, "memory_vectors")
    get = select(MemoryRow, "FROM memory_items WHERE namespace = ? AND item_key = ?", **_ROW)
    get_live = select(
        MemoryRow, f"FROM memory_items WHERE namespace = ? AND item_key = ? AND {_LIVE}", **_ROW
    )
    refresh = (
        "UPDATE memory_items SET expires_at_ms = {now_ms} + ttl_ms"
        f" WHERE namespace = ? AND item_key = ? AND ttl_ms IS NOT NULL AND {_LIVE}"
    )
    # A search's pages: under a prefix or everywhere, live items or all, first or after one.
    under = _page(under=True, live=False, after=False)
    under_live = _page(under=True, live=True, after=False)
    under_after = _page(under=True, live=False, after=True)
    under_live_after = _page(under=True, live=True, after=True)
    every = _page(under=False, live=False, after=False)
    every_live = _page(under=False, live=True, after=False)
    every_after = _page(under=False, live=False, after=True)
    every_live_after = _page(under=False, live=True, after=True)
    vectors = select(
        VectorRow,
        f"FROM memory_vectors WHERE {_UNDER} ORDER BY namespace, item_key, field",
    )
    all_vectors = select(VectorRow, "FROM memory_vectors ORDER BY namespace, item_key, field")
    namespaces = f"SELECT DISTINCT namespace FROM memory_items WHERE {_UNDER} ORDER BY namespace"
    namespaces_live = (
        f"SELECT DISTINCT namespace FROM memory_items WHERE {_UNDER} AND {_LIVE} ORDER BY namespace"
    )
    all_namespaces = "SELECT DISTINCT namespace FROM memory_items ORDER BY namespace"
    all_namespaces_live = (
        f"SELECT DISTINCT namespace FROM memory_items WHERE {_LIVE} ORDER BY namespace"
    )
    # The catalog's pages: (owner, under, after) in the name, each one of the eight.
    catalog = _catalog(owner=False, under=False, after=False)
    catalog_after = _catalog(owner=False, under=False, after=True)
    catalog_under = _catalog(owner=False, under=True, after=False)
    catalog_under_after = _catalog(owner=False, under=True, after=True)
    catalog_owner = _catalog(owner=True, under=False, after=False)
    catalog_owner_after = _catalog(owner=True, under=False, after=True)
    catalog_owner_under = _catalog(owner=True, under=True, after=False)
    catalog_owner_under_after = _catalog(owner=True, under=True, after=True)


def _under(prefix: tuple[str, ...]) -> tuple[str, str, str]:
    text = namespace_text(prefix)
    return text, text + SEPARATOR, text + _AFTER


def write(tx: Tx, writes: Iterable[MemoryWrite]) -> None:
    """Apply puts and deletes in order (a batch's last write per item is all it keeps)."""
    sql, text = tx.sql(MemorySql), tx.dialect.memory_text
    for one in writes:
        key = (namespace_text(one.namespace), one.key)
        if isinstance(one, MemoryDelete):
            text.delete(tx, *key)
            continue
        text.put(tx, _insert(one), one.text)
        if one.vectors is not None:
            tx.run(sql.drop_vectors, key)
        if one.vectors:
            tx.many(sql.add_vector, [VectorInsert(*key, *vector) for vector in one.vectors])


def _insert(put: MemoryPut) -> MemoryInsert:
    return MemoryInsert(
        namespace_text(put.namespace), put.key, put.owner_id, put.value_json, put.ttl_ms, put.ttl_ms
    )


def get(tx: Tx, one: MemoryGet, live: bool) -> MemoryRow | None:
    """One item, None if absent (or expired, when `live`)."""
    sql = tx.sql(MemorySql)
    return tx.row(sql.get_live if live else sql.get, (namespace_text(one.namespace), one.key))


def search(tx: Tx, one: MemorySearch, live: bool) -> list[SearchedRow]:
    """The items under `one.prefix` that `one.keep` keeps, newest update first: those past the
    first `one.offset`, at most `one.limit` of them (all, with `limit` None)."""
    if one.query is not None:
        return _matching(tx, one, live)
    under = _under(one.prefix) if one.prefix else ()
    first, after, narrow = _pages(tx, one, live)
    wanted = None if one.limit is None else one.offset + one.limit
    kept: list[MemoryRow] = []
    # A read of every kept row (a semantic search scores them all) is one statement. Rows
    # narrowed in SQL mostly all pass `keep`: a page of as many as wanted mostly suffices.
    page = one.page
    if wanted is None:
        page = I64_MAX
    elif narrow:
        page = min(one.page, max(wanted, 1))
    rows = tx.rows(first, (*under, *narrow, page))
    while rows:
        kept += [row for row in rows if one.keep is None or one.keep(row)]
        if (wanted is not None and len(kept) >= wanted) or len(rows) < page:
            break
        last = rows[-1]
        past = (last.updated_at_ms, last.updated_at_ms, last.namespace, last.namespace, last.key)
        rows = tx.rows(after, (*under, *past, *narrow, page))
    chosen = kept[one.offset : wanted]
    return [SearchedRow(row, ()) for row in chosen] if not one.vectors else _with(tx, one, chosen)


def _pages(
    tx: Tx, one: MemorySearch, live: bool
) -> tuple[Query[MemoryRow], Query[MemoryRow], tuple[str, ...]]:
    """A search's first and next pages, and the parameters of the condition narrowing them
    to the rows whose values hold `one.equals` (none where the database cannot tell)."""
    sql, equals = tx.sql(MemorySql), tx.dialect.json_equals
    name = ("under" if one.prefix else "every") + ("_live" if live else "")
    if not one.equals or equals is None:
        return getattr(sql, name), getattr(sql, name + "_after"), ()
    shape = (id(tx.dialect), bool(one.prefix), live, len(one.equals))
    found = _NARROWED.get(shape)
    if found is None:
        narrow = equals(len(one.equals))
        pages = [
            _page(under=bool(one.prefix), live=live, after=after, narrow=narrow)
            for after in (False, True)
        ]
        first, after = (Query(tx.dialect.format(page.sql), page.make) for page in pages)
        found = _NARROWED[shape] = (first, after)
    texts = tuple(text for field, value in one.equals for text in (f'$."{field}"', value))
    return (*found, texts)


_NARROWED: dict[tuple[int, bool, bool, int], tuple[Query[MemoryRow], Query[MemoryRow]]] = {}
"""The narrowed pages formatted so far, by dialect (each one object, a module's), prefix or
none, live items or all, and how many fields they test: a few shapes, each formatted once.
A field's JSON path quotes its name (a hyphen or a leading digit in it)."""


def _matching(tx: Tx, one: MemorySearch, live: bool) -> list[SearchedRow]:
    """`search` with a query: the items whose words match, best first, read a page a time."""
    assert one.query is not None  # the caller's branch
    under = _under(one.prefix) if one.prefix else None
    query = MemoryTextQuery(memory_terms(one.query), under, live, one.page, 0, any_of=one.any_of)
    wanted = None if one.limit is None else one.offset + one.limit
    kept: list[MemoryRow] = []
    while True:
        rows = tx.dialect.memory_text.page(tx, query)
        kept += [row for row in rows if one.keep is None or one.keep(row)]
        if (wanted is not None and len(kept) >= wanted) or len(rows) < query.limit:
            break
        query = query._replace(offset=query.offset + query.limit)
    chosen = kept[one.offset : wanted]
    return [SearchedRow(row, ()) for row in chosen] if not one.vectors else _with(tx, one, chosen)


def _with(tx: Tx, one: MemorySearch, rows: list[MemoryRow]) -> list[SearchedRow]:
    found: dict[tuple[str, str], list[MemoryVector]] = {}
    sql = tx.sql(MemorySql)
    stored = tx.rows(sql.vectors, _under(one.prefix)) if one.prefix else tx.rows(sql.all_vectors)
    for vector in stored:
        found.setdefault((vector.namespace, vector.item_key), []).append(
            MemoryVector(vector.field, vector.vector)
        )
    return [SearchedRow(row, tuple(found.get((row.namespace, row.key), ()))) for row in rows]


def refresh(tx: Tx, keys: Iterable[tuple[str, str]]) -> None:
    """Restart the time to live of these (stored namespace, key) items, where they have one."""
    tx.many(tx.sql(MemorySql).refresh, list(keys))


def namespaces(tx: Tx, prefix: tuple[str, ...] | None, live: bool) -> list[str]:
    """The stored namespaces (under `prefix`, if given) that hold an item, in order."""
    sql = tx.sql(MemorySql)
    if prefix is None:
        return list(tx.values(sql.all_namespaces_live if live else sql.all_namespaces))
    return list(tx.values(sql.namespaces_live if live else sql.namespaces, _under(prefix)))


def catalog(tx: Tx, request: MemoryCatalogRequest) -> MemoryCatalogPage:
    """A page of the namespaces holding live items (of `request.owner_id`, if given)."""
    sql, params = tx.sql(MemorySql), []
    name = "catalog" + ("_owner" if request.owner_id is not None else "")
    params += [request.owner_id] if request.owner_id is not None else []
    name += "_under" if request.prefix else ""
    if request.prefix:
        text, below, past = _under(request.prefix)
        params += [text, past, text, below]
    name += "_after" if request.after else ""
    params += [namespace_text(request.after)] if request.after else []
    rows = tx.rows(getattr(sql, name), (*params, request.limit + 1))
    found = [
        MemoryNamespace(namespace_of(row.namespace), row.items, row.updated_at_ms) for row in rows
    ]
    more = len(found) > request.limit
    page = found[: request.limit]
    return MemoryCatalogPage(page, page[-1].namespace if more else None)


def find(tx: Tx, request: MemoryFindRequest, terms: tuple[Term, ...]) -> MemoryFindPage:
    """A page of the live items whose words match `terms` (the request's, checked), best
    first, each with the part of its text that matches."""
    under = _under(request.prefix) if request.prefix else None
    query = MemoryTextQuery(terms, under, True, request.limit + 1, request.offset, request.owner_id)
    rows = tx.dialect.memory_text.page(tx, query)
    words = [term_words(term) for term in terms]
    hits = []
    for row in rows[: request.limit]:
        # The index keeps words: the snippet is cut from the value as the store keeps it.
        cut = search_text.snippet(item_text(memory_value(row.value_json)), words)
        hits.append(MemoryHit(namespace_of(row.namespace), row.key, row.updated_at_ms, *cut))
    more = len(rows) > request.limit
    return MemoryFindPage(hits, request.offset + request.limit if more else None)


INDEX_BATCH = 500
"""The most items whose words one indexing transaction takes."""


def index_pending(tx: Tx) -> int:
    """Index the words of up to `INDEX_BATCH` items that puts left pending; how many."""
    return tx.dialect.memory_text.index_pending(tx, INDEX_BATCH)


def has_pending(tx: Tx) -> bool:
    """Whether some item's words wait to be indexed."""
    return tx.dialect.memory_text.has_pending(tx)


def erase_owned(tx: Tx, owner_id: str, limit: int) -> int:
    """Delete up to `limit` of the owner's items, expired or not, their words out of the
    index in this commit; how many."""
    found = tx.rows(tx.sql(MemorySql).owned, (owner_id, limit))
    for one in found:
        tx.dialect.memory_text.delete(tx, one.namespace, one.item_key)
    return len(found)


def owned_count(tx: Tx, owner_id: str) -> int:
    """How many items the owner holds, expired or not."""
    return int(tx.value(tx.sql(MemorySql).owned_count, (owner_id,)))


def sweep(tx: Tx) -> int:
    """Delete every expired item; how many there were."""
    return tx.dialect.memory_text.sweep(tx)
