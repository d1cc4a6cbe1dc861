"""Slow clients against a real `turnstore serve`: a deadline on request heads, a cap on
connections, and normal requests answered while clients trickle header lines.

Raw sockets play the slow clients (a header line every few tenths of a second, as a slowloris
sends them); httpx plays the well-behaved one. SQLite only: the guard acts before a request
reaches the app, so no backend is ever asked.
"""

from __future__ import annotations

import resource
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from click.testing import CliRunner

from turnstore.cli import main
from turnstore.cli.serve import serve as serve_command
from turnstore.server import ServeSettings
from turnstore.server.connections import fit_to_descriptors

sqlite_only = pytest.mark.parametrize("backend_name", ["sqlite"])

HEAD_LINE = b"X-Slow: still sending\r\n"


class Client:
    """A raw connection to the server that sends its request head when told to."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setblocking(False)
        self.received = b""
        self.closed = False

    def send(self, data: bytes) -> None:
        """Send `data` unless the server has closed the connection."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True

    def poll(self) -> bool:
        """Read what has arrived; whether the server has closed the connection."""
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            self.received += chunk
            self.closed = not chunk
        return self.closed

    def trickle(self, every: float, within: float) -> float | None:
        """Send a header line each `every` seconds until the server closes the connection;
        the seconds from the first line to the close, or None if it stayed open `within`."""
        started = time.monotonic()
        while time.monotonic() - started < within:
            self.send(HEAD_LINE)
            deadline = time.monotonic() + every
            while time.monotonic() < deadline:
                if self.poll():
                    return time.monotonic() - started
                time.sleep(0.02)
        return None

    def close(self) -> None:
        """Close our end."""
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request_head(path: str) -> bytes:
    """The first line and Host header of a GET of `path`, without the ending blank line."""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()


def answered(client: Client, within: float = 2) -> bytes:
    """The response head the server sent `client` within `within` seconds."""
    deadline = time.monotonic() + within
    while b"\r\n\r\n" not in client.received and time.monotonic() < deadline:
        if client.poll():
            break
        time.sleep(0.01)
    return client.received.partition(b"\r\n\r\n")[0]


@sqlite_only
def test_a_request_is_answered_while_slow_clients_outnumber_the_descriptors(serve) -> None:
    """150 clients trickling header lines at a server limited to 128 open files: with
    --max-connections 16, a normal request is answered within 1.5 s (in milliseconds, in fact),
    every time, and the server never runs out of descriptors."""
    server = serve("--max-connections", "16")
    assert server.process is not None
    resource.prlimit(server.process.pid, resource.RLIMIT_NOFILE, (128, 128))
    slow: list[Client] = []
    try:
        # In waves, as clients arrive: the server sized its accept backlog for the limit it
        # started with, not for the one lowered here.
        for _ in range(15):
            slow += [Client(server.port) for _ in range(10)]
            for client in slow[-10:]:
                client.send(request_head("/api/health"))
            time.sleep(0.02)
        for _ in range(3):
            for client in slow:
                client.send(HEAD_LINE)
            started = time.monotonic()
            response = httpx.get(f"{server.base}/api/health", timeout=3)
            assert response.status_code == 200
            assert time.monotonic() - started < 1.5
            # The newest slow clients are still connected: the cap closed the others.
            assert 1 <= sum(not client.poll() for client in slow) <= 16
            time.sleep(0.2)
    finally:
        for client in slow:
            client.close()
    assert "out of system resource" not in server.log.read_text()


