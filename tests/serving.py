"""`turnstore serve` processes for the tests, forked from one parent that imported them once.

`python -m turnstore serve` spends half a second of CPU importing turnstore, its server and
uvicorn before it listens, and the server and viewer tests start well over a hundred servers
(a quarter of the suite's CPU went to those imports). So each test process starts one fork
server (`_serve_forker.py`), which imports all that once; every server is a fork of it that
runs the command line's own `main` with the test's arguments: still a process of its own, on
a real port, through the code path `turnstore serve` takes, killed and restarted like one.
`tests/integration/test_cli.py` keeps starting the real entry point.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


class Forker:
    """The fork server of this test process, started when first asked for a server."""

    _process: subprocess.Popen[str] | None = None

    @classmethod
    def spawn(cls, args: list[str], log: Path, env: dict[str, str]) -> int:
        """Fork a process that runs `turnstore <args>` with `env`, output to `log`; its pid."""
        process = cls._process
        if process is None or process.poll() is not None:
            process = cls._process = subprocess.Popen(
                [sys.executable, str(HERE / "_serve_forker.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=os.getcwd(),
            )
            atexit.register(process.kill)
        assert process.stdin is not None
        assert process.stdout is not None
        request = {"args": args, "log": str(log), "env": env, "cwd": os.getcwd()}
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        answer = process.stdout.readline()
        if not answer:
            raise AssertionError(f"the serve fork server exited ({process.wait()})")
        return int(answer)


class Forked:
    """A forked `turnstore` process: `poll`, `terminate`, `kill` and `wait`, as on a Popen."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.pid = Forker.spawn(args, log, dict(os.environ if env is None else env))
        # A pidfd says when the process ends though it is not our child (the fork server's
        # children are reaped by the kernel, so no zombie lingers and no pid is reused early).
        self._pidfd = os.pidfd_open(self.pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """None while the process runs; afterwards a stand-in code (the real one is not ours)."""
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -1
            os.close(self._pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end; `subprocess.TimeoutExpired` after `timeout` seconds."""
        if self.poll() is None and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"turnstore (pid {self.pid})", timeout or 0)
        result = self.poll()
        assert result is not None
        return result

    def send_signal(self, signum: int) -> None:
        """Signal the process unless it has ended."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_serve(store_url: str, port: int, log: Path, args: tuple[str, ...] = ()) -> Forked:
    """`turnstore serve STORE_URL --port PORT --log-level warning ARGS`, forked."""
    command = ["serve", store_url, "--port", str(port), "--log-level", "warning", *args]
    return Forked(command, log, {**os.environ, "PYTHONUNBUFFERED": "1"})


def stop(process: Forked) -> None:
    """SIGTERM, then SIGKILL after ten seconds; wait for the end."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until(ready: object, process: Forked, log: Path, seconds: float = 30) -> None:
    """Call `ready()` until it returns true; fail with the log if the process ends first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"turnstore serve exited:\n{log.read_text()}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.05)
    stop(process)
    raise AssertionError(f"turnstore serve did not answer:\n{log.read_text()}")
