"""Contract: the event journal — sequencing, paging, transient events, compaction, turn pages.

Ports the seed-003 tests `event_journal_sequences_and_pages_normalized_events`,
`transient_controls_advance_sequence_without_entering_history`,
`completed_model_step_compacts_progressive_deltas` and
`incomplete_model_steps_retain_progressive_deltas`, and the seed-002 `event_turn_page` walk.
"""

from __future__ import annotations

from turnstore import (
    Checkpoint,
    Event,
    EventPageRequest,
    SessionContext,
    TimestampedEvent,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentReasoningContentDeltaEvent,
    FrontendEventMsg,
    FrontendPicker,
    FrontendPreview,
    FrontendRemoveWidget,
    FrontendWidget,
    FrontendWidgetEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepContent,
    ModelStepFailed,
    ModelStepInterrupted,
    ModelStepStartedEvent,
    SessionHistoryEvent,
    SessionResumeRequestedEvent,
    TokenCountEvent,
    TokenUsage,
    TurnAbortedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    UrlCitation,
    WarningEvent,
)
from turnstore.records import (
    JournalEvent,
    StreamMetrics,
)


def warning(message: str) -> Event:
    """A durable warning event."""
    return Event(msg=WarningEvent(message=message))


def stamped(recorded_at_ms: int, event: Event) -> TimestampedEvent:
    """Pair an event with its receipt time."""
    return TimestampedEvent(recorded_at_ms=recorded_at_ms, event=event)


def started(turn_id: str) -> Event:
    """A task_started event."""
    return Event(msg=TurnStartedEvent(turn_id=turn_id))


def complete(turn_id: str) -> Event:
    """A task_complete event."""
    return Event(msg=TurnCompleteEvent(turn_id=turn_id))


def step_started(model_step_id: str) -> Event:
    """A model_step_started event of turn `turn`."""
    return Event(
        submission_id="submission",
        msg=ModelStepStartedEvent(
            session_id="session",
            turn_id="turn",
            model_step_id=model_step_id,
            step_index=0,
            started_at_ms=10,
        ),
    )


def message_delta(model_step_id: str, delta: str, phase: str = "final_answer") -> Event:
    """An agent_message_content_delta event."""
    return Event(
        submission_id="submission",
        msg=AgentMessageContentDeltaEvent(
            session_id="session",
            turn_id="turn",
            model_step_id=model_step_id,
            delta=delta,
            phase=phase,
        ),
    )


def reasoning_delta(model_step_id: str, delta: str) -> Event:
    """An agent_reasoning_content_delta event."""
    return Event(
        submission_id="submission",
        msg=AgentReasoningContentDeltaEvent(
            session_id="session", turn_id="turn", model_step_id=model_step_id, delta=delta
        ),
    )


def step_completed(model_step_id: str, outcome) -> Event:
    """A model_step_completed event with `outcome`."""
    return Event(
        submission_id="submission",
        msg=ModelStepCompletedEvent(
            session_id="session",
            turn_id="turn",
            model_step_id=model_step_id,
            step_index=0,
            started_at_ms=10,
            completed_at_ms=20,
            outcome=outcome,
        ),
    )


async def new_session(store, session_id: str = "session") -> Checkpoint:
    """Save an empty checkpoint so the session exists."""
    checkpoint = Checkpoint.empty(session_id)
    await store.save(checkpoint)
    return checkpoint


async def all_events(store, session_id: str = "session") -> list[JournalEvent]:
    """Every journaled event of a session, oldest first."""
    page = await store.event_page(session_id, EventPageRequest(limit=10_000))
    assert page.next_before_sequence is None
    return page.into_chronological()


