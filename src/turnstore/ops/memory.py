"""Long-term memory's operations, as steps: checked requests in, stored rows out.

`TurnstoreStore` (`turnstore.integrations.langgraph_store`) encodes values, embeds text and
decides what a filter keeps; each of its batches is one `run` here: one read snapshot, or
one write transaction when the batch writes (a put, a delete, a time to live restarted).
"""

from __future__ import annotations

from typing import cast

from turnstore.drivers.steps import Steps, origin, read, write
from turnstore.engine.protocol import Engine, Tx
from turnstore.errors import InvalidInput
from turnstore.records.base import I64_MAX
from turnstore.records.memory import (
    MemoryAnswer,
    MemoryCall,
    MemoryCatalogPage,
    MemoryCatalogRequest,
    MemoryDelete,
    MemoryFindPage,
    MemoryFindRequest,
    MemoryPut,
    MemoryWrite,
)
from turnstore.rules.memory_names import MAX_LABEL, check_bytes, label, namespace
from turnstore.rules.search import memory_terms, memory_value
from turnstore.rules.validation import identifier, optional_identifier, top_field_equal
from turnstore.scripts import memory as scripts


def _count(value: object, what: str, *, low: int) -> int:
    if type(value) is not int or value < low:
        raise InvalidInput(f"{what} must be an integer of at least {low}")
    return value


def prefix(labels: object) -> tuple[str, ...] | None:
    """A namespace prefix: None or `()` for every namespace, else a namespace."""
    if labels is None or labels == ():
        return None
    return namespace(labels, "namespace prefix")


def _checked_write(one: MemoryWrite) -> MemoryWrite:
    namespace(one.namespace)
    check_bytes(label(one.key, "memory key"), "memory key")
    if isinstance(one, MemoryDelete):
        return one
    value = identifier(one.value_json, "memory value")
    if one.text:
        # Its words are read later, by the indexer: a value that is not JSON is refused now.
        memory_value(value)
    optional_identifier(one.owner_id, "owner ID")
    if one.ttl_ms is not None and _count(one.ttl_ms, "a time to live in ms", low=1) > I64_MAX // 2:
        raise InvalidInput("a time to live must be a positive number of milliseconds")
    fields = [identifier(vector.field, "vector field") for vector in one.vectors or ()]
    for field in fields:
        check_bytes(field, "a vector's field")
    if len(set(fields)) < len(fields):
        raise InvalidInput("an item's vectors must each name a different field")
    if not all(type(vector.vector) is bytes for vector in one.vectors or ()):
        raise InvalidInput("a vector must be bytes")
    return one


def _checked(call: MemoryCall) -> MemoryCall:
    for get in call.gets:
        namespace(get.namespace)
        check_bytes(label(get.key, "memory key"), "memory key")
    for search in call.searches:
        if search.query is not None:
            memory_terms(search.query)
        for field, value in search.equals:
            top_field_equal(field, value)
        _count(search.offset, "a search's offset", low=0)
        _count(search.page, "a search's page", low=1)
        if search.limit is not None:
            _count(search.limit, "a search's limit", low=0)
        if search.prefix:
            namespace(search.prefix, "namespace prefix")
    for listed in call.namespaces:
        prefix(listed)
    last: dict[tuple[tuple[str, ...], str], MemoryWrite] = {}
    for one in call.writes:
        last[(one.namespace, one.key)] = _checked_write(one)
    # Written in key order: two batches writing the same items take their locks in one order.
    return call._replace(writes=tuple(last[key] for key in sorted(last)))


def run(call: MemoryCall) -> Steps[MemoryAnswer]:
    """Run a batch: its reads in one snapshot taken before its writes, which commit together.

    The reads are a read transaction of their own (one snapshot on both databases), then the
    writes one write transaction, with the restarts of the times to live the reads asked for
    (an item deleted in between is left alone).
    """
    checked = _checked(call)
    reads = checked.gets or checked.searches or checked.namespaces
    answer = MemoryAnswer([], [], [])
    if any(one.query is not None for one in checked.searches):
        yield from catch_up()
    if reads:
        answer = yield from read(lambda tx: _read(tx, checked), single=_one_statement(checked))
    touched = _refreshed(checked, answer)
    if touched and not checked.writes and cast(Engine, (yield from origin())).read_only:
        # A read-only store reads as any other; it cannot restart a time to live.
        touched = []
    if checked.writes or touched:
        writes = checked.writes
        single = not touched and len(writes) == 1 and _one_statement_write(writes[0])
        yield from write(lambda tx: _write(tx, touched, writes), single=single)
    return answer


