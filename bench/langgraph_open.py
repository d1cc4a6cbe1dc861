"""How fast a saver opens: from its first import to its first acknowledged `put`, new process.

Short-lived processes (a CLI, a serverless handler, a test) pay this every time. Each sample
is a fresh interpreter that first imports what every saver shares (`langgraph.checkpoint.base`
and the serializer; not counted, nor is the interpreter's start), then starts the clock,
imports the saver's module, opens it on an existing database (made by an untimed first run:
the common case, a store that is already there) and `put`s one checkpoint. The median of
`repeats` samples is reported per saver, beside `SqliteSaver`'s and `PostgresSaver`'s.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = r"""
import json, sys, time
import langgraph.checkpoint.base
import langgraph.checkpoint.serde.jsonplus
from langgraph.checkpoint.base import empty_checkpoint

kind, where, thread = sys.argv[1], sys.argv[2], sys.argv[3]
config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
started = time.perf_counter()
if kind == "sqlite":
    import sqlite3
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(where, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    saver = SqliteSaver(connection)
    saver.put(config, empty_checkpoint(), {}, {})
elif kind == "postgres":
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(where) as saver:
        saver.setup()
        saver.put(config, empty_checkpoint(), {}, {})
else:
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver(where) as saver:
        saver.put(config, empty_checkpoint(), {}, {})
print(json.dumps((time.perf_counter() - started) * 1e3))
"""


def sample(kind: str, where: str, thread: str) -> float:
    """One fresh process's milliseconds from the saver's import to its first put."""
    # Bytecode is written and used, as an installed package's is: a source checkout run
    # with PYTHONDONTWRITEBYTECODE would compile turnstore at every start.
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, where, thread],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent.parent,
        env=environment,
    )
    if done.returncode != 0:
        raise RuntimeError(f"opening {kind} failed:\n{done.stderr}")
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def measure_open(sides: dict[str, tuple[str, str]], repeats: int) -> dict[str, dict[str, Any]]:
    """{name: (kind, where)} -> {name: {"median_ms", "samples_ms"}}; one untimed run first."""
    found: dict[str, dict[str, Any]] = {}
    for name, (kind, where) in sides.items():
        sample(kind, where, "open-setup")
        # Interleaved with the others would be fairer still; a few samples each is enough
        # to tell 20 ms from 80.
        samples = [sample(kind, where, f"open-{n}") for n in range(repeats)]
        found[name] = {"median_ms": statistics.median(samples), "samples_ms": samples}
    return found
