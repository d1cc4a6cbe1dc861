"""Event-journal rules: index, transience, stream metrics, prepare_event, turn pages, page order."""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_samples import I64_MAX, event_msgs, frontend_events, journal

from turnstore import (
    Event,
    EventPageRequest,
    InvalidInput,
    TimestampedEvent,
)
from turnstore.errors import (
    RecordDecodeError,
    TurnstoreError,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentReasoningContentDeltaEvent,
    FrontendEventMsg,
    FrontendWidget,
    FrontendWidgetEvent,
    MessageTarget,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepFailed,
    ModelStepInterrupted,
    TokenCountEvent,
    TokenUsage,
    TurnAbortedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    WarningEvent,
)
from turnstore.records import (
    TURN_PAGE_BATCH_SIZE,
    EventPage,
    JournalEvent,
    StreamMetrics,
    TranscriptBatch,
    TranscriptPage,
)
from turnstore.rules.journal import (
    EventIndex,
    StreamMetricAccumulator,
    completes_model_step,
    event_index,
    event_turn_page_steps,
    is_transient,
    next_event_sequence,
    prepare_event,
    prepare_events,
    stream_metrics,
)
from turnstore.rules.values import require, revalidated

# --- event_index ----------------------------------------------------------------------------

STEP_KINDS = {
    "agent_message",
    "model_step_started",
    "model_step_completed",
    "web_search_begin",
    "web_search_end",
}


@pytest.mark.parametrize("tag", sorted(event_msgs()))
def test_event_index_kind_is_the_serde_tag(tag: str) -> None:
    """Each variant is indexed under the seed 003 kind, which is also its JSON "type" tag."""
    assert event_index(event_msgs()[tag]).kind == tag


@pytest.mark.parametrize(
    "tag",
    sorted(
        set(event_msgs())
        - set(STEP_KINDS)
        - {"agent_message_content_delta", "agent_reasoning_content_delta"}
    ),
)
def test_plain_events_carry_no_step_phase_or_bytes(tag: str) -> None:
    """Events the seed indexes as `plain` have no model step, stream phase or delta length."""
    assert event_index(event_msgs()[tag]) == EventIndex(tag)


@pytest.mark.parametrize("tag", sorted(STEP_KINDS))
def test_step_events_carry_their_model_step_only(tag: str) -> None:
    """agent_message, model_step_*, web_search_* are indexed with their model_step_id only."""
    assert event_index(event_msgs()[tag]) == EventIndex(tag, "m-1", None, None)


def test_frontend_events_are_all_indexed_as_frontend() -> None:
    """Every frontend event, transient or not, is indexed under the kind "frontend"."""
    for frontend in frontend_events().values():
        assert event_index(FrontendEventMsg(event=frontend)) == EventIndex("frontend")


@pytest.mark.parametrize("phase", ["commentary", "final_answer"])
def test_agent_message_delta_index(phase: str) -> None:
    """An agent message delta carries its model step, its phase and its UTF-8 byte length."""
    msg = AgentMessageContentDeltaEvent(
        session_id="s", turn_id="t", model_step_id="step-7", delta="abc", phase=phase
    )
    assert event_index(msg) == EventIndex("agent_message_content_delta", "step-7", phase, 3)


def test_reasoning_delta_index() -> None:
    """A reasoning delta is indexed in the "reasoning" stream phase."""
    msg = AgentReasoningContentDeltaEvent(
        session_id="s", turn_id="t", model_step_id="step-7", delta="hmm"
    )
    assert event_index(msg) == EventIndex("agent_reasoning_content_delta", "step-7", "reasoning", 3)


@pytest.mark.parametrize(
    ("delta", "utf8_bytes"),
    [("héllo→", 9), ("", 0), ("😀", 4), ("日本語", 9), ("plain", 5)],
)
def test_delta_length_counts_utf8_bytes_not_characters(delta: str, utf8_bytes: int) -> None:
    """delta_bytes is the UTF-8 byte length of the delta ("héllo→" is 6 characters, 9 bytes)."""
    message = AgentMessageContentDeltaEvent(
        session_id="s", turn_id="t", model_step_id="m", delta=delta, phase="final_answer"
    )
    reasoning = AgentReasoningContentDeltaEvent(
        session_id="s", turn_id="t", model_step_id="m", delta=delta
    )
    assert event_index(message).delta_bytes == utf8_bytes
    assert event_index(reasoning).delta_bytes == utf8_bytes


