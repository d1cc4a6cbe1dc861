"""Contract: memory items searched by their words (`MemorySearch.query`), on both backends.

An item put with `text` is indexed by the words of its value's strings, as a session's item
is; a query (words, "phrases", `prefix*`) finds the items under a namespace prefix whose words
match, best match first. A put that replaces an item, a delete and a sweep take its words out
in the same transaction: on SQLite the FTS5 index is checked to hold exactly the words of the
items still indexed, after any sequence of writes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizes import pick
from turnstore import InvalidInput
from turnstore.records.memory import MemoryCall, MemoryDelete, MemoryPut, MemorySearch

NS = ("olive", "memories")


def put(namespace: tuple[str, ...], key: str, text: str, **options: Any) -> MemoryPut:
    """A put of `{"text": text}`, indexed by its words unless `text=False`."""
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


async def test_a_replaced_or_deleted_item_is_found_by_its_new_words_only(store):
    await write(store, put(NS, "pet", "a grey cat named Ash"))
    await write(store, put(NS, "pet", "a brown dog named Birch"))
    assert await found(store, "cat") == []
    assert await found(store, "dog") == ["pet"]
    await write(store, put(NS, "pet", "a brown dog named Birch", indexed=False))
    assert await found(store, "dog") == []
    await write(store, put(NS, "pet", "a parrot"), MemoryDelete(NS, "never-stored"))
    await write(store, MemoryDelete(NS, "pet"))
    assert await found(store, "parrot") == []


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
        assert _fts5_terms(database.path) == {
            word: sum(word in held for held in model.values())
            for word in {word for held in model.values() for word in held}
        }


def _fts5_terms(path: Any) -> dict[str, int]:
    """Each term SQLite's memory index holds, and in how many rows."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, memory_fts, row)")
        return dict(connection.execute("SELECT term, doc FROM temp.terms"))
    finally:
        connection.close()
