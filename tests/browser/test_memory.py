"""The viewer's memory page and its memories among search hits, in a real headless Chromium."""

from __future__ import annotations

import json
from typing import Any

from turnstore import BlockingStore
from turnstore.records import SearchRequest
from turnstore.records.memory import MemoryCall, MemoryFindRequest, MemoryPut

from .conftest import DOCS_IMAGES, UPDATE_SCREENSHOTS, Browser
from .sessions import new_session

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def put(store: BlockingStore, namespace: tuple[str, ...], key: str, value: Any, owner: str) -> None:
    """One item searched by its words, with an hour to live for Alice's drafts."""
    ttl = 3_600_000 if key == "draft" else None
    write = MemoryPut(namespace, key, json.dumps(value), ttl, owner, text=True)
    store.memory.run(MemoryCall(writes=(write,)))


def seed(store: BlockingStore) -> None:
    """Alice's notes (one hostile), preferences and a draft; Bob's preferences; a session of
    Alice's that mentions the lighthouse too."""
    put(
        store,
        ("alice", "notes"),
        "keeper",
        {"text": "the lighthouse keeper retires in May"},
        "alice",
    )
    put(store, ("alice", "notes"), "boat", {"text": "prefers the morning boat"}, "alice")
    put(store, ("alice", "notes"), "hostile", {"text": HOSTILE, "tags": ["x"]}, "alice")
    put(store, ("alice", "prefs"), "draft", {"text": "half a plan"}, "alice")
    put(store, ("bob", "prefs"), "lang", {"text": "answers in French"}, "bob")
    new_session(store, "alice-chat", owner="alice", text="when does the lighthouse open?")
    # The server's store cannot index: the writer brings both indexes up to date, as its
    # background indexer would.
    found = store.memory.find(MemoryFindRequest("lighthouse")).hits
    assert [hit.key for hit in found] == ["keeper"]
    assert len(store.search(SearchRequest(query="lighthouse")).hits) == 1


def namespace_rows(browser: Browser, count: int) -> list[tuple[str, str]]:
    """The memory page's namespaces and item counts, once `count` rows show."""
    selector = browser.testid("memory-namespace-row")
    browser.wait(lambda _: len(browser.css(selector)) == count, message=f"{count} namespaces")
    return [
        (row["data"]["namespace"], row["text"].split("\t")[1]) for row in browser.snapshot(selector)
    ]


def test_the_memory_page_lists_namespaces_by_owner_and_shows_their_items(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """Namespaces with their counts, narrowed by owner; a namespace's items with their values
    as text (stored markup stays text), the time to live shown."""
    seed(blocking_store)
    server = serve()
    browser.open(f"{server.base}/")
    browser.one(browser.testid("nav-memory")).click()
    assert namespace_rows(browser, 3) == [
        ("alice.notes", "3"),
        ("alice.prefs", "1"),
        ("bob.prefs", "1"),
    ]
    browser.screenshot("memory-namespaces")
    browser.one(browser.testid("memory-owner")).send_keys("bob")
    assert namespace_rows(browser, 1) == [("bob.prefs", "1")]
    assert browser.driver.current_url.endswith("#/memory?owner=bob")

    browser.open(f"{server.base}/#/memory")
    namespace_rows(browser, 3)
    browser.one(browser.testid("memory-namespace-link")).click()
    items = browser.testid("memory-item")
    browser.wait(lambda _: len(browser.css(items)) == 3)
    shown = {item["data"]["key"]: item["text"] for item in browser.snapshot(items)}
    assert set(shown) == {"keeper", "boat", "hostile"}
    assert '"text": "the lighthouse keeper retires in May"' in shown["keeper"]
    assert "onerror" in shown["hostile"]
    assert browser.driver.execute_script("return window.__pwned === undefined")
    assert (
        browser.driver.execute_script(
            "return document.querySelectorAll('main img, main script').length"
        )
        == 0
    )
    assert "alice.notes" in browser.one(browser.testid("memory-namespace")).text
    if UPDATE_SCREENSHOTS and backend_name == "sqlite":
        browser.full_screenshot(DOCS_IMAGES / "viewer-memory.png", height=760)
    browser.screenshot("memory-items")

    browser.open(f"{server.base}/#/memory?ns=alice.prefs")
    browser.wait(lambda _: browser.css(browser.testid("memory-expires")))
    browser.one(browser.testid("memory-back")).click()
    namespace_rows(browser, 3)


def test_search_shows_memories_marked_above_what_was_said(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """A query's first page shows the matching memories, each badged as one, above the
    session hits; a memory hit opens its item on the memory page, picked out."""
    seed(blocking_store)
    server = serve()
    browser.open(f"{server.base}/#/?q=lighthouse")
    memory = browser.testid("memory-hit")
    browser.wait(lambda _: browser.css(memory) and browser.css(browser.testid("search-hit")))
    (hit,) = browser.snapshot(memory)
    assert (hit["data"]["namespace"], hit["data"]["key"]) == ("alice.notes", "keeper")
    assert hit["text"].startswith("memory")
    (said,) = browser.snapshot(browser.testid("search-hit"))
    assert said["data"]["sessionId"] == "alice-chat"
    marked = browser.snapshot(f"{memory} mark")
    assert [m["text"].lower() for m in marked] == ["lighthouse"]
    status = browser.one(browser.testid("search-status")).text
    assert status == "1 memory · 1 matching item"
    if UPDATE_SCREENSHOTS and backend_name == "sqlite":
        browser.full_screenshot(DOCS_IMAGES / "viewer-search-memory.png", height=420)
    browser.screenshot("search-memory")

    browser.one(browser.testid("memory-hit-link")).click()
    target = browser.wait(lambda _: browser.css(".memory-item.target"))
    assert target[0].get_attribute("data-key") == "keeper"

    # Only what was said matches: no memory shows, and the status says as much as before.
    browser.open(f"{server.base}/#/?q=open")
    browser.wait(lambda _: browser.css(browser.testid("search-hit")))
    assert browser.css(memory) == []
    assert browser.one(browser.testid("search-status")).text == "1 matching item"