# --- transience and model-step completion ---------------------------------------------------

TRANSIENT = {"session_history", "session_resume_requested"}
TRANSIENT_FRONTEND = {"picker", "preview", "widget", "remove_widget"}


@pytest.mark.parametrize("tag", sorted(event_msgs()))
def test_is_transient_for_every_event_msg(tag: str) -> None:
    """Only session_history and session_resume_requested are transient among non-frontend kinds."""
    assert is_transient(event_msgs()[tag]) is (tag in TRANSIENT)


@pytest.mark.parametrize("tag", sorted(frontend_events()))
def test_is_transient_for_every_frontend_event(tag: str) -> None:
    """Frontend picker, preview, widget and remove_widget are transient; a notice is kept."""
    msg = FrontendEventMsg(event=frontend_events()[tag])
    assert is_transient(msg) is (tag in TRANSIENT_FRONTEND)


def _step_completed(outcome: Any) -> ModelStepCompletedEvent:
    return ModelStepCompletedEvent(
        session_id="s",
        turn_id="t",
        model_step_id="m",
        step_index=0,
        started_at_ms=0,
        completed_at_ms=1,
        outcome=outcome,
    )


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (ModelStepCompleted(end_turn=True), True),
        (ModelStepCompleted(end_turn=False, tool_call_ids=["c"]), True),
        (ModelStepFailed(message="x"), False),
        (ModelStepFailed(), False),
        (ModelStepInterrupted(), False),
    ],
)
def test_completes_model_step_only_for_a_completed_outcome(outcome: Any, expected: bool) -> None:
    """Only a model_step_completed event with a Completed outcome completes the step."""
    assert completes_model_step(_step_completed(outcome)) is expected


@pytest.mark.parametrize("tag", sorted(set(event_msgs()) - {"model_step_completed"}))
def test_other_events_do_not_complete_a_model_step(tag: str) -> None:
    """No event other than model_step_completed completes a model step."""
    assert completes_model_step(event_msgs()[tag]) is False


# --- prepare_event --------------------------------------------------------------------------


def test_prepare_event_refuses_negative_timestamps() -> None:
    """A negative recorded_at_ms is refused before anything else."""
    event = TimestampedEvent(recorded_at_ms=-1, event=Event(msg=WarningEvent(message="x")))
    with pytest.raises(InvalidInput) as caught:
        prepare_event(event)
    assert str(caught.value) == "event journal timestamp cannot be negative"


@pytest.mark.parametrize("tag", sorted(event_msgs()))
def test_prepare_event_describes_the_journal_work(tag: str) -> None:
    """prepare_event returns the event JSON, index, transience, step compaction and supersession."""
    msg = event_msgs()[tag]
    source = TimestampedEvent(recorded_at_ms=0, event=Event(submission_id="sub", msg=msg))
    prepared = prepare_event(source)
    assert prepared.recorded_at_ms == 0
    assert prepared.event_json == source.event.to_json()
    assert prepared.columns == event_index(msg)
    assert prepared.transient is is_transient(msg)
    assert prepared.compacts_step_deltas is completes_model_step(msg)
    assert prepared.supersedes_token_count is (tag == "token_count")
    assert prepared.event == source.event
    journal_event = prepared.journal_event(5, [])
    assert journal_event == JournalEvent(
        sequence=5, recorded_at_ms=0, event=source.event, stream_metrics=[]
    )


def test_prepare_event_refuses_out_of_range_values() -> None:
    """An event holding a negative u64 (constructed without checks) is refused on revalidation."""
    bad = TokenCountEvent(total_usage=TokenUsage(total_tokens=-3))
    with pytest.raises(RecordDecodeError):
        prepare_event(TimestampedEvent(recorded_at_ms=1, event=Event(msg=bad)))


