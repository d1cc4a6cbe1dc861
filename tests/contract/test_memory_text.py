"""Contract: memory items searched by their words (`MemorySearch.query`), on both backends.

An item put with `text` is indexed by the words of its value's strings, as a session's item
is: on PostgreSQL in the put, on SQLite after it, by the search indexer or by the next search
by words, which indexes what is pending first. A query (words, "phrases", `prefix*`) finds
the items under a namespace prefix whose words match, best match first. A put without
`text`, a delete and a sweep take an item's words out in their own transaction, even words
a put left for the indexer to replace: on SQLite the FTS5 index is checked to hold exactly
the words of the items there, after any sequence of writes.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import turnstore
from conftest import fts5_terms
from sizes import pick
from turnstore import InvalidInput
from turnstore.records.memory import (
    MemoryCall,
    MemoryDelete,
    MemoryFindRequest,
    MemoryPut,
    MemorySearch,
)

NS = ("olive", "memories")


def put(namespace: tuple[str, ...], key: str, text: str, **options: Any) -> MemoryPut:
    """A put of `{"text": text}`, searched by its words unless `indexed=False`."""
    return MemoryPut(
        namespace,
        key,
        json.dumps({"text": text, **options.get("more", {})}),
        options.get("ttl_ms"),
        namespace[0],
        text=options.get("indexed", True),
    )


async def write(store: Any, *writes: Any) -> None:
    """One batch of writes."""
    await store.memory.run(MemoryCall(writes=writes))


async def found(store: Any, query: str, prefix: tuple[str, ...] = (), **options: Any) -> list[str]:
    """The keys a search for `query` under `prefix` gives, in its order."""
    search = MemorySearch(prefix, query=query, **{"limit": None, **options})
    (rows,) = (await store.memory.run(MemoryCall(searches=(search,)))).searches
    return [one.row.key for one in rows]


async def test_a_query_finds_the_items_whose_words_match_best_first(store):
    await write(
        store,
        put(NS, "tour", "lighthouse tour, lighthouse keeper, lighthouse"),
        put(NS, "coffee", "Takes her coffee black"),
        put(NS, "ferry", "the ferry passed one lighthouse"),
        put(("bob", "memories"), "tour", "Bob skipped the lighthouse"),
        put(NS, "quiet", "the lighthouse", indexed=False),
    )
    assert await found(store, "lighthouse", ("olive",)) == ["tour", "ferry"]
    assert sorted(await found(store, "lighthouse")) == ["ferry", "tour", "tour"]
    assert await found(store, '"lighthouse keeper"') == ["tour"]
    assert await found(store, "light*", ("olive",)) == ["tour", "ferry"]
    assert await found(store, "coffee black", NS) == ["coffee"]
    assert await found(store, "coffee lighthouse") == []
    # Case, and Latin diacritics, are read alike, as the conversation search reads them.
    assert await found(store, "CAFÉ") == []
    await write(store, put(NS, "cafe", "un café au lait"))
    assert await found(store, "Cafe") == ["cafe"]
    # A search past the first rows, and with a filter, pages as a search without a query.
    assert await found(store, "lighthouse", ("olive",), limit=1, offset=1, page=1) == ["ferry"]
    keep = MemorySearch(("olive",), query="lighthouse", keep=lambda row: "ferry" in row.value_json)
    (rows,) = (await store.memory.run(MemoryCall(searches=(keep,)))).searches
    assert [one.row.key for one in rows] == ["ferry"]


async def test_a_query_of_any_of_its_terms_finds_every_item_holding_one(store):
    await write(
        store,
        put(NS, "tour", "lighthouse tour, lighthouse keeper"),
        put(NS, "coffee", "Takes her coffee black"),
        put(NS, "ferry", "the ferry passed one lighthouse"),
        put(NS, "tea", "green tea in the morning"),
        put(("bob", "memories"), "boat", "Bob's ferry, his lighthouse"),
        put(NS, "quiet", "coffee by the lighthouse", indexed=False),
    )
    assert await found(store, "coffee lighthouse") == []
    anywhere = sorted(await found(store, "coffee lighthouse", any_of=True))
    assert anywhere == ["boat", "coffee", "ferry", "tour"]
    assert sorted(await found(store, 'coffee "lighthouse keeper" tea*', NS, any_of=True)) == [
        "coffee",
        "tea",
        "tour",
    ]
    # The item holding both terms ranks above those holding one.
    assert (await found(store, "ferry lighthouse", ("bob",), any_of=True)) == ["boat"]
    assert (await found(store, "ferry lighthouse", NS, any_of=True))[0] == "ferry"
    assert await found(store, "nothing here", any_of=True) == []


async def test_a_replaced_or_deleted_item_is_found_by_its_new_words_only(store, database):
    await write(store, put(NS, "pet", "a grey cat named Ash"))
    await write(store, put(NS, "pet", "a brown dog named Birch"))
    assert await found(store, "cat") == []
    assert await found(store, "dog") == ["pet"]
    await write(store, put(NS, "pet", "a brown dog named Birch", indexed=False))
    assert await found(store, "dog") == []
    await write(store, put(NS, "pet", "a parrot"), MemoryDelete(NS, "never-stored"))
    await write(store, MemoryDelete(NS, "pet"))
    assert await found(store, "parrot") == []
    # Indexed, then put again: on SQLite its old words wait in FTS5 for the indexer to swap
    # them, and a delete or a put without text forgets them before it does.
    await write(store, put(NS, "pet", "a quiet owl"))
    assert await found(store, "owl") == ["pet"]
    await write(store, put(NS, "pet", "a loud jay"))
    await write(store, MemoryDelete(NS, "pet"))
    await write(store, put(NS, "bird", "a quiet owl"))
    assert await found(store, "owl") == ["bird"]
    await write(store, put(NS, "bird", "a loud jay"))
    await write(store, put(NS, "bird", "a loud jay", indexed=False))
    assert await found(store, "owl") == await found(store, "jay") == []
    if database.backend == "sqlite":
        assert fts5_terms(database.path) == {}


async def test_an_expired_item_is_not_found_unless_asked_and_a_sweep_forgets_it(store):
    await write(
        store, put(NS, "brief", "a passing thought", ttl_ms=50), put(NS, "kept", "a thought")
    )
    await asyncio.sleep(0.2)
    assert await found(store, "thought") == ["kept"]
    everything = MemorySearch((), query="thought", limit=None)
    answer = await store.memory.run(MemoryCall(searches=(everything,), omit_expired=False))
    assert sorted(one.row.key for one in answer.searches[0]) == ["brief", "kept"]
    assert await store.memory.sweep() == 1
    answer = await store.memory.run(MemoryCall(searches=(everything,), omit_expired=False))
    assert [one.row.key for one in answer.searches[0]] == ["kept"]


@pytest.mark.parametrize("query", ["", "   ", '"unclosed', "!!!", "x" * 501, "a\x00b", 7])
async def test_a_bad_query_is_refused_with_the_batch_changing_nothing(store, database, query):
    search = MemorySearch(NS, query=query)
    with pytest.raises(InvalidInput):
        await store.memory.run(MemoryCall(searches=(search,), writes=(put(NS, "k", "words"),)))
    assert database.count("memory_items") == 0


async def test_a_value_that_is_not_json_is_refused_when_its_text_is_indexed(store, database):
    bad = MemoryPut(NS, "k", "not json", None, None, text=True)
    with pytest.raises(InvalidInput, match="not JSON"):
        await write(store, put(NS, "fine", "fine words"), bad)
    assert database.count("memory_items") == 0
    await write(store, bad._replace(text=False))  # kept as text, not searched
    assert await found(store, "json") == []


# --- any sequence of writes: what is found, and on SQLite what FTS5 holds ---------------------

WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord"]
KEYS = ["a", "b", "c"]
WRITE = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(KEYS),
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=4),
        st.booleans(),
    ),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just([]), st.just(False)),
)


@settings(
    max_examples=pick(60, 15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=st.lists(st.lists(WRITE, min_size=1, max_size=4), min_size=1, max_size=5))
def test_any_writes_leave_each_word_finding_exactly_the_items_that_hold_it(
    blocking_store, database, batches
):
    memory = blocking_store.memory
    memory.run(MemoryCall(writes=tuple(MemoryDelete(NS, key) for key in KEYS)))
    model: dict[str, set[str]] = {}
    for batch in batches:
        writes: list[Any] = []
        for action, key, said, indexed in batch:
            if action == "delete":
                writes.append(MemoryDelete(NS, key))
                model.pop(key, None)
            else:
                writes.append(put(NS, key, " ".join(said), indexed=indexed))
                model[key] = set(said) if indexed else set()
        memory.run(MemoryCall(writes=tuple(writes)))
    for word in WORDS:
        search = MemorySearch(NS, query=word, limit=None)
        (rows,) = memory.run(MemoryCall(searches=(search,))).searches
        assert sorted(one.row.key for one in rows) == sorted(
            k for k, w in model.items() if word in w
        )
    if database.backend == "sqlite":
        assert fts5_terms(database.path) == {
            word: sum(word in held for held in model.values())
            for word in {word for held in model.values() for word in held}
        }
    # Every item put again, then deleted before the indexer ran: nothing is left.
    memory.run(MemoryCall(writes=tuple(put(NS, key, "fjord") for key in model)))
    memory.run(MemoryCall(writes=tuple(MemoryDelete(NS, key) for key in KEYS)))
    if database.backend == "sqlite":
        assert fts5_terms(database.path) == {}
    assert database.count("memory_items") == 0


def _pending(database: Any) -> list[tuple[str, bool]]:
    """Each item's key and whether its words wait for the indexer (SQLite's: PostgreSQL's put
    indexes them)."""
    if database.backend != "sqlite":
        return []
    rows = database.query("SELECT item_key, words_pending FROM memory_items ORDER BY item_key")
    return [(key, bool(pending)) for key, pending in rows]


async def test_a_put_on_sqlite_leaves_its_words_pending_and_a_search_by_words_indexes_them(
    store, database
):
    if database.backend != "sqlite":
        pytest.skip("a PostgreSQL put indexes its words itself")
    await write(store, put(NS, "a", "amber dune"), put(NS, "b", "birch", indexed=False))
    assert _pending(database) == [("a", True), ("b", False)]
    assert fts5_terms(database.path) == {}
    # A search without a query leaves them; one with a query indexes every pending item.
    assert len((await store.memory.run(MemoryCall(searches=(MemorySearch(NS),)))).searches[0]) == 2
    assert _pending(database) == [("a", True), ("b", False)]
    assert await found(store, "dune") == ["a"]
    assert _pending(database) == [("a", False), ("b", False)]
    assert fts5_terms(database.path) == {"amber": 1, "dune": 1}
    assert await store.memory.index() == 0


def test_the_background_indexer_indexes_pending_words_without_a_search(store_url, database):
    """A store's indexer thread indexes what puts left pending, in batches, within moments."""
    with turnstore.open_blocking(store_url) as store:
        puts = tuple(put(NS, f"k{n}", f"word{n} common") for n in range(1_200))
        store.memory.run(MemoryCall(writes=puts))
        began = time.monotonic()
        while any(pending for _, pending in _pending(database)):
            assert time.monotonic() - began < 20, "the background indexer never indexed them"
            time.sleep(0.05)
        # A reader that cannot index finds them now.
        with turnstore.open_blocking(store_url, read_only=True) as reader:
            page = reader.memory.find(MemoryFindRequest("word7"))
            assert [hit.key for hit in page.hits] == ["k7"]
    if database.backend == "sqlite":
        terms = fts5_terms(database.path)
        assert terms["common"] == 1_200
        assert terms["word7"] == 1
    else:
        assert database.query("SELECT count(*) FROM memory_items WHERE words IS NULL") == [(0,)]
