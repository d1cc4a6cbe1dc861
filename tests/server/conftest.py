"""A real `turnstore serve` in its own process, and a store to write what it shows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import turnstore
from serving import Forked, free_port, start_serve, stop, wait_until
from turnstore import BlockingStore

ServerFactory = Callable[..., "Server"]


class Server:
    """One `turnstore serve` process (forked, `tests/serving.py`) and the base URL it answers on."""

    def __init__(self, url: str, args: list[str], log: Path) -> None:
        self.store_url = url
        self.args = args
        self.log = log
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: Forked | None = None

    def start(self) -> Server:
        """Start the process and wait until `/api/health` answers (a token may be needed)."""
        self.process = start_serve(self.store_url, self.port, self.log, tuple(self.args))
        wait_until(self._answers, self.process, self.log)
        return self

    def _answers(self) -> bool:
        try:
            httpx.get(f"{self.base}/api/health", timeout=1)
        except httpx.TransportError:
            return False
        return True

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and wait for it."""
        if self.process is not None:
            stop(self.process)

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        """GET `path` from this server."""
        return httpx.get(f"{self.base}{path}", timeout=10, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def writer(store_url: str) -> Iterator[BlockingStore]:
    """The store the test writes through; the server reads the same database."""
    with turnstore.open_blocking(store_url) as opened:
        yield opened


@pytest.fixture
def serve(store_url: str, writer: BlockingStore, tmp_path: Path) -> Iterator[ServerFactory]:
    """Start `turnstore serve` on the test's database with extra arguments; stopped after."""
    started: list[Server] = []

    def start(*args: str) -> Server:
        server = Server(store_url, list(args), tmp_path / f"serve-{len(started)}.log").start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