@pytest.mark.parametrize("stamp", [I64_MAX + 1, 2**64, True, 1.5, "1"])
def test_prepare_event_refuses_a_bad_timestamp_as_the_whole_record_would(stamp: Any) -> None:
    """A timestamp outside the fast path is refused by the whole record's revalidation."""
    event = TimestampedEvent(recorded_at_ms=stamp, event=Event(msg=WarningEvent(message="x")))
    with pytest.raises(TurnstoreError) as expected:
        revalidated(event, free=())
    with pytest.raises(type(expected.value)) as caught:
        prepare_event(event)
    assert str(caught.value) == str(expected.value)


def test_prepare_event_keeps_the_largest_timestamp() -> None:
    """recorded_at_ms = 2**63 - 1 takes the one-pass path and is stored as given."""
    event = TimestampedEvent(recorded_at_ms=I64_MAX, event=Event(msg=WarningEvent(message="x")))
    prepared = prepare_event(event)
    assert prepared.recorded_at_ms == I64_MAX
    assert prepared.event == event.event
    assert prepared.event_json == event.event.to_json()


def test_prepare_event_does_not_change_its_input() -> None:
    """prepare_event leaves the caller's event unchanged."""
    source = TimestampedEvent(recorded_at_ms=3, event=Event(msg=event_msgs()["user_message"]))
    before = copy.deepcopy(source)
    prepare_event(source)
    assert source == before


# --- prepare_events: a save's events in one pass ---------------------------------------------


def _one_by_one(events: list[Any]) -> Any:
    """What preparing each event on its own gives: the list, or the first refusal."""
    try:
        return [prepare_event(require(event, TimestampedEvent, "event")) for event in events]
    except TurnstoreError as error:
        return (type(error), str(error))


def _all_at_once(events: list[Any]) -> Any:
    try:
        return prepare_events(events)
    except TurnstoreError as error:
        return (type(error), str(error))


def test_prepare_events_equals_preparing_each_event() -> None:
    """Every kind of event at once: the same index, flags, JSON and record as one at a time."""
    events = [
        TimestampedEvent(recorded_at_ms=at, event=Event(submission_id="s", msg=msg))
        for at, msg in enumerate(
            [
                *event_msgs().values(),
                *(FrontendEventMsg(event=e) for e in frontend_events().values()),
            ]
        )
    ]
    together = prepare_events(events)
    assert together == _one_by_one(events)
    assert [p.event_json for p in together] == [e.event.to_json() for e in events]


def test_prepare_events_splits_json_holding_newlines() -> None:
    """Each event's JSON is its own line even where its text holds newlines."""
    events = [
        TimestampedEvent(recorded_at_ms=1, event=Event(msg=WarningEvent(message=text)))
        for text in ("a\nb", "\n", "\r\n\u2028", "")
    ]
    assert [p.event_json for p in prepare_events(events)] == [e.event.to_json() for e in events]


BAD_EVENTS = {
    "negative u64": TimestampedEvent(
        recorded_at_ms=1, event=Event(msg=TokenCountEvent(total_usage=TokenUsage(total_tokens=-3)))
    ),
    "u64 overflow": TimestampedEvent(
        recorded_at_ms=1,
        event=Event(msg=TokenCountEvent(total_usage=TokenUsage(total_tokens=2**64))),
    ),
    "negative timestamp": TimestampedEvent(
        recorded_at_ms=-1, event=Event(msg=WarningEvent(message="x"))
    ),
    "timestamp past i64": TimestampedEvent(
        recorded_at_ms=I64_MAX + 1, event=Event(msg=WarningEvent(message="x"))
    ),
    "text timestamp": TimestampedEvent(
        recorded_at_ms="1",
        event=Event(msg=WarningEvent(message="x")),  # type: ignore[arg-type]
    ),
    "lone surrogate": TimestampedEvent(
        recorded_at_ms=1, event=Event(msg=WarningEvent(message="\ud800"))
    ),
    "NaN in a typed field": TimestampedEvent(
        recorded_at_ms=1,
        event=Event(
            msg=FrontendEventMsg(
                event=FrontendWidgetEvent(
                    capability="c",
                    item=FrontendWidget(id="w", slot="header", text="t", progress=math.nan),
                )
            )
        ),
    ),
    "not an event": {"recorded_at_ms": 1, "event": {"msg": {"type": "warning"}}},
    "dict as message": TimestampedEvent(
        recorded_at_ms=1,
        event=Event(msg={"type": "warning", "message": "x"}),  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD_EVENTS))
