"""The viewer on what is not finished: a session not saved yet, a turn without its end."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from turnstore import BlockingStore
from turnstore.cli.demo import ANSWER_2, CRASH_ID, REASONING_3

from .conftest import Browser
from .pages import session_url, status_cells, wait_rows
from .sessions import new_session, start_turn, whole_turn

# --- a session not saved yet ---------------------------------------------------------------


def test_a_page_opened_before_the_first_save_waits_for_it(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """A session page for an id not saved yet says so, then shows the session once it is saved."""
    server = serve()
    browser.allow_console(
        "/api/sessions/agent%2F7 - Failed to load resource: "
        "the server responded with a status of 404"
    )
    browser.open(session_url(server.base, "agent/7"))
    waiting = browser.one(browser.testid("session-waiting"))
    assert "Waiting for the first save" in waiting.text
    assert "agent/7" in waiting.text
    browser.one(browser.testid("live-indicator") + "[data-state='waiting']")
    browser.driver.execute_script("window.__samePage = true")
    browser.screenshot("waiting")

    checkpoint = new_session(blocking_store, "agent/7", text="are you there?")
    header = browser.one(browser.testid("session-id"))
    assert header.text == "agent/7"
    assert not browser.css(browser.testid("session-waiting"))
    browser.one(browser.testid("live-indicator") + "[data-state='on']")
    # The page now follows the session: its first turn arrives live.
    whole_turn(blocking_store, checkpoint, "turn-1", "are you there?", "Here I am.")
    turn = browser.testid("timeline-turn") + "[data-status='completed']"
    browser.wait(lambda _: browser.snapshot(turn), message="the first turn did not arrive")
    assert browser.driver.execute_script("return window.__samePage") is True, "no reload"


def test_a_bare_framework_id_links_to_the_session_stored_under_it(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """`#/s/lg-tides` when `langgraph/lg-tides` is stored: the page says so and links to it."""
    new_session(blocking_store, "langgraph/lg-tides", text="when is high tide?")
    server = serve()
    browser.allow_console(
        "/api/sessions/lg-tides - Failed to load resource: "
        "the server responded with a status of 404"
    )
    browser.open(session_url(server.base, "lg-tides"))
    meant = browser.one(browser.testid("did-you-mean"))
    assert "Did you mean langgraph/lg-tides?" in meant.text
    browser.screenshot("did-you-mean")
    meant.find_element("css selector", "a").click()
    header = browser.one(browser.testid("session-id"))
    assert header.text == "langgraph/lg-tides"


# --- turns without an end ----------------------------------------------------------------------

DEMO_CHILD = [sys.executable, "-m", "turnstore.cli._demo_child"]
TWO_MINUTES_MS = 120_000


def kill_demo_worker(store_url: str) -> None:
    """Run the demo's worker on the store until it streams turn-2, then SIGKILL it."""
    worker = subprocess.Popen([*DEMO_CHILD, store_url], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        while not worker.stdout.readline().startswith("streaming"):
            assert worker.poll() is None, "the demo worker stopped before streaming"
    finally:
        worker.kill()
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()


def test_a_killed_turn_is_shown_for_what_it_is(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str
) -> None:
    """The demo's worker killed mid-turn: running while fresh, then "no activity", timer stopped.

    A turn left without an end when a later turn started is "interrupted"; the catalog's
    status column follows the same rule.
    """
    kill_demo_worker(store_url)
    left = new_session(blocking_store, "left-behind", text="first try")
    start_turn(blocking_store, left, "turn-1", "first try")
    whole_turn(blocking_store, left, "turn-2", "second try", "This one finished.")
    new_session(blocking_store, "no-events", text="nothing journaled")
    server = serve()
    turn2 = browser.testid("timeline-turn") + "[data-turn-id='turn-2']"

    browser.open(session_url(server.base, CRASH_ID))
    fresh = browser.wait(lambda _: browser.snapshot(turn2), message="no turn-2")
    assert fresh[0]["data"]["status"] == "running", "killed seconds ago: it cannot tell yet"
    parts = browser.snapshot(turn2 + " " + browser.testid("streamed-phase"))
    assert [(p["data"]["phase"], p["text"].split("\n")[-1]) for p in parts] == [
        ("reasoning", "".join(text for _, text in REASONING_3)),
        ("final_answer", "".join(text for _, text in ANSWER_2[:2])),
    ]
    assert status_cells_after(browser, server.base)[CRASH_ID] == "running"

    with browser.clock_ahead(TWO_MINUTES_MS):
        browser.open(session_url(server.base, CRASH_ID))
        stalled = browser.wait(
            lambda _: browser.snapshot(turn2 + "[data-status='stalled']"),
            message="the killed turn still reads as running two minutes later",
        )
        assert "no activity" in stalled[0]["text"]
        note = browser.snapshot(turn2 + " " + browser.testid("turn-note"))[0]["text"]
        assert note.startswith("No activity since ")
        duration = turn2 + " " + browser.testid("turn-duration")
        shown = browser.snapshot(duration)[0]["text"]
        assert shown.endswith(" ms"), f"the turn's span ends at its last event: {shown}"
        step = browser.snapshot(turn2 + " " + browser.testid("timeline-step"))[0]
        assert step["data"]["outcome"] == "unfinished"
        assert "never completed" in step["text"]
        turn1 = browser.testid("timeline-turn") + "[data-turn-id='turn-1']"
        assert browser.snapshot(turn1)[0]["data"]["status"] == "completed"
        browser.full_screenshot(browser.artifacts / f"{browser.name}-killed-turn.png", 1000)
        time.sleep(1.2)
        assert browser.snapshot(duration)[0]["text"] == shown, "the timer stopped"

        browser.open(session_url(server.base, "left-behind"))
        turn1 = browser.testid("timeline-turn") + "[data-turn-id='turn-1']"
        left_turn = browser.wait(
            lambda _: browser.snapshot(turn1 + "[data-status='interrupted']"),
            message="the turn left behind is not interrupted",
        )
        assert "a later turn started" in left_turn[0]["text"]
        assert browser.snapshot(turn2)[0]["data"]["status"] == "completed"

        statuses = status_cells_after(browser, server.base)
    assert statuses == {
        "no-events": "none",
        "left-behind": "completed",
        CRASH_ID: "stalled",
    }
    browser.screenshot("catalog-status")


def status_cells_after(browser: Browser, base: str) -> dict[str, str]:
    """Open the catalog of the three sessions and read every row's status."""
    browser.open(f"{base}/")
    wait_rows(browser, 3)
    return status_cells(browser)


# --- a server that needs its token ------------------------------------------------------------


def test_a_browser_without_the_token_is_told_how_to_sign_in(
    blocking_store: BlockingStore, serve: Any, browser: Browser
) -> None:
    """A page, not raw JSON: how to sign in; a wrong token is called wrong; the right one
    opens the viewer."""
    new_session(blocking_store, "s", text="hello")
    server = serve("--token", "s3cret")
    browser.allow_console("the server responded with a status of 401")
    browser.open(f"{server.base}/")
    # Cookies go by host, not port: one an earlier test's server set would sign this one in.
    browser.driver.delete_all_cookies()
    browser.open(f"{server.base}/")
    heading = browser.one("h1")
    assert heading.text == "This turnstore server needs its token"
    page = browser.one("body").text
    assert "A bearer token is required." in page
    assert "/?token=TOKEN" in page
    browser.screenshot("sign-in")
    browser.open(f"{server.base}/?token=wrong")
    assert "The token given is wrong." in browser.one("body").text
    browser.screenshot("wrong-token")
    browser.open(f"{server.base}/?token=s3cret")
    browser.one(browser.testid("session-link"))
    browser.driver.delete_all_cookies()
