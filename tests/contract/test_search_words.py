"""Contract: the search index keeps no copy of the text, and forgets exactly what goes.

SQLite's FTS5 table has no content: a row leaves it only when handed the words it was
indexed by, and other words corrupt it silently (its terms no longer match its rows). So
every path that removes indexed items is checked by what the index itself holds: its terms
and how many items hold each (FTS5's vocabulary, PostgreSQL's `ts_stat`) must be exactly
those of the items still indexed, a removed item's words are not found, and other items
sharing those words still are. Every test runs on both backends.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from typing import Any

import turnstore
from turnstore import Checkpoint
from turnstore.records import SearchRequest
from turnstore.rules.search import index_texts

A = {"role": "user", "content": "the lighthouse keeper alpha"}
B = {"role": "assistant", "content": "a lighthouse beam bravo"}
C = {"role": "user", "content": "harbour charlie 東京の天気です"}
D = {"role": "assistant", "content": "lighthouse delta"}
E = {"role": "user", "content": "lighthouse echo"}
F = {"role": "assistant", "content": "keeper foxtrot"}
G = {"role": "user", "content": "golf by the lighthouse"}


def _held_terms(backend_name: str, database: Any) -> Counter[str]:
    """Each term the text index holds, and how many items hold it."""
    if backend_name == "postgres":
        rows = database.query("SELECT word, ndoc FROM ts_stat('SELECT words FROM search_items')")
        return Counter({word: count for word, count in rows})
    connection = sqlite3.connect(database.path)
    try:
        connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_fts, row)")
        rows = connection.execute("SELECT term, doc FROM temp.terms").fetchall()
    finally:
        connection.close()
    return Counter({term: count for term, count in rows})


def _terms_of(*items: Any) -> Counter[str]:
    """The terms of these items as the indexer reads them, and how many items hold each."""
    counted: Counter[str] = Counter()
    for _, words in index_texts(items):
        counted.update(set(words.split()))
    return counted


def _found(store: Any, query: str) -> list[tuple[str, int | None, int]]:
    hits = store.search(SearchRequest(query=query, limit=50)).hits
    return sorted((hit.session_id, hit.sequence, hit.item) for hit in hits)


def _save(store: Any, session_id: str, items: list[Any]) -> None:
    checkpoint = store.load(session_id) or Checkpoint.empty(session_id)
    checkpoint.context += items
    checkpoint.sequence += 1
    store.save(checkpoint, transcript_delta=items)


def test_the_index_keeps_no_copy_of_the_text(backend_name, database, store_url):
    """`search_items` has no text column; SQLite's FTS5 table is contentless."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("s", [A])
        assert _found(store, "alpha") == [("s", None, 0)]
    if backend_name == "sqlite":
        columns = {row[1] for row in database.query("PRAGMA table_info(search_items)")}
        ((definition,),) = database.query("SELECT sql FROM sqlite_schema WHERE name = 'search_fts'")
        assert "content=''" in definition
    else:
        columns = {
            row[0]
            for row in database.query(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = 'search_items'"
            )
        }
        assert "words" in columns
    assert "body" not in columns
    assert _held_terms(backend_name, database) == _terms_of(A)


def test_every_removal_takes_out_exactly_the_words_of_what_it_removes(
    backend_name, database, store_url, caplog
):
    """Pop, a replace that drops a prefix (renumbering the rest), a pop at a renumbered
    index, a save that rewrites a session of items, a rebuild, a tree's delete, a clear and
    a prune: after each, the index holds the terms of the remaining items, no more, and each
    read its items' words before it changed them (no rebuild was needed)."""
    caplog.set_level(logging.WARNING, "turnstore.search")
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("s", [A, B, C])
        store.append_context("i", [E])
        _save(store, "log", [E, F])
        store.fork("log", 1, Checkpoint(session_id="log-fork", context=[E, F]))
        _save(store, "log-fork", [G])
        live = [A, B, C, E, E, F, E, F, G]  # the fork journals its context as batch 0
        assert len(_found(store, "lighthouse")) == 6
        assert _held_terms(backend_name, database) == _terms_of(*live)

        store.pop_context("s")
        live.remove(C)
        assert _found(store, "charlie") == _found(store, "天気") == []
        assert _held_terms(backend_name, database) == _terms_of(*live)

        sequence = store.session_summary("s").sequence
        assert store.replace_context("s", sequence, 2, [D], drop_prefix=1)
        live[live.index(A)] = D
        assert _found(store, "alpha") == []
        assert _found(store, "keeper") == [("log", 1, 1), ("log-fork", 0, 1)]
        assert _found(store, "bravo") == [("s", None, 0)]
        assert _found(store, "delta") == [("s", None, 1)]
        assert _held_terms(backend_name, database) == _terms_of(*live)

        store.pop_context("s")  # D, renumbered from 2 to 1
        live.remove(D)
        assert _found(store, "delta") == []
        assert _found(store, "bravo") == [("s", None, 0)]
        assert _held_terms(backend_name, database) == _terms_of(*live)

        rewritten = store.load("i")
        assert rewritten is not None
        rewritten.context = [G]
        rewritten.context_epoch += 1
        rewritten.sequence += 1
        store.save(rewritten)
        live[live.index(E)] = G
        assert ("i", None, 0) in _found(store, "golf")
        assert _held_terms(backend_name, database) == _terms_of(*live)

        store.upkeep.reindex(restart=True)
        assert _held_terms(backend_name, database) == _terms_of(*live)

        assert store.delete_sessions(["log"])
        live = [B, G]
        assert _found(store, "echo") == _found(store, "foxtrot") == []
        assert _found(store, "lighthouse") == [("i", None, 0), ("s", None, 0)]
        assert _held_terms(backend_name, database) == _terms_of(*live)

        store.clear_context("s")
        assert _found(store, "lighthouse") == [("i", None, 0)]
        assert _held_terms(backend_name, database) == _terms_of(G)

        store.upkeep.prune(int(time.time()) + 3600)
        assert _found(store, "golf") == []
        assert _held_terms(backend_name, database) == Counter()
    assert "rebuilt" not in caplog.text


def test_an_item_gone_before_its_index_entry_rebuilds_the_index(
    backend_name, database, store_url, caplog
):
    """A transcript batch deleted behind the store's back cannot give its words again: the
    session's delete rebuilds the text index from every item it still indexes instead, in
    the same commit, so the other items are still found and the gone one's words are not."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        _save(store, "t", [E])
        store.append_context("u", [A, B])
        assert len(_found(store, "lighthouse")) == 3
        database.query("DELETE FROM transcript_delta WHERE session_id = 't'")
        caplog.set_level(logging.WARNING, "turnstore.search")
        assert store.delete_sessions(["t"])
        # Only where the index must be handed the words: PostgreSQL reads none.
        assert ("rebuilt" in caplog.text) == (backend_name == "sqlite")
        assert _found(store, "echo") == []
        assert _found(store, "lighthouse") == [("u", None, 0), ("u", None, 1)]
        assert _held_terms(backend_name, database) == _terms_of(A, B)
        store.pop_context("u")
        assert _found(store, "lighthouse") == [("u", None, 0)]
        assert _held_terms(backend_name, database) == _terms_of(A)
