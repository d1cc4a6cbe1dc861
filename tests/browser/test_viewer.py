"""The web viewer in a real headless Chromium, against a real `turnstore serve` on each backend."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from turnstore import (
    BlockingStore,
    Checkpoint,
    GraphAppend,
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionContext,
    SessionNodeRecord,
)
from turnstore.cli.demo import run_demo

from .conftest import DOCS_IMAGES, UPDATE_SCREENSHOTS, Browser
from .pages import session_url, status_cells, wait_rows
from .sessions import new_session, whole_turn

WRITER = Path(__file__).with_name("_live_writer.py")
PWNED = "return [window.__pwned === undefined, document.title]"


# --- the catalog ---------------------------------------------------------------------------


def test_catalog_lists_newest_first_searches_filters_and_pages(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """Sessions appear newest update first; prefix and owner narrow; scrolling loads page two."""
    for index in range(55):
        owner = "bob" if index % 5 == 0 else "alice"
        new_session(blocking_store, f"alpha-{index:03}", owner=owner, text=f"question {index}")
    for index in range(3):
        new_session(blocking_store, f"beta-{index}", owner="carol", text="beta question")
    time.sleep(1.1)  # the catalog orders by update time, in seconds
    touched = blocking_store.load("alpha-007")
    assert touched is not None
    touched.sequence += 1
    blocking_store.save(touched)
    server = serve()
    expected = [s.session_id for s in blocking_store.list_sessions_page(_page(60)).sessions]

    browser.open(f"{server.base}/")
    first = wait_rows(browser, 50)
    assert first[0] == "alpha-007", "the session updated last is listed first"
    assert first == expected[:50], "the catalog shows the store's newest-first order"
    assert browser.one(browser.testid("load-more")).is_displayed()
    browser.screenshot("catalog")

    # Scrolling the sentinel into view loads the next page by cursor.
    browser.driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert wait_rows(browser, 58) == expected
    assert not browser.one(browser.testid("load-more")).is_displayed()

    browser.one(browser.testid("search-prefix")).send_keys("beta-")
    assert sorted(wait_rows(browser, 3)) == ["beta-0", "beta-1", "beta-2"]
    assert "#/?prefix=beta-" in browser.driver.current_url

    browser.one(browser.testid("search-prefix")).clear()
    browser.one(browser.testid("search-prefix")).send_keys("alpha-0")
    wait_rows(browser, 50)
    owner = browser.one(browser.testid("filter-owner"))
    owner.send_keys("bob")
    bobs = wait_rows(browser, 11)
    assert bobs == [sid for sid in expected if sid.startswith("alpha-0") and int(sid[-3:]) % 5 == 0]
    assert {cell.text for cell in browser.css(".cell-owner")} == {"bob"}

    # A link opens the session page.
    browser.css(browser.testid("session-link"))[0].click()
    header = browser.one(browser.testid("session-id"))
    assert header.text == bobs[0]


def _page(limit: int) -> Any:
    from turnstore import SessionPageRequest

    return SessionPageRequest(limit=limit)


# --- a session -----------------------------------------------------------------------------


MORE_SESSIONS = [
    (
        "support-4821",
        "grace",
        "Why was my March invoice charged twice?",
        "The second charge is a pending authorisation; it drops off in 3 days.",
    ),
    (
        "research-paper-17",
        "ada",
        "Summarise the attached paper on retrieval-augmented agents.",
        "It compares four retrieval strategies; hybrid search wins on recall.",
    ),
    (
        "ops-incident-0412",
        "linus",
        "Which deploy raised the p99 latency on the checkout service?",
        "Deploy 2f9c1 added a synchronous call to the pricing API.",
    ),
]


def runtime_session(store: BlockingStore, session_id: str) -> None:
    """A runtime-face session: two graph nodes on the active path and one queued batch."""
    rt = store.runtime(session_id)
    user = SessionNodeRecord(
        node_id="n-user",
        payload={"role": "user", "parts": [{"kind": "text", "content": "Summarise the report"}]},
    )
    reply = SessionNodeRecord(
        node_id="n-reply",
        parent_node_id="n-user",
        payload={"role": "assistant", "parts": [{"kind": "text", "content": "Here is the gist."}]},
    )
    rt.commit_runtime_state(
        RuntimeCommit(
            session_id=session_id,
            graph=GraphAppend(nodes=[user, reply], leaf_node_id="n-reply"),
            checkpoint=HydratedSessionCheckpoint(tool_state={"cwd": "/work"}),
        )
    )
    rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[{"text": "and the appendix?"}]))


def test_session_shows_summary_transcript_timeline_executions_graph_and_queue(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """The demo session's stats, transcript, turns with steps and tools, and a runtime graph."""
    for session_id, owner, question, answer in MORE_SESSIONS:
        checkpoint = new_session(blocking_store, session_id, owner=owner, text=question)
        whole_turn(blocking_store, checkpoint, "turn-1", question, answer)
    run_demo(blocking_store)
    runtime_session(blocking_store, "runtime-1")
    server = serve()
    summary = blocking_store.session_summary("demo-session")
    assert summary is not None

    browser.open(f"{server.base}/")
    wait_rows(browser, 6)
    assert set(status_cells(browser).values()) == {"completed", "none"}
    if UPDATE_SCREENSHOTS and backend_name == "sqlite":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        browser.full_screenshot(DOCS_IMAGES / "viewer-catalog.png", height=540)

    browser.open(session_url(server.base, "demo-session"))
    stats = browser.one(browser.testid("session-stats"))
    assert browser.one(browser.testid("stat-runs")).text.startswith("2")
    assert f"{summary.execution_stats.usage.total_tokens:,}" in stats.text
    turns = browser.wait(
        lambda _: (
            len(browser.css(browser.testid("timeline-turn"))) == 2
            and browser.css(browser.testid("timeline-turn"))
        )
    )
    # Newest turn first, each completed, with its model steps and the tool call.
    assert [t.get_attribute("data-turn-id") for t in turns] == ["turn-2", "turn-1"]
    assert {t.get_attribute("data-status") for t in turns} == {"completed"}
    first_turn = turns[1]
    steps = first_turn.find_elements("css selector", browser.testid("timeline-step"))
    assert len(steps) == 2
    assert "first delta" in steps[0].text
    assert "412 in" in steps[0].text
    tool = first_turn.find_elements("css selector", browser.testid("timeline-tool"))
    assert len(tool) == 1
    assert "get_forecast" in tool[0].text
    assert tool[0].get_attribute("data-state") == "ok"
    assert tool[0].find_element("css selector", browser.testid("tool-duration")).text.endswith("ms")
    items = browser.wait(lambda _: browser.css(browser.testid("conversation-message")))
    assert any("Do I need an umbrella?" in item.text for item in items)
    assert any("bring an umbrella" in item.text for item in items)
    assert len(browser.css(browser.testid("execution"))) == 2
    forks = browser.wait(
        lambda _: (
            len(browser.css(browser.testid("fork-link"))) == 2
            and browser.css(browser.testid("fork-link"))
        )
    )
    assert [link.text for link in forks] == ["demo-session", "demo-fork"]
    assert "current" in forks[0].get_attribute("class")
    browser.one(browser.testid("graph-empty"))
    browser.one(browser.testid("live-indicator") + "[data-state='on']")
    browser.screenshot("session")
    if UPDATE_SCREENSHOTS and backend_name == "sqlite":
        browser.full_screenshot(DOCS_IMAGES / "viewer-session.png", height=1500)

    browser.open(session_url(server.base, "runtime-1"))
    nodes = browser.wait(
        lambda _: (
            len(browser.css(browser.testid("graph-node"))) == 2
            and browser.css(browser.testid("graph-node"))
        )
    )
    assert "Summarise the report" in nodes[0].text
    assert "Here is the gist." in nodes[1].text
    assert "and the appendix?" in browser.one(browser.testid("queue-batch")).text