@pytest.mark.parametrize("position", [0, 3, 7])
def test_prepare_events_refuses_as_one_at_a_time(bad: str, position: int) -> None:
    """A bad event among good ones is refused with the message preparing it alone gives."""
    good = [
        TimestampedEvent(recorded_at_ms=n, event=Event(msg=WarningEvent(message=str(n))))
        for n in range(7)
    ]
    events: list[Any] = [*good[:position], BAD_EVENTS[bad], *good[position:]]
    expected = _one_by_one(events)
    assert isinstance(expected, tuple), "the sample must be refused"
    assert _all_at_once(events) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(event_msgs())),
            st.one_of(st.integers(min_value=-2, max_value=2**64), st.sampled_from([True, 1.5])),
        ),
        max_size=8,
    )
)
def test_prepare_events_property(picks: list[tuple[str, Any]]) -> None:
    """Any list of events, timestamps in and out of range: the same answer as one at a time."""
    events = [
        TimestampedEvent(recorded_at_ms=at, event=Event(msg=event_msgs()[tag])) for tag, at in picks
    ]
    assert _all_at_once(events) == _one_by_one(events)


def test_next_event_sequence() -> None:
    """The next sequence is latest + 1, refused past 2**63-1."""
    assert next_event_sequence(0) == 1
    assert next_event_sequence(I64_MAX - 1) == I64_MAX
    with pytest.raises(InvalidInput, match=r"^event journal sequence overflow$"):
        next_event_sequence(I64_MAX)


# --- stream metrics -------------------------------------------------------------------------


def test_stream_metrics_tolerate_wall_clock_regression() -> None:
    """Seed test: a delta recorded earlier than the previous one counts as no gap."""
    metrics = StreamMetricAccumulator()
    metrics.observe(20, 2)
    metrics.observe(10, 3)
    assert metrics.finish("reasoning") == StreamMetrics(
        phase="reasoning",
        first_delta_at_ms=20,
        last_delta_at_ms=20,
        chunk_count=2,
        utf8_bytes=5,
        longest_gap_ms=0,
    )


def test_stream_metrics_longest_gap() -> None:
    """longest_gap_ms is the largest interval between consecutive deltas."""
    metrics = StreamMetricAccumulator()
    for at, size in [(100, 1), (105, 2), (140, 3), (150, 4)]:
        metrics.observe(at, size)
    assert metrics.finish("commentary") == StreamMetrics(
        phase="commentary",
        first_delta_at_ms=100,
        last_delta_at_ms=150,
        chunk_count=4,
        utf8_bytes=10,
        longest_gap_ms=35,
    )


def test_stream_metrics_gap_after_regression_is_measured_from_the_clamped_time() -> None:
    """After a regressed delta, the next gap is measured from the clamped (latest) time."""
    metrics = StreamMetricAccumulator()
    for at in (100, 50, 130):
        metrics.observe(at, 1)
    result = metrics.finish("final_answer")
    assert result is not None
    assert (result.first_delta_at_ms, result.last_delta_at_ms, result.longest_gap_ms) == (
        100,
        130,
        30,
    )


def test_stream_metrics_single_delta() -> None:
    """One delta: first = last, one chunk, no gap; zero-byte deltas still count as chunks."""
    metrics = StreamMetricAccumulator()
    metrics.observe(-5, 0)
    assert metrics.finish("reasoning") == StreamMetrics(
        phase="reasoning",
        first_delta_at_ms=-5,
        last_delta_at_ms=-5,
        chunk_count=1,
        utf8_bytes=0,
        longest_gap_ms=0,
    )


