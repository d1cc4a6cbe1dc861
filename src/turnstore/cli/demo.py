"""Internal: a scripted two-turn agent session through the public API: no network, no model."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from turnstore import (
    ActiveExecution,
    BlockingStore,
    Checkpoint,
    Event,
    ExecutionRecord,
    SessionContext,
    TimestampedEvent,
    TranscriptPageRequest,
    new_queued_message,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentMessagePhase,
    AgentReasoningContentDeltaEvent,
    EventMsg,
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
from turnstore.records import (
    ActiveModelStep,
    PendingApproval,
    QueueBoundary,
)

SESSION_ID = "demo-session"
"""The session the demo writes."""
FORK_ID = "demo-fork"
"""The child session the demo forks from `SESSION_ID`."""
CRASH_ID = "demo-crash"
"""The session a worker process writes until it is killed mid-turn."""
OWNER_ID = "demo-user"
"""The owner both demo sessions are catalogued under."""

Chunks = Sequence[tuple[int, str]]
"""Streamed text as (milliseconds since the previous chunk, text) pairs."""

QUESTION = "What's the weather in Lisbon tomorrow? Do I need an umbrella?"
FOLLOW_UP = "And what about the weekend?"
FORECAST_CALL = ToolCall(
    call_id="call-forecast-1",
    name="get_forecast",
    arguments='{"city": "Lisbon", "days": 4}',
)
FORECAST = (
    '{"tomorrow": {"high_c": 17, "rain_mm": 4.2}, "saturday": {"high_c": 21, "rain_mm": 0},'
    ' "sunday": {"high_c": 19, "rain_mm": 1.1}}'
)
REASONING_1: Chunks = [
    (180, "The user asks about Lisbon "),
    (40, "tomorrow. I have no forecast "),
    (35, "in context, so I should call "),
    (120, "get_forecast first."),
]
COMMENTARY_1: Chunks = [(60, "Let me check "), (30, "the forecast.")]
REASONING_2: Chunks = [(150, "4.2 mm of rain tomorrow: "), (45, "recommend an umbrella.")]
ANSWER_1: Chunks = [
    (90, "Tomorrow in Lisbon: "),
    (25, "17 C with about 4 mm of rain, "),
    (30, "so yes, bring an umbrella."),
]
REASONING_3: Chunks = [(140, "The forecast I fetched "), (55, "already covers the weekend.")]
ANSWER_2: Chunks = [
    (70, "Saturday looks dry and sunny (21 C). "),
    (220, "Sunday has light showers, "),
    (35, "about 1 mm, so keep the umbrella handy."),
]


@dataclass
class Clock:
    """A simulated wall clock, so stream timings are realistic without sleeping."""

    now_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    def tick(self, elapsed_ms: int) -> int:
        """Advance by `elapsed_ms` and return the new time."""
        self.now_ms += elapsed_ms
        return self.now_ms


@dataclass(frozen=True)
class DemoResult:
    """What the demo wrote: the session, its fork and the parent sequence it forked at."""

    session_id: str
    fork_id: str
    fork_sequence: int


def _text(chunks: Chunks) -> str:
    return "".join(text for _, text in chunks)


def user_item(text: str) -> dict[str, Any]:
    """A user message in the OpenAI Responses item shape."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_item(item_id: str, text: str) -> dict[str, Any]:
    """An assistant message in the OpenAI Responses item shape."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    """A reasoning summary in the OpenAI Responses item shape."""
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": text}]}


def function_call_item(call: ToolCall) -> dict[str, Any]:
    """A function call in the OpenAI Responses item shape."""
    return {
        "type": "function_call",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "status": "completed",
    }


def function_output_item(call_id: str, output: str) -> dict[str, Any]:
    """A function call's output in the OpenAI Responses item shape."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _checked_add(total: TokenUsage, usage: TokenUsage) -> None:
    if not total.checked_add(usage):
        raise OverflowError("demo token usage overflowed")