async def test_event_journal_sequences_and_pages_normalized_events(store):
    """append_event assigns sequences 1, 2, … and event_page pages them newest first."""
    await new_session(store)
    appended = []
    for recorded_at_ms, message in [(10, "first"), (20, "second")]:
        appended.append(await store.append_event("session", recorded_at_ms, warning(message)))

    newest = await store.event_page("session", EventPageRequest(before_sequence=None, limit=1))
    older = await store.event_page(
        "session", EventPageRequest(before_sequence=newest.next_before_sequence, limit=1)
    )
    assert newest.events[0].sequence == 2
    assert newest.latest_sequence == 2
    assert newest.events[0].recorded_at_ms == 20
    assert newest.next_before_sequence == 2
    assert older.events[0].sequence == 1
    assert older.next_before_sequence is None
    assert older.latest_sequence == 2
    assert appended == [
        JournalEvent(sequence=1, recorded_at_ms=10, event=warning("first"), stream_metrics=[]),
        JournalEvent(sequence=2, recorded_at_ms=20, event=warning("second"), stream_metrics=[]),
    ]
    assert newest.events == [appended[1]]
    assert older.events == [appended[0]]


async def test_event_page_of_a_session_without_events(store):
    """event_page of an existing session with no events is empty with latest_sequence 0."""
    await new_session(store)
    page = await store.event_page("session", EventPageRequest(limit=5))
    assert (page.latest_sequence, page.events, page.next_before_sequence) == (0, [], None)


async def test_event_sequences_are_per_session(store):
    """Each session numbers its events from 1, independently of other sessions."""
    await new_session(store, "a")
    await new_session(store, "b")
    await store.append_event("a", 1, warning("a1"))
    await store.append_event("a", 2, warning("a2"))
    first_b = await store.append_event("b", 3, warning("b1"))
    assert first_b.sequence == 1
    assert [event.sequence for event in await all_events(store, "a")] == [1, 2]
    assert [event.event for event in await all_events(store, "b")] == [warning("b1")]


async def test_event_sequence_survives_checkpoint_saves(store):
    """Saving checkpoints neither resets nor consumes the session's event sequence."""
    checkpoint = await new_session(store)
    await store.append_event("session", 1, warning("one"))
    checkpoint.sequence = 1
    await store.save(checkpoint, [{"role": "user"}])
    second = await store.append_event("session", 2, warning("two"))
    assert second.sequence == 2


async def test_transient_controls_advance_sequence_without_entering_history(store):
    """Transient events take a sequence (latest_sequence) but are never kept in history."""
    await new_session(store)
    events = [
        WarningEvent(message="durable"),
        SessionResumeRequestedEvent(session_id="session", context=SessionContext()),
        FrontendEventMsg(event=FrontendPicker(title="Choose", options=[])),
        FrontendEventMsg(
            event=FrontendPreview(
                id="preview",
                title="Preview",
                subtitle="",
                page_id="preview:latest",
                update="replace",
                events=[],
                next=None,
            )
        ),
        FrontendEventMsg(
            event=FrontendWidgetEvent(
                capability="test",
                item=FrontendWidget(
                    id="status",
                    slot="header",
                    text="Current",
                    tone="neutral",
                    symbol=None,
                    icon_only=False,
                    progress=None,
                    content=None,
                    action=None,
                ),
            )
        ),
        FrontendEventMsg(event=FrontendRemoveWidget(capability="test", id="status")),
        SessionHistoryEvent(session_id="session", items=[{"role": "user"}]),
    ]
    returned = []
    for index, msg in enumerate(events):
        returned.append(await store.append_event("session", index, Event(msg=msg)))

    page = await store.event_page("session", EventPageRequest(before_sequence=None, limit=10))
    assert page.latest_sequence == 7
    assert [event.sequence for event in page.events] == [1]
    assert [event.sequence for event in returned] == [1, 2, 3, 4, 5, 6, 7]
    assert [event.event.msg for event in returned] == events


async def test_transient_events_in_a_batch_take_sequences_but_are_not_kept(store):
    """save_with_events numbers transient events but only durable ones enter history."""
    checkpoint = Checkpoint.empty("session")
    returned = await store.save_with_events(
        checkpoint,
        [],
        None,
        [
            stamped(1, Event(msg=SessionHistoryEvent(session_id="session"))),
            stamped(2, warning("kept")),
            stamped(3, Event(msg=FrontendEventMsg(event=FrontendPicker(title="Pick")))),
        ],
    )
    assert [event.sequence for event in returned] == [1, 2, 3]
    page = await store.event_page("session", EventPageRequest(limit=10))
    assert page.latest_sequence == 3
    assert page.events == [returned[1]]


