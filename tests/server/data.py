"""Sessions for the server's tests: turns with events, transcript and finished executions."""

from __future__ import annotations

from typing import Any

from turnstore import (
    BlockingStore,
    Checkpoint,
    Event,
    ExecutionRecord,
    SessionContext,
    TimestampedEvent,
)
from turnstore.events import (
    AgentMessageEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    WarningEvent,
)


def new_session(
    store: BlockingStore, session_id: str, owner: str | None = "alice", text: str = "hello"
) -> Checkpoint:
    """Create a session with one user item; return its checkpoint for further turns."""
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.session_context = SessionContext(owner_id=owner)
    checkpoint.sequence = 1
    store.save(checkpoint, [{"type": "message", "role": "user", "content": text}])
    return checkpoint


def turn(
    store: BlockingStore, checkpoint: Checkpoint, turn_id: str, answer: str = "an answer"
) -> list[int]:
    """Save one finished turn (items, events, execution record); return its event sequences."""
    checkpoint.sequence += 1
    started = 1_000 * checkpoint.sequence
    events = [
        TimestampedEvent(
            recorded_at_ms=started, event=Event(msg=TurnStartedEvent(turn_id=turn_id))
        ),
        TimestampedEvent(
            recorded_at_ms=started + 5,
            event=Event(
                msg=AgentMessageEvent(
                    session_id=checkpoint.session_id,
                    turn_id=turn_id,
                    model_step_id=f"{turn_id}-step",
                    message=answer,
                )
            ),
        ),
        TimestampedEvent(
            recorded_at_ms=started + 9,
            event=Event(msg=TurnCompleteEvent(turn_id=turn_id, last_agent_message=answer)),
        ),
    ]
    execution = ExecutionRecord(
        session_id=checkpoint.session_id,
        submission_id=f"sub-{turn_id}",
        turn_id=turn_id,
        started_at_ms=started,
        finished_at_ms=started + 9,
        elapsed_ms=9,
        outcome="completed",
        model_calls=1,
    )
    items: list[Any] = [{"type": "message", "role": "assistant", "content": answer}]
    stored = store.save_with_events(checkpoint, items, execution, events)
    return [event.sequence for event in stored]


def warning(store: BlockingStore, session_id: str, text: str, at_ms: int = 1) -> int:
    """Journal one warning event; return its sequence."""
    return store.append_event(session_id, at_ms, Event(msg=WarningEvent(message=text))).sequence


def runtime_graph(store: BlockingStore, session_id: str, texts: list[str]) -> None:
    """Give the session a runtime graph: a chain of message nodes, plus a side branch."""
    from turnstore import GraphAppend, HydratedSessionCheckpoint, RuntimeCommit, SessionNodeRecord
    from turnstore.records import AgentFrameRecord, ModelSpec, PersistedSessionConfig

    nodes = []
    parent = None
    for index, text in enumerate(texts):
        node_id = f"n{index}"
        role = "user" if index % 2 == 0 else "assistant"
        payload = {"role": role, "parts": [{"kind": "text", "content": text}]}
        nodes.append(SessionNodeRecord(node_id=node_id, parent_node_id=parent, payload=payload))
        parent = node_id
    # A branch off the root that is not on the active path.
    nodes.append(SessionNodeRecord(node_id="side", parent_node_id="n0", payload={"x": 1}))
    store.runtime(session_id).commit_runtime_state(
        RuntimeCommit(
            session_id=session_id,
            expected_head_revision=None,
            config=PersistedSessionConfig(provider_id="p", model=ModelSpec(name="m")),
            agent_frames=[AgentFrameRecord(frame_id="main", agent_name="main")],
            current_agent_frame_id="main",
            graph=GraphAppend(nodes=nodes, leaf_node_id=parent),
            checkpoint=HydratedSessionCheckpoint(),
        )
    )
