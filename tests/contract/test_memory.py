"""Contract: long-term memory (`store.memory`), on both backends and both faces.

A batch is one transaction: its reads see the store as it was before it, its writes (the
last per item) commit together or not at all. Namespaces are paths of labels; a prefix
covers exactly the namespaces below it. Times are the database's; an expired item is not
read (unless asked) and a sweep deletes it.
"""

from __future__ import annotations

import asyncio
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizes import pick
from turnstore import InvalidInput
from turnstore.records.memory import (
    MemoryCall,
    MemoryDelete,
    MemoryGet,
    MemoryPut,
    MemorySearch,
    MemoryVector,
)

NS = ("olive", "prefs")


def put(namespace: tuple[str, ...], key: str, value: str = "{}", **options: Any) -> MemoryPut:
    """A put of JSON text `value`, owned by the namespace's first label."""
    return MemoryPut(
        namespace,
        key,
        value,
        options.get("ttl_ms"),
        namespace[:1] and namespace[0],
        options.get("vectors"),
    )


async def write(store: Any, *writes: Any) -> None:
    """One batch of writes."""
    await store.memory.run(MemoryCall(writes=writes))


async def keys(store: Any, prefix: tuple[str, ...], **options: Any) -> list[tuple[str, str]]:
    """The (namespace, key) a search under `prefix` gives, in its order."""
    answer = await store.memory.run(MemoryCall(searches=(MemorySearch(prefix, **options),)))
    return [(one.row.namespace, one.row.key) for one in answer.searches[0]]


async def test_a_put_reads_back_and_a_second_put_replaces_it_keeping_its_creation(store):
    await write(store, put(NS, "color", '{"v": "teal"}'))
    first = (await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "color"),)))).gets[0]
    await asyncio.sleep(0.01)
    await write(store, put(NS, "color", '{"v": "amber"}'))
    second = (await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "color"),)))).gets[0]
    assert first is not None
    assert second is not None
    assert (first.namespace, first.key, first.value_json) == (
        "olive.prefs",
        "color",
        '{"v": "teal"}',
    )
    assert second.value_json == '{"v": "amber"}'
    assert second.created_at_ms == first.created_at_ms
    assert second.updated_at_ms > first.updated_at_ms
    await write(store, MemoryDelete(NS, "color"), MemoryDelete(NS, "never-stored"))
    assert (await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "color"),)))).gets == [None]


async def test_a_batch_reads_the_store_as_it_was_and_keeps_its_last_write_per_item(store):
    await write(store, put(NS, "a", '{"n": 1}'))
    answer = await store.memory.run(
        MemoryCall(
            gets=(MemoryGet(NS, "a"), MemoryGet(NS, "b")),
            writes=(put(NS, "a", '{"n": 2}'), put(NS, "b"), MemoryDelete(NS, "b")),
        )
    )
    assert [row and row.value_json for row in answer.gets] == ['{"n": 1}', None]
    after = await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "a"), MemoryGet(NS, "b"))))
    assert [row and row.value_json for row in after.gets] == ['{"n": 2}', None]


async def test_a_prefix_covers_exactly_the_namespaces_below_it(store):
    namespaces = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a-b",), ("a/b",), ("b", "a")]
    await write(store, *(put(ns, "k") for ns in namespaces))
    assert sorted(ns for ns, _ in await keys(store, ("a",), limit=None)) == ["a", "a.b", "a.b.c"]
    assert sorted(ns for ns, _ in await keys(store, ("a", "b"), limit=None)) == ["a.b", "a.b.c"]
    assert len(await keys(store, (), limit=None)) == len(namespaces)
    listed = await store.memory.run(MemoryCall(namespaces=(None, ("a",), ("zz",))))
    assert listed.namespaces == [
        sorted(".".join(ns) for ns in namespaces),
        ["a", "a.b", "a.b.c"],
        [],
    ]


async def test_a_search_pages_newest_first_and_filters_across_its_pages(store):
    for n in range(7):
        await write(store, put(NS, f"k{n}", f'{{"n": {n}}}'))
    newest = await keys(store, NS, limit=None, page=2)
    assert [key for _, key in newest] == [f"k{n}" for n in reversed(range(7))]
    assert [key for _, key in await keys(store, NS, offset=2, limit=3, page=2)] == [
        "k4",
        "k3",
        "k2",
    ]

    def odd(row: Any) -> bool:
        return '"n": 1' in row.value_json or '"n": 3' in row.value_json

    assert [key for _, key in await keys(store, NS, keep=odd, page=2)] == ["k3", "k1"]


async def test_an_expired_item_is_not_read_and_a_sweep_deletes_it(store, database):
    await write(store, put(NS, "brief", ttl_ms=50), put(NS, "kept"))
    await asyncio.sleep(0.2)
    assert [key for _, key in await keys(store, NS)] == ["kept"]
    everything = MemoryCall(searches=(MemorySearch(NS),), omit_expired=False)
    assert len((await store.memory.run(everything)).searches[0]) == 2
    assert (await store.memory.run(MemoryCall(namespaces=(None,)))).namespaces == [["olive.prefs"]]
    assert await store.memory.sweep() == 1
    assert database.count("memory_items") == 1
    assert await store.memory.sweep() == 0


