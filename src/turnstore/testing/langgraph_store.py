"""A contract any LangGraph `BaseStore` can run against itself: turnstore's store tests.

Subclass `StoreContract` (the sync API) or `AsyncStoreContract` (the `a*` methods, run by
pytest-asyncio: the class carries its mark) and give the subclass a `store` fixture that
yields an empty store, a new one for each test::

    from turnstore.testing.langgraph_store import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self):
            with MyStore.open(...) as store:
                yield store

It tests what LangGraph's own stores share: put, get, delete, `batch`; search by namespace
prefix, `filter` (equality, lists, nested objects, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`)
and `limit`/`offset`; `list_namespaces`; `BaseStore`'s namespace checks; times to live. A
test of a feature the store lacks skips, saying why, asked of the store and never of its
class: the TTL tests need `supports_ttl` and `sweep_ttl()`, the refresh one a `TTLConfig`
with `refresh_on_read: True`. Search results are compared as sets, since LangGraph's stores
order them differently (`InMemoryStore` as put, `SqliteStore` newest update first);
`list_namespaces` is sorted in all of them, and asserted so.

As a pytest plugin (`pytest -p turnstore.testing.langgraph_store`) it only marks each contract
test `store_contract`, for `-m store_contract` or `-m "not store_contract"`. It declares no
`pytest11` entry point, which would load it into every pytest run of everyone who installs
turnstore. It imports pytest and LangGraph, nothing of turnstore.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
)

MARKER = "store_contract"
"""The mark the plugin puts on every contract test."""

BRIEF_TTL = 0.5 / 60
"""Minutes: half a second, long enough to read an item back before it expires."""
REFRESHED_TTL_SECONDS = 2.0
"""The refresh test's time to live: a read halfway restarts it, so the item outlives it."""
SWEEP_PATIENCE = 5.0
"""Seconds to keep sweeping for an expired item: a store may keep times in whole seconds."""

NS, PEOPLE = ("contract", "items"), ("contract", "people")
PEOPLE_ITEMS: dict[str, dict[str, Any]] = {
    "ada": {"name": "Ada", "age": 36, "lang": "en", "active": True},
    "bob": {"name": "Bob", "age": 25, "lang": "fr", "active": False},
    "cy": {"name": "Cy", "age": 50, "lang": "en", "active": False},
    "di": {"name": "Di", "age": 41, "lang": "de", "active": True},
    "eve": {"name": "Eve", "age": 25, "lang": "en", "active": True},
}
"""What the filter tests filter (`_people` adds a neighbour no search of `PEOPLE` may find)."""
EQUALITY_FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"lang": "en"}, {"ada", "cy", "eve"}),
    ({"lang": "en", "active": True}, {"ada", "eve"}),
    ({"age": 25}, {"bob", "eve"}),
    ({"active": False}, {"bob", "cy"}),
    ({"lang": "es"}, set()),
    ({"nickname": "en"}, set()),
]
OPERATOR_FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"lang": {"$eq": "fr"}}, {"bob"}),
    ({"lang": {"$ne": "en"}}, {"bob", "di"}),
    ({"age": {"$ne": 25}}, {"ada", "cy", "di"}),
    ({"age": {"$gt": 36}}, {"cy", "di"}),
    ({"age": {"$gte": 36}}, {"ada", "cy", "di"}),
    ({"age": {"$lt": 36}}, {"bob", "eve"}),
    ({"age": {"$lte": 25}}, {"bob", "eve"}),
    ({"age": {"$gt": 40.5}}, {"cy", "di"}),
    ({"age": {"$gte": 30, "$lt": 45}}, {"ada", "di"}),
    ({"age": {"$gt": 30}, "lang": "en"}, {"ada", "cy"}),
]
NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "c"), ("ab",), ("b", "x", "c")]
"""Sorted; `("ab",)` is there to catch a prefix matched as text rather than by labels."""
NAMESPACE_QUERIES: list[tuple[dict[str, Any], list[tuple[str, ...]]]] = [
    ({}, NAMESPACES),
    ({"prefix": ("a",)}, [("a",), ("a", "b"), ("a", "b", "c"), ("a", "c")]),
    ({"prefix": ("a", "*")}, [("a", "b"), ("a", "b", "c"), ("a", "c")]),
    ({"suffix": ("c",)}, [("a", "b", "c"), ("a", "c"), ("b", "x", "c")]),
    ({"prefix": ("a",), "suffix": ("c",)}, [("a", "b", "c"), ("a", "c")]),
    ({"max_depth": 1}, [("a",), ("ab",), ("b",)]),
    ({"prefix": ("a",), "max_depth": 2}, [("a",), ("a", "b"), ("a", "c")]),
    ({"prefix": ("z",)}, []),
]
"""`list_namespaces` arguments -> its answer over `NAMESPACES`."""
INVALID_NAMESPACES = [(), ("a.b",), ("",), ("a", ""), ("a", "b.c")]
"""Refused by `BaseStore.put` before the store sees them."""
VALUE = {"text": "tea ☕", "n": 3, "ratio": 0.5, "ok": True, "no": None, "deep": {"l": [1, {}]}}


