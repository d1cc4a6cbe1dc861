"""A batch of LangGraph store operations as one call of the store's memory tables
(`store.memory`), and each operation's result read from its answer."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from turnstore.errors import InvalidInput
from turnstore.integrations import requires_extra
from turnstore.integrations._langgraph_memory import (
    check_filter,
    decode_value,
    encode_value,
    keep_row,
    listed,
    similarity,
    texts_equal,
    unit_vector,
)
from turnstore.records.memory import (
    MemoryAnswer,
    MemoryCall,
    MemoryDelete,
    MemoryGet,
    MemoryPut,
    MemoryRow,
    MemorySearch,
    MemoryVector,
    MemoryWrite,
    SearchedRow,
    namespace_of,
)

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langgraph.store.base import (
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        tokenize_path,
        validate_op_namespace,
    )


class Indexing(NamedTuple):
    """What a store with an `index` embeds: the texts of a put, and how many dimensions."""

    texts: Callable[[Any], list[tuple[str, str]]]
    dims: int | None


class Plan:
    """A batch's ops as one `MemoryCall`, and how each op's result is read from its answer."""

    def __init__(
        self,
        ops: Sequence[Op],
        owner: Callable[[tuple[str, ...]], str | None],
        indexing: Indexing | None,
        refreshing: bool,
        words: bool = False,
    ) -> None:
        self.ops = ops
        self.words = words and indexing is None
        """Whether puts index their words and a query searches them (no embedding index)."""
        self.refreshing = refreshing
        """Whether a read asking to restart times to live may (`TTLConfig.refresh_on_read`)."""
        self.owner = owner
        self.indexing = indexing
        self.gets: list[MemoryGet] = []
        self.searches: list[MemorySearch] = []
        self.listings: list[tuple[str, ...] | None] = []
        self.writes: list[MemoryWrite] = []
        self.texts: list[tuple[int, str, str]] = []
        """Texts to embed for puts: (the put's index in `writes`, field, text)."""
        self.queries: dict[int, str] = {}
        """The query text of each semantic search, by its index in `searches`."""
        for op in ops:
            self._add(op)

    def _add(self, op: Op) -> None:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            self.gets.append(MemoryGet(tuple(op.namespace), op.key, self._refresh(op.refresh_ttl)))
        elif isinstance(op, SearchOp):
            self._add_search(op)
        elif isinstance(op, ListNamespacesOp):
            self.listings.append(_listing_prefix(op))
        elif isinstance(op, PutOp):
            self._add_put(op)
        else:
            raise InvalidInput(f"unknown store operation {type(op).__name__}")

    def _add_search(self, op: SearchOp) -> None:
        checked = check_filter(op.filter)
        keep, prefix, equals = keep_row(checked), tuple(op.namespace_prefix), texts_equal(checked)
        _page(op.offset, op.limit)
        semantic = bool(op.query) and self.indexing is not None
        if semantic:
            self.queries[len(self.searches)] = str(op.query)
            search = MemorySearch(prefix, keep, limit=None, vectors=True, equals=equals)
        else:
            # Without an index, a query is the items' words (LangGraph's stores ignore it).
            query = (op.query or None) if self.words else None
            refresh = self._refresh(op.refresh_ttl)
            search = MemorySearch(
                prefix, keep, op.offset, op.limit, refresh, query=query, equals=equals
            )
        self.searches.append(search)

    def _add_put(self, op: PutOp) -> None:
        if op.value is None:
            self.writes.append(MemoryDelete(tuple(op.namespace), op.key))
            return
        ttl_ms = None if op.ttl is None else _minutes_ms(op.ttl)
        namespace = tuple(op.namespace)
        value = encode_value(op.value)
        text = self.words and op.index is not False
        owner = self.owner(namespace)
        self.writes.append(MemoryPut(namespace, op.key, value, ttl_ms, owner, text=text))
        if self.indexing is not None and op.index is not False:
            at = len(self.writes) - 1
            self.texts += [(at, field, text) for field, text in self.indexing.texts(op)]

    def call(self, vectors: Sequence[Sequence[float]]) -> MemoryCall:
        """The batch to run, its puts carrying their texts' vectors."""
        writes = list(self.writes)
        # A field named twice (in `fields` or a put's `index`) keeps its last text's vector.
        embedded: dict[int, dict[str, MemoryVector]] = {}
        dims = None if self.indexing is None else self.indexing.dims
        for (at, field, _), embedding in zip(self.texts, vectors, strict=True):
            embedded.setdefault(at, {})[field] = MemoryVector(field, unit_vector(embedding, dims))
        if self.indexing is not None:
            for at, one in enumerate(writes):
                # A put not embedded (`index=False`, or no text at its fields) leaves no vector.
                if isinstance(one, MemoryPut):
                    writes[at] = one._replace(vectors=tuple(embedded.get(at, {}).values()))
        return MemoryCall(
            tuple(self.gets), tuple(self.searches), tuple(self.listings), tuple(writes)
        )

    def results(self, answer: MemoryAnswer, queries: dict[int, bytes]) -> list[Result]:
        """Each op's result, in the batch's order."""
        gets, searches, listings = iter(answer.gets), iter(enumerate(answer.searches)), 0
        results: list[Result] = []
        for op in self.ops:
            if isinstance(op, GetOp):
                row = next(gets)
                results.append(None if row is None else _item(row))
            elif isinstance(op, SearchOp):
                at, found = next(searches)
                results.append(self._searched(op, found, queries.get(at)))
            elif isinstance(op, ListNamespacesOp):
                results.append(_listed(op, answer.namespaces[listings]))
                listings += 1
            else:
                results.append(None)
        return results

    def _searched(
        self, op: SearchOp, found: list[SearchedRow], query: bytes | None
    ) -> list[SearchItem]:
        if query is None:
            return [_search_item(one.row, None) for one in found]
        scored = [(similarity(query, one.vectors), one.row) for one in found]
        ranked = sorted(
            (pair for pair in scored if pair[0] is not None), key=lambda pair: -(pair[0] or 0.0)
        )
        unscored = [pair for pair in scored if pair[0] is None]
        chosen = (ranked + unscored)[op.offset : op.offset + op.limit]
        return [_search_item(row, score) for score, row in chosen]

    def touched(self, results: list[Result]) -> list[MemoryGet]:
        """The items semantic searches gave whose time to live they ask to restart."""
        touched: list[MemoryGet] = []
        for op, result in zip(self.ops, results, strict=True):
            if isinstance(op, SearchOp) and self._refresh(op.refresh_ttl) and self._semantic(op):
                items = (
                    [i for i in result if isinstance(i, Item)] if isinstance(result, list) else []
                )
                touched += [MemoryGet(i.namespace, i.key, True) for i in items]
        return touched

    def _refresh(self, asked: bool) -> bool:
        return asked and self.refreshing

    def _semantic(self, op: SearchOp) -> bool:
        return bool(op.query) and self.indexing is not None


def index_fields(index: IndexConfig | None) -> list[str]:
    """The fields an index embeds: `fields` (`text_fields`, as `SqliteStore` names it), else
    the whole value."""
    found: Any = None if index is None else index.get("fields") or index.get("text_fields")
    found = [found] if isinstance(found, str) else found or ["$"]
    if not isinstance(found, list) or not all(isinstance(field, str) for field in found):
        raise InvalidInput(f"an index's fields must be a list of paths, not {found!r}")
    return found


def paths(fields: Sequence[str]) -> list[tuple[str, str | list[str]]]:
    """Each field with its path as `get_text_at_path` takes it ("$" itself: the whole value)."""
    return [(field, field if field == "$" else tokenize_path(field)) for field in fields]


def _minutes_ms(ttl: float) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
        raise InvalidInput(f"a time to live must be a positive number of minutes, not {ttl!r}")
    return max(1, round(ttl * 60_000))


def _page(offset: object, limit: object) -> None:
    for value, what in ((offset, "offset"), (limit, "limit")):
        if type(value) is not int or value < 0:
            raise InvalidInput(f"a {what} must be a non-negative integer, not {value!r}")


def _listing_prefix(op: ListNamespacesOp) -> tuple[str, ...] | None:
    """The fixed labels a listing's prefix condition starts with: the range the store reads."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels) or None
    return None


def _listed(op: ListNamespacesOp, stored: list[str]) -> list[tuple[str, ...]]:
    _page(op.offset, op.limit)
    conditions = [
        (condition.match_type, tuple(condition.path))
        for condition in op.match_conditions or ()
        if condition.path
    ]
    found = listed(stored, conditions, op.max_depth)
    return found[op.offset : op.offset + op.limit]


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _item(row: MemoryRow) -> Item:
    return Item(
        value=decode_value(row.value_json),
        key=row.key,
        namespace=namespace_of(row.namespace),
        created_at=_time(row.created_at_ms),
        updated_at=_time(row.updated_at_ms),
    )


def _search_item(row: MemoryRow, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=namespace_of(row.namespace),
        key=row.key,
        value=decode_value(row.value_json),
        created_at=_time(row.created_at_ms),
        updated_at=_time(row.updated_at_ms),
        score=score,
    )
