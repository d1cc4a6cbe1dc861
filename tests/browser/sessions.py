"""Sessions the viewer's tests write through the public API: turns with events and records."""

from __future__ import annotations

import time
from typing import Any

from turnstore import (
    ActiveExecution,
    BlockingStore,
    Checkpoint,
    Event,
    SessionContext,
    TimestampedEvent,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentMessageEvent,
    AgentReasoningContentDeltaEvent,
    MessageAuthor,
    MessageEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepContent,
    ModelStepStartedEvent,
    TokenCountEvent,
    TokenUsage,
    ToolCall,
    ToolCallBeginEvent,
    ToolCallEndEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    UserMessageEvent,
)


def now_ms() -> int:
    """Wall-clock milliseconds, as a runtime stamps its events."""
    return time.time_ns() // 1_000_000


def new_session(
    store: BlockingStore, session_id: str, owner: str | None = "alice", text: str = "hello"
) -> Checkpoint:
    """Create a session holding one user item; return its checkpoint for later turns."""
    checkpoint = Checkpoint(
        session_id=session_id,
        session_context=SessionContext(owner_id=owner, workspace_label="browser tests"),
        first_user_message=text,
    )
    checkpoint.sequence = 1
    item = {"type": "message", "role": "user", "content": text}
    checkpoint.context.append(item)
    store.save(checkpoint, [item])
    return checkpoint


def _event(turn_id: str, at: int, msg: Any) -> TimestampedEvent:
    return TimestampedEvent(recorded_at_ms=at, event=Event(submission_id=f"sub-{turn_id}", msg=msg))


def start_turn(store: BlockingStore, checkpoint: Checkpoint, turn_id: str, question: str) -> int:
    """Commit the start of a turn and its first model step; return the step's start time."""
    started = now_ms()
    checkpoint.active_execution = ActiveExecution(
        submission_id=f"sub-{turn_id}", turn_id=turn_id, started_at_ms=started
    )
    message = MessageEvent(
        author=MessageAuthor(role="user", name="Ada"), delivery="turn", text=question
    )
    step = ModelStepStartedEvent(
        session_id=checkpoint.session_id,
        turn_id=turn_id,
        model_step_id=f"{turn_id}-step-0",
        step_index=0,
        started_at_ms=started + 2,
    )
    checkpoint.sequence += 1
    store.save_with_events(
        checkpoint,
        events=[
            _event(turn_id, started, TurnStartedEvent(turn_id=turn_id, started_at_ms=started)),
            _event(turn_id, started + 1, UserMessageEvent(message=message, turn_id=turn_id)),
            _event(turn_id, started + 2, step),
        ],
    )
    return started + 2


def stream_reasoning(
    store: BlockingStore, checkpoint: Checkpoint, turn_id: str, chunks: list[str]
) -> None:
    """Journal the step's streamed reasoning deltas one by one."""
    for chunk in chunks:
        delta = AgentReasoningContentDeltaEvent(
            session_id=checkpoint.session_id,
            turn_id=turn_id,
            model_step_id=f"{turn_id}-step-0",
            delta=chunk,
        )
        store.append_event(
            checkpoint.session_id, now_ms(), Event(submission_id=f"sub-{turn_id}", msg=delta)
        )


def stream_answer(
    store: BlockingStore, checkpoint: Checkpoint, turn_id: str, chunks: list[str]
) -> None:
    """Journal the answer's streamed deltas one by one, as a live runtime does."""
    for chunk in chunks:
        delta = AgentMessageContentDeltaEvent(
            session_id=checkpoint.session_id,
            turn_id=turn_id,
            model_step_id=f"{turn_id}-step-0",
            delta=chunk,
            phase="final_answer",
        )
        store.append_event(
            checkpoint.session_id, now_ms(), Event(submission_id=f"sub-{turn_id}", msg=delta)
        )


def finish_turn(
    store: BlockingStore,
    checkpoint: Checkpoint,
    turn_id: str,
    question: str,
    answer: str,
    step_started: int,
    *,
    tool_output: str = '{"ok": true}',
    tool_success: bool = True,
) -> None:
    """Commit the step's completion, one tool call, the answer and the finished turn."""
    at = max(now_ms(), step_started + 40)
    usage = TokenUsage(
        input_tokens=420, cached_input_tokens=128, output_tokens=64, total_tokens=484
    )
    call = ToolCall(
        call_id=f"{turn_id}-call", name="search_docs", arguments='{"query": "turnstore"}'
    )
    completed = ModelStepCompletedEvent(
        session_id=checkpoint.session_id,
        turn_id=turn_id,
        model_step_id=f"{turn_id}-step-0",
        step_index=0,
        started_at_ms=step_started,
        completed_at_ms=at,
        outcome=ModelStepCompleted(
            end_turn=True,
            usage=usage,
            content=[
                ModelStepContent(output_index=0, part_index=0, phase="final_answer", text=answer)
            ],
        ),
    )
    events = [
        _event(turn_id, at, completed),
        _event(turn_id, at + 1, TokenCountEvent(total_usage=usage, last_usage=usage)),
        _event(turn_id, at + 2, ToolCallBeginEvent(turn_id=turn_id, call=call)),
        _event(
            turn_id,
            at + 90,
            ToolCallEndEvent(
                turn_id=turn_id, call_id=call.call_id, output=tool_output, success=tool_success
            ),
        ),
        _event(
            turn_id,
            at + 95,
            AgentMessageEvent(
                session_id=checkpoint.session_id,
                turn_id=turn_id,
                model_step_id=f"{turn_id}-step-0",
                message=answer,
            ),
        ),
        _event(turn_id, at + 100, TurnCompleteEvent(turn_id=turn_id, last_agent_message=answer)),
    ]
    active = checkpoint.active_execution
    assert active is not None
    active.model_calls += 1
    active.tool_calls += 1
    active.failed_tool_calls += 0 if tool_success else 1
    active.usage = usage
    record = checkpoint.finish_execution("completed", at + 100)
    items = [
        {"type": "message", "role": "user", "content": question},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": answer}],
        },
    ]
    checkpoint.context.extend(items)
    checkpoint.sequence += 1
    store.save_with_events(checkpoint, items, record, events)


def whole_turn(
    store: BlockingStore,
    checkpoint: Checkpoint,
    turn_id: str,
    question: str,
    answer: str,
    **kwargs: Any,
) -> None:
    """Write one finished turn with its events, transcript batch and execution record."""
    started = start_turn(store, checkpoint, turn_id, question)
    stream_answer(
        store, checkpoint, turn_id, [answer[: len(answer) // 2], answer[len(answer) // 2 :]]
    )
    finish_turn(store, checkpoint, turn_id, question, answer, started, **kwargs)
