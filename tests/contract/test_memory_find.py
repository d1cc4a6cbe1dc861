"""Contract: every memory item searched by its words across namespaces (`store.memory.find`).

A page holds the live items put with `text` whose words match, best match first, each with
the part of its text that matches; `owner_id` and `prefix` narrow it, `next_offset` pages on.
Items a put left for the indexer are indexed first, so a put committed before the search is
found; a deleted item is not. Bad requests are refused with `InvalidInput`, changing nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from turnstore import InvalidInput
from turnstore.records.memory import (
    MemoryCall,
    MemoryDelete,
    MemoryFindRequest,
    MemoryPut,
)


def put(owner: str, where: str, key: str, text: str, ttl_ms: int | None = None) -> MemoryPut:
    """A put of `{"text": text}` in `(owner, where)`, searched by its words."""
    return MemoryPut((owner, where), key, json.dumps({"text": text}), ttl_ms, owner, text=True)


async def found(store: Any, query: str, **options: Any) -> list[tuple[tuple[str, ...], str]]:
    """Where each hit of one page is, in its order."""
    page = await store.memory.find(MemoryFindRequest(query, **options))
    return [(hit.namespace, hit.key) for hit in page.hits]


async def _fill(store: Any) -> None:
    await store.memory.run(
        MemoryCall(
            writes=(
                put("olive", "notes", "tour", "lighthouse tour, lighthouse keeper, lighthouse"),
                put("olive", "prefs", "drink", "Takes her coffee black"),
                put("olive", "notes", "ferry", "the ferry passed one lighthouse on the way"),
                put("bob", "notes", "walk", "Bob skipped the lighthouse"),
            )
        )
    )


async def test_find_searches_every_namespace_best_first_and_narrows_by_owner_and_prefix(store):
    await _fill(store)
    everything = await found(store, "lighthouse")
    assert everything[0] == (("olive", "notes"), "tour")
    assert sorted(everything) == [
        (("bob", "notes"), "walk"),
        (("olive", "notes"), "ferry"),
        (("olive", "notes"), "tour"),
    ]
    assert await found(store, "lighthouse", owner_id="bob") == [(("bob", "notes"), "walk")]
    assert await found(store, "lighthouse", owner_id="nobody") == []
    assert await found(store, "light*", prefix=("olive",)) == [
        (("olive", "notes"), "tour"),
        (("olive", "notes"), "ferry"),
    ]
    assert await found(store, "coffee", prefix=("olive", "notes")) == []
    assert await found(store, '"coffee black"') == [(("olive", "prefs"), "drink")]
    assert await found(store, "coffee lighthouse") == []


async def test_a_hit_says_where_its_words_matched(store):
    await store.memory.run(MemoryCall(writes=(put("olive", "notes", "k", "Saw a Lighthouse"),)))
    page = await store.memory.find(MemoryFindRequest("lighthouse"))
    (hit,) = page.hits
    assert hit.snippet == "Saw a Lighthouse"
    assert [hit.snippet[start:end] for start, end in hit.marks] == ["Lighthouse"]
    assert hit.updated_at_ms > 0
    assert page.next_offset is None


async def test_pages_follow_one_another_without_a_hit_twice(store):
    writes = tuple(put("olive", "notes", f"k{n:02}", "kelp " * (n + 1)) for n in range(25))
    await store.memory.run(MemoryCall(writes=writes))
    keys: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await store.memory.find(MemoryFindRequest("kelp", limit=10, offset=offset))
        assert len(page.hits) <= 10
        keys += [hit.key for hit in page.hits]
        offset = page.next_offset
    assert sorted(keys) == sorted(one.key for one in writes)


async def test_a_put_is_found_at_once_and_a_delete_or_an_expiry_is_not(store):
    await _fill(store)
    assert await found(store, "coffee") == [(("olive", "prefs"), "drink")]
    await store.memory.run(MemoryCall(writes=(put("olive", "prefs", "drink", "green tea"),)))
    assert await found(store, "coffee") == []
    assert await found(store, "tea") == [(("olive", "prefs"), "drink")]
    await store.memory.run(MemoryCall(writes=(MemoryDelete(("olive", "prefs"), "drink"),)))
    assert await found(store, "tea") == []
    await store.memory.run(MemoryCall(writes=(put("olive", "notes", "brief", "tea", 50),)))
    await asyncio.sleep(0.2)
    assert await found(store, "tea") == []


@pytest.mark.parametrize(
    "request_",
    [
        MemoryFindRequest(""),
        MemoryFindRequest('"unclosed'),
        MemoryFindRequest("tea", limit=0),
        MemoryFindRequest("tea", limit=1001),
        MemoryFindRequest("tea", offset=-1),
        MemoryFindRequest("tea", offset=2**63),
        MemoryFindRequest("tea", offset=1.5),  # type: ignore[arg-type]
        MemoryFindRequest("tea", prefix=("a.b",)),
        MemoryFindRequest("tea", prefix="olive"),  # type: ignore[arg-type]
        MemoryFindRequest("tea", owner_id=7),  # type: ignore[arg-type]
        MemoryFindRequest(7),  # type: ignore[arg-type]
    ],
)
async def test_a_bad_request_is_refused_before_anything_is_indexed(store, database, request_):
    await store.memory.run(MemoryCall(writes=(put("olive", "notes", "k", "tea"),)))
    with pytest.raises(InvalidInput):
        await store.memory.find(request_)
    if database.backend == "sqlite":
        # The put's words still wait for the indexer (a PostgreSQL put indexed them).
        pending = "SELECT COUNT(*) FROM memory_items WHERE words_pending"
        assert database.query(pending) == [(1,)]


async def test_an_item_put_without_text_is_not_found(store):
    quiet = put("olive", "notes", "q", "tea")._replace(text=False)
    await store.memory.run(MemoryCall(writes=(quiet, put("olive", "notes", "k", "tea"))))
    assert await found(store, "tea") == [(("olive", "notes"), "k")]