def _one_statement_write(one: MemoryWrite) -> bool:
    """Whether a write alone is one statement on a database that can make it one (a delete,
    or a put without vectors: `MemoryText`), which running twice leaves as running once."""
    return isinstance(one, MemoryDelete) or one.vectors is None


def _one_statement(call: MemoryCall) -> bool:
    """Whether the reads are likely one statement: one get, one listing, or one search whose
    first page holds its answer (no words, no vectors). A guess: a read that needs more runs
    again in a transaction (`read(single=True)`)."""
    if any(one.query is not None or one.vectors for one in call.searches):
        return False
    return len(call.gets) + len(call.searches) + len(call.namespaces) == 1


def _read(tx: Tx, call: MemoryCall) -> MemoryAnswer:
    live = call.omit_expired
    return MemoryAnswer(
        gets=[scripts.get(tx, one, live) for one in call.gets],
        searches=[scripts.search(tx, one, live) for one in call.searches],
        namespaces=[scripts.namespaces(tx, prefix(one), live) for one in call.namespaces],
    )


def _write(tx: Tx, touched: list[tuple[str, str]], writes: tuple[MemoryWrite, ...]) -> None:
    if touched:
        scripts.refresh(tx, touched)
    scripts.write(tx, writes)


def _refreshed(call: MemoryCall, answer: MemoryAnswer) -> list[tuple[str, str]]:
    """The items read whose time to live the reads ask to restart."""
    rows = [row for one, row in zip(call.gets, answer.gets, strict=True) if one.refresh and row]
    for one, found in zip(call.searches, answer.searches, strict=True):
        rows += [searched.row for searched in found] if one.refresh else []
    return sorted({(row.namespace, row.key) for row in rows if row.ttl_ms is not None})


def catch_up() -> Steps[int]:
    """Index every item whose words a put left pending (nothing on a read-only store, whose
    writer's indexer does it): a search by words first runs this, so it finds every put
    committed before it began. How many it indexed."""
    if cast(Engine, (yield from origin())).read_only:
        return 0
    indexed = 0
    # Looked at first, in a read: most searches find nothing pending, and take no write lock.
    while (yield from read(scripts.has_pending, single=True)):
        done = yield from write(scripts.index_pending)
        indexed += done
        if done < scripts.INDEX_BATCH:
            break
    return indexed


MAX_CATALOG_PAGE = 1000
"""The most namespaces one page of the memory catalog holds."""


def catalog(request: MemoryCatalogRequest) -> Steps[MemoryCatalogPage]:
    """One page of the namespaces that hold live items (of one owner, under a prefix)."""
    optional_identifier(request.owner_id, "owner ID")
    if _count(request.limit, "a catalog page's limit", low=1) > MAX_CATALOG_PAGE:
        raise InvalidInput(f"a catalog page holds at most {MAX_CATALOG_PAGE} namespaces")
    checked = request._replace(
        prefix=prefix(request.prefix),
        after=None if request.after is None else namespace(request.after, "catalog cursor"),
    )
    return (yield from read(lambda tx: scripts.catalog(tx, checked), single=True))


MAX_FIND_PAGE = 1000
"""The most hits one page of `find` holds."""


def find(request: MemoryFindRequest) -> Steps[MemoryFindPage]:
    """A page of every live item whose words match, best first; what puts left pending is
    indexed first, so every put committed before it is searched."""
    terms = memory_terms(request.query)
    optional_identifier(request.owner_id, "owner ID")
    if _count(request.limit, "a search's limit", low=1) > MAX_FIND_PAGE:
        raise InvalidInput(f"a memory search's page holds at most {MAX_FIND_PAGE} hits")
    if _count(request.offset, "a search's offset", low=0) > I64_MAX // 2:
        raise InvalidInput("a memory search's offset is past any page")
    checked = request._replace(prefix=prefix(request.prefix))
    yield from catch_up()
    return (yield from read(lambda tx: scripts.find(tx, checked, terms)))


def sweep() -> Steps[int]:
    """Delete every expired item; how many there were."""
    return (yield from write(scripts.sweep))


__all__ = [
    "MAX_LABEL",
    "MemoryPut",
    "catalog",
    "catch_up",
    "find",
    "namespace",
    "prefix",
    "run",
    "sweep",
]
