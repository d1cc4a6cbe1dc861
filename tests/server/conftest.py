"""A real `turnstore serve` in its own process, and a store to write what it shows."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import turnstore
from turnstore import BlockingStore

ServerFactory = Callable[..., "Server"]


class Server:
    """One `turnstore serve` subprocess and the base URL it answers on."""

    def __init__(self, url: str, args: list[str], log: Path) -> None:
        self.store_url = url
        self.args = args
        self.log = log
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        """Start the process and wait until `/api/health` answers (a token may be needed)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "turnstore",
                    "serve",
                    self.store_url,
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited: {self.log.read_text()}")
            try:
                httpx.get(f"{self.base}/api/health", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError(f"server did not start: {self.log.read_text()}")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        """GET `path` from this server."""
        return httpx.get(f"{self.base}{path}", timeout=10, **kwargs)  # type: ignore[arg-type]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
