"""Sessions of every kind read as conversations, and the search box, in a real Chromium.

The default suite writes each framework's stored shapes through the public API; the `peers`
tests (`./dev test-peers`) have LangGraph, the OpenAI Agents SDK and ADK write them.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from turnstore import BlockingStore, Checkpoint, SessionContext
from turnstore.records import SearchRequest

from .conftest import DOCS_IMAGES, UPDATE_SCREENSHOTS, Browser, Server
from .pages import session_url, wait_rows

MESSAGE = "[data-testid='conversation-message']"
PWNED = "return window.__pwned === undefined"
IN_VIEW = (
    "const box = arguments[0].getBoundingClientRect();"
    " return box.top >= 0 && box.bottom <= window.innerHeight"
)
IMG = '<img src=x onerror="window.__pwned=1">'


def messages(browser: Browser, count: int | None = None) -> list[dict[str, Any]]:
    """The conversation's messages (text, role, index), once there are `count` (or any)."""
    return list(
        browser.wait(
            lambda _: (
                (found := browser.snapshot(MESSAGE))
                and (count is None or len(found) == count)
                and found
            ),
            message=f"expected {count or 'some'} conversation messages",
        )
    )


def roles(shown: Any) -> str:
    """The roles of messages (a list, or a dict by index) in order, separated by spaces."""
    listed = [shown[i] for i in sorted(shown)] if isinstance(shown, dict) else shown
    return " ".join(message["data"]["role"] for message in listed)


