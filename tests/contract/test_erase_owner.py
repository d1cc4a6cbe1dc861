"""Contract: erasing one owner (`store.upkeep.erase_owner`), on both backends and both faces.

A person's sessions of three kinds (checkpoint saves, OpenAI items, ADK events), a fork of
theirs under someone else's session, a fork of someone else's under theirs, and their memory
items (searched by words, expiring or not) sit beside another person's. Erasing the person
removes every tree holding a session of theirs and every item of theirs, and nothing of it
can be found afterwards: not by the conversation search, not by the memory search, and (on
SQLite) not in either FTS5 index's vocabulary. The other person's keep everything. A dry run
reports the same and changes nothing; bad owners are refused, changing nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import fts5_terms
from turnstore import Checkpoint, InvalidInput, SessionContext
from turnstore.records import SearchRequest, SessionPageRequest
from turnstore.records.memory import MemoryCall, MemoryFindRequest, MemoryPut


def _said(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _memory(namespace: tuple[str, ...], key: str, text: str, owner: str, **more: Any) -> Any:
    value = json.dumps({"text": text})
    return MemoryPut(namespace, key, value, more.get("ttl_ms"), owner, text=True)


async def _seed(store: Any) -> None:
    ada = SessionContext(owner_id="ada")
    await store.save(
        Checkpoint(
            session_id="ada-run", sequence=1, context=_said("kayaking in Oslo"), session_context=ada
        ),
        _said("kayaking in Oslo"),
    )
    await store.append_context(
        "ada-chat", _said("ada prefers marzipan"), "ada", kind="openai-agents"
    )
    adk = [
        {
            "author": "user",
            "id": "e1",
            "content": {"role": "user", "parts": [{"text": "ada hums quietly"}]},
        }
    ]
    await store.append_context("adk/app/ada/s1", adk, "ada", kind="adk")
    await store.save(
        Checkpoint(
            session_id="bob-run",
            sequence=1,
            context=_said("bob likes chess"),
            session_context=SessionContext(owner_id="bob"),
        ),
        _said("bob likes chess"),
    )
    # A fork of ada's under bob's session, and bob's fork under ada's.
    for parent, child, owner, text in (
        ("bob-run", "ada-fork", "ada", "ada forked chess"),
        ("ada-run", "bob-fork", "bob", "kayaking too"),
    ):
        fork = Checkpoint.empty(child)
        fork.session_context = SessionContext(owner_id=owner)
        await store.fork(parent, 1, fork)
        fork.sequence, fork.context = 1, _said(text)
        await store.save(fork, _said(text))
    writes = (
        _memory(("ada", "facts"), "boat", "ada owns a red kayak", "ada"),
        _memory(("ada", "facts"), "brief", "ada's passing marzipan craving", "ada", ttl_ms=1),
        _memory(("adk", "app", "ada", "s1"), "e1", "ada hums quietly", "ada"),
        _memory(("bob", "facts"), "board", "bob owns a chess board", "bob"),
    )
    await store.memory.run(MemoryCall(writes=writes))


async def _session_ids(store: Any, owner: str | None = None) -> list[str]:
    page = await store.list_sessions_page(SessionPageRequest(owner_id=owner, limit=100))
    return sorted(one.session_id for one in page.sessions)


async def _found(store: Any, query: str) -> list[str]:
    page = await store.search(SearchRequest(query=query, limit=100))
    return sorted(hit.session_id for hit in page.hits)


async def _remembered(store: Any, query: str) -> list[str]:
    page = await store.memory.find(MemoryFindRequest(query, limit=100))
    return sorted(hit.key for hit in page.hits)


async def test_erasing_an_owner_leaves_nothing_of_theirs_to_find(store, database):
    await _seed(store)
    assert await _found(store, "kayaking") == ["ada-run", "bob-fork"]
    assert await _remembered(store, "ada") == ["boat", "e1"]  # the expired one is not found
    report = await store.upkeep.erase_owner("ada")
    assert report.session_ids == ["ada-chat", "ada-fork", "ada-run", "adk/app/ada/s1", "bob-fork"]
    assert report.tree_count == 4
    assert report.memory_item_count == 3  # the expired item too
    assert await _session_ids(store) == ["bob-run"]
    assert await _session_ids(store, "ada") == []
    for word in ("kayaking", "marzipan", "hums", "oslo", "forked"):
        assert await _found(store, word) == []
        assert await _remembered(store, word) == []
    assert await _found(store, "chess") == ["bob-run"]
    assert await _remembered(store, "chess") == ["board"]
    if database.backend == "sqlite":
        vocabulary = set(fts5_terms(database.path, "search_fts")) | set(fts5_terms(database.path))
        assert not vocabulary & {"kayaking", "marzipan", "hums", "oslo", "kayak", "ada", "forked"}
    again = await store.upkeep.erase_owner("ada")
    assert (again.session_ids, again.tree_count, again.memory_item_count) == ([], 0, 0)


async def test_a_dry_run_reports_what_would_go_and_changes_nothing(store):
    await _seed(store)
    sessions = await _session_ids(store)
    report = await store.upkeep.erase_owner("ada", dry_run=True)
    assert report.dry_run
    assert report.session_ids == ["ada-chat", "ada-fork", "ada-run", "adk/app/ada/s1", "bob-fork"]
    assert (report.tree_count, report.memory_item_count) == (4, 3)
    assert await _session_ids(store) == sessions
    assert await _remembered(store, "ada") == ["boat", "e1"]


async def test_an_owner_with_nothing_is_erased_with_nothing_removed(store):
    await _seed(store)
    report = await store.upkeep.erase_owner("nobody")
    assert (report.session_ids, report.tree_count, report.memory_item_count) == ([], 0, 0)
    assert len(await _session_ids(store)) == 6


@pytest.mark.parametrize("owner", ["", "   ", "a\x00b", 7, None])
async def test_a_bad_owner_is_refused_changing_nothing(store, owner):
    await _seed(store)
    with pytest.raises(InvalidInput):
        await store.upkeep.erase_owner(owner)
    assert len(await _session_ids(store)) == 6
    assert await _remembered(store, "ada") == ["boat", "e1"]


async def test_many_sessions_and_items_are_erased_past_one_page(store, monkeypatch):
    """Pages of 3 sessions and commits of 4 items: the erasure goes on past each."""
    from turnstore.ops import upkeep

    monkeypatch.setattr(upkeep, "ERASE_PAGE", 3)
    monkeypatch.setattr(upkeep, "ERASE_MEMORY_BATCH", 4)
    for n in range(10):
        await store.append_context(f"ada-{n:02d}", _said(f"note {n}"), "ada", kind="openai-agents")
    writes = tuple(_memory(("ada", "many"), f"k{n}", f"memo {n}", "ada") for n in range(12))
    await store.memory.run(MemoryCall(writes=writes))
    dry = await store.upkeep.erase_owner("ada", dry_run=True)
    assert (dry.tree_count, dry.memory_item_count) == (10, 12)
    report = await store.upkeep.erase_owner("ada")
    assert report.session_ids == [f"ada-{n:02d}" for n in range(10)]
    assert (report.tree_count, report.memory_item_count) == (10, 12)
    assert await _session_ids(store, "ada") == []
    assert await _remembered(store, "memo") == []