def _item(store: BaseStore, namespace: tuple[str, ...], key: str) -> Item:
    """The item at `namespace`/`key`, which the test expects to be there."""
    item = store.get(namespace, key, refresh_ttl=False)
    assert item is not None, f"no item at {namespace} {key!r}"
    return item


def _keys(items: Iterable[Any]) -> set[str]:
    return {item.key for item in items}


def _places(items: Iterable[Item]) -> set[tuple[tuple[str, ...], str]]:
    return {(item.namespace, item.key) for item in items}


def _people() -> list[PutOp]:
    """The filter tests' items, and one in a namespace whose name extends theirs."""
    neighbour = {"name": "Zed", "age": 40, "lang": ["en", "fr"], "active": True}
    puts = [PutOp(PEOPLE, key, value) for key, value in PEOPLE_ITEMS.items()]
    return [*puts, PutOp(("contract", "peoplex"), "zed", neighbour)]


def _pages_fill() -> list[PutOp]:
    return [PutOp(NS, f"k{n:02}", {"n": n, "even": n % 2 == 0}) for n in range(12)]


def _prefix_fill() -> list[PutOp]:
    return [PutOp(namespace, "k", {"at": list(namespace)}) for namespace in NAMESPACES]


def _check_pages(pages: Sequence[Sequence[Item]], size: int, expected: set[str]) -> None:
    """The pages are full but the last, and hold every expected item exactly once."""
    keys = [item.key for page in pages for item in page]
    assert len(keys) == len(set(keys)), f"an item on two pages: {keys}"
    assert set(keys) == expected
    assert all(len(page) == size for page in pages[:-1])


def _fail_without_store(contract: object) -> NoReturn:
    pytest.fail(f"{type(contract).__name__} must define a `store` fixture yielding an empty store")


def _sweeper(store: BaseStore) -> Callable[[], Any]:
    """The store's `sweep_ttl`, or a skip: the TTL tests need one."""
    if not store.supports_ttl:
        pytest.skip("the store does not support TTLs (supports_ttl is false)")
    sweep = getattr(store, "sweep_ttl", None)
    if not callable(sweep):
        pytest.skip("the store has no sweep_ttl() to delete expired items")
    return sweep  # type: ignore[no-any-return]


def _require_refresh_on_read(store: BaseStore) -> None:
    if not (store.ttl_config or {}).get("refresh_on_read"):
        pytest.skip("the store's TTLConfig does not set refresh_on_read: no read restarts a TTL")


