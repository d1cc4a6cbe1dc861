"""A complete agent loop on turnstore, with a scripted model: no framework, no network.

Each run answers the next question of a short script as one turn: the turn's events (turn
started, the model step with its streamed text, a tool call, turn complete), its transcript
items and its finished-turn record commit with the checkpoint in one transaction. Run it again
and it resumes at the next question; kill it at any point and the next run resumes after the
last turn that committed.

    python examples/agent_loop.py [DATABASE_URL]
"""

from __future__ import annotations

import sys
import time
from typing import Any

import turnstore
from turnstore import ActiveExecution, Checkpoint, Event, SessionContext, TimestampedEvent
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

SESSION = "loop-1"
QUESTIONS = ["What's the weather in Lisbon?", "And in Porto?", "And in Faro?"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def scripted_model(question: str) -> tuple[str, str]:
    """The tool to call and the answer: what a model would decide, fixed for the example."""
    city = question.removesuffix("?").split()[-1]
    return city, f"{city}: 17 C with light rain. Take an umbrella."


def run_turn(store: turnstore.BlockingStore, checkpoint: Checkpoint, question: str) -> None:
    """Run one user turn and commit it whole."""
    turn_id = f"turn-{checkpoint.sequence + 1}"
    step_id = f"{turn_id}-step-0"
    events: list[TimestampedEvent] = []

    def emit(msg: Any) -> None:
        events.append(TimestampedEvent(recorded_at_ms=now_ms(), event=Event(msg=msg)))

    started = now_ms()
    checkpoint.active_execution = ActiveExecution(
        submission_id=turn_id, turn_id=turn_id, started_at_ms=started, model_calls=1
    )
    emit(TurnStartedEvent(turn_id=turn_id, started_at_ms=started))
    user = {"role": "user", "content": question}
    city, answer = scripted_model(question)
    step = {"session_id": SESSION, "turn_id": turn_id, "model_step_id": step_id}
    emit(ModelStepStartedEvent(**step, step_index=0, started_at_ms=now_ms()))
    call = ToolCall(call_id=f"{turn_id}-call", name="get_forecast", arguments=f'"{city}"')
    emit(ToolCallBeginEvent(turn_id=turn_id, call=call))
    emit(ToolCallEndEvent(turn_id=turn_id, call_id=call.call_id, output=answer))
    for word in answer.split(" "):
        emit(AgentMessageContentDeltaEvent(**step, delta=word + " ", phase="final_answer"))
    emit(
        ModelStepCompletedEvent(
            **step,
            step_index=0,
            started_at_ms=started,
            completed_at_ms=now_ms(),
            outcome=ModelStepCompleted(end_turn=False, tool_call_ids=[call.call_id]),
        )
    )
    emit(TurnCompleteEvent(turn_id=turn_id, last_agent_message=answer))
    reply = {"role": "assistant", "content": answer}
    checkpoint.context += [user, reply]
    checkpoint.active_execution.tool_calls = 1
    record = checkpoint.finish_execution("completed", now_ms())
    checkpoint.sequence += 1
    store.save_with_events(checkpoint, [user, reply], record, events)


def main(url: str) -> None:
    with turnstore.open_blocking(url) as store:
        checkpoint = store.load(SESSION) or Checkpoint(
            session_id=SESSION, session_context=SessionContext(owner_id="example")
        )
        done = checkpoint.execution_stats.run_count
        if done >= len(QUESTIONS):
            print(f"{SESSION}: all {done} questions answered; start over with a new file")
            return
        run_turn(store, checkpoint, QUESTIONS[done])
        turn = store.event_turn_page(SESSION)
        kinds = [event.event.msg.__struct_config__.tag for event in turn.into_chronological()]
        print(f"{SESSION} turn {done + 1}: {QUESTIONS[done]!r} -> journal {kinds}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///agent_loop.sqlite3")
