"""`TurnstoreStore(words=True)` searched by words: a `query` without an embedding `index`.

LangGraph's own stores (and ours by default) ignore such a query and return every item under
the prefix; with `words=True` ours finds the items whose words match, best first, then
filters and pages them (docs/how-to/langgraph-memory.md). Both backends, both faces.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from turnstore import InvalidInput
from turnstore.integrations.langgraph_store import AsyncTurnstoreStore, TurnstoreStore

pytestmark = pytest.mark.peers

ADA = ("ada", "memories")
MEMORIES = {
    "boat": {"text": "Sails a small boat on weekends; the boat is called Gull", "kind": "fact"},
    "tea": {"text": "Drinks green tea, never coffee", "kind": "preference"},
    "harbour": {"text": "Lives near the harbour where the boat is moored", "kind": "fact"},
    "quiet": {"text": "Mentions the boat rarely", "kind": "fact"},
}


@pytest.fixture
def store(store_url: str) -> Iterator[TurnstoreStore]:
    with TurnstoreStore.from_conn_string(store_url, words=True) as opened:
        opened.setup()
        for key, value in MEMORIES.items():
            opened.put(ADA, key, value, index=False if key == "quiet" else None)
        opened.put(("bob", "memories"), "boat", {"text": "Bob has no boat"})
        yield opened


def test_a_query_finds_the_items_whose_words_match_best_first(store: TurnstoreStore) -> None:
    found = store.search(("ada",), query="boat")
    assert [item.key for item in found] == ["boat", "harbour"]
    assert all(item.score is None for item in found)
    assert [item.key for item in store.search(("ada",), query='"green tea"')] == ["tea"]
    assert [item.key for item in store.search(("ada",), query="harb*")] == ["harbour"]
    assert store.search(("ada",), query="submarine") == []
    assert sorted(item.namespace for item in store.search((), query="boat")) == [
        ADA,
        ADA,
        ("bob", "memories"),
    ]
    # The filter, offset and limit apply to the matches, in their order.
    assert [i.key for i in store.search(("ada",), query="boat", filter={"kind": "fact"})] == [
        "boat",
        "harbour",
    ]
    assert [i.key for i in store.search(("ada",), query="boat", offset=1, limit=1)] == ["harbour"]


def test_a_replaced_or_deleted_memory_is_found_by_its_new_words_only(
    store: TurnstoreStore,
) -> None:
    store.put(ADA, "tea", {"text": "Switched to black coffee"})
    assert store.search(ADA, query="green") == []
    assert [item.key for item in store.search(ADA, query="coffee")] == ["tea"]
    store.delete(ADA, "tea")
    assert store.search(ADA, query="coffee") == []


def test_the_difference_from_langgraphs_own_store_is_the_query_alone(tmp_path: Path) -> None:
    """LangGraph's store returns every item for a query it cannot rank; ours with words the
    matches; without a query both return every item under the prefix."""
    theirs = InMemoryStore()
    for key, value in MEMORIES.items():
        theirs.put(ADA, key, value)
    assert len(theirs.search(ADA, query="submarine")) == len(MEMORIES)
    with TurnstoreStore.from_conn_string(str(tmp_path / "store.sqlite3"), words=True) as ours:
        for key, value in MEMORIES.items():
            ours.put(ADA, key, value)
        assert ours.search(ADA, query="submarine") == []
        assert sorted(i.key for i in ours.search(ADA)) == sorted(i.key for i in theirs.search(ADA))


def test_a_query_that_cannot_be_read_is_refused(store: TurnstoreStore) -> None:
    for query in ('"unclosed', "!!!", "x" * 501):
        with pytest.raises(InvalidInput):
            store.search(ADA, query=query)


async def test_the_async_store_searches_by_words_too(store_url: str) -> None:
    async with AsyncTurnstoreStore.from_conn_string(store_url, words=True) as store:
        await store.setup()
        await store.aput(ADA, "boat", MEMORIES["boat"])
        await store.aput(ADA, "tea", MEMORIES["tea"])
        assert [item.key for item in await store.asearch(ADA, query="tea")] == ["tea"]


def test_a_store_without_words_ignores_a_query_as_langgraphs_do(store_url: str) -> None:
    """The default: no words indexed, a query without an index ignored."""
    with TurnstoreStore.from_url(store_url) as store:
        store.put(ADA, "boat", MEMORIES["boat"])
        store.put(ADA, "tea", MEMORIES["tea"])
        assert sorted(item.key for item in store.search(ADA, query="submarine")) == [
            "boat",
            "tea",
        ]
    # Its puts left no words: a store that searches them finds none of those items.
    with TurnstoreStore.from_url(store_url, words=True) as store:
        assert store.search(ADA, query="tea") == []