class StoreContract:
    """The sync API's contract: subclass it and define a `store` fixture (an empty store)."""

    @pytest.fixture
    def store(self) -> BaseStore:
        """An empty store for one test; each subclass defines its own."""
        _fail_without_store(self)

    def _wait_past(self, stamp: datetime) -> None:
        """Until a time the store writes can differ from `stamp`: at once if it keeps fractions
        of a second, else once the clock's second has changed."""
        started = time.time()
        time.sleep(0.01)
        while not stamp.microsecond and int(time.time()) == int(started):
            time.sleep(0.02)

    def _sweep_until_one(self, sweep: Callable[[], Any]) -> int:
        """Sweep until something is swept (or patience runs out); how many items went."""
        deadline, swept = time.monotonic() + SWEEP_PATIENCE, 0
        while not swept and time.monotonic() < deadline:
            time.sleep(0.05)
            swept += int(sweep())
        return swept

    # --- put, get, delete ---------------------------------------------------------------------

    def test_put_then_get_returns_the_item(self, store: BaseStore) -> None:
        store.put(NS, "pref-1 ü", VALUE)
        item = _item(store, NS, "pref-1 ü")
        assert (item.namespace, item.key, item.value) == (NS, "pref-1 ü", VALUE)
        assert isinstance(item.created_at, datetime)
        assert item.created_at <= item.updated_at

    def test_get_of_a_missing_item_is_none(self, store: BaseStore) -> None:
        assert store.get(NS, "absent") is None
        store.put(NS, "here", {"v": 1})
        assert store.get(NS, "absent") is None
        assert store.get(NS[:1], "here") is None
        assert store.get((*NS, "deeper"), "here") is None

    def test_a_put_over_an_item_replaces_it(self, store: BaseStore) -> None:
        store.put(NS, "k", {"a": 1, "b": 2})
        first = _item(store, NS, "k")
        self._wait_past(first.updated_at)
        store.put(NS, "k", {"a": 3})
        second = _item(store, NS, "k")
        assert second.value == {"a": 3}
        assert second.updated_at > first.updated_at
        assert second.created_at <= second.updated_at
        assert _keys(store.search(NS)) == {"k"}

    def test_a_put_over_an_item_keeps_its_creation_time(self, store: BaseStore) -> None:
        store.put(NS, "k", {"v": 1})
        first = _item(store, NS, "k")
        self._wait_past(first.created_at)
        store.put(NS, "k", {"v": 2})
        second = _item(store, NS, "k")
        assert second.created_at == first.created_at

    def test_delete_removes_the_item_and_no_other(self, store: BaseStore) -> None:
        store.put(NS, "gone", {"v": 1})
        store.put(NS, "kept", {"v": 2})
        store.delete(NS, "gone")
        assert store.get(NS, "gone") is None
        assert _keys(store.search(NS)) == {"kept"}

    def test_deleting_a_missing_item_changes_nothing(self, store: BaseStore) -> None:
        store.put(NS, "kept", {"v": 2})
        store.delete(NS, "absent")
        store.delete(("never", "made"), "absent")
        store.delete(NS, "kept")
        store.delete(NS, "kept")
        assert store.search(()) == []

    def test_only_namespaces_holding_items_are_listed(self, store: BaseStore) -> None:
        store.get(("only", "read"), "k")
        store.search(("only", "searched"))
        store.put(("emptied",), "k", {"v": 1})
        store.delete(("emptied",), "k")
        store.put(("kept",), "k", {"v": 1})
        assert store.list_namespaces() == [("kept",)]

    # --- batches ------------------------------------------------------------------------------

    def test_batch_returns_one_result_per_op_in_order(self, store: BaseStore) -> None:
        assert store.batch([]) == []
        store.put(NS, "before", {"v": 0})
        listing = ListNamespacesOp(match_conditions=(MatchCondition("prefix", NS[:1]),))
        reads: list[Op] = [GetOp(NS, "absent"), GetOp(NS, "before"), listing, SearchOp(NS)]
        absent, before, namespaces, found, put = store.batch([*reads, PutOp(("o",), "n", {"v": 1})])
        assert absent is None
        assert isinstance(before, Item)
        assert before.value == {"v": 0}
        assert namespaces == [NS]
        assert isinstance(found, list)
        assert _keys(found) == {"before"}
        assert put is None
        assert _item(store, ("o",), "n").value == {"v": 1}

    def test_reads_in_a_batch_see_the_store_before_it(self, store: BaseStore) -> None:
        store.put(NS, "old", {"v": 0})
        writes = [PutOp(NS, "new", {"v": 1}), PutOp(NS, "old", None)]
        results = store.batch([*writes, GetOp(NS, "new"), GetOp(NS, "old"), SearchOp(NS)])
        assert results[:3] == [None, None, None]
        assert isinstance(results[3], Item)
        assert isinstance(results[4], list)
        assert _keys(results[4]) == {"old"}
        assert _keys(store.search(NS)) == {"new"}

    def test_the_last_write_to_an_item_in_a_batch_wins(self, store: BaseStore) -> None:
        twice = [PutOp(NS, "twice", {"v": 1}), PutOp(NS, "twice", {"v": 2})]
        store.batch([*twice, PutOp(NS, "gone", {"v": 1}), PutOp(NS, "gone", None)])
        assert _item(store, NS, "twice").value == {"v": 2}
        assert store.get(NS, "gone") is None

    # --- search ---------------------------------------------------------------------------

    def test_search_covers_its_prefix_label_by_label(self, store: BaseStore) -> None:
        store.batch(_prefix_fill())
        everything = {(namespace, "k") for namespace in NAMESPACES}
        assert _places(store.search(())) == everything
        expected = {(ns, "k") for ns in NAMESPACES if ns[:1] == ("a",)}
        assert _places(store.search(("a",))) == expected
        assert _places(store.search(("a", "b"))) == {(("a", "b"), "k"), (("a", "b", "c"), "k")}
        assert _places(store.search(("ab",))) == {(("ab",), "k")}
        assert store.search(("a", "b", "c", "d")) == []
        assert store.search(("x",)) == []

    def test_search_returns_search_items(self, store: BaseStore) -> None:
        store.put(NS, "note", VALUE)
        found, item = store.search(NS), _item(store, NS, "note")
        assert len(found) == 1
        assert isinstance(found[0], SearchItem)
        assert (found[0].namespace, found[0].key, found[0].value) == (NS, "note", VALUE)
        assert (found[0].created_at, found[0].updated_at) == (item.created_at, item.updated_at)
        assert found[0].score is None

    def test_filter_by_equality(self, store: BaseStore) -> None:
        store.batch(_people())
        for where, expected in EQUALITY_FILTERS:
            assert _keys(store.search(PEOPLE, filter=where)) == expected, where

    def test_filter_by_operators(self, store: BaseStore) -> None:
        store.batch(_people())
        for where, expected in OPERATOR_FILTERS:
            assert _keys(store.search(PEOPLE, filter=where)) == expected, where

    def test_filter_on_a_list_matches_it_item_by_item(self, store: BaseStore) -> None:
        tags = {"a": ["x", "y"], "b": ["x"], "c": ["y", "x"], "d": "x"}
        store.batch([PutOp(NS, key, {"tags": value}) for key, value in tags.items()])
        assert _keys(store.search(NS, filter={"tags": ["x", "y"]})) == {"a"}
        assert _keys(store.search(NS, filter={"tags": ["x"]})) == {"b"}

    def test_filter_on_a_nested_object_matches_the_fields_it_names(self, store: BaseStore) -> None:
        store.put(NS, "a", {"author": {"name": "ada", "team": "core"}})
        store.put(NS, "b", {"author": {"name": "bob", "team": "core"}})
        store.put(NS, "c", {"author": "ada"})
        assert _keys(store.search(NS, filter={"author": {"name": "ada"}})) == {"a"}
        assert _keys(store.search(NS, filter={"author": {"team": "core"}})) == {"a", "b"}

    def test_limit_and_offset_page_through_every_item_once(self, store: BaseStore) -> None:
        store.batch(_pages_fill())
        every = {f"k{n:02}" for n in range(12)}
        assert len(store.search(NS)) == 10  # BaseStore.search's default limit
        assert _keys(store.search(NS, limit=100)) == every
        _check_pages([store.search(NS, limit=5, offset=at) for at in (0, 5, 10)], 5, every)
        assert store.search(NS, limit=5, offset=12) == []
        evens = [store.search(NS, filter={"even": True}, limit=4, offset=at) for at in (0, 4)]
        _check_pages(evens, 4, {f"k{n:02}" for n in range(0, 12, 2)})

    # --- list_namespaces ------------------------------------------------------------------

    def test_list_namespaces_by_prefix_suffix_and_depth(self, store: BaseStore) -> None:
        store.batch(_prefix_fill())
        for query, expected in NAMESPACE_QUERIES:
            assert store.list_namespaces(**query) == expected, query

    def test_list_namespaces_pages(self, store: BaseStore) -> None:
        store.batch(_prefix_fill())
        pages = [store.list_namespaces(limit=2, offset=at) for at in (0, 2, 4)]
        assert [namespace for page in pages for namespace in page] == NAMESPACES
        assert store.list_namespaces(offset=len(NAMESPACES)) == []
        within = store.list_namespaces(prefix=("a",), limit=2, offset=1)
        assert within == [("a", "b"), ("a", "b", "c")]

    # --- namespaces refused ---------------------------------------------------------------

    def test_a_put_to_an_invalid_namespace_is_refused(self, store: BaseStore) -> None:
        for namespace in INVALID_NAMESPACES:
            with pytest.raises(InvalidNamespaceError):
                store.put(namespace, "k", {"v": 1})
        assert (store.search(()), store.list_namespaces()) == ([], [])

    def test_reads_and_deletes_refuse_invalid_labels(self, store: BaseStore) -> None:
        store.put(("a", "b"), "k", {"v": 1})
        for bad in (("a.b",), ("a", "")):
            for call in (store.get, store.delete):
                with pytest.raises(InvalidNamespaceError):
                    call(bad, "k")
            with pytest.raises(InvalidNamespaceError):
                store.search(bad)
            with pytest.raises(InvalidNamespaceError):
                store.list_namespaces(prefix=bad)
            with pytest.raises(InvalidNamespaceError):
                store.list_namespaces(suffix=bad)
        _item(store, ("a", "b"), "k")

    # --- times to live --------------------------------------------------------------------

    def test_a_ttl_on_a_store_without_ttls_is_refused(self, store: BaseStore) -> None:
        if store.supports_ttl:
            pytest.skip("the store supports TTLs (supports_ttl is true)")
        with pytest.raises(NotImplementedError):
            store.put(NS, "k", {"v": 1}, ttl=5)
        assert store.get(NS, "k") is None

    def test_an_expired_item_is_swept_and_no_other(self, store: BaseStore) -> None:
        sweep = _sweeper(store)
        store.put(NS, "brief", {"v": 1}, ttl=BRIEF_TTL)
        store.put(NS, "lasting", {"v": 2}, ttl=60)
        store.put(NS, "forever", {"v": 3})
        assert store.get(NS, "brief", refresh_ttl=False) is not None
        assert self._sweep_until_one(sweep) == 1
        assert store.get(NS, "brief", refresh_ttl=False) is None
        assert _keys(store.search(NS, refresh_ttl=False)) == {"lasting", "forever"}

    def test_a_read_that_refreshes_restarts_the_ttl(self, store: BaseStore) -> None:
        sweep = _sweeper(store)
        _require_refresh_on_read(store)
        for key in ("read", "unread"):
            store.put(NS, key, {"v": key}, ttl=REFRESHED_TTL_SECONDS / 60)
        time.sleep(REFRESHED_TTL_SECONDS / 2)
        assert store.get(NS, "read", refresh_ttl=True) is not None
        assert store.get(NS, "unread", refresh_ttl=False) is not None
        assert self._sweep_until_one(sweep) == 1  # the unread item, at its first TTL's end
        assert store.get(NS, "unread", refresh_ttl=False) is None
        assert store.get(NS, "read", refresh_ttl=False) is not None