class ScriptedSession:
    """Drives one session through the store the way an agent runtime would, step by step."""

    def __init__(self, store: BlockingStore, clock: Clock, session_id: str = SESSION_ID) -> None:
        self.store = store
        self.clock = clock
        self.session_id = session_id
        self.checkpoint = Checkpoint(
            session_id=session_id,
            session_context=demo_context(),
            model_route="scripted/no-model",
        )
        self._events: list[TimestampedEvent] = []
        self._turn_items: list[Any] = []

    @property
    def active(self) -> ActiveExecution:
        """The running turn."""
        if self.checkpoint.active_execution is None:
            raise RuntimeError("the demo script has no turn running")
        return self.checkpoint.active_execution

    @property
    def step(self) -> ActiveModelStep:
        """The model step in flight."""
        if self.checkpoint.active_model_step is None:
            raise RuntimeError("the demo script has no model step running")
        return self.checkpoint.active_model_step

    def _event(self, msg: EventMsg) -> Event:
        active = self.checkpoint.active_execution
        return Event(submission_id=None if active is None else active.submission_id, msg=msg)

    def emit(self, msg: EventMsg, after_ms: int = 5) -> None:
        """Buffer an event for the next commit, so it lands with the checkpoint it explains."""
        at = self.clock.tick(after_ms)
        self._events.append(TimestampedEvent(recorded_at_ms=at, event=self._event(msg)))

    def remember(self, item: Any) -> None:
        """Append a conversation item to the model context and to this turn's transcript."""
        self.checkpoint.context.append(item)
        self._turn_items.append(item)

    def commit(self, execution: ExecutionRecord | None = None) -> None:
        """Save the checkpoint at the next sequence with the buffered events, atomically."""
        self.checkpoint.sequence += 1
        # The transcript journal gets one batch per finished turn: what a frontend pages.
        transcript = self._turn_items if execution is not None else []
        self.store.save_with_events(self.checkpoint, transcript, execution, self._events)
        self._events = []
        if execution is not None:
            self._turn_items = []

    def start_turn(self, turn_id: str, message: MessageEvent) -> None:
        """Begin a user turn for `message`."""
        now = self.clock.tick(5)
        self.checkpoint.active_execution = ActiveExecution(
            submission_id=f"sub-{turn_id}", turn_id=turn_id, started_at_ms=now
        )
        if self.checkpoint.first_user_message is None:
            self.checkpoint.first_user_message = message.text
        self.emit(TurnStartedEvent(turn_id=turn_id, started_at_ms=now), after_ms=0)
        self.emit(UserMessageEvent(message=message, turn_id=turn_id))
        self.remember(user_item(message.text))

    def start_step(self) -> None:
        """Begin the next model step of the running turn."""
        active = self.active
        index = active.next_model_step
        step = ActiveModelStep(
            model_step_id=f"{active.turn_id}-step-{index}",
            step_index=index,
            started_at_ms=self.clock.tick(10),
        )
        active.next_model_step += 1
        self.checkpoint.active_model_step = step
        started = ModelStepStartedEvent(
            session_id=self.session_id,
            turn_id=active.turn_id,
            model_step_id=step.model_step_id,
            step_index=index,
            started_at_ms=step.started_at_ms,
        )
        self.emit(started, after_ms=0)

    def stream_reasoning(self, chunks: Chunks) -> None:
        """Journal reasoning deltas one by one, as a live frontend would receive them."""
        turn_id, step_id = self.active.turn_id, self.step.model_step_id
        for after_ms, text in chunks:
            delta = AgentReasoningContentDeltaEvent(
                session_id=self.session_id, turn_id=turn_id, model_step_id=step_id, delta=text
            )
            self.store.append_event(self.session_id, self.clock.tick(after_ms), self._event(delta))

    def stream_message(self, phase: AgentMessagePhase, chunks: Chunks) -> None:
        """Journal agent message deltas one by one, as a live frontend would receive them."""
        turn_id, step_id = self.active.turn_id, self.step.model_step_id
        for after_ms, text in chunks:
            delta = AgentMessageContentDeltaEvent(
                session_id=self.session_id,
                turn_id=turn_id,
                model_step_id=step_id,
                delta=text,
                phase=phase,
            )
            self.store.append_event(self.session_id, self.clock.tick(after_ms), self._event(delta))

    def model_step(self, reply: ModelReply) -> None:
        """Run one model step: start it durably, stream its output, then complete it."""
        self.start_step()
        self.commit()
        self.stream_reasoning(reply.reasoning)
        self.stream_message(reply.phase, reply.message)
        self.complete_step(reply)

    def complete_step(self, reply: ModelReply) -> None:
        """Complete the model step in flight; the next commit compacts its deltas."""
        step, active = self.step, self.active
        reasoning, message = step_content(reply)
        outcome = ModelStepCompleted(
            end_turn=not reply.calls,
            tool_call_ids=[call.call_id for call in reply.calls],
            usage=reply.usage,
            content=[reasoning, message],
        )
        completed = ModelStepCompletedEvent(
            session_id=self.session_id,
            turn_id=active.turn_id,
            model_step_id=step.model_step_id,
            step_index=step.step_index,
            started_at_ms=step.started_at_ms,
            completed_at_ms=self.clock.tick(15),
            outcome=outcome,
        )
        self.emit(completed, after_ms=0)
        self.checkpoint.active_model_step = None
        active.model_calls += 1
        self.count_usage(reply.usage)
        self.remember(reasoning_item(f"rs-{step.model_step_id}", reasoning.text))
        self.remember(assistant_item(f"msg-{step.model_step_id}", message.text))
        for call in reply.calls:
            self.remember(function_call_item(call))

    def count_usage(self, usage: TokenUsage) -> None:
        """Add one model call's usage to the turn and the session, and report the totals."""
        _checked_add(self.active.usage, usage)
        _checked_add(self.checkpoint.total_usage, usage)
        self.checkpoint.last_usage = usage
        # Copies: buffered events are encoded at the next commit, after totals may grow.
        total = msgspec.structs.replace(self.checkpoint.total_usage)
        self.emit(TokenCountEvent(total_usage=total, last_usage=msgspec.structs.replace(usage)))

    def request_approval(self, call: ToolCall) -> None:
        """Park the tool call until a person decides, durably, and ask the frontend."""
        active = self.active
        approval = PendingApproval(
            submission_id=active.submission_id,
            turn_id=active.turn_id,
            request_id=f"approval-{call.call_id}",
            approval_call_ids=[call.call_id],
            authorized_call_ids=[],
            calls=[call],
            reason="it reaches the network",
            sandbox_mode="read_only",
            network_access="enabled",
        )
        self.checkpoint.pending_tools = [call]
        self.checkpoint.pending_approval = approval
        self.emit(approval.request_event())
        self.commit()

    def approve(self, call: ToolCall) -> None:
        """Record the person's approval and start the tool call."""
        self.checkpoint.pending_approval = None
        # A person takes a while to decide; the tool starts once they have.
        self.emit(ToolCallBeginEvent(turn_id=self.active.turn_id, call=call), after_ms=2_400)
        self.commit()

    def finish_tool(self, call: ToolCall, output: str) -> None:
        """End the tool call with its output."""
        active = self.active
        self.emit(ToolCallEndEvent(turn_id=active.turn_id, call_id=call.call_id, output=output))
        active.tool_calls += 1
        self.checkpoint.pending_tools = []
        self.remember(function_output_item(call.call_id, output))

    def queue_message(self, message_id: str, text: str) -> None:
        """Accept user input while the turn runs; it waits durably for the turn to end."""
        message = MessageEvent(author=demo_author(), delivery="queue", text=text)
        queued = new_queued_message(OWNER_ID, message_id, QueueBoundary(), message)
        self.checkpoint.pending_messages.append(queued)
        self.clock.tick(350)
        self.commit()

    def finish_turn(self, last_message: str) -> None:
        """End the running turn and commit it with its record and transcript batch."""
        turn_id = self.active.turn_id
        self.emit(TurnCompleteEvent(turn_id=turn_id, last_agent_message=last_message))
        record = self.checkpoint.finish_execution("completed", self.clock.now_ms)
        self.commit(record)

    def deliver_queued(self, turn_id: str) -> None:
        """Start the next turn with the oldest queued message."""
        queued = self.checkpoint.pending_messages.pop(0)
        self.start_turn(turn_id, queued.event())


