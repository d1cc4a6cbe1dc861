"""The frontend events and execution record one benchmark turn produces, for turnstore."""

from __future__ import annotations

from bench.workload import Turn
from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    ExecutionRecord,
    TimestampedEvent,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    EventMsg,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepContent,
    ModelStepStartedEvent,
    TokenUsage,
    ToolCall,
    ToolCallBeginEvent,
    ToolCallEndEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
)

DELTA_CHARS = 100
"""Characters per streamed delta of the assistant's answer (~10 deltas per turn)."""
EPOCH_MS = 1_700_000_000_000
"""The simulated clock's start: event times are deterministic, not wall time."""


class TurnEvents:
    """Builds one turn's events on a checkpoint: a tool-calling step, then a streamed answer."""

    def __init__(self, checkpoint: Checkpoint, turn: Turn) -> None:
        self.checkpoint = checkpoint
        self.turn = turn
        self.turn_id = f"{checkpoint.session_id}-turn-{checkpoint.sequence}"
        self.now_ms = EPOCH_MS + checkpoint.sequence * 60_000
        self.events: list[TimestampedEvent] = []
        self.active = ActiveExecution(
            submission_id=f"sub-{self.turn_id}", turn_id=self.turn_id, started_at_ms=self.now_ms
        )

    def build(self) -> tuple[list[TimestampedEvent], ExecutionRecord]:
        """Run the turn's steps on the checkpoint and return its events and finished record."""
        self.checkpoint.active_execution = self.active
        self.emit(TurnStartedEvent(turn_id=self.turn_id, started_at_ms=self.now_ms))
        call = self.turn.call
        tool_call = ToolCall(
            call_id=call["call_id"], name=call["name"], arguments=call["arguments"]
        )
        self.model_step([], tool_call_ids=[tool_call.call_id])
        self.emit(ToolCallBeginEvent(turn_id=self.turn_id, call=tool_call), after_ms=20)
        self.emit(
            ToolCallEndEvent(
                turn_id=self.turn_id, call_id=tool_call.call_id, output=self.turn.tool_output
            ),
            after_ms=400,
        )
        self.active.tool_calls += 1
        self.model_step(chunks(self.turn.assistant_text), tool_call_ids=[])
        self.emit(
            TurnCompleteEvent(turn_id=self.turn_id, last_agent_message=self.turn.assistant_text)
        )
        return self.events, self.checkpoint.finish_execution("completed", self.now_ms)

    def emit(self, msg: EventMsg, after_ms: int = 5) -> None:
        self.now_ms += after_ms
        event = Event(submission_id=self.active.submission_id, msg=msg)
        self.events.append(TimestampedEvent(recorded_at_ms=self.now_ms, event=event))

    def model_step(self, deltas: list[str], tool_call_ids: list[str]) -> None:
        """One model call: started, its answer streamed in deltas, completed with usage."""
        index = self.active.next_model_step
        self.active.next_model_step += 1
        step_id = f"{self.turn_id}-step-{index}"
        started_at = self.now_ms + 10
        ids = {"session_id": self.checkpoint.session_id, "turn_id": self.turn_id}
        self.emit(
            ModelStepStartedEvent(
                **ids, model_step_id=step_id, step_index=index, started_at_ms=started_at
            ),
            after_ms=10,
        )
        for delta in deltas:
            self.emit(
                AgentMessageContentDeltaEvent(
                    **ids, model_step_id=step_id, delta=delta, phase="final_answer"
                ),
                after_ms=30,
            )
        usage = TokenUsage(input_tokens=900, output_tokens=250, total_tokens=1_150)
        content = [
            ModelStepContent(output_index=0, part_index=0, phase="final_answer", text=text)
            for text in ["".join(deltas)]
            if text
        ]
        outcome = ModelStepCompleted(
            end_turn=not tool_call_ids, tool_call_ids=tool_call_ids, usage=usage, content=content
        )
        self.emit(
            ModelStepCompletedEvent(
                **ids,
                model_step_id=step_id,
                step_index=index,
                started_at_ms=started_at,
                completed_at_ms=self.now_ms + 15,
                outcome=outcome,
            ),
            after_ms=15,
        )
        self.active.model_calls += 1
        self.active.usage.checked_add(usage)
        self.checkpoint.total_usage.checked_add(usage)


def chunks(text: str) -> list[str]:
    """Split streamed text into deltas of `DELTA_CHARS` characters."""
    return [text[start : start + DELTA_CHARS] for start in range(0, len(text), DELTA_CHARS)]
