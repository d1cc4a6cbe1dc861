"""Long-term memory as the store keeps it (`store.memory`): items by namespace and key.

A memory item is a JSON object under a key in a namespace, a path of labels such as
`("olive", "preferences")`. The integrations (`TurnstoreStore` for LangGraph) encode values
and decide what is similar; the store keeps the encoded rows, their times and vectors, so
nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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
    no embedding asked for).
    """

    namespace: tuple[str, ...]
    key: str
    value_json: str
    ttl_ms: int | None
    owner_id: str | None
    vectors: tuple[MemoryVector, ...] | None = None


class MemoryDelete(NamedTuple):
    """An item removed, with its vectors; an item that is not there is no error."""

    namespace: tuple[str, ...]
    key: str


MemoryWrite = MemoryPut | MemoryDelete
"""A change of one item."""


class MemoryRow(NamedTuple):
    """An item as stored: its value's JSON text, its times in Unix milliseconds."""

    namespace: str
    key: str
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int | None
    ttl_ms: int | None


class MemoryGet(NamedTuple):
    """A read of one item; `refresh` starts its time to live again (if it has one)."""

    namespace: tuple[str, ...]
    key: str
    refresh: bool = False


class MemorySearch(NamedTuple):
    """A read of the items under a namespace prefix that `keep` keeps, newest update first:
    those after the first `offset`, at most `limit` (all with None), read `page` rows a time.

    With `vectors`, rows come with their stored vectors; `refresh` restarts the time to live
    of the items it gives.
    """

    prefix: tuple[str, ...]
    keep: Callable[[MemoryRow], bool] | None = None
    offset: int = 0
    limit: int | None = 10
    refresh: bool = False
    vectors: bool = False
    page: int = 256


class SearchedRow(NamedTuple):
    """A row a search read, with its vectors when asked for."""

    row: MemoryRow
    vectors: tuple[MemoryVector, ...]


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


def namespace_text(namespace: tuple[str, ...]) -> str:
    """A namespace as stored: its labels joined by `SEPARATOR`."""
    return SEPARATOR.join(namespace)


def namespace_of(text: str) -> tuple[str, ...]:
    """A stored namespace's labels."""
    return tuple(text.split(SEPARATOR))