@dataclass(frozen=True)
class ModelReply:
    """What the scripted model streams in one step: reasoning, then a message or tool calls."""

    reasoning: Chunks
    phase: AgentMessagePhase
    message: Chunks
    usage: TokenUsage
    calls: Sequence[ToolCall] = ()


def step_content(reply: ModelReply) -> tuple[ModelStepContent, ModelStepContent]:
    """The authoritative reasoning and message text of a completed step."""
    reasoning = ModelStepContent(
        output_index=0, part_index=0, phase="reasoning", text=_text(reply.reasoning)
    )
    message = ModelStepContent(
        output_index=1, part_index=0, phase=reply.phase, text=_text(reply.message)
    )
    return reasoning, message


def demo_context() -> SessionContext:
    """Where the demo sessions come from, as the catalog shows it."""
    return SessionContext(owner_id=OWNER_ID, workspace_label="demo", origin_label="turnstore demo")


def demo_author() -> MessageAuthor:
    """The person talking to the scripted agent."""
    return MessageAuthor(role="user", id=OWNER_ID, name="Demo User")


def usage(input_tokens: int, cached: int, output_tokens: int, reasoning: int) -> TokenUsage:
    """Token usage of one model call; the total counts input and output."""
    return TokenUsage(
        input_tokens=input_tokens,
        cached_input_tokens=cached,
        output_tokens=output_tokens,
        reasoning_output_tokens=reasoning,
        total_tokens=input_tokens + output_tokens,
    )