# --- live updates --------------------------------------------------------------------------


def test_a_turn_saved_by_another_process_appears_without_reload(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str
) -> None:
    """A separate writer process saves a turn while the page is open; the page shows it live."""
    checkpoint = new_session(blocking_store, "live-1", text="first question")
    whole_turn(blocking_store, checkpoint, "turn-1", "first question", "first answer")
    server = serve()
    browser.open(session_url(server.base, "live-1"))
    browser.one(browser.testid("live-indicator") + "[data-state='on']")
    browser.wait(lambda _: len(browser.css(browser.testid("timeline-turn"))) == 1)
    browser.driver.execute_script("window.__samePage = true")

    answer = "The live answer streamed in while you were watching it arrive"
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), store_url, "live-1", "turn-live", "live question", answer],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "started"
        turn = browser.testid("timeline-turn") + "[data-turn-id='turn-live']"
        running = browser.wait(lambda _: browser.snapshot(turn), message="no live turn")
        assert running[0]["data"]["status"] == "running"
        # Reasoning and the answer stream into parts of their own, never one run of text.
        parts = turn + " " + browser.testid("streamed-phase")
        both = ["reasoning", "final_answer"]
        streamed = browser.wait(
            lambda _: (
                [p["data"]["phase"] for p in browser.snapshot(parts)] == both
                and browser.snapshot(parts)
            ),
            message="no separate reasoning and answer parts while streaming",
        )
        assert streamed[0]["text"].endswith("Thinking about the question.")
        assert "Thinking" not in streamed[1]["text"]
        assert streamed[1]["text"].split("\n")[-1].startswith("The live answer")
        done = browser.wait(
            lambda _: browser.snapshot(turn + "[data-status='completed']"),
            timeout=15,
            message="the live turn did not complete",
        )
        assert answer in done[0]["text"]
        assert writer.wait(timeout=20) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait()
        if writer.stdout is not None:
            writer.stdout.close()
    # After the turn completes the summary, conversation and executions refresh too.
    items = browser.testid("conversation-message")
    browser.wait(lambda _: any(answer in i["text"] for i in browser.snapshot(items)))
    browser.wait(lambda _: browser.snapshot(browser.testid("stat-runs"))[0]["text"].startswith("2"))
    browser.wait(lambda _: len(browser.css(browser.testid("execution"))) == 2)
    assert browser.driver.execute_script("return window.__samePage") is True, "no reload"
    assert len(browser.css(browser.testid("timeline-turn"))) == 2
    browser.screenshot("live")