def by_index(shown: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Messages by their item index."""
    return {int(message["data"]["index"]): message for message in shown}


def state_deltas(browser: Browser) -> list[Any]:
    """The state deltas shown with the messages, read back as JSON."""
    shown = browser.snapshot(browser.testid("state-delta") + " .json-inline")
    return [json.loads(delta["text"]) for delta in shown]


def hit_link(browser: Browser, session_id: str) -> Any:
    """The link of the search hit in `session_id`."""
    hit = f"{browser.testid('search-hit')}[data-session-id='{session_id}']"
    return browser.one(f"{hit} {browser.testid('search-hit-link')}")


def docs_screenshot(browser: Browser, backend_name: str, name: str, height: int) -> None:
    """Refresh a documentation image (TURNSTORE_UPDATE_SCREENSHOTS=1, SQLite run only)."""
    if UPDATE_SCREENSHOTS and backend_name == "sqlite":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        browser.full_screenshot(DOCS_IMAGES / name, height=height)


# --- the shapes the integrations store -------------------------------------------------------

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
PACKING = "\n".join(f"{DAYS[i % 7]}, item {i + 1}: jersey, bib shorts, socks" for i in range(40))
AGENT_ITEMS: list[Any] = [
    {"role": "user", "content": "What's the weather in Paris, and should I cycle to work?"},
    {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Ask the weather tool before answering."}],
    },
    {
        "type": "function_call",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "call_id": "call_1",
    },
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": '{"temp_c": 18, "sky": "cloudy", "wind_kmh": 12}',
    },
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "18 °C, cloudy, light wind: cycle."}],
    },
    {"role": "user", "content": "Write me a packing list for a week of cycling."},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": PACKING}],
    },
]

ADK_EVENTS: list[Any] = [
    {
        "author": "user",
        "invocation_id": "inv-1",
        "content": {"role": "user", "parts": [{"text": "Book a table for two tonight."}]},
        "actions": {"state_delta": {"party_size": 2}},
    },
    {
        "author": "concierge",
        "invocation_id": "inv-1",
        "content": {
            "role": "model",
            "parts": [
                {
                    "function_call": {
                        "id": "fc-1",
                        "name": "find_table",
                        "args": {"party": 2, "time": "20:00"},
                    }
                }
            ],
        },
    },
    {
        "author": "concierge",
        "invocation_id": "inv-1",
        "content": {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "fc-1",
                        "name": "find_table",
                        "response": {"restaurant": "Chez Nous", "time": "20:00"},
                    }
                }
            ],
        },
        "actions": {"state_delta": {"booking": "Chez Nous, 20:00"}},
    },
    {
        "author": "concierge",
        "invocation_id": "inv-1",
        "content": {
            "role": "model",
            "parts": [{"text": "Booked: Chez Nous at 20:00 for two."}],
        },
    },
]

NATIVE_ITEMS: list[Any] = [
    {"role": "user", "content": "How do I branch a session?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "t-1",
                "type": "function",
                "function": {"name": "search_docs", "arguments": '{"query": "fork"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "t-1", "content": "store.fork(parent, sequence, child)"},
    {"role": "assistant", "content": "Call store.fork with the parent's sequence."},
]


def native_session(store: BlockingStore, session_id: str, batches: list[list[Any]]) -> None:
    """A checkpoint session whose saves hold `batches` as transcript deltas, one per save."""
    checkpoint = Checkpoint(
        session_id=session_id,
        session_context=SessionContext(owner_id="grace"),
        first_user_message=batches[0][0]["content"],
    )
    for batch in batches:
        checkpoint.context.extend(batch)
        checkpoint.sequence += 1
        store.save(checkpoint, batch)


def test_sessions_of_every_kind_read_as_conversations(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """SDK items, ADK events and a transcript: roles, texts, tool calls, results, state."""
    blocking_store.append_context("agents-weather", AGENT_ITEMS, "ada", kind="openai-agents")
    blocking_store.append_context("adk-dinner", ADK_EVENTS, "ada", kind="adk")
    native_session(blocking_store, "native-docs", [NATIVE_ITEMS[:1], NATIVE_ITEMS[1:]])
    server = serve()

    browser.open(f"{server.base}/")
    wait_rows(browser, 3)
    kinds = {
        row["data"]["sessionId"]: row["text"].split("\t")[2]
        for row in browser.snapshot(browser.testid("session-row"))
    }
    assert kinds == {
        "agents-weather": "openai-agents",
        "adk-dinner": "adk",
        "native-docs": "turnstore",
    }

    browser.open(session_url(server.base, "agents-weather"))
    shown = by_index(messages(browser, 7))
    assert roles(shown) == "user reasoning assistant tool assistant user assistant"
    assert "should I cycle to work?" in shown[0]["text"]
    assert "Ask the weather tool" in shown[1]["text"]
    assert 'get_weather({"city": "Paris"})' in shown[2]["text"]
    assert "result of get_weather call_1" in shown[3]["text"]
    assert '"temp_c": 18' in shown[3]["text"]
    assert "cycle." in shown[4]["text"]
    docs_screenshot(browser, backend_name, "viewer-openai-agents.png", 1000)
    # Forty lines are folded: their start shows, the rest once opened.
    packing = browser.css(MESSAGE)[6]
    fold = packing.find_element("css selector", browser.testid("message-fold"))
    assert fold.get_attribute("open") is None
    assert f"show all · {len(PACKING):,} characters, 40 lines" in packing.text
    assert len(packing.text.splitlines()) < 8
    fold.find_element("css selector", "summary").click()
    browser.wait(lambda _: len(packing.text.splitlines()) > 40)
    # The stored item is behind a toggle, built when opened.
    raw = browser.css(MESSAGE)[2].find_element("css selector", browser.testid("raw-toggle"))
    assert not raw.find_elements("css selector", browser.testid("item-json"))
    raw.find_element("css selector", "summary").click()
    pre = browser.wait(lambda _: raw.find_elements("css selector", browser.testid("item-json")))
    assert '"call_id": "call_1"' in pre[0].text
    # The result's link shows its call.
    browser.css(browser.testid("tool-result-of"))[0].click()
    browser.wait(lambda _: "flash" in browser.css(MESSAGE)[2].get_attribute("class"))
    assert browser.one(browser.testid("conversation-kind")).text == "openai-agents"
    browser.screenshot("openai-agents")

    browser.open(session_url(server.base, "adk-dinner"))
    shown = by_index(messages(browser, 4))
    assert roles(shown) == "user assistant tool assistant"
    names = [n.text for n in browser.css(f"{MESSAGE} {browser.testid('message-name')}")]
    assert names == ["concierge", "find_table", "concierge"], "the author; a result, its tool"
    assert state_deltas(browser) == [{"party_size": 2}, {"booking": "Chez Nous, 20:00"}]
    assert 'find_table({"party": 2, "time": "20:00"})' in shown[1]["text"]
    assert "result of find_table fc-1" in shown[2]["text"]
    assert "Chez Nous at 20:00" in shown[3]["text"]
    docs_screenshot(browser, backend_name, "viewer-adk.png", 900)
    browser.screenshot("adk")

    browser.open(session_url(server.base, "native-docs"))
    shown = messages(browser, 4)
    assert [(m["data"]["sequence"], m["data"]["index"]) for m in shown] == [
        ("1", "0"), ("2", "0"), ("2", "1"), ("2", "2"),
    ]  # fmt: skip
    assert 'search_docs({"query": "fork"})' in shown[1]["text"]
    assert "result of search_docs t-1" in shown[2]["text"]
    # A transcript message says when its batch was saved.
    saved = browser.css(f"{MESSAGE} .msg-pos time")
    assert len(saved) == 4
    assert all(time.get_attribute("datetime") for time in saved)
    assert browser.driver.execute_script(PWNED) is True


def test_each_session_shows_the_figures_its_framework_records_and_no_other(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """ADK events carry tokens and times, SDK items only runs and tool calls, plain items
    nothing: the catalog and the session page show what is recorded, a dash or a note for
    the rest, never a zero that reads as a measurement."""
    usage = {"prompt_token_count": 1200, "candidates_token_count": 80, "total_token_count": 1280}
    timed = [
        {**event, "timestamp": 1_700_000_000.0 + 0.75 * at} for at, event in enumerate(ADK_EVENTS)
    ]
    for event in (timed[1], timed[3]):
        event["usage_metadata"] = usage
    blocking_store.append_context("adk-dinner", timed, "ada", kind="adk")
    blocking_store.append_context("agents-weather", AGENT_ITEMS, "ada", kind="openai-agents")
    blocking_store.append_context("notes", [{"role": "user", "content": "a note"}], "ada")
    blocking_store.search(SearchRequest(query="table"))  # a writer derives the figures
    server = serve()

    browser.open(f"{server.base}/")
    wait_rows(browser, 3)
    cells = {
        row["data"]["sessionId"]: row["text"].split("\t")
        for row in browser.snapshot(browser.testid("session-row"))
    }
    turns = {
        key: browser.one(
            f"{browser.testid('session-row')}[data-session-id='{key}']"
            f" {browser.testid('session-turns')}"
        ).text
        for key in cells
    }
    tokens = {
        key: browser.one(
            f"{browser.testid('session-row')}[data-session-id='{key}']"
            f" {browser.testid('session-tokens')}"
        ).text
        for key in cells
    }
    assert turns == {"adk-dinner": "1", "agents-weather": "2", "notes": "—"}
    assert tokens == {"adk-dinner": "2,560", "agents-weather": "—", "notes": "—"}
    browser.screenshot("figures-catalog")

    browser.open(session_url(server.base, "adk-dinner"))
    browser.wait(lambda _: browser.css(browser.testid("session-stats")))
    stat = lambda name: browser.one(browser.testid(f"stat-{name}")).text.split("\n")[0]  # noqa: E731
    assert [stat(name) for name in ("runs", "model-calls", "tool-calls", "elapsed")] == [
        "1", "2", "1", "2.25 s",
    ]  # fmt: skip
    assert (stat("input-tokens"), stat("output-tokens")) == ("2,400", "160")
    assert not browser.css(browser.testid("stats-unrecorded"))
    browser.screenshot("figures-adk")

    browser.open(session_url(server.base, "agents-weather"))
    browser.wait(lambda _: browser.css(browser.testid("stats-unrecorded")))
    assert (stat("runs"), stat("tool-calls")) == ("2", "1")
    for unrecorded in ("model-calls", "elapsed", "input-tokens", "failed"):
        assert not browser.css(browser.testid(f"stat-{unrecorded}"))
    assert browser.one(browser.testid("stats-unrecorded")).text == (
        "Not recorded for openai-agents sessions: failed turns, model calls, time, tokens."
    )
    browser.screenshot("figures-openai-agents")

    browser.open(session_url(server.base, "notes"))
    browser.wait(lambda _: browser.css(browser.testid("stats-unrecorded")))
    assert not browser.css(browser.testid("session-stats"))


def search_sessions(store: BlockingStore) -> None:
    """Sessions of three kinds saying "lighthouse", one in item 12 of 80, one in batch 4 of
    30; "harbour" in 25 items; then a writer's search, which brings the index up to date
    (the server's store cannot index)."""
    long_items = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: small talk"}
        for i in range(80)
    ]
    for i in range(50, 75):
        long_items[i]["content"] = f"Turn {i}: the harbour is busy today"
    long_items[12]["content"] = f"Turn 12: the lighthouse keeper sleeps at noon {IMG}"
    store.append_context("agents-long", long_items, "ada", kind="openai-agents")
    store.append_context("adk-dinner", ADK_EVENTS, "ada", kind="adk")
    coast = {"author": "user", "content": {"parts": [{"text": "Is the lighthouse open?"}]}}
    store.append_context("adk-coast", [coast], "ada", kind="adk")
    batches = [[{"role": "user", "content": f"Batch {s}"}, "noted"] for s in range(1, 31)]
    batches[3][1] = "The lighthouse at batch four"
    native_session(store, "native-long", batches)
    assert len(store.search(SearchRequest(query="lighthouse")).hits) == 3


def test_the_search_box_lists_marked_hits_pages_them_and_says_refusals(
    blocking_store: BlockingStore, serve: Any, browser: Browser, backend_name: str
) -> None:
    """Hits of every kind with their words marked, 20 a page; a refused query said as text."""
    search_sessions(blocking_store)
    server = serve()

    browser.open(f"{server.base}/")
    wait_rows(browser, 4)
    browser.one(browser.testid("search-text")).send_keys("lighthouse")
    hits = browser.wait(
        lambda _: len(found := browser.snapshot(browser.testid("search-hit"))) == 3 and found
    )
    found = {h["data"]["sessionId"]: (h["data"].get("sequence"), h["data"]["item"]) for h in hits}
    assert found == {
        "native-long": ("4", "1"), "adk-coast": (None, "0"), "agents-long": (None, "12"),
    }  # fmt: skip
    marks = browser.css(browser.testid("search-snippet") + " mark")
    assert [mark.text.lower() for mark in marks] == ["lighthouse"] * 3
    # SQLite's snippet keeps the markup as text; PostgreSQL's headline leaves tags out.
    snippet = next(hit["text"] for hit in hits if hit["data"]["sessionId"] == "agents-long")
    assert snippet.endswith(IMG)  # shown as text, on both backends alike
    assert browser.driver.execute_script("return document.querySelectorAll('main img').length") == 0
    assert browser.driver.execute_script(PWNED) is True
    assert browser.driver.current_url.endswith("#/?q=lighthouse")
    docs_screenshot(browser, backend_name, "viewer-search.png", 620)
    browser.screenshot("search")

    # 25 hits: twenty, then the rest by cursor.
    browser.open(f"{server.base}/#/?q=harbour&order=best")
    browser.wait(lambda _: len(browser.css(browser.testid("search-hit"))) == 20)
    assert browser.one(browser.testid("search-order")).get_attribute("value") == "best"
    browser.one(browser.testid("search-more")).click()
    browser.wait(lambda _: len(browser.css(browser.testid("search-hit"))) == 25)
    assert not browser.one(browser.testid("search-more")).is_displayed()

    # A query the server refuses is said, as text.
    browser.allow_console("status of 400")
    box = browser.one(browser.testid("search-text"))
    box.clear()
    box.send_keys('"unclosed <b>')
    error = browser.wait(
        lambda _: browser.snapshot(f"{browser.testid('search-error')}:not([hidden])")
    )
    assert error[0]["text"].startswith("The query was refused: ")
    assert not browser.css(browser.testid("search-hit"))
    assert browser.driver.execute_script(PWNED) is True


def test_a_search_hit_opens_its_message_highlighted_in_view(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """A hit's link opens the page holding its message, highlighted in view; pages follow."""
    search_sessions(blocking_store)
    server = serve()

    # The SDK session's hit: item 12 of 80, not on the newest page.
    browser.open(f"{server.base}/#/?q=lighthouse")
    hit_link(browser, "agents-long").click()
    target = browser.one(f"{MESSAGE}.highlight")
    assert target.get_attribute("data-index") == "12"
    assert browser.driver.current_url.endswith("#/s/agents-long?item=12")
    assert browser.driver.execute_script(IN_VIEW, target)
    browser.screenshot("hit")
    assert [int(m["data"]["index"]) for m in messages(browser, 33)] == list(range(33))
    assert not browser.one(browser.testid("older-messages")).is_displayed()
    browser.one(browser.testid("newer-messages")).click()
    assert [int(m["data"]["index"]) for m in messages(browser, 80)] == list(range(80))
    assert not browser.one(browser.testid("newer-messages")).is_displayed()

    # The transcript's hit: batch 4 of 30 ends the page; later batches load on demand.
    browser.open(f"{server.base}/#/?q=lighthouse")
    hit_link(browser, "native-long").click()
    target = browser.one(f"{MESSAGE}.highlight")
    assert (target.get_attribute("data-sequence"), target.get_attribute("data-index")) == ("4", "1")
    assert "The lighthouse at batch four" in target.text
    assert browser.driver.execute_script(IN_VIEW, target)
    messages(browser, 8)
    browser.one(browser.testid("newer-messages")).click()
    messages(browser, 48)

    # The long form of the route, as a link from elsewhere may spell it.
    browser.open(f"{server.base}/#/session/agents-long?item=40")
    assert browser.one(f"{MESSAGE}.highlight").get_attribute("data-index") == "40"
    assert [int(m["data"]["index"]) for m in messages(browser, 50)] == list(range(11, 61))

    # Opened without a target: the newest page, then the earlier one.
    browser.open(session_url(server.base, "agents-long"))
    assert [int(m["data"]["index"]) for m in messages(browser, 50)] == list(range(30, 80))
    assert not browser.css(f"{MESSAGE}.highlight")
    browser.one(browser.testid("older-messages")).click()
    messages(browser, 80)
    assert not browser.one(browser.testid("older-messages")).is_displayed()


def test_a_store_whose_index_is_not_built_says_how_to_build_it(
    backend_name: str,
    database: Any,
    pg_schema: str,
    store_url: str,
    tmp_path: Path,
    browser: Browser,
) -> None:
    """A store migrated from before search answers 409; the page names `turnstore reindex`."""
    import turnstore
    from conftest import restore_fixture

    restore_fixture(backend_name, database, pg_schema, 6)
    with turnstore.open_blocking(store_url, index_in_background=False):
        pass  # migrated, its index not built
    server = Server(store_url, tmp_path / "serve.log")
    try:
        browser.allow_console("status of 409")
        browser.open(f"{server.base}/#/?q=answer")
        error = browser.wait(
            lambda _: browser.snapshot(browser.testid("search-error") + ":not([hidden])")
        )
        assert error[0]["text"].startswith("Search is not available on this store yet: ")
        assert "turnstore reindex" in error[0]["text"]
    finally:
        browser.driver.get("about:blank")
        server.stop()


# --- written by the frameworks themselves ----------------------------------------------------


@pytest.mark.peers
def test_a_langgraph_thread_reads_as_its_messages(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str, backend_name: str
) -> None:
    """A ReAct graph's thread: human, AI with a tool call, tool, AI; the checkpoint header."""
    pytest.importorskip("langgraph")
    from frameworks._langgraph_graph import build, config, user
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver(store_url) as saver:
        graph = build(saver)
        graph.invoke(user("trip", 1, "Which train goes to Lyon?"), config("trip"))
        # The next turn stops before its tool runs: the thread waits on `tools`.
        graph.invoke(user("trip", 2, "And back?"), config("trip"), interrupt_before=["tools"])
        step = saver.get_tuple(config("trip")).metadata["step"]
    server = serve()

    browser.open(session_url(server.base, "langgraph/trip"))
    shown = messages(browser, 6)
    assert roles(shown) == "user assistant tool assistant user assistant"
    assert "Which train goes to Lyon?" in shown[0]["text"]
    assert 'lookup({"q": "Which train goes to Lyon?"})' in shown[1]["text"]
    assert "result of lookup call-user-trip-1" in shown[2]["text"]
    assert "answer to found Which train goes to Lyon?" in shown[3]["text"]
    header = browser.one(browser.testid("langgraph-point"))
    assert browser.one(browser.testid("langgraph-next")).text == "tools"
    assert browser.one(browser.testid("langgraph-step")).text == str(step)
    assert browser.one(browser.testid("langgraph-source")).text == "loop"
    assert len(browser.one(browser.testid("langgraph-checkpoint")).text) > 10
    assert "LangGraph thread" in header.text
    docs_screenshot(browser, backend_name, "viewer-langgraph.png", 1000)
    browser.screenshot("langgraph")
    # The catalog says the thread waits, and where, once a writer's indexer has read it.
    blocking_store.search(SearchRequest(query="Lyon"))
    browser.open(f"{server.base}/")
    wait_rows(browser, 1)
    assert browser.one(browser.testid("session-waiting")).text == "waiting: tools"
    browser.screenshot("langgraph-waiting")


@pytest.mark.peers
def test_an_agents_sdk_session_reads_as_its_items(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str
) -> None:
    """The SDK's runner with a tool: user, function call, its output, the answer."""
    pytest.importorskip("agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from turnstore.integrations.openai_agents import TurnstoreSession

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"18 °C and cloudy in {city}"

    async def run() -> None:
        set_tracing_disabled(True)
        model = ScriptedModel(
            steps=[
                [function_call("get_weather", {"city": "Paris"}, call_id="call_w")],
                [assistant_message("Take a light jacket.")],
            ]
        )
        agent = Agent(name="weather", model=model, tools=[get_weather])
        session = TurnstoreSession("sdk-chat", store_url, owner_id="ada")
        try:
            await Runner.run(agent, "Do I need a jacket in Paris?", session=session)
        finally:
            await session.aclose()

    asyncio.run(run())
    server = serve()

    browser.open(session_url(server.base, "sdk-chat"))
    shown = messages(browser, 4)
    assert roles(shown) == "user assistant tool assistant"
    assert "Do I need a jacket in Paris?" in shown[0]["text"]
    assert 'get_weather({"city":"Paris"})' in shown[1]["text"]
    assert "result of get_weather call_w" in shown[2]["text"]
    assert "18 °C and cloudy in Paris" in shown[2]["text"]
    assert "Take a light jacket." in shown[3]["text"]
    assert browser.one(browser.testid("conversation-kind")).text == "openai-agents"


@pytest.mark.peers
def test_an_adk_session_reads_as_its_events(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str
) -> None:
    """ADK's runner with a tool: the author, the call, the response and its state delta."""
    pytest.importorskip("google.adk")
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.genai import types

    from frameworks._adk_runner import ScriptedLlm, bump_counter
    from turnstore.integrations.adk import TurnstoreSessionService, turnstore_id

    async def run() -> None:
        service = TurnstoreSessionService(store_url)
        agent = LlmAgent(name="helper", model=ScriptedLlm(model="scripted"), tools=[bump_counter])
        runner = Runner(app_name="demo", agent=agent, session_service=service)
        await service.create_session(app_name="demo", user_id="u1", session_id="s1")
        message = types.Content(role="user", parts=[types.Part(text="Count me in")])
        async for _ in runner.run_async(user_id="u1", session_id="s1", new_message=message):
            pass
        await runner.close()
        await service.close()

    asyncio.run(run())
    server = serve()

    browser.open(session_url(server.base, turnstore_id("demo", "u1", "s1")))
    shown = messages(browser, 4)
    assert roles(shown) == "user assistant tool assistant"
    assert "Count me in" in shown[0]["text"]
    names = [n.text for n in browser.css(f"{MESSAGE} {browser.testid('message-name')}")]
    assert names == ["helper", "bump_counter", "helper"]
    assert 'bump_counter({"by": 2})' in shown[1]["text"]
    assert "result of bump_counter" in shown[2]["text"]
    assert '"counter": 2' in shown[2]["text"]
    deltas = state_deltas(browser)
    assert len(deltas) == 1
    assert {"turns": 1, "user:counter": 2}.items() <= deltas[0].items()
    assert "done" in shown[3]["text"]


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Any:
    started = time.monotonic()
    yield
    print(f"{request.node.name}: {time.monotonic() - started:.1f}s")
