"""What the viewer's tests read off a page: session addresses and the catalog's rows."""

from __future__ import annotations

from urllib.parse import quote

from .conftest import Browser


def session_url(base: str, session_id: str) -> str:
    """The viewer's address of one session, encoded as the viewer itself links it."""
    return f"{base}/#/s/{quote(session_id, safe='')}"


def row_ids(browser: Browser) -> list[str]:
    """The session ids of the catalog's rows, in page order."""
    return [
        row.get_attribute("data-session-id") for row in browser.css(browser.testid("session-row"))
    ]


def wait_rows(browser: Browser, count: int, timeout: float = 10) -> list[str]:
    """Wait until the catalog shows `count` rows and its status says it is done loading."""
    browser.wait(
        lambda _: (
            len(browser.css(browser.testid("session-row"))) == count
            and "Loading" not in browser.one(browser.testid("catalog-status")).text
        ),
        timeout,
        f"expected {count} catalog rows",
    )
    return row_ids(browser)


def status_cells(browser: Browser) -> dict[str, str]:
    """Each catalog row's session id and its status cell's status, once all have loaded."""
    cells = browser.testid("session-status")
    browser.wait(lambda _: all(c["data"]["status"] != "loading" for c in browser.snapshot(cells)))
    rows = browser.snapshot(browser.testid("session-row"))
    return {
        row["data"]["sessionId"]: cell["data"]["status"]
        for row, cell in zip(rows, browser.snapshot(cells), strict=True)
    }