async def test_token_count_supersedes_earlier_token_counts(store):
    """A token_count event replaces every earlier token_count of its session in the journal."""
    await new_session(store)
    await new_session(store, "other")
    other = await store.append_event(
        "other", 1, Event(msg=TokenCountEvent(total_usage=TokenUsage(total_tokens=7)))
    )
    await store.append_event(
        "session", 1, Event(msg=TokenCountEvent(total_usage=TokenUsage(total_tokens=1)))
    )
    await store.append_event("session", 2, warning("between"))
    await store.append_event(
        "session", 3, Event(msg=TokenCountEvent(total_usage=TokenUsage(total_tokens=2)))
    )
    newest = await store.append_event(
        "session",
        4,
        Event(
            msg=TokenCountEvent(
                total_usage=TokenUsage(total_tokens=5), last_usage=TokenUsage(total_tokens=3)
            )
        ),
    )

    page = await store.event_page("session", EventPageRequest(limit=10))
    assert page.latest_sequence == 4
    assert [event.sequence for event in page.events] == [4, 2]
    assert page.events[0] == newest
    assert page.events[1].event == warning("between")
    assert await all_events(store, "other") == [other]


async def test_completed_model_step_compacts_progressive_deltas(store):
    """A completed model step removes its streamed deltas and keeps its content and metrics."""
    await new_session(store)
    content = [
        ModelStepContent(
            output_index=0, part_index=0, phase="reasoning", text="Plan", annotations=[]
        ),
        ModelStepContent(
            output_index=1,
            part_index=0,
            phase="final_answer",
            text="Done",
            annotations=[
                UrlCitation(url="https://example.com", title="Example", start_index=0, end_index=4)
            ],
        ),
    ]
    events = [
        step_started("step"),
        reasoning_delta("step", "Plan"),
        message_delta("step", "Done", "final_answer"),
        step_completed(
            "step",
            ModelStepCompleted(
                end_turn=True, tool_call_ids=[], usage=TokenUsage(), content=content
            ),
        ),
    ]
    for index, event in enumerate(events):
        await store.append_event("session", 10 + index, event)

    page = await all_events(store)
    assert [event.sequence for event in page] == [1, 4]
    msg = page[1].event.msg
    assert isinstance(msg, ModelStepCompletedEvent)
    assert isinstance(msg.outcome, ModelStepCompleted)
    assert msg.outcome.content == content
    assert [
        (metrics.phase, metrics.chunk_count, metrics.utf8_bytes)
        for metrics in page[1].stream_metrics
    ] == [("reasoning", 1, 4), ("final_answer", 1, 4)]


async def test_completed_model_step_records_stream_metrics(store):
    """A completed step's event carries per-phase first/last time, chunks, bytes, longest gap."""
    await new_session(store)
    timeline = [
        (10, step_started("step")),
        (100, reasoning_delta("step", "ab")),
        (120, message_delta("other", "kept", "final_answer")),
        (130, reasoning_delta("step", "cde")),
        (140, message_delta("step", "é!", "commentary")),
        (150, message_delta("step", "Done", "final_answer")),
        (190, message_delta("step", ".", "final_answer")),
        (195, message_delta("step", "!", "final_answer")),
    ]
    for recorded_at_ms, event in timeline:
        await store.append_event("session", recorded_at_ms, event)
    completed = await store.append_event(
        "session", 200, step_completed("step", ModelStepCompleted(end_turn=True))
    )

    expected = [
        StreamMetrics(
            phase="reasoning",
            first_delta_at_ms=100,
            last_delta_at_ms=130,
            chunk_count=2,
            utf8_bytes=5,
            longest_gap_ms=30,
        ),
        StreamMetrics(
            phase="commentary",
            first_delta_at_ms=140,
            last_delta_at_ms=140,
            chunk_count=1,
            utf8_bytes=3,
            longest_gap_ms=0,
        ),
        StreamMetrics(
            phase="final_answer",
            first_delta_at_ms=150,
            last_delta_at_ms=195,
            chunk_count=3,
            utf8_bytes=6,
            longest_gap_ms=40,
        ),
    ]
    assert completed.sequence == 9
    assert completed.stream_metrics == expected
    page = await all_events(store)
    assert [event.sequence for event in page] == [1, 3, 9]
    assert page[1].event == message_delta("other", "kept", "final_answer")
    assert page[2] == completed


