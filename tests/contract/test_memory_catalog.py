"""The memory catalog (`store.memory.catalog`): the namespaces that hold live items, in order,
each with how many (of one owner, when asked) and when the newest was written; under a
prefix, label by label; paged by the last namespace; bad requests refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turnstore import InvalidInput
from turnstore.records.memory import (
    MemoryCall,
    MemoryCatalogRequest,
    MemoryGet,
    MemoryNamespace,
    MemoryPut,
)


def put(namespace: tuple[str, ...], key: str, owner: str | None = None, **options: Any) -> Any:
    """A put of `{}` owned by `owner`, else by the namespace's first label."""
    return MemoryPut(namespace, key, "{}", options.get("ttl_ms"), owner or namespace[0])


async def write(store: Any, *writes: Any) -> None:
    await store.memory.run(MemoryCall(writes=writes))


async def listed(store: Any, **request: Any) -> list[tuple[tuple[str, ...], int]]:
    """The catalog's (namespace, items), every page followed."""
    found: list[MemoryNamespace] = []
    after = None
    while True:
        page = await store.memory.catalog(MemoryCatalogRequest(after=after, **request))
        found += page.namespaces
        if page.next_after is None:
            return [(one.namespace, one.items) for one in found]
        assert page.namespaces, "a page that is not the last holds namespaces"
        after = page.next_after


async def _filled(store: Any) -> None:
    await write(
        store,
        put(("ada", "notes"), "a"),
        put(("ada", "notes"), "b"),
        put(("ada", "prefs"), "c"),
        put(("ada-x", "n"), "d"),  # sorts before "ada.…", and is not under ("ada",)
        put(("bob", "notes"), "e"),
        put(("shared", "team"), "f", owner="ada"),
        put(("shared", "team"), "g", owner="bob"),
        put(("shared", "team"), "h", owner="bob"),
    )


async def test_the_catalog_lists_the_namespaces_with_their_live_items(store):
    await _filled(store)
    await write(store, put(("ada", "old"), "x", ttl_ms=50), put(("ada", "notes"), "y", ttl_ms=50))
    await asyncio.sleep(0.2)  # both expired: neither listed nor counted
    assert await listed(store) == [
        (("ada-x", "n"), 1),
        (("ada", "notes"), 2),
        (("ada", "prefs"), 1),
        (("bob", "notes"), 1),
        (("shared", "team"), 3),
    ]
    page = await store.memory.catalog(MemoryCatalogRequest(prefix=("ada", "notes")))
    (notes,) = page.namespaces
    rows = await store.memory.run(
        MemoryCall(gets=(MemoryGet(("ada", "notes"), "a"), MemoryGet(("ada", "notes"), "b")))
    )
    assert notes.updated_at_ms == max(row.updated_at_ms for row in rows.gets if row)
    assert page.next_after is None


async def test_the_catalog_of_a_prefix_holds_only_the_namespaces_below_it(store):
    await _filled(store)
    assert await listed(store, prefix=("ada",)) == [(("ada", "notes"), 2), (("ada", "prefs"), 1)]
    assert await listed(store, prefix=("ada", "prefs")) == [(("ada", "prefs"), 1)]
    assert await listed(store, prefix=("ad",)) == []
    assert await listed(store, prefix=()) == await listed(store)


async def test_the_catalog_of_an_owner_counts_only_their_items(store):
    await _filled(store)
    assert await listed(store, owner_id="ada") == [
        (("ada", "notes"), 2),
        (("ada", "prefs"), 1),
        (("shared", "team"), 1),
    ]
    assert await listed(store, owner_id="bob") == [(("bob", "notes"), 1), (("shared", "team"), 2)]
    assert await listed(store, owner_id="bob", prefix=("shared",)) == [(("shared", "team"), 2)]
    assert await listed(store, owner_id="nobody") == []


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_the_catalog_pages_cover_every_namespace_once(store, limit):
    await _filled(store)
    everything = await listed(store)
    assert await listed(store, limit=limit) == everything
    assert await listed(store, limit=limit, owner_id="bob") == await listed(store, owner_id="bob")
    assert await listed(store, limit=limit, prefix=("ada",)) == await listed(store, prefix=("ada",))
    first = await store.memory.catalog(MemoryCatalogRequest(limit=limit))
    assert len(first.namespaces) == limit
    assert first.next_after == first.namespaces[-1].namespace


@pytest.mark.parametrize(
    "request_",
    [
        MemoryCatalogRequest(limit=0),
        MemoryCatalogRequest(limit=1001),
        MemoryCatalogRequest(limit=True),
        MemoryCatalogRequest(owner_id="nul\x00"),
        MemoryCatalogRequest(prefix=("a.b",)),
        MemoryCatalogRequest(prefix=("",)),
        MemoryCatalogRequest(after=()),
        MemoryCatalogRequest(after=("a", 3)),  # type: ignore[arg-type]
    ],
)
async def test_a_bad_catalog_request_is_refused(store, request_):
    with pytest.raises(InvalidInput):
        await store.memory.catalog(request_)
