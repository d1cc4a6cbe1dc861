"""The LangGraph benchmark's second workload: many threads taking turns round-robin.

An agent server holds many conversations at once, so a saver is also measured with 20
threads (LangGraph `thread_id`s) of 50 turns each, turn by turn across the threads, every
saver interleaved the same way as the single-thread workload, at LangGraph's default
durability, each saver freshly opened (a PostgreSQL saver on a schema of its own). Turns/s:
turns over the summed `invoke` time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.workload import make_turn

THREADS = 20
"""Conversations taking turns."""
TURNS = 50
"""Turns of each conversation."""
BACKENDS = ("memory", "sqlite", "postgres")
"""The savers this workload runs: all of them."""


def run_round_robin(
    specs: Sequence[Any],
    places: Any,
    open_row: Callable[[Any, Any], Any],
    seed: int,
    threads: int = THREADS,
    turns: int = TURNS,
) -> dict[str, Any]:
    """Each saver's turns/s over `threads` x `turns` round-robin; its document."""
    rows = [open_row(spec, places) for spec in specs if spec.backend in BACKENDS]
    seconds = {row.spec.name: 0.0 for row in rows}
    try:
        for index in range(turns):
            for number in range(threads):
                thread = f"rr-{number:02d}"
                turn = make_turn(seed, thread, index)
                for offset in range(len(rows)):
                    row = rows[(index * threads + number + offset) % len(rows)]
                    seconds[row.spec.name] += _invoke(row, thread, turn, index)
        for row in rows:
            _check(row, threads, turns)
    finally:
        for row in rows:
            row.opened.close()
    return {
        "threads": threads,
        "turns_per_thread": turns,
        "savers": {
            row.spec.name: {
                "label": row.spec.label,
                "turns_per_s": threads * turns / seconds[row.spec.name],
            }
            for row in rows
        },
    }


def _invoke(row: Any, thread: str, turn: Any, index: int) -> float:
    from langchain_core.messages import HumanMessage

    row.holder["turn"] = turn
    user = HumanMessage(content=turn.user_text, id=f"user-{thread}-{index}")
    started = time.perf_counter()
    row.graph.invoke(
        {"messages": [user], "loop_state": turn.state}, {"configurable": {"thread_id": thread}}
    )
    return time.perf_counter() - started


def _check(row: Any, threads: int, turns: int) -> None:
    """Every thread holds every message it was given."""
    for number in range(threads):
        state = row.graph.get_state({"configurable": {"thread_id": f"rr-{number:02d}"}})
        held = len(state.values.get("messages", []))
        if held != 4 * turns:
            raise RuntimeError(f"{row.spec.name} rr-{number:02d}: {held} messages, not {4 * turns}")


def scratch(directory: Path) -> Path:
    """The workload's own directory beside the single-thread savers'."""
    path = directory / "round-robin"
    path.mkdir()
    return path
