"""Property: journaling a batch of events in one save leaves what appending them one by one does.

A save decides the batch's compaction in memory: deltas its own completed steps make redundant
are never written, only its last token count is, and only stored rows are deleted. Hypothesis
draws histories of batches mixing deltas of two steps (with clock regressions), completed and
failed steps, token counts, warnings and transient events. One session takes each batch in one
`save_with_events`; a twin takes the same batch through one `append_event` per event, where
each compaction is a read and a delete of stored rows. The returned records and the whole
stored journal must be equal, on both backends.
"""

from __future__ import annotations

import uuid
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from turnstore import Checkpoint, Event, EventPageRequest, TimestampedEvent
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentReasoningContentDeltaEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepFailed,
    SessionHistoryEvent,
    TokenCountEvent,
    TokenUsage,
    WarningEvent,
)

STEPS = ("step-a", "step-b")


def _completed(step: str, failed: bool) -> Any:
    outcome = ModelStepFailed(message="boom") if failed else ModelStepCompleted(end_turn=True)
    return ModelStepCompletedEvent(
        session_id="s",
        turn_id="t",
        model_step_id=step,
        step_index=0,
        started_at_ms=1,
        completed_at_ms=2,
        outcome=outcome,
    )


_MESSAGES = st.one_of(
    st.builds(
        lambda step, text, phase: AgentMessageContentDeltaEvent(
            session_id="s", turn_id="t", model_step_id=step, delta=text, phase=phase
        ),
        st.sampled_from(STEPS),
        st.text(max_size=5),
        st.sampled_from(["commentary", "final_answer"]),
    ),
    st.builds(
        lambda step, text: AgentReasoningContentDeltaEvent(
            session_id="s", turn_id="t", model_step_id=step, delta=text
        ),
        st.sampled_from(STEPS),
        st.text(max_size=5),
    ),
    st.builds(_completed, st.sampled_from(STEPS), st.booleans()),
    st.builds(
        lambda total: TokenCountEvent(total_usage=TokenUsage(total_tokens=total)),
        st.integers(0, 100),
    ),
    st.builds(lambda text: WarningEvent(message=text), st.text(max_size=5)),
    st.just(SessionHistoryEvent(session_id="s")),
)
_EVENTS = st.builds(
    lambda at, msg: TimestampedEvent(recorded_at_ms=at, event=Event(msg=msg)),
    st.integers(0, 50),
    _MESSAGES,
)
_HISTORIES = st.lists(st.lists(_EVENTS, max_size=8), min_size=1, max_size=5)


def _journal(store: Any, session_id: str) -> list[Any]:
    page = store.event_page(session_id, EventPageRequest(limit=1_000))
    return [(e.sequence, e.recorded_at_ms, e.event, e.stream_metrics) for e in page.events]


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(history=_HISTORIES)
def test_a_batch_journals_what_one_append_per_event_does(blocking_store, history):
    """Batch and one-by-one appends return the same records and leave the same journal."""
    store = blocking_store
    batched, single = (f"{name}-{uuid.uuid4().hex}" for name in ("batch", "single"))
    batch_checkpoint, single_checkpoint = Checkpoint.empty(batched), Checkpoint.empty(single)
    store.save(single_checkpoint)
    for events in history:
        batch_checkpoint.sequence += 1
        from_batch = store.save_with_events(batch_checkpoint, [], None, events)
        from_single = [store.append_event(single, e.recorded_at_ms, e.event) for e in events]
        assert [(e.sequence, e.stream_metrics) for e in from_batch] == [
            (e.sequence, e.stream_metrics) for e in from_single
        ]
        assert _journal(store, batched) == _journal(store, single)
    _pages_agree(store, batched)


def _pages_agree(store: Any, session_id: str) -> None:
    """Pages of any size, from any cursor, give the journal a whole read gives.

    A save's kept events are one batch row, pending deltas and token counts a row each: a
    cursor may fall inside a batch, and a page may take part of one.
    """
    whole = [
        event.sequence
        for event in store.event_page(session_id, EventPageRequest(limit=1_000)).events
    ]
    for limit in (1, 2, 3, 5):
        walked: list[int] = []
        before = None
        while True:
            page = store.event_page(
                session_id, EventPageRequest(before_sequence=before, limit=limit)
            )
            assert len(page.events) <= limit
            walked += [event.sequence for event in page.events]
            if page.next_before_sequence is None:
                break
            assert before is None or page.next_before_sequence < before
            before = page.next_before_sequence
        assert walked == whole, limit
        for start in (0, *whole[len(whole) // 2 :: 2]):
            forward: list[int] = []
            after = start
            while True:
                found = store.events_after(session_id, after, limit).events
                assert len(found) <= limit
                forward += [event.sequence for event in found]
                if len(found) < limit:
                    break
                assert found[-1].sequence > after
                after = found[-1].sequence
            assert forward == sorted(sequence for sequence in whole if sequence > start)
    # The largest cursor there is: nothing after it, and no arithmetic past the range.
    assert store.events_after(session_id, 2**63 - 1, 5).events == []
