"""PostgreSQL: a save waits for the server twice — once for its reads, once for its commit.

A write transaction runs in pipeline mode: BEGIN, the session's row lock and the stored
deltas of the steps the save completes go out together and are read in one round trip;
every write and the COMMIT go out together and are read in the second. The proof is
libpq's own protocol trace of the store's one connection: each switch from messages the
client sent, ending in one that asks for the server's answers (Sync, Flush or a simple Query),
to messages the server answered is one round trip.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _pg_worker import with_params

import turnstore
from turnstore import ActiveExecution, Checkpoint, Event, TimestampedEvent
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepStartedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
)


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `store_url` gives a fresh schema."""
    return "postgres"


def _step(session_id: str, turn: str, step: str, deltas: int, complete: bool) -> list[Any]:
    ids = {"session_id": session_id, "turn_id": turn, "model_step_id": step}
    msgs: list[Any] = [ModelStepStartedEvent(**ids, step_index=0, started_at_ms=1)]
    msgs += [
        AgentMessageContentDeltaEvent(**ids, delta=f"part {n}", phase="final_answer")
        for n in range(deltas)
    ]
    if complete:
        outcome = ModelStepCompleted(end_turn=True)
        msgs.append(
            ModelStepCompletedEvent(
                **ids, step_index=0, started_at_ms=1, completed_at_ms=2, outcome=outcome
            )
        )
    return msgs


def _turn(checkpoint: Checkpoint, msgs: list[Any]) -> tuple[list[TimestampedEvent], Any]:
    turn = f"turn-{checkpoint.sequence}"
    checkpoint.active_execution = ActiveExecution(
        submission_id=f"sub-{turn}", turn_id=turn, started_at_ms=checkpoint.sequence
    )
    events = [
        TimestampedEvent(recorded_at_ms=n, event=Event(msg=msg)) for n, msg in enumerate(msgs)
    ]
    return events, checkpoint.finish_execution("completed", checkpoint.sequence + 1)


WAITS = ("Sync", "Flush", "Query")
"""The client messages after which it waits for the server: one round trip each burst."""


def _round_trips(trace: str) -> int:
    """Waits for the server from the save's first message to the server's COMMIT answer.

    A wait is a switch from client to server messages right after one of `WAITS`. A switch
    after any other message is not: the server answered what it had read of a burst the
    client had not finished sending (a send split under load), and the client never waited.
    """
    lines = _after_notifies([line.split("\t") for line in trace.splitlines()])
    end = next(
        i for i, line in enumerate(lines) if line[1:2] == ["B"] and '"COMMIT"' in " ".join(line[3:])
    )
    messages = [(line[1], line[3]) for line in lines[: end + 1]]
    assert messages[0][0] == "F", "the trace starts with the save's first message"
    return sum(
        1
        for (sender, kind), (answerer, _) in itertools.pairwise(messages)
        if sender == "F" and answerer == "B" and kind in WAITS
    )


def _after_notifies(lines: list[list[str]]) -> list[list[str]]:
    """The trace without the exchanges in front that send the previous saves' `pg_notify`.

    The store's notify thread sends them on the pool's one connection after each commit, so
    one may still be going out when tracing starts; they carry the store's channel name.
    """
    while True:
        ready = next((i for i, line in enumerate(lines) if line[3:4] == ["ReadyForQuery"]), None)
        if ready is None or not any(
            "turnstore_events_" in "\t".join(line) for line in lines[:ready]
        ):
            return lines
        lines = lines[ready + 1 :]


def _traced_save(store: Any, checkpoint: Checkpoint, msgs: list[Any]) -> int:
    events, execution = _turn(checkpoint, msgs)
    pool = store._driver.engine.pool
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace"
        with path.open("w") as out:
            with pool.connection() as connection:  # the pool's one connection
                connection.pgconn.trace(out.fileno())
            try:
                store.save_with_events(checkpoint, [{"n": checkpoint.sequence}], execution, events)
            finally:
                with pool.connection() as connection:
                    connection.pgconn.untrace()
        return _round_trips(path.read_text())


def test_a_save_with_events_takes_two_round_trips(store_url):
    """Saves with transcript, execution and events: two round trips each, compaction included.

    The first traced save completes a step whose deltas are all in its own batch; the second
    completes one whose deltas an earlier save stored, so it reads and deletes them too.
    """
    url = with_params(store_url, pool_min_size=1, pool_max_size=1)
    # No background indexer: on the one pooled connection its catch-up, if it ran during a
    # traced save (as it did under load), would be counted as that save's round trips.
    with turnstore.open_blocking(url, index_in_background=False) as store:
        checkpoint = Checkpoint.empty("session")
        for sequence in range(1, 8):  # past psycopg's threshold for preparing statements
            checkpoint.sequence = sequence
            events, execution = _turn(checkpoint, [TurnStartedEvent(turn_id=f"t{sequence}")])
            store.save_with_events(checkpoint, [{"n": sequence}], execution, events)

        checkpoint.sequence += 1
        whole = [
            TurnStartedEvent(turn_id="whole"),
            *_step("session", "whole", "step-whole", deltas=5, complete=True),
            TurnCompleteEvent(turn_id="whole"),
        ]
        assert _traced_save(store, checkpoint, whole) == 2

        checkpoint.sequence += 1
        events, execution = _turn(checkpoint, _step("session", "split", "step-split", 4, False))
        store.save_with_events(checkpoint, [], execution, events)
        checkpoint.sequence += 1
        rest = _step("session", "split", "step-split", deltas=2, complete=True)[1:]
        assert _traced_save(store, checkpoint, rest) == 2

        journal = store.event_page("session", turnstore.EventPageRequest(limit=1000))
        kinds = [event.event.msg.__struct_config__.tag for event in journal.events]
        assert "agent_message_content_delta" not in kinds, "both completed steps are compacted"
        completed = [e for e in journal.events if isinstance(e.event.msg, ModelStepCompletedEvent)]
        assert [metrics.chunk_count for e in completed for metrics in e.stream_metrics] == [6, 5]