# --- forks ---------------------------------------------------------------------------------


def test_fork_tree_links_between_sessions(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """A fork made with `fork` is marked in the catalog and linked both ways in its tree."""
    parent = new_session(blocking_store, "root-session", text="plan a trip")
    whole_turn(blocking_store, parent, "turn-1", "plan a trip", "Lisbon it is")
    fork_at = parent.sequence
    whole_turn(blocking_store, parent, "turn-2", "and the hotel?", "Try Alfama")
    child = Checkpoint(
        session_id="child/session?#1",
        session_context=SessionContext(owner_id="alice"),
        first_user_message="plan a trip",
    )
    blocking_store.fork("root-session", fork_at, child)
    grandchild = Checkpoint(
        session_id="grandchild", session_context=SessionContext(owner_id="alice")
    )
    blocking_store.fork("child/session?#1", 0, grandchild)
    server = serve()

    browser.open(f"{server.base}/")
    wait_rows(browser, 3)
    marker = next(
        row
        for row in browser.css(browser.testid("session-row"))
        if row.get_attribute("data-session-id") == "child/session?#1"
    ).find_element("css selector", browser.testid("forked-from"))
    assert "fork of root-session" in marker.text

    browser.open(session_url(server.base, "grandchild"))
    links = browser.wait(
        lambda _: (
            len(browser.css(browser.testid("fork-link"))) == 3
            and browser.css(browser.testid("fork-link"))
        )
    )
    assert [link.text for link in links] == ["root-session", "child/session?#1", "grandchild"]
    assert [("current" in link.get_attribute("class")) for link in links] == [False, False, True]
    # Nested: the grandchild's item sits inside its parent's.
    assert browser.css(".fork-tree li li li [data-testid='fork-link']")[0].text == "grandchild"
    links[1].click()
    browser.wait(lambda _: browser.one(browser.testid("session-id")).text == "child/session?#1")
    assert browser.one(browser.testid("parent-link")).text == "root-session"
    current = browser.testid("fork-link") + ".current"
    browser.wait(
        lambda _: [link["text"] for link in browser.snapshot(current)] == [child.session_id]
    )
    browser.one(browser.testid("parent-link")).click()
    browser.wait(lambda _: browser.one(browser.testid("session-id")).text == "root-session")
    browser.wait(lambda _: len(browser.css(browser.testid("timeline-turn"))) == 2)


# --- hostile content -------------------------------------------------------------------------

SCRIPT = "<script>window.__pwned=1;document.title='pwned'</script>"
IMG = "<img src=x onerror=\"window.__pwned=1;document.title='pwned'\">"
SVG = '"><svg onload="window.__pwned=1">'
ATTR = "' autofocus onfocus='window.__pwned=1' x='"
EVIL_ID = "evil\x01\x1b[31m\u202e/<b>?#%" + SVG
BIG = 50_000_000


def test_hostile_content_is_shown_as_text_and_runs_nothing(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """Markup, attribute injections, control characters and a 50 MB value stay inert text."""
    checkpoint = Checkpoint(
        session_id=EVIL_ID,
        session_context=SessionContext(owner_id=SCRIPT, workspace_label=ATTR, origin_label=IMG),
        first_user_message=IMG,
    )
    checkpoint.sequence = 1
    items = [
        {"type": "message", "role": "user", "content": SCRIPT},
        {"type": "message", "role": SVG, "content": [{"type": "output_text", "text": IMG}]},
        {ATTR: SVG, "<b>bold</b>": [SCRIPT, {"href": "javascript:window.__pwned=1"}]},
        {"type": "message", "role": "user", "content": "A" * BIG},
    ]
    blocking_store.save(checkpoint, items)
    whole_turn(
        blocking_store,
        checkpoint,
        "turn-" + SCRIPT,
        SVG,
        IMG,
        tool_output=ATTR + SCRIPT,
        tool_success=False,
    )
    server = serve()

    browser.open(f"{server.base}/")
    row = browser.one(browser.testid("session-row"))
    assert SCRIPT in row.text
    assert IMG in row.text
    link = row.find_element("css selector", browser.testid("session-link"))
    # Controls show as escapes, so the id cannot hide or reorder what follows it.
    assert link.text == "evil\\x01\\x1B[31m\\u202E/<b>?#%" + SVG
    assert browser.driver.execute_script(PWNED) == [True, "Sessions · turnstore"]
    link.click()

    header = browser.one(browser.testid("session-id"))
    assert header.text == link_text_of(EVIL_ID)
    assert browser.driver.current_url.endswith("#/s/" + quote(EVIL_ID, safe="-_.!~*'()"))
    items_shown = browser.wait(
        lambda _: (
            len(browser.css(browser.testid("conversation-message"))) >= 6
            and browser.css(browser.testid("conversation-message"))
        )
    )
    # Long values are folded: open each fold to read it whole.
    for fold in browser.css(browser.testid("message-fold") + " > summary"):
        fold.click()
    browser.wait(lambda _: any("more characters" in item.text for item in items_shown))
    texts = [item.text for item in items_shown]
    assert any(SCRIPT in text for text in texts)
    assert any(IMG in text for text in texts)
    assert any(SVG in text for text in texts)
    # The 50 MB value is cut before it reaches the DOM.
    big = [text for text in texts if "more characters" in text]
    assert big
    assert f"({BIG - 20_000:,} more characters)" in big[0]
    assert max(len(text) for text in texts) < 30_000
    turn = browser.one(browser.testid("timeline-turn"))
    assert SCRIPT in turn.find_element("css selector", browser.testid("turn-id")).text
    tool = turn.find_element("css selector", browser.testid("timeline-tool"))
    assert tool.get_attribute("data-state") == "failed"
    assert ATTR + SCRIPT in tool.text
    assert SCRIPT in browser.one(browser.testid("session-header")).text
    # No element came from stored markup, and the page still answers at once.
    injected = (
        "return document.querySelectorAll("
        "'main script, main img, main svg, [onerror], [onload], [onfocus]').length"
    )
    assert browser.driver.execute_script(injected) == 0
    started = time.monotonic()
    assert browser.driver.execute_script(PWNED)[0] is True
    assert time.monotonic() - started < 2
    assert browser.driver.title != "pwned"
    assert browser.driver.title.endswith(" · turnstore")
    browser.screenshot("hostile")


def link_text_of(session_id: str) -> str:
    """An id as the viewer shows it: control and bidi characters as \\xNN and \\uNNNN escapes."""
    shown = []
    for ch in session_id:
        if ord(ch) < 0x20:
            shown.append(f"\\x{ord(ch):02X}")
        elif ch == "\u202e":
            shown.append("\\u202E")
        else:
            shown.append(ch)
    return "".join(shown)


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Any:
    started = time.monotonic()
    yield
    print(f"{request.node.name}: {time.monotonic() - started:.1f}s")
