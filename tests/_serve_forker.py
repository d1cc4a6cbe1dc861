"""The fork server behind `tests/serving.py`: imports once, then forks a `turnstore` per request.

Each request is one JSON line on stdin (`args`, `log`, `env`, `cwd`); the answer is the pid of
a fork that runs `turnstore.cli.main(args)` with its output in `log`. Nothing here opens a
connection or starts a thread before forking, so every fork starts as clean as a new process.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
from typing import Any

import uvicorn

import turnstore.cli
import turnstore.server

# What `turnstore serve` imports only once it runs: the PostgreSQL backend (when its extra is
# installed) and uvicorn's protocol classes, which its Config loads by name.
for name in ("turnstore.backends.sqlite", "turnstore.backends.postgres", "opentelemetry"):
    with contextlib.suppress(ImportError):
        importlib.import_module(name)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """A stand-in app: `Config.load` imports the protocol classes whatever app it wraps."""


uvicorn.Config(_app, log_config=None).load()


def child(request: dict[str, Any]) -> None:
    """Become `turnstore <args>`: its own environment, directory and output; never return."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        try:
            turnstore.cli.main(request["args"], prog_name="turnstore")
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """Fork one process per request until stdin closes."""
    # The kernel reaps the forks: no zombie keeps a pid that the tests wait on.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while line := sys.stdin.readline():
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