async def test_stream_metrics_of_deltas_in_the_same_batch(store):
    """save_with_events computes a completed step's metrics from deltas earlier in its batch."""
    returned = await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [
            stamped(10, step_started("step")),
            stamped(11, reasoning_delta("step", "Plan")),
            stamped(15, reasoning_delta("step", "ning")),
            stamped(20, step_completed("step", ModelStepCompleted(end_turn=False))),
        ],
    )
    assert [event.sequence for event in returned] == [1, 2, 3, 4]
    assert returned[3].stream_metrics == [
        StreamMetrics(
            phase="reasoning",
            first_delta_at_ms=11,
            last_delta_at_ms=15,
            chunk_count=2,
            utf8_bytes=8,
            longest_gap_ms=4,
        )
    ]
    assert await all_events(store) == [returned[0], returned[3]]


async def test_incomplete_model_steps_retain_progressive_deltas(store):
    """Failed and interrupted model steps keep their streamed deltas in the journal."""
    await new_session(store)
    for model_step_id, outcome in [
        ("failed", ModelStepFailed()),
        ("interrupted", ModelStepInterrupted()),
    ]:
        await store.append_event(
            "session", 10, message_delta(model_step_id, f"partial {model_step_id}")
        )
        await store.append_event("session", 20, step_completed(model_step_id, outcome))

    page = await all_events(store)
    assert [event.sequence for event in page] == [1, 2, 3, 4]
    assert isinstance(page[0].event.msg, AgentMessageContentDeltaEvent)
    assert isinstance(page[2].event.msg, AgentMessageContentDeltaEvent)
    assert page[0].event == message_delta("failed", "partial failed")
    assert page[1].stream_metrics == [
        StreamMetrics(
            phase="final_answer",
            first_delta_at_ms=10,
            last_delta_at_ms=10,
            chunk_count=1,
            utf8_bytes=len("partial failed"),
            longest_gap_ms=0,
        )
    ]


async def test_save_with_events_returns_the_durable_sequences(store):
    """save_with_events returns each event with the sequence it was durably stored under."""
    checkpoint = Checkpoint.empty("session")
    first = await store.save_with_events(checkpoint, [], None, [stamped(5, warning("a"))])
    assert first == [
        JournalEvent(sequence=1, recorded_at_ms=5, event=warning("a"), stream_metrics=[])
    ]
    await store.append_event("session", 6, warning("b"))

    checkpoint.sequence = 1
    batch = [stamped(7, warning("c")), stamped(8, started("turn")), stamped(9, complete("turn"))]
    returned = await store.save_with_events(checkpoint, [{"role": "user"}], None, batch)
    assert [event.sequence for event in returned] == [3, 4, 5]
    assert [(event.recorded_at_ms, event.event) for event in returned] == [
        (item.recorded_at_ms, item.event) for item in batch
    ]
    page = await store.event_page("session", EventPageRequest(limit=3))
    assert page.events == list(reversed(returned))
    assert page.latest_sequence == 5
    assert await store.load("session") == checkpoint


async def test_save_with_no_events_returns_an_empty_list(store):
    """save_with_events with no events returns [] and leaves the event sequence alone."""
    assert await store.save_with_events(Checkpoint.empty("session"), [], None, []) == []
    page = await store.event_page("session", EventPageRequest(limit=1))
    assert page.latest_sequence == 0


