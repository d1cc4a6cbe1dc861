"""Long-term memory as the store keeps it (`store.memory`): items by namespace and key.

A memory item is a JSON object under a key in a namespace, a path of labels such as
`("olive", "preferences")`. The integrations (`TurnstoreStore` for LangGraph) encode values
and decide what is similar; the store keeps the encoded rows, their times and vectors, so
nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from turnstore.records.base import json_loads

SEPARATOR = "."
"""What joins a namespace's labels in the stored column; a label cannot hold it."""


class MemoryVector(NamedTuple):
    """One embedding of an item's text: the path of the field it was taken from, and its
    float32 components, normalised to unit length, as bytes."""

    field: str
    vector: bytes


class MemoryPut(NamedTuple):
    """An item written whole: created if new, replaced if not (its creation time kept).

    `vectors` replace the item's stored ones when given; None keeps them (a value written with
    no embedding asked for), unless the item had expired: a put over an expired item, swept or
    not, creates it anew, with no vectors but its own.
    """

    namespace: tuple[str, ...]
    key: str
    value_json: str
    ttl_ms: int | None
    owner_id: str | None
    vectors: tuple[MemoryVector, ...] | None = None
    text: bool = False
    """Index the words of the value's strings, for a search by words to find the item: on
    PostgreSQL in the put, on SQLite after it, by the search indexer (a search by words
    indexes what is pending first). The value must then be JSON."""


class MemoryDelete(NamedTuple):
    """An item removed, with its vectors; an item that is not there is no error."""

    namespace: tuple[str, ...]
    key: str


MemoryWrite = MemoryPut | MemoryDelete
"""A change of one item."""


class MemoryRow(NamedTuple):
    """An item as stored: its value's JSON text, its times in Unix milliseconds, its owner."""

    namespace: str
    key: str
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int | None
    ttl_ms: int | None
    owner_id: str | None = None

    def decoded_value(self) -> Any:
        """The value as Python's `json` decodes it (a `NaN` in it too), or the stored text
        itself when it is not JSON (an item put without its words searched may hold any)."""
        try:
            return json_loads(self.value_json)
        except ValueError:
            return self.value_json


class MemoryGet(NamedTuple):
    """A read of one item; `refresh` starts its time to live again (if it has one)."""

    namespace: tuple[str, ...]
    key: str
    refresh: bool = False


class MemorySearch(NamedTuple):
    """A read of the items under a namespace prefix that `keep` keeps, newest update first:
    those after the first `offset`, at most `limit` (all with None), read `page` rows a time.

    With `vectors`, rows come with their stored vectors; `refresh` restarts the time to live
    of the items it gives. With `query` (words and "phrases", as `store.search` reads them),
    only items put with `text` whose words match (all of them; any, with `any_of`), best match
    first. `equals` narrows what is read to the rows that can pass `keep`.
    """

    prefix: tuple[str, ...]
    keep: Callable[[MemoryRow], bool] | None = None
    offset: int = 0
    limit: int | None = 10
    refresh: bool = False
    vectors: bool = False
    page: int = 256
    query: str | None = None
    equals: tuple[tuple[str, str], ...] = ()
    """(field, text) pairs that every item `keep` keeps holds at the top of its value: the
    database may skip other rows before `keep`, which stays the exact test."""
    any_of: bool = False
    """With `query`: items holding any of its words and phrases (the best match first), not
    only those holding all of them."""


class SearchedRow(NamedTuple):
    """A row a search read, with its vectors when asked for."""

    row: MemoryRow
    vectors: tuple[MemoryVector, ...]


class MemoryInsert(NamedTuple):
    """A `memory_items` row as a put writes it (the times are the database's)."""

    namespace: str
    item_key: str
    owner_id: str | None
    value_json: str
    ttl_ms: int | None
    expires_at_ms: int | None
    """The time to live again: the statement adds the database's time to it."""


class MemoryTextQuery(NamedTuple):
    """A page of a text search of memory: its terms, where, and which page."""

    terms: tuple[tuple[str, bool], ...]
    """The query's terms as the index's words, one space apart, and whether each is a prefix."""
    under: tuple[str, str, str] | None
    """The stored prefix, and the range of the namespaces below it; None: every namespace."""
    live: bool
    limit: int
    offset: int
    owner_id: str | None = None
    """Only this owner's items; None: everyone's."""
    any_of: bool = False
    """Items matching any of the terms, not all of them."""


class MemoryCall(NamedTuple):
    """One batch of memory work, run in one transaction: reads see the store as it was before
    the batch, and its writes (the last one per item) land in the batch's commit."""

    gets: tuple[MemoryGet, ...] = ()
    searches: tuple[MemorySearch, ...] = ()
    namespaces: tuple[tuple[str, ...] | None, ...] = ()
    writes: tuple[MemoryWrite, ...] = ()
    omit_expired: bool = True


class MemoryAnswer(NamedTuple):
    """What a `MemoryCall` read, in the order of its requests."""

    gets: list[MemoryRow | None]
    searches: list[list[SearchedRow]]
    namespaces: list[list[str]]


class MemoryItemCopy(NamedTuple):
    """A memory item as another store holds it, to be written with its own times and owner
    (`turnstore.transfer.import_memory_items`); `searched`: its words are searched."""

    namespace: tuple[str, ...]
    key: str
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    owner_id: str | None = None
    ttl_ms: int | None = None
    expires_at_ms: int | None = None
    searched: bool = True


class MemoryCatalogRequest(NamedTuple):
    """One page of the memory catalog: the namespaces that hold live items, in order.

    `owner_id` keeps only that owner's items (an owner's memories, counted); `prefix` only
    the namespaces at or below it; `after` is the last namespace of the page before.
    """

    owner_id: str | None = None
    prefix: tuple[str, ...] | None = None
    after: tuple[str, ...] | None = None
    limit: int = 100


class MemoryNamespace(NamedTuple):
    """A namespace of the memory catalog: how many live items it holds (of the owner asked
    for, if one was), and when the newest of them was written (Unix milliseconds)."""

    namespace: tuple[str, ...]
    items: int
    updated_at_ms: int


class MemoryCatalogPage(NamedTuple):
    """A page of the memory catalog; `next_after` is None on the last page."""

    namespaces: list[MemoryNamespace]
    next_after: tuple[str, ...] | None


class MemoryFindRequest(NamedTuple):
    """A search of every memory item by its words, best match first (`store.memory.find`).

    `query` is read as `store.search` reads it: words and "quoted phrases", all of which must
    match, `word*` a prefix. `owner_id` keeps one owner's items, `prefix` the namespaces at or
    below it; `offset` is the `next_offset` of the page before. Expired items are not found.
    """

    query: str
    owner_id: str | None = None
    prefix: tuple[str, ...] | None = None
    limit: int = 20
    offset: int = 0


class MemoryHit(NamedTuple):
    """An item whose words match: where it is, when it was written, and the matching part."""

    namespace: tuple[str, ...]
    key: str
    updated_at_ms: int
    snippet: str
    """The matching part of the value's text, cut at word bounds."""
    marks: list[tuple[int, int]]
    """(start, end) character offsets of the matched words in `snippet`."""


class MemoryFindPage(NamedTuple):
    """A page of `MemoryHit`s; `next_offset` is None on the last page."""

    hits: list[MemoryHit]
    next_offset: int | None


def namespace_text(namespace: tuple[str, ...]) -> str:
    """A namespace as stored: its labels joined by `SEPARATOR`."""
    return SEPARATOR.join(namespace)


def namespace_of(text: str) -> tuple[str, ...]:
    """A stored namespace's labels."""
    return tuple(text.split(SEPARATOR))
