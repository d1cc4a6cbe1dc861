"""The SQL statements of a save, counted where the database sees them; a new one fails here.

SQLite: the trace callback of the store's one write connection (one call per statement run,
so each row of an `executemany` counts). PostgreSQL: libpq's protocol trace of the store's
one connection, one `Execute` message per statement run. A save that needs fewer lowers the
budget; one that needs more must say why here.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import turnstore
from conftest import THROUGH_PGBOUNCER
from turnstore import ActiveExecution, Checkpoint, Event, TimestampedEvent
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepStartedEvent,
    ToolCall,
    ToolCallBeginEvent,
    ToolCallEndEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
)

PLAIN = 6
"""BEGIN, the session row's read, its UPDATE, the context chunk, the transcript batch, COMMIT."""
EVENTS = 9
"""PLAIN, the read of the completed steps' stored deltas, the execution row and one batch row
holding 8 events (the turn's 17 less the 9 deltas its two completed steps fold into their
metrics; none of the 8 is one a later save deletes, so none is a row of its own)."""
STEADY = 3
"""Saves before the counted one: the session exists and its statements are prepared."""


def _item(sequence: int, role: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "text", "text": f"{sequence}"}]}


def _step(session_id: str, turn: str, index: int, deltas: int) -> list[Any]:
    ids = {"session_id": session_id, "turn_id": turn, "model_step_id": f"{turn}-{index}"}
    started = ModelStepStartedEvent(**ids, step_index=index, started_at_ms=1)
    streamed = [
        AgentMessageContentDeltaEvent(**ids, delta=f"part {n}", phase="final_answer")
        for n in range(deltas)
    ]
    outcome = ModelStepCompleted(end_turn=deltas > 0)
    done = ModelStepCompletedEvent(
        **ids, step_index=index, started_at_ms=1, completed_at_ms=2, outcome=outcome
    )
    return [started, *streamed, done]


def _turn(checkpoint: Checkpoint) -> tuple[list[TimestampedEvent], Any]:
    """A tool-calling model step, the tool call, a streamed answer: 17 events, 9 deltas."""
    session, turn = checkpoint.session_id, f"turn-{checkpoint.sequence}"
    checkpoint.active_execution = ActiveExecution(
        submission_id=f"sub-{turn}", turn_id=turn, started_at_ms=checkpoint.sequence
    )
    call = ToolCall(call_id=f"call-{turn}", name="search", arguments="{}")
    msgs = [
        TurnStartedEvent(turn_id=turn),
        *_step(session, turn, 0, deltas=0),
        ToolCallBeginEvent(turn_id=turn, call=call),
        ToolCallEndEvent(turn_id=turn, call_id=call.call_id, output="found"),
        *_step(session, turn, 1, deltas=9),
        TurnCompleteEvent(turn_id=turn),
    ]
    events = [
        TimestampedEvent(recorded_at_ms=n, event=Event(msg=msg)) for n, msg in enumerate(msgs)
    ]
    return events, checkpoint.finish_execution("completed", checkpoint.sequence + 1)


def _save(store: Any, checkpoint: Checkpoint, events: bool) -> None:
    checkpoint.sequence += 1
    items = [_item(checkpoint.sequence, "user"), _item(checkpoint.sequence, "assistant")]
    checkpoint.context.extend(items)
    checkpoint.metadata = {"turn": checkpoint.sequence}
    if events:
        journal, execution = _turn(checkpoint)
        store.save_with_events(checkpoint, items, execution, journal)
    else:
        store.save(checkpoint, items)


@contextmanager
def _sqlite_statements(store: Any) -> Iterator[list[str]]:
    connection = store._driver.engine._writer._connection
    seen: list[str] = []
    connection.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        connection.set_trace_callback(None)


@contextmanager
def _postgres_statements(store: Any) -> Iterator[list[str]]:
    pool = store._driver.engine.pool
    seen: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace"
        with path.open("w") as out:
            with pool.connection() as connection:  # the pool's one connection
                connection.pgconn.trace(out.fileno())
            try:
                yield seen
            finally:
                with pool.connection() as connection:
                    connection.pgconn.untrace()
        seen.extend(_executed(path.read_text()))


def _executed(trace: str) -> list[str]:
    """The statements a save ran: each `Execute` the client sent, named by its `Parse` or
    its prepared name, without the `pg_notify` exchanges the notify thread may interleave."""
    lines = [line.split("\t") for line in trace.splitlines()]
    sent = [line for line in lines if line[1:2] == ["F"] and len(line) > 3]
    executed: list[str] = []
    bound = ""
    for line in sent:
        if line[3] in ("Bind", "Parse"):
            bound = line[4] if len(line) > 4 else ""
        elif line[3] == "Execute":
            executed.append(bound)
        elif line[3] == "Query":
            executed.append(line[4] if len(line) > 4 else "")
    return [text for text in executed if not re.search("pg_notify|turnstore_events_", text)]


def _counted(backend_name: str, url: str, events: bool) -> list[str]:
    """The statements the database saw for one steady-state save."""
    if backend_name == "postgres":
        url = f"{url}&pool_min_size=1&pool_max_size=1"
    watch: Callable[[Any], Any] = (
        _postgres_statements if backend_name == "postgres" else _sqlite_statements
    )
    with turnstore.open_blocking(url) as store:
        checkpoint = Checkpoint.empty("counted")
        for _ in range(STEADY):
            _save(store, checkpoint, events)
        with watch(store) as seen:
            _save(store, checkpoint, events)
    return list(seen)


@pytest.mark.parametrize("events", [False, True], ids=["plain", "events"])
def test_a_save_sends_no_more_statements_than_its_budget(
    backend_name: str, store_url: str, events: bool
) -> None:
    """A plain save runs 6 statements and a save with a turn's events 16, on both backends."""
    seen = _counted(backend_name, store_url, events)
    budget = EVENTS if events else PLAIN
    if backend_name == "postgres" and THROUGH_PGBOUNCER:
        # Behind a transaction pooler each transaction first sets the schema (pool.PRELUDE),
        # in the same pipeline as its BEGIN: a statement more, no round trip more.
        budget += 1
    listing = "\n".join(text[:100] for text in seen)
    assert len(seen) <= budget, f"{len(seen)} statements, budget {budget}:\n{listing}"
    assert len(seen) == budget, f"fewer statements ({len(seen)}): lower the budget\n{listing}"
