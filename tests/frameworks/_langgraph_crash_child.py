"""A LangGraph graph killed in the middle of a step, then resumed, on one saver.

    python _langgraph_crash_child.py SAVER TARGET THREAD MODE LOG PHASE

SAVER is `turnstore` (TARGET a store URL) or `sqlite` (TARGET a file for LangGraph's
`SqliteSaver`); MODE is the durability the graph runs with (`sync`, `async`, `exit`).

The graph: `first`, then `fast` and `slow` in one step, then `last`. Every node appends its
name to LOG (flushed and synced) when it starts, so LOG counts the runs of each. PHASE `run`
invokes the graph; in the second step `slow` waits until `fast` has finished and its writes
had time to land (`async` durability writes them in the background), creates LOG.ready and
sleeps until the test kills the process. PHASE `resume` prints, as one JSON line, what the
saver kept (the next nodes, and the tasks whose writes it holds), then finishes the run: from
where the saver left it, or from the start when it kept nothing.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

SETTLE_S = 0.5
"""How long `slow` waits, once started, for `fast`'s writes to land before it signals."""


class State(TypedDict):
    """The names of the nodes that finished, in the order their writes were applied."""

    done: Annotated[list[str], operator.add]


def _node(name: str, log: Path, phase: str) -> Any:
    def run(state: State) -> dict[str, list[str]]:
        with log.open("a") as out:
            out.write(name + "\n")
            out.flush()
            os.fsync(out.fileno())
        if name == "slow" and phase == "run":
            deadline = time.monotonic() + 30
            while "fast" not in log.read_text().split() and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(SETTLE_S)
            Path(f"{log}.ready").touch()
            time.sleep(600)  # killed here, mid-step
        return {"done": [name]}

    return run


def build(saver: Any, log: Path, phase: str) -> Any:
    """The graph: first -> (fast, slow) -> last."""
    graph = StateGraph(State)
    for name in ("first", "fast", "slow", "last"):
        graph.add_node(name, _node(name, log, phase))
    graph.add_edge(START, "first")
    graph.add_edge("first", "fast")
    graph.add_edge("first", "slow")
    graph.add_edge(["fast", "slow"], "last")
    graph.add_edge("last", END)
    return graph.compile(checkpointer=saver)


def _saver(kind: str, target: str) -> Any:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(target, check_same_thread=False))
    from turnstore.integrations.langgraph import TurnstoreSaver

    return TurnstoreSaver(target)


def main(kind: str, target: str, thread: str, mode: str, log: Path, phase: str) -> None:
    saver = _saver(kind, target)
    graph = build(saver, log, phase)
    config = {"configurable": {"thread_id": thread}}
    if phase == "run":
        graph.invoke({"done": []}, config, durability=mode)
        raise SystemExit("the run finished: it should have been killed in its second step")
    state = graph.get_state(config)
    kept = {
        "next": sorted(state.next),
        "written": sorted(task.name for task in state.tasks if task.result is not None),
        "done": sorted(state.values.get("done", [])),
    }
    print(json.dumps(kept), flush=True)
    final = graph.invoke(None if state.next else {"done": []}, config, durability=mode)
    print(json.dumps({"final": sorted(final["done"])}), flush=True)
    close = getattr(saver, "close", None)
    if close is not None:
        close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5]), sys.argv[6])