def test_stream_metrics_without_deltas_finish_as_none() -> None:
    """An accumulator that saw no delta has no metrics."""
    assert StreamMetricAccumulator().finish("commentary") is None


def test_stream_metrics_refuse_negative_lengths() -> None:
    """A negative delta length is refused."""
    metrics = StreamMetricAccumulator()
    with pytest.raises(InvalidInput, match=r"^stream delta has a negative length$"):
        metrics.observe(1, -1)


@given(
    st.lists(
        st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 10**6)), min_size=1, max_size=30
    )
)
def test_stream_metric_accumulator_property(rows: list[tuple[int, int]]) -> None:
    """Metrics match the seed: times clamp to the running latest; gaps are between clamped times."""
    metrics = StreamMetricAccumulator()
    for at, size in rows:
        metrics.observe(at, size)
    first = rows[0][0]
    clamped = [first]
    for at, _ in rows[1:]:
        clamped.append(max(at, clamped[-1]))
    gaps = [later - earlier for earlier, later in itertools.pairwise(clamped)]
    assert metrics.finish("reasoning") == StreamMetrics(
        phase="reasoning",
        first_delta_at_ms=first,
        last_delta_at_ms=clamped[-1],
        chunk_count=len(rows),
        utf8_bytes=sum(size for _, size in rows),
        longest_gap_ms=max(gaps, default=0),
    )


def test_stream_metrics_over_rows_of_several_phases() -> None:
    """Rows are accumulated per phase in row order; results come reasoning, commentary, final."""
    rows = [
        ("final_answer", 300, 5),
        ("reasoning", 100, 2),
        ("commentary", 200, 3),
        ("final_answer", 320, 6),
        ("reasoning", 90, 4),
        ("final_answer", 360, 1),
    ]
    assert stream_metrics(rows) == [
        StreamMetrics(
            phase="reasoning",
            first_delta_at_ms=100,
            last_delta_at_ms=100,
            chunk_count=2,
            utf8_bytes=6,
            longest_gap_ms=0,
        ),
        StreamMetrics(
            phase="commentary",
            first_delta_at_ms=200,
            last_delta_at_ms=200,
            chunk_count=1,
            utf8_bytes=3,
            longest_gap_ms=0,
        ),
        StreamMetrics(
            phase="final_answer",
            first_delta_at_ms=300,
            last_delta_at_ms=360,
            chunk_count=3,
            utf8_bytes=12,
            longest_gap_ms=40,
        ),
    ]


def test_stream_metrics_omit_phases_without_deltas() -> None:
    """Phases with no rows produce no metrics; no rows produce an empty list."""
    assert stream_metrics([]) == []
    only = stream_metrics([("commentary", 1, 1)])
    assert [metrics.phase for metrics in only] == ["commentary"]


def test_stream_metrics_refuse_an_unknown_phase() -> None:
    """A row with a phase other than reasoning/commentary/final_answer is refused."""
    with pytest.raises(InvalidInput, match=r"^event journal contains an unknown stream phase$"):
        stream_metrics([("reasoning", 1, 1), ("thinking", 2, 1)])


# --- event_turn_page_steps ------------------------------------------------------------------


def _serve(
    events: list[JournalEvent], request: EventPageRequest, latest: int, page_size: int | None
) -> EventPage:
    """A fake store's event_page: newest first, before the cursor, with the seed's has_more rule."""
    limit = request.limit if page_size is None else min(request.limit, page_size)
    older = [
        event
        for event in reversed(events)
        if request.before_sequence is None or event.sequence < request.before_sequence
    ]
    page = older[:limit]
    has_more = len(older) > limit
    return EventPage(
        latest_sequence=latest,
        events=page,
        next_before_sequence=page[-1].sequence if has_more and page else None,
    )