def replies() -> list[ModelReply]:
    """The three model steps of the script, in order."""
    return [
        ModelReply(
            REASONING_1,
            "commentary",
            COMMENTARY_1,
            usage(412, 0, 58, 31),
            [FORECAST_CALL],
        ),
        ModelReply(
            REASONING_2,
            "final_answer",
            ANSWER_1,
            usage(538, 412, 47, 14),
        ),
        ModelReply(
            REASONING_3,
            "final_answer",
            ANSWER_2,
            usage(640, 538, 52, 12),
        ),
    ]


def run_demo(store: BlockingStore, clock: Clock | None = None) -> DemoResult:
    """Write the scripted session and its fork into `store`; return what was written."""
    session = ScriptedSession(store, clock or Clock())
    first, second, third = replies()
    question = MessageEvent(author=demo_author(), delivery="turn", text=QUESTION)
    session.start_turn("turn-1", question)
    session.model_step(first)
    session.request_approval(FORECAST_CALL)
    session.approve(FORECAST_CALL)
    session.queue_message("follow-up-1", FOLLOW_UP)
    session.finish_tool(FORECAST_CALL, FORECAST)
    session.model_step(second)
    session.finish_turn(_text(ANSWER_1))
    fork_sequence = session.checkpoint.sequence
    session.deliver_queued("turn-2")
    session.model_step(third)
    session.finish_turn(_text(ANSWER_2))
    fork_session(store, fork_sequence)
    return DemoResult(SESSION_ID, FORK_ID, fork_sequence)


def fork_session(store: BlockingStore, parent_sequence: int) -> None:
    """Branch `FORK_ID` off the demo session at `parent_sequence`, with the history so far."""
    request = TranscriptPageRequest(before_sequence=parent_sequence + 1, max_batches=100)
    page = store.transcript_page(SESSION_ID, request)
    history = [item for _, item in page.into_positioned_items_chronological()]
    child = Checkpoint(
        session_id=FORK_ID,
        session_context=demo_context(),
        first_user_message=QUESTION,
        context=history,
    )
    store.fork(SESSION_ID, parent_sequence, child)