async def test_a_read_that_refreshes_restarts_the_time_to_live(store):
    await write(store, put(NS, "kept", ttl_ms=2000), put(NS, "left", ttl_ms=2000))
    for _ in range(5):
        await asyncio.sleep(0.5)
        await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "kept", refresh=True),)))
    assert [key for _, key in await keys(store, NS)] == ["kept"]


async def test_vectors_are_replaced_by_a_put_that_carries_them_and_deleted_with_the_item(
    store, database
):
    first = (MemoryVector("text", _unit(1, 0)), MemoryVector("title", _unit(0, 1)))
    await write(store, put(NS, "doc", vectors=first))
    await write(store, put(NS, "doc", vectors=(MemoryVector("text", _unit(1, 1)),)))
    await write(store, put(NS, "doc"))  # no vectors given: the stored ones stay
    search = MemoryCall(searches=(MemorySearch(NS, vectors=True),))
    (found,) = (await store.memory.run(search)).searches[0]
    assert [vector.field for vector in found.vectors] == ["text"]
    await write(store, MemoryDelete(NS, "doc"))
    assert database.count("memory_vectors") == 0


@pytest.mark.parametrize("lone", [False, True], ids=["batched", "lone"])
async def test_a_put_over_an_expired_item_creates_it_anew_without_its_vectors(
    store, database, lone
):
    """Expired but not yet swept, an item is gone: a put over it keeps none of its vectors,
    as it keeps none of its creation time, even one that gives no vectors of its own. A lone
    put without vectors is one statement on PostgreSQL (`Write.single`), which drops them."""
    await write(store, put(NS, "doc", ttl_ms=50, vectors=(MemoryVector("text", _unit(1, 0)),)))
    await write(store, put(NS, "kept", vectors=(MemoryVector("text", _unit(0, 1)),)))
    await asyncio.sleep(0.2)
    if lone:
        await write(store, put(NS, "doc"))
        await write(store, put(NS, "kept"))
    else:
        await write(store, put(NS, "doc"), put(NS, "kept"))
    search = MemoryCall(searches=(MemorySearch(NS, vectors=True),))
    found = {one.row.key: one.vectors for one in (await store.memory.run(search)).searches[0]}
    assert found["doc"] == ()
    assert [vector.field for vector in found["kept"]] == ["text"]  # live: its vectors stay
    assert database.count("memory_vectors") == 1


@pytest.mark.parametrize("lone", [False, True], ids=["batched", "lone"])
async def test_a_put_sets_the_owner_it_gives_and_keeps_an_unchanged_one(store, database, lone):
    """The owner is what the latest put gave, a new one or none, alone or in a batch (SQLite
    sets it apart from the rest of the put, and only when it changes)."""

    def owned(owner: str | None) -> MemoryPut:
        return put(NS, "doc")._replace(owner_id=owner)

    async def written(*writes: MemoryPut) -> None:
        if lone:
            for one in writes:
                await write(store, one)
        else:
            await write(store, *writes)

    def owners() -> list[tuple[str, Any]]:
        return [
            (key, owner)
            for key, owner in database.query("SELECT item_key, owner_id FROM memory_items")
        ]

    await written(owned("olive"), put(NS, "other"))
    assert sorted(owners()) == [("doc", "olive"), ("other", "olive")]
    await written(owned("ada"))
    assert sorted(owners()) == [("doc", "ada"), ("other", "olive")]
    await written(owned(None))
    assert sorted(owners()) == [("doc", None), ("other", "olive")]
    await written(owned("ada"), owned("bob"))  # the last write of the batch wins
    assert sorted(owners()) == [("doc", "bob"), ("other", "olive")]
    await written(owned("bob"))
    assert sorted(owners()) == [("doc", "bob"), ("other", "olive")]


def _unit(*components: float) -> bytes:
    return array("f", components).tobytes()


@pytest.mark.parametrize(
    "bad",
    [
        put((), "k"),
        put(("olive",), ""),
        put(("a.b",), "k"),
        put(("",), "k"),
        put(("ok", "nul\x00"), "k"),
        put(("ok",), "k", ttl_ms=0),
        put(("ok",), "k" * 256),
        MemoryPut(("ok",), "k", "{}", None, "owner\x00"),
        MemoryDelete(("ok", 3), "k"),  # type: ignore[arg-type]
    ],
)
async def test_a_batch_with_a_bad_write_is_refused_whole_and_changes_nothing(store, database, bad):
    with pytest.raises(InvalidInput):
        await write(store, put(NS, "fine"), bad)
    assert database.count("memory_items") == 0