async def test_event_turn_page_returns_the_newest_turn(store):
    """event_turn_page returns the newest turn from task_started to its task_complete."""
    events = [
        started("t1"),  # 1
        warning("t1 work"),  # 2
        complete("t1"),  # 3
        started("t2"),  # 4
        warning("t2 work"),  # 5
        complete("t2"),  # 6
        warning("after t2"),  # 7
    ]
    returned = await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [stamped(index, event) for index, event in enumerate(events)],
    )
    by_sequence = {event.sequence: event for event in returned}

    newest = await store.event_turn_page("session", None)
    assert newest.latest_sequence == 7
    assert [event.sequence for event in newest.events] == [6, 5, 4]
    assert newest.events == [by_sequence[6], by_sequence[5], by_sequence[4]]
    assert newest.next_before_sequence == 4

    earlier = await store.event_turn_page("session", newest.next_before_sequence)
    assert earlier.latest_sequence == 7
    assert [event.sequence for event in earlier.events] == [3, 2, 1]
    assert earlier.next_before_sequence is None


async def test_event_turn_page_of_a_turn_in_progress_runs_to_the_newest_event(store):
    """A turn without a terminal event spans from task_started to the newest event."""
    events = [started("t1"), complete("t1"), started("t2"), warning("w1"), warning("w2")]
    await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [stamped(index, event) for index, event in enumerate(events)],
    )
    page = await store.event_turn_page("session", None)
    assert [event.sequence for event in page.events] == [5, 4, 3]
    assert page.next_before_sequence == 3


async def test_event_turn_page_ends_an_aborted_turn_at_turn_aborted(store):
    """turn_aborted ends a turn as task_complete does."""
    events = [
        started("t1"),
        warning("work"),
        Event(msg=TurnAbortedEvent(turn_id="t1", reason="interrupted")),
        warning("later"),
    ]
    await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [stamped(index, event) for index, event in enumerate(events)],
    )
    page = await store.event_turn_page("session", None)
    assert [event.sequence for event in page.events] == [3, 2, 1]
    assert page.next_before_sequence is None
    assert page.latest_sequence == 4


async def test_event_turn_page_without_a_turn_is_empty(store):
    """With no task_started before the cursor, event_turn_page returns no events."""
    await store.save_with_events(
        Checkpoint.empty("session"), [], None, [stamped(1, warning("a")), stamped(2, warning("b"))]
    )
    page = await store.event_turn_page("session", None)
    assert (page.latest_sequence, page.events, page.next_before_sequence) == (2, [], None)


async def test_event_turn_page_walks_across_page_boundaries(store):
    """event_turn_page gathers a turn of more than 100 events across several pages."""
    events = [started("t1"), warning("t1"), complete("t1"), started("t2")]  # 1..4
    events += [warning(f"w{index}") for index in range(250)]  # 5..254
    events.append(complete("t2"))  # 255
    await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [stamped(index, event) for index, event in enumerate(events)],
    )

    newest = await store.event_turn_page("session", None)
    assert newest.latest_sequence == 255
    assert [event.sequence for event in newest.events] == list(range(255, 3, -1))
    assert newest.events[0].event == complete("t2")
    assert newest.events[-1].event == started("t2")
    assert newest.next_before_sequence == 4

    earlier = await store.event_turn_page("session", 4)
    assert [event.sequence for event in earlier.events] == [3, 2, 1]
    assert earlier.next_before_sequence is None


async def test_event_turn_page_finds_an_earlier_turn_beyond_the_first_page(store):
    """next_before_sequence is set when the earlier turn starts several pages back."""
    events = [started("t1")] + [warning(f"a{index}") for index in range(150)]  # 1..151
    events += [complete("t1"), started("t2"), warning("b"), complete("t2")]  # 152..155
    await store.save_with_events(
        Checkpoint.empty("session"),
        [],
        None,
        [stamped(index, event) for index, event in enumerate(events)],
    )
    newest = await store.event_turn_page("session", None)
    assert [event.sequence for event in newest.events] == [155, 154, 153]
    assert newest.next_before_sequence == 153

    earlier = await store.event_turn_page("session", 153)
    assert [event.sequence for event in earlier.events] == list(range(152, 0, -1))
    assert earlier.next_before_sequence is None