def _turn_page(
    events: list[JournalEvent],
    before: int | None = None,
    latest: int | None = None,
    page_size: int | None = None,
) -> tuple[EventPage, list[EventPageRequest]]:
    """Drive event_turn_page_steps against the fake paginator; return the page and requests."""
    latest = latest if latest is not None else (events[-1].sequence if events else 0)
    steps = event_turn_page_steps(before)
    requests = []
    request = next(steps)
    while True:
        requests.append(request)
        try:
            request = steps.send(_serve(events, request, latest, page_size))
        except StopIteration as stop:
            return stop.value, requests


def _reference_turn_page(events: list[JournalEvent], before: int | None, latest: int) -> EventPage:
    """The seed's event_turn_page, written over the whole chronological journal at once."""
    visible = [e for e in events if before is None or e.sequence < before]
    starts = [i for i, e in enumerate(visible) if isinstance(e.event.msg, TurnStartedEvent)]
    if not starts:
        return EventPage(latest_sequence=latest, events=[], next_before_sequence=None)
    start = starts[-1]
    turn_id = visible[start].event.msg.turn_id
    end = len(visible) - 1
    for index in range(len(visible) - 1, start, -1):
        msg = visible[index].event.msg
        if isinstance(msg, TurnCompleteEvent | TurnAbortedEvent) and msg.turn_id == turn_id:
            end = index
            break
    return EventPage(
        latest_sequence=latest,
        events=list(reversed(visible[start : end + 1])),
        next_before_sequence=visible[start].sequence if len(starts) > 1 else None,
    )


def _started(turn: str) -> TurnStartedEvent:
    return TurnStartedEvent(turn_id=turn)


def _complete(turn: str) -> TurnCompleteEvent:
    return TurnCompleteEvent(turn_id=turn)


def _aborted(turn: str) -> TurnAbortedEvent:
    return TurnAbortedEvent(turn_id=turn)


def _note(text: str) -> WarningEvent:
    return WarningEvent(message=text)


def _sequences(page: EventPage) -> list[int]:
    return [event.sequence for event in page.events]


def test_turn_inside_one_page() -> None:
    """The newest completed turn is returned newest first with a cursor to the earlier turn."""
    events = journal(
        [_started("t1"), _note("a"), _complete("t1"), _started("t2"), _note("b"), _complete("t2")]
    )
    page, requests = _turn_page(events)
    assert _sequences(page) == [6, 5, 4]
    assert page.latest_sequence == 6
    assert page.next_before_sequence == 4
    assert requests == [EventPageRequest(before_sequence=None, limit=TURN_PAGE_BATCH_SIZE)]


def test_walking_back_turn_by_turn() -> None:
    """Following next_before_sequence visits every turn, newest first, and ends with None."""
    events = journal(
        [
            _note("before any turn"),
            _started("t1"),
            _complete("t1"),
            _started("t2"),
            _aborted("t2"),
            _started("t3"),
            _note("x"),
            _complete("t3"),
        ]
    )
    turns = []
    cursor: int | None = None
    while True:
        page, _ = _turn_page(events, before=cursor)
        turns.append(page.into_chronological()[0].event.msg.turn_id)
        cursor = page.next_before_sequence
        if cursor is None:
            break
    assert turns == ["t3", "t2", "t1"]
    assert _sequences(_turn_page(events, before=2)[0]) == []


def test_turn_spanning_three_pages() -> None:
    """A turn of 252 events is gathered over three pages of 100, following each page's cursor."""
    body = [_note(f"n{i}") for i in range(250)]
    events = journal([_started("t0"), _complete("t0"), _started("t1"), *body, _complete("t1")])
    page, requests = _turn_page(events)
    total = len(events)
    assert total == 254
    assert _sequences(page) == list(range(total, 2, -1))
    assert page.next_before_sequence == 3
    assert page.latest_sequence == total
    assert [request.before_sequence for request in requests] == [None, total - 99, total - 199]
    assert all(request.limit == TURN_PAGE_BATCH_SIZE == 100 for request in requests)


def test_first_turn_spanning_pages_has_no_earlier_turn() -> None:
    """When the only turn spans pages, the walk reads to the journal's start and finds no cursor."""
    events = journal([_note("configured"), _started("t1"), *[_note("x")] * 230])
    page, requests = _turn_page(events)
    assert _sequences(page) == list(range(232, 1, -1))
    assert page.next_before_sequence is None
    assert len(requests) == 3


