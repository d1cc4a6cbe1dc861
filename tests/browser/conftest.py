"""A headless Chromium (the distribution's, driven by its chromedriver) and a real server."""

from __future__ import annotations

import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from serving import free_port, start_serve, stop, wait_until

CHROMIUM = os.environ.get("TURNSTORE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TURNSTORE_CHROMEDRIVER", "/usr/bin/chromedriver")
REQUIRE_BROWSER = os.environ.get("TURNSTORE_REQUIRE_BROWSER") == "1"
ARTIFACTS = os.environ.get("TURNSTORE_ARTIFACTS_DIR")
UPDATE_SCREENSHOTS = os.environ.get("TURNSTORE_UPDATE_SCREENSHOTS") == "1"
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
WINDOW = "1400,1000"
# Console entries a correct page still logs (none: every read the viewer makes answers 200).
EXPECTED_CONSOLE: tuple[str, ...] = ()


def browser_unavailable() -> str | None:
    """Why no browser test can run here, or None."""
    for path, what in ((CHROMIUM, "TURNSTORE_CHROMIUM"), (CHROMEDRIVER, "TURNSTORE_CHROMEDRIVER")):
        if not (Path(path).is_file() and os.access(path, os.X_OK)) and shutil.which(path) is None:
            return (
                f"no {Path(path).name} at {path} ({what}): install Debian's chromium and "
                "chromium-driver, or run ./dev test as root"
            )
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def require_browser() -> None:
    """Skip without a browser, or fail when TURNSTORE_REQUIRE_BROWSER=1."""
    reason = browser_unavailable()
    if reason is None:
        return
    if REQUIRE_BROWSER:
        pytest.fail(f"TURNSTORE_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chrome() -> Iterator[Any]:
    """One headless Chromium for the whole run; each test drains and checks its console."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW}",
        "--force-prefers-reduced-motion",
        "--lang=en-GB",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium-manager never runs, nothing is downloaded.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        driver.quit()


class Browser:
    """The shared Chromium, as one test sees it: pages, waits, screenshots, console checks."""

    def __init__(self, driver: Any, artifacts: Path, name: str) -> None:
        self.driver = driver
        self.artifacts = artifacts
        self.name = name
        self.console: list[dict[str, Any]] = []
        self.expected = list(EXPECTED_CONSOLE)

    def allow_console(self, text: str) -> None:
        """Expect SEVERE console entries containing `text` (a 404 the test asks for)."""
        self.expected.append(text)

    def open(self, url: str) -> None:
        """Load `url` as a fresh document (a hash change alone would keep the old page)."""
        self.driver.get("about:blank")
        self.driver.get(url)

    def wait(self, condition: Callable[[Any], Any], timeout: float = 10, message: str = "") -> Any:
        """Wait until `condition(driver)` is truthy and return it."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        wait = WebDriverWait(
            self.driver,
            timeout,
            poll_frequency=0.05,
            ignored_exceptions=(StaleElementReferenceException,),
        )
        return wait.until(condition, message)

    def snapshot(self, selector: str) -> list[dict[str, Any]]:
        """Text, class and data-* of every match, read in one script (no stale elements)."""
        return list(
            self.driver.execute_script(
                "return [...document.querySelectorAll(arguments[0])].map((el) =>"
                " ({text: el.innerText, cls: el.className, data: {...el.dataset}}))",
                selector,
            )
        )

    def css(self, selector: str) -> list[Any]:
        """Every element matching `selector`."""
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def one(self, selector: str, timeout: float = 10) -> Any:
        """The first element matching `selector`, once there is one."""
        return self.wait(lambda _: (self.css(selector) or [None])[0], timeout, f"no {selector}")

    def testid(self, name: str) -> str:
        """A selector for `data-testid=name`."""
        return f"[data-testid='{name}']"

    def screenshot(self, label: str) -> Path:
        """Save a PNG of the viewport as a test artifact; print where it went."""
        path = self.artifacts / f"{self.name}-{label}.png"
        self.driver.save_screenshot(str(path))
        print(f"screenshot: {path}")
        return path

    def full_screenshot(self, path: Path, height: int | None = None) -> None:
        """Save a PNG of the page, resized to show `height` pixels (or all of it)."""
        full = self.driver.execute_script("return document.documentElement.scrollHeight")
        width, base = (int(value) for value in WINDOW.split(","))
        self.driver.set_window_size(width, min(height or full, 4000) + 90)
        try:
            self.driver.execute_script("window.scrollTo(0, 0)")
            time.sleep(0.3)
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(width, base)
        print(f"screenshot: {path}")

    @contextmanager
    def clock_ahead(self, ms: int) -> Iterator[None]:
        """Pages loaded inside see a wall clock `ms` ahead: a viewer opened that much later.

        Only the page's `Date` moves (set through DevTools before any script of the page
        runs); the server, the store and the events' times stay real.
        """
        shift = (
            "(() => { const Real = Date; const now = () => Real.now() + SHIFT;"
            " class Later extends Real { constructor(...a) { super(...(a.length ? a : [now()])); }"
            " static now() { return now(); } } window.Date = Later; })();"
        ).replace("SHIFT", str(int(ms)))
        added = self.driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument", {"source": shift}
        )
        try:
            yield
        finally:
            self.driver.execute_cdp_cmd(
                "Page.removeScriptToEvaluateOnNewDocument", {"identifier": added["identifier"]}
            )

    def drain_console(self) -> list[dict[str, Any]]:
        """The console entries logged since the last drain."""
        entries = list(self.driver.get_log("browser"))
        self.console.extend(entries)
        return entries

    def severe(self) -> list[str]:
        """SEVERE console entries (CSP violations, script errors), but the expected ones."""
        self.drain_console()
        return [
            entry["message"]
            for entry in self.console
            if entry.get("level") == "SEVERE"
            and not any(expected in entry["message"] for expected in self.expected)
        ]


@pytest.fixture
def browser(chrome: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Browser]:
    """The shared Chromium for one test; the test fails on any unexpected SEVERE console entry."""
    artifacts = Path(ARTIFACTS) if ARTIFACTS else tmp_path
    artifacts.mkdir(parents=True, exist_ok=True)
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in request.node.name)
    page = Browser(chrome, artifacts, name)
    chrome.get("about:blank")
    chrome.get_log("browser")
    yield page
    try:
        page.screenshot("last")
        problems = page.severe()
    finally:
        # Leave no stream open on a server that is about to stop.
        chrome.get("about:blank")
    assert not problems, f"the browser console logged: {problems}"


class Server:
    """One `turnstore serve` process over a store URL (forked, `tests/serving.py`)."""

    def __init__(self, store_url: str, log: Path, args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process = start_serve(store_url, self.port, log, args)
        wait_until(self._answers, self.process, log)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/api/sessions?limit=1", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answers, if only to say that a token is needed
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> None:
        """Stop the process and wait for it."""
        stop(self.process)


@pytest.fixture
def serve(store_url: str, blocking_store: Any, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start `turnstore serve` over the test's store (written first, through `blocking_store`)."""
    started: list[Server] = []

    def start(*args: str) -> Server:
        server = Server(store_url, tmp_path / f"serve-{len(started)}.log", args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