@sqlite_only
def test_a_request_head_gets_the_bound_from_its_first_byte(serve) -> None:
    """With --header-timeout 1: a head trickled from connecting, a connection that sends
    nothing, and a kept-alive connection's next head trickled after a pause are each closed
    about a second after they started (a 408 where part of a head came); a head sent in pieces
    over 0.6 s is answered."""
    server = serve("--header-timeout", "1")

    def trickled() -> tuple[float | None, bytes]:
        with Client(server.port) as client:
            client.send(request_head("/api/health"))
            return client.trickle(0.2, within=3), answered(client, 0)

    def silent() -> tuple[float | None, bytes]:
        with Client(server.port) as client:
            return _closed_after(client, 3), client.received

    def kept_alive() -> tuple[float | None, bytes]:
        with Client(server.port) as client:
            client.send(request_head("/api/health") + b"\r\n")
            assert answered(client).startswith(b"HTTP/1.1 200")
            client.received = b""
            time.sleep(0.5)
            client.send(request_head("/api/health"))
            return client.trickle(0.2, within=3), answered(client, 0)

    def in_pieces() -> tuple[float | None, bytes]:
        with Client(server.port) as client:
            for piece in (request_head("/api/health"), HEAD_LINE, HEAD_LINE, b"\r\n"):
                client.send(piece)
                time.sleep(0.2)
            return None, answered(client)

    with ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(case) for case in (trickled, silent, kept_alive, in_pieces)]
        (late, late_answer), (mute, mute_answer), (kept, kept_answer), (_, whole) = (
            run.result() for run in runs
        )
    for seconds in (late, mute, kept):
        assert seconds is not None
        assert 0.8 <= seconds <= 2.5
    assert late_answer.startswith(b"HTTP/1.1 408")
    assert kept_answer.startswith(b"HTTP/1.1 408")
    assert mute_answer == b""
    assert whole.startswith(b"HTTP/1.1 200")


def _closed_after(client: Client, within: float) -> float | None:
    """Seconds until the server closes `client`, which sends nothing; None after `within`."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if client.poll():
            return time.monotonic() - started
        time.sleep(0.02)
    return None


@sqlite_only
def test_the_cap_closes_waiting_connections_and_keeps_live_tails(serve) -> None:
    """With --max-connections 3 and two live tails open, slow clients make way for a normal
    request and a third tail; with three tails serving, a fourth connection gets a 503."""
    server = serve("--max-connections", "3")
    tail_path = "/api/sessions/absent/events/stream?wait=1"
    tails: list[Client] = []
    slow: list[Client] = []
    try:
        for _ in range(2):
            tails.append(Client(server.port))
            tails[-1].send(request_head(tail_path) + b"\r\n")
            assert answered(tails[-1]).startswith(b"HTTP/1.1 200")
        for _ in range(5):
            slow.append(Client(server.port))
            slow[-1].send(request_head("/api/health"))
        assert httpx.get(f"{server.base}/api/health", timeout=3).status_code == 200
        tails.append(Client(server.port))
        tails[-1].send(request_head(tail_path) + b"\r\n")
        assert answered(tails[-1]).startswith(b"HTTP/1.1 200")
        refused = httpx.get(f"{server.base}/api/health", timeout=3)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert all(client.poll() for client in slow)
        assert not any(tail.poll() for tail in tails)
    finally:
        for client in (*tails, *slow):
            client.close()


def test_the_command_defaults_are_the_settings_defaults() -> None:
    """`turnstore serve`'s --header-timeout and --max-connections default to ServeSettings'."""
    defaults = {param.name: param.default for param in serve_command.params}
    settings = ServeSettings()
    assert defaults["header_timeout"] == settings.header_timeout_seconds
    assert defaults["max_connections"] == settings.max_connections
    assert CliRunner().invoke(main, ["serve", "--header-timeout", "0", "x"]).exit_code == 2


@pytest.mark.parametrize(
    ("descriptors", "expected"),
    [(None, (1000, 2048)), (20000, (1000, 2048)), (1024, (480, 160)), (256, (96, 32))],
)
def test_the_cap_and_backlog_fit_the_descriptor_limit(
    descriptors: int | None, expected: tuple[int, int]
) -> None:
    """The cap keeps half the descriptors beyond 64 for connections, the backlog a sixth, so
    three turns of accepts beyond the cap still fit."""
    assert fit_to_descriptors(1000, descriptors) == expected