def test_running_turn_runs_from_task_started_to_the_newest_event() -> None:
    """A turn without task_complete yields everything from task_started to the newest event."""
    events = journal([_started("t1"), _complete("t1"), _started("t2"), _note("a"), _note("b")])
    page, _ = _turn_page(events)
    assert _sequences(page) == [5, 4, 3]
    assert page.next_before_sequence == 3


def test_no_task_started_gives_an_empty_page() -> None:
    """A journal without task_started gives no events and no cursor, but the latest sequence."""
    events = journal([_note("a"), _note("b"), _complete("t-old")])
    page, _ = _turn_page(events, latest=9)
    assert page == EventPage(latest_sequence=9, events=[], next_before_sequence=None)


def test_empty_journal_gives_an_empty_page() -> None:
    """An empty journal gives an empty page after one request."""
    page, requests = _turn_page([], latest=4)
    assert page == EventPage(latest_sequence=4, events=[], next_before_sequence=None)
    assert len(requests) == 1


def test_no_cursor_without_an_earlier_turn() -> None:
    """next_before_sequence stays None when only events, not turns, precede the turn."""
    events = journal([_note("a"), _note("b"), _started("t1"), _complete("t1")])
    page, _ = _turn_page(events)
    assert _sequences(page) == [4, 3]
    assert page.next_before_sequence is None


def test_events_after_the_turns_end_are_excluded() -> None:
    """Events newer than the turn's task_complete (belonging to no turn) are left out."""
    events = journal(
        [_started("t1"), _note("in"), _complete("t1"), _note("after"), _note("after 2")]
    )
    page, _ = _turn_page(events)
    assert _sequences(page) == [3, 2, 1]
    assert page.latest_sequence == 5


def test_turn_aborted_also_ends_the_turn() -> None:
    """A turn_aborted for the turn's id ends it like task_complete."""
    events = journal([_started("t1"), _aborted("t1"), _note("after")])
    page, _ = _turn_page(events)
    assert _sequences(page) == [2, 1]


def test_terminal_event_of_another_turn_does_not_end_the_turn() -> None:
    """A task_complete with a different turn id does not cut the turn."""
    events = journal([_started("t1"), _complete("stale"), _note("x")])
    page, _ = _turn_page(events)
    assert _sequences(page) == [3, 2, 1]


def test_before_sequence_limits_the_walk() -> None:
    """before_sequence restricts the walk to older events and is the first request's cursor."""
    events = journal([_started("t1"), _note("a"), _complete("t1"), _started("t2"), _note("b")])
    page, requests = _turn_page(events, before=4)
    assert _sequences(page) == [3, 2, 1]
    assert page.next_before_sequence is None
    assert requests[0] == EventPageRequest(before_sequence=4, limit=TURN_PAGE_BATCH_SIZE)


def test_sparse_sequences_are_followed_by_cursor() -> None:
    """Sequences with gaps (discarded transient events) are paged by the events' own sequences."""
    events = [
        JournalEvent(sequence=seq, recorded_at_ms=0, event=Event(msg=msg))
        for seq, msg in [
            (2, _started("t1")),
            (7, _complete("t1")),
            (11, _started("t2")),
            (40, _note("x")),
        ]
    ]
    page, _ = _turn_page(events, latest=55, page_size=1)
    assert _sequences(page) == [40, 11]
    assert page.next_before_sequence == 11
    assert page.latest_sequence == 55


