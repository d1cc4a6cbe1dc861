"""A LangGraph thread's search index holds exactly the words of its newest list, whatever
rewrote the list: SQLite's FTS5 keeps no text, and forgets a row only when handed the words
it was indexed by, read again from the thread before the write that changes its list.

After each change (a run resumed from an earlier checkpoint, a checkpoint made from an older
one again, a removed message, a deleted run, a copy into a thread that exists), the index's
terms are compared with those of a fresh store the threads were copied into (whose import
indexed them from scratch), and no removal needed the rebuild that an unreadable item forces.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _langgraph_graph import build, config, user

import turnstore
from turnstore.records import SearchRequest
from turnstore.transfer import copy_store

pytest.importorskip("langgraph")


def _terms(path: Path) -> Counter[str]:
    """Each term SQLite's FTS5 index holds, and how many items hold it."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_fts, row)")
        return Counter(dict(connection.execute("SELECT term, doc FROM temp.terms").fetchall()))
    finally:
        connection.close()


def _same_as_fresh(store: Any, path: Path, tmp_path: Path) -> None:
    """The index holds what an index built from scratch over the same threads holds."""
    store.search(SearchRequest(query="anything"))  # catches the index up first
    fresh = tmp_path / f"fresh-{uuid.uuid4().hex}.sqlite3"
    with turnstore.open_blocking(fresh, index_in_background=False) as other:
        copy_store(store, other)
        other.search(SearchRequest(query="anything"))
    assert _terms(path) == _terms(fresh)


def _found(store: Any, query: str) -> list[int]:
    """Where the hits are in thread `s`'s list."""
    hits = store.search(SearchRequest(query=query)).hits
    return sorted(hit.item for hit in hits if hit.session_id == "langgraph/s")


def test_a_threads_index_forgets_exactly_what_its_list_loses(tmp_path: Path, caplog) -> None:
    """Resumed, set back, removed, deleted by run, copied over: the index follows the newest
    list."""
    from langchain_core.messages import RemoveMessage

    from turnstore.integrations.langgraph import TurnstoreSaver

    caplog.set_level(logging.WARNING, "turnstore.search")
    path = tmp_path / "threads.sqlite3"
    with turnstore.open_blocking(path, index_in_background=False) as store:
        saver = TurnstoreSaver(store)
        graph = build(saver)
        for turn, word in enumerate(("narwhal", "beluga")):
            graph.invoke(user("s", turn, f"tell me about the {word}"), config("s"))
        graph.invoke(user("other", 0, "tell me about the narwhal"), config("other"))
        assert _found(store, "beluga") == [4, 5, 6, 7]
        _same_as_fresh(store, path, tmp_path)

        # Resumed from the checkpoint after the first turn: the beluga turn is not in its list.
        first_turn = next(
            state
            for state in graph.get_state_history(config("s"))
            if len(state.values["messages"]) == 4
        )
        graph.invoke(user("s", 2, "tell me about the walrus"), first_turn.config)
        assert _found(store, "beluga") == []
        assert _found(store, "walrus") == [4, 5, 6, 7]
        _same_as_fresh(store, path, tmp_path)

        # A checkpoint made from the older one again: its list is the shorter one.
        graph.update_state(first_turn.config, {"turns": 1})
        assert _found(store, "walrus") == []
        assert _found(store, "narwhal") == [0, 1, 2, 3]
        _same_as_fresh(store, path, tmp_path)

        asked = graph.get_state(config("s")).values["messages"][0]
        graph.update_state(config("s"), {"messages": [RemoveMessage(id=asked.id)]})
        _same_as_fresh(store, path, tmp_path)

        run = str(uuid.uuid4())
        graph.invoke(
            user("s", 3, "tell me about the orca"), {**config("s"), "metadata": {"run_id": run}}
        )
        assert _found(store, "orca")
        saver.delete_for_runs([run])
        assert _found(store, "orca") == []
        _same_as_fresh(store, path, tmp_path)

        saver.copy_thread("s", "other")
        _same_as_fresh(store, path, tmp_path)
    assert "rebuilt" not in caplog.text