@pytest.mark.asyncio
class AsyncStoreContract:
    """The async API's contract (`aput`, `aget`, …): subclass it and define a `store` fixture."""

    @pytest.fixture
    def store(self) -> BaseStore:
        """An empty store for one test; each subclass defines its own (it may be async)."""
        _fail_without_store(self)

    async def test_aput_then_aget_returns_the_item(self, store: BaseStore) -> None:
        assert await store.aget(NS, "k") is None
        await store.aput(NS, "k", VALUE)
        item = await store.aget(NS, "k")
        assert item is not None
        assert (item.namespace, item.key, item.value) == (NS, "k", VALUE)
        assert item.created_at <= item.updated_at
        assert await store.aget(NS[:1], "k") is None

    async def test_adelete_removes_the_item(self, store: BaseStore) -> None:
        await store.aput(NS, "gone", {"v": 1})
        await store.aput(NS, "kept", {"v": 2})
        await store.adelete(NS, "gone")
        await store.adelete(NS, "gone")
        assert await store.aget(NS, "gone") is None
        assert _keys(await store.asearch(NS)) == {"kept"}

    async def test_abatch_returns_one_result_per_op_in_order(self, store: BaseStore) -> None:
        await store.aput(NS, "before", {"v": 0})
        reads: list[Op] = [GetOp(NS, "absent"), GetOp(NS, "before")]
        absent, before, put, found = await store.abatch(
            [*reads, PutOp(NS, "new", {}), SearchOp(NS)]
        )
        assert (absent, put) == (None, None)
        assert isinstance(before, Item)
        assert isinstance(found, list)
        assert _keys(found) == {"before"}
        assert _keys(await store.asearch(NS)) == {"before", "new"}

    async def test_asearch_covers_its_prefix_label_by_label(self, store: BaseStore) -> None:
        await store.abatch(_prefix_fill())
        assert len(await store.asearch(())) == len(NAMESPACES)
        expected = {(ns, "k") for ns in NAMESPACES if ns[:1] == ("a",)}
        assert _places(await store.asearch(("a",))) == expected
        assert _places(await store.asearch(("ab",))) == {(("ab",), "k")}

    async def test_asearch_filters(self, store: BaseStore) -> None:
        await store.abatch(_people())
        for where, expected in EQUALITY_FILTERS + OPERATOR_FILTERS:
            assert _keys(await store.asearch(PEOPLE, filter=where)) == expected, where

    async def test_asearch_pages_through_every_item_once(self, store: BaseStore) -> None:
        await store.abatch(_pages_fill())
        pages = [await store.asearch(NS, limit=5, offset=at) for at in (0, 5, 10)]
        _check_pages(pages, 5, {f"k{n:02}" for n in range(12)})

    async def test_alist_namespaces(self, store: BaseStore) -> None:
        await store.abatch(_prefix_fill())
        for query, expected in NAMESPACE_QUERIES:
            assert await store.alist_namespaces(**query) == expected, query
        pages = [await store.alist_namespaces(limit=4, offset=at) for at in (0, 4)]
        assert [namespace for page in pages for namespace in page] == NAMESPACES

    async def test_invalid_namespaces_are_refused(self, store: BaseStore) -> None:
        for namespace in INVALID_NAMESPACES:
            with pytest.raises(InvalidNamespaceError):
                await store.aput(namespace, "k", {"v": 1})
        with pytest.raises(InvalidNamespaceError):
            await store.aget(("a.b",), "k")
        assert await store.alist_namespaces() == []

    async def test_an_expired_item_is_swept_and_no_other(self, store: BaseStore) -> None:
        sweep = _sweeper(store)
        await store.aput(NS, "brief", {"v": 1}, ttl=BRIEF_TTL)
        await store.aput(NS, "forever", {"v": 2})
        deadline, swept = time.monotonic() + SWEEP_PATIENCE, 0
        while not swept and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            done = sweep()
            swept += int(await done if inspect.isawaitable(done) else done)
        assert swept == 1
        assert _keys(await store.asearch(NS, refresh_ttl=False)) == {"forever"}


def pytest_configure(config: pytest.Config) -> None:
    """Register the `store_contract` mark (the plugin's only setting)."""
    config.addinivalue_line("markers", f"{MARKER}: a test of turnstore's LangGraph store contract")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test a contract class defines, in every subclass that runs it."""
    contracts = (StoreContract, AsyncStoreContract)
    for item in items:
        cls, name = getattr(item, "cls", None), getattr(item, "originalname", item.name)
        if isinstance(cls, type) and any(issubclass(cls, c) and name in vars(c) for c in contracts):
            item.add_marker(MARKER)