_TURN_IDS = ["a", "b", "c"]
_journal_msgs = st.lists(
    st.one_of(
        st.sampled_from(_TURN_IDS).map(_started),
        st.sampled_from(_TURN_IDS).map(_complete),
        st.sampled_from(_TURN_IDS).map(_aborted),
        st.just(_note("n")),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(
    msgs=_journal_msgs,
    gaps=st.lists(st.integers(1, 3), min_size=40, max_size=40),
    before_index=st.none() | st.integers(0, 45),
    page_size=st.sampled_from([1, 2, 3, 7, None]),
)
def test_turn_page_matches_the_reference(
    msgs: list[Any], gaps: list[int], before_index: int | None, page_size: int | None
) -> None:
    """For any journal, cursor and page size, the walk returns the reference turn page."""
    sequence = 0
    events = []
    for msg, gap in zip(msgs, gaps, strict=False):
        sequence += gap
        events.append(JournalEvent(sequence=sequence, recorded_at_ms=0, event=Event(msg=msg)))
    latest = sequence + 2
    before = None if before_index is None else before_index * 2
    page, requests = _turn_page(events, before=before, latest=latest, page_size=page_size)
    assert page == _reference_turn_page(events, before, latest)
    assert requests[0].before_sequence == before


@settings(max_examples=25, deadline=None)
@given(
    turn_lengths=st.lists(st.integers(0, 150), min_size=1, max_size=4),
    finished=st.booleans(),
    tail=st.integers(0, 3),
)
def test_turn_page_matches_the_reference_over_full_pages(
    turn_lengths: list[int], finished: bool, tail: int
) -> None:
    """With real 100-event pages, turns of up to 150 events match the reference page."""
    msgs: list[Any] = []
    for number, length in enumerate(turn_lengths):
        turn = f"t{number}"
        msgs += [_started(turn), *[_note("x")] * length]
        if finished or number < len(turn_lengths) - 1:
            msgs.append(_complete(turn))
    msgs += [_note("tail")] * tail
    events = journal(msgs)
    page, _ = _turn_page(events)
    assert page == _reference_turn_page(events, None, events[-1].sequence)


def test_turn_page_steps_stops_at_the_earlier_turn() -> None:
    """Once an earlier task_started is seen, no further page is requested."""
    events = journal(
        [*[_note("x")] * 150, _started("t0"), _complete("t0"), _started("t1"), _note("y")]
    )
    page, requests = _turn_page(events)
    assert len(requests) == 1
    assert _sequences(page) == [154, 153]
    assert page.next_before_sequence == 153


# --- page order -----------------------------------------------------------------------------


def test_event_page_into_chronological() -> None:
    """into_chronological returns the newest-first events in replay (oldest-first) order."""
    events = journal([_started("t"), _note("a"), _complete("t")])
    page = EventPage(latest_sequence=3, events=list(reversed(events)), next_before_sequence=None)
    assert page.into_chronological() == events
    assert EventPage().into_chronological() == []


def test_transcript_positions_are_chronological_and_one_based() -> None:
    """Items are flattened oldest batch first with (checkpoint_sequence, 1-based item count)."""
    page = TranscriptPage(
        batches=[
            TranscriptBatch(sequence=7, created_at=2, items=["x", "y"]),
            TranscriptBatch(sequence=5, created_at=1, items=[]),
            TranscriptBatch(sequence=3, created_at=0, items=[{"a": 1}, "b", None]),
        ],
        next_before_sequence=3,
    )

    def target(sequence: int, count: int) -> MessageTarget:
        return MessageTarget(checkpoint_sequence=sequence, batch_item_count=count)

    assert page.into_positioned_items_chronological() == [
        (target(3, 1), {"a": 1}),
        (target(3, 2), "b"),
        (target(3, 3), None),
        (target(7, 1), "x"),
        (target(7, 2), "y"),
    ]
    assert TranscriptPage().into_positioned_items_chronological() == []


@given(st.lists(st.lists(st.integers(), max_size=4), max_size=5))
def test_transcript_positions_property(item_lists: list[list[int]]) -> None:
    """Each item's position names its batch sequence and its 1-based index within the batch."""
    batches = [
        TranscriptBatch(sequence=index + 1, created_at=0, items=items)
        for index, items in enumerate(item_lists)
    ]
    page = TranscriptPage(batches=list(reversed(batches)))
    positioned = page.into_positioned_items_chronological()
    expected = [
        (MessageTarget(checkpoint_sequence=batch.sequence, batch_item_count=i + 1), item)
        for batch in batches
        for i, item in enumerate(batch.items)
    ]
    assert positioned == expected