async def test_bad_reads_are_refused(store):
    for call in (
        MemoryCall(gets=(MemoryGet(("a.b",), "k"),)),
        MemoryCall(searches=(MemorySearch(NS, offset=-1),)),
        MemoryCall(searches=(MemorySearch(NS, limit=-1),)),
        MemoryCall(namespaces=(("x", ""),)),
    ):
        with pytest.raises(InvalidInput):
            await store.memory.run(call)


LABELS = st.text(
    st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=6,
)


# Each example first deletes what the one before it stored: the store is the fixture's.
@settings(
    max_examples=pick(100, 25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(namespaces=st.lists(st.lists(LABELS, min_size=1, max_size=3).map(tuple), max_size=8))
def test_any_labels_round_trip_and_prefixes_cover_exactly_their_namespaces(
    blocking_store, namespaces
):
    memory = blocking_store.memory
    memory.run(MemoryCall(writes=tuple(MemoryDelete(ns, "k") for ns in _stored(memory))))
    memory.run(MemoryCall(writes=tuple(put(ns, "k") for ns in namespaces)))
    assert sorted(_stored(memory)) == sorted(set(namespaces))
    for prefix in {ns[:1] for ns in namespaces}:
        answer = memory.run(MemoryCall(searches=(MemorySearch(prefix, limit=None),)))
        under = {tuple(one.row.namespace.split(".")) for one in answer.searches[0]}
        assert under == {ns for ns in namespaces if ns[: len(prefix)] == prefix}


def _stored(memory: Any) -> list[tuple[str, ...]]:
    listed = memory.run(MemoryCall(namespaces=(None,), omit_expired=False)).namespaces[0]
    return [tuple(text.split(".")) for text in listed]


ANY_TEXT = st.text(max_size=8) | st.sampled_from(["a.b", "\x00", "k" * 256, "\ud800"])
ANY_NAMESPACE = st.lists(ANY_TEXT, max_size=3).map(tuple) | st.integers() | st.none()


@settings(
    max_examples=pick(150, 40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    namespace=ANY_NAMESPACE,
    key=ANY_TEXT | st.integers(),
    value=ANY_TEXT,
    ttl=st.none() | st.integers(-2, 10**7),
)
def test_any_put_reads_back_exactly_or_is_refused_changing_nothing(
    blocking_store, database, namespace, key, value, ttl
):
    memory = blocking_store.memory
    before = database.count("memory_items")
    one = MemoryPut(namespace, key, value, ttl, None)
    try:
        memory.run(MemoryCall(writes=(one,)))
    except InvalidInput:
        assert database.count("memory_items") == before
        return
    # Read expired or not: a time to live of a few ms may be over by now.
    (row,) = memory.run(MemoryCall(gets=(MemoryGet(namespace, key),), omit_expired=False)).gets
    assert row is not None
    assert (row.namespace.split("."), row.key, row.value_json, row.ttl_ms) == (
        list(namespace),
        key,
        value,
        ttl,
    )
    memory.run(MemoryCall(writes=(MemoryDelete(namespace, key),)))


async def test_a_read_only_store_reads_an_item_whose_read_would_restart_its_time_to_live(
    store, store_url
):
    """A refreshing read on a read-only store answers as on any store; only the restart of
    the time to live, a write, is left out (it raised `ReadOnlyStore` before)."""
    import turnstore

    await write(store, put(NS, "kept", '{"v": 1}', ttl_ms=60_000))
    before = (await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "kept"),)))).gets[0]
    with turnstore.open_blocking(store_url, read_only=True) as reader:
        refreshing = MemoryCall(
            gets=(MemoryGet(NS, "kept", refresh=True),),
            searches=(MemorySearch(NS, refresh=True),),
        )
        answer = reader.memory.run(refreshing)
    assert answer.gets[0] is not None
    assert answer.gets[0].value_json == '{"v": 1}'
    assert [one.row.key for one in answer.searches[0]] == ["kept"]
    after = (await store.memory.run(MemoryCall(gets=(MemoryGet(NS, "kept"),)))).gets[0]
    assert after.expires_at_ms == before.expires_at_ms


async def test_a_put_stamps_its_item_with_one_instant(store):
    """A new item's creation and update times are equal and it expires exactly its time to
    live after them, however the database's clock ticks during the statement."""
    keys = [f"k{n}" for n in range(pick(300, 60))]
    await write(store, *(put(NS, key, ttl_ms=5_000) for key in keys))
    for key in keys:
        await write(store, put(("fresh",), key, ttl_ms=7_000))
    every = MemorySearch((), limit=None)
    rows = [one.row for one in (await store.memory.run(MemoryCall(searches=(every,)))).searches[0]]
    assert len(rows) == 2 * len(keys)
    for row in rows:
        assert row.created_at_ms == row.updated_at_ms, row
        assert row.expires_at_ms == row.updated_at_ms + row.ttl_ms, row
