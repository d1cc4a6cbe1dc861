"""Contract: the search indexer works off the save path and never shows what was removed.

A reader that cannot index sees a write once a writer's background indexer has run; indexers
of two stores on one database share the work without indexing an item twice; and text popped
or deleted is never found, however the indexer's passes fall between the writes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import turnstore
from turnstore.records import SearchRequest


def _found(store: Any, word: str) -> list[tuple[str, int | None, int]]:
    page = store.search(SearchRequest(query=word, limit=100))
    return [(hit.session_id, hit.sequence, hit.item) for hit in page.hits]


def test_a_read_only_reader_sees_a_write_once_the_writers_indexer_ran(store_url):
    """The writer's thread indexes within a fraction of a second; the reader cannot index."""
    with turnstore.open_blocking(store_url) as writer:
        writer.append_context("s", [{"role": "user", "content": "first words"}])
        writer.search(SearchRequest(query="first"))  # the index is built and caught up
        with turnstore.open_blocking(store_url, read_only=True) as reader:
            writer.append_context("s", [{"role": "user", "content": "quokka sighted"}])
            began = time.monotonic()
            while not _found(reader, "quokka"):
                assert time.monotonic() - began < 10, "the background indexer never ran"
                time.sleep(0.02)
            assert _found(reader, "quokka") == [("s", None, 1)]


def test_without_the_background_thread_a_search_still_finds_every_earlier_write(store_url):
    """A store opened with index_in_background=False indexes what it needs when it searches."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("s", [{"role": "user", "content": "wombat burrow"}])
        with turnstore.open_blocking(store_url, read_only=True) as reader:
            time.sleep(0.5)
            assert _found(reader, "wombat") == []  # nobody indexed it yet
            assert _found(store, "wombat") == [("s", None, 0)]
            assert _found(reader, "wombat") == [("s", None, 0)]
        assert not [t for t in threading.enumerate() if t.name == "turnstore-search"]


def test_two_stores_indexing_one_database_index_each_item_once(store_url, database):
    """Indexers of two stores (two processes' worth) share the work: no item twice."""
    with turnstore.open_blocking(store_url) as one, turnstore.open_blocking(store_url) as two:
        for turn in range(30):
            writer = one if turn % 2 else two
            writer.append_context(f"s{turn % 3}", [{"role": "user", "content": f"kiwi {turn}"}])
            writer.search(SearchRequest(query="kiwi"))
        one.search(SearchRequest(query="kiwi"))
        two.search(SearchRequest(query="kiwi"))
        rows = database.query("SELECT session_id, item FROM search_items ORDER BY session_id, item")
        assert len(rows) == len(set(rows)) == 30
        hits, cursor = [], None
        while True:
            page = one.search(SearchRequest(query="kiwi", limit=7, cursor=cursor))
            hits += page.hits
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(hits) == 30


def test_text_popped_or_deleted_is_never_found_while_the_indexer_runs(store_url):
    """Appends and pops race the background indexer; a popped word is gone at once."""
    with (
        turnstore.open_blocking(store_url) as writer,
        turnstore.open_blocking(store_url, read_only=True) as reader,
    ):
        writer.append_context("s", [{"role": "user", "content": "kept"}])
        for turn in range(40):
            word = f"ephemeral{turn}"
            writer.append_context("s", [{"role": "user", "content": word}])
            if turn % 3 == 0:
                writer.search(SearchRequest(query=word))  # indexed before the pop, at times
            time.sleep(0.01 * (turn % 4))
            writer.pop_context("s")
            assert _found(reader, word) == []
            assert _found(writer, word) == []
        writer.save(turnstore.Checkpoint(session_id="gone", sequence=1), ["doomed words"])
        writer.search(SearchRequest(query="doomed"))
        writer.delete_sessions(["gone"])
        assert _found(reader, "doomed") == []
        assert _found(writer, "kept") == [("s", None, 0)]


def test_a_writer_that_closes_leaves_its_last_writes_indexed(store_url):
    """Closing a writable store indexes what it committed since its thread last looked."""
    with turnstore.open_blocking(store_url) as writer:
        writer.append_context("s", [{"role": "user", "content": "early words"}])
    with turnstore.open_blocking(store_url) as writer:
        writer.append_context("s", [{"role": "user", "content": "parting words"}])
    with turnstore.open_blocking(store_url, read_only=True) as reader:
        assert _found(reader, "parting") == [("s", None, 1)]
        assert _found(reader, "early") == [("s", None, 0)]
