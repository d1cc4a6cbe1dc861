"""Contract: checkpoints, transcript and execution journals, and atomic rollback of a save.

Ports the seed-003 tests `save_rejects_a_nonadvancing_sequence`,
`load_completes_while_another_connection_holds_a_write_transaction`,
`transcript_page_bounds_batches_and_continues_backward`,
`execution_journal_pages_records_and_updates_catalog_stats`,
`execution_insert_failure_rolls_back_checkpoint_and_transcript` and
`event_insert_failure_rolls_back_checkpoint_and_event_batch`, and adds the rules the seeds
state in prose (a save is one commit boundary) or imply.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

import turnstore
from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    SessionContext,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.events import (
    MessageAuthor,
    MessageTarget,
    TokenUsage,
    ToolCall,
    WarningEvent,
)
from turnstore.records import (
    ActiveModelStep,
    ContextRewrite,
    ExecutionCompletionPhase,
    ExecutionStats,
    PendingApproval,
    QueuedMessage,
    SteerBoundary,
)


def execution(session_id: str, turn: int) -> ExecutionRecord:
    """The seed's `execution` helper: turn N starts at N*100 ms and lasts 25 ms."""
    started_at_ms = turn * 100
    return ExecutionRecord(
        session_id=session_id,
        submission_id=f"submission-{turn}",
        turn_id=f"turn-{turn}",
        started_at_ms=started_at_ms,
        finished_at_ms=started_at_ms + 25,
        elapsed_ms=25,
        outcome="completed",
        model_calls=1,
        tool_calls=turn,
        failed_tool_calls=0,
        usage=TokenUsage(total_tokens=1),
    )


def warning(recorded_at_ms: int, message: str) -> TimestampedEvent:
    """A durable warning event received at `recorded_at_ms`."""
    return TimestampedEvent(
        recorded_at_ms=recorded_at_ms, event=Event(msg=WarningEvent(message=message))
    )


def busy_checkpoint(session_id: str) -> Checkpoint:
    """A checkpoint with every field set away from its default."""
    return Checkpoint(
        session_id=session_id,
        session_context=SessionContext(
            owner_id="owner-1",
            workspace_id="workspace-1",
            workspace_label="Project One",
            origin_label="cron",
        ),
        metadata={"gateway.chat": {"workspace": "/srv/project"}, "count": 3, "flag": None},
        catalog_visible=False,
        first_user_message="hello",
        model_route="provider/model",
        sequence=4,
        context=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        ],
        context_epoch=2,
        compaction_count=1,
        last_context_rewrite=ContextRewrite(epoch=2, reasons=["compaction", "scratchpad"]),
        total_usage=TokenUsage(
            input_tokens=10,
            cached_input_tokens=2,
            output_tokens=5,
            reasoning_output_tokens=1,
            total_tokens=15,
        ),
        last_usage=TokenUsage(total_tokens=15),
        pending_messages=[
            QueuedMessage(
                owner="user",
                id="message-1",
                boundary=SteerBoundary(turn_id="turn-1"),
                author=MessageAuthor(role="user", id="u-1", name="Ada"),
                message="also check the tests",
            )
        ],
        active_execution=ActiveExecution(
            submission_id="submission-1",
            turn_id="turn-1",
            started_at_ms=1_000,
            model_calls=2,
            tool_calls=3,
            failed_tool_calls=1,
            usage=TokenUsage(total_tokens=15),
            next_model_step=2,
            stop_hook_active=True,
            phase=ExecutionCompletionPhase(last_assistant_message="done"),
        ),
        active_model_step=ActiveModelStep(
            model_step_id="step-2", step_index=2, started_at_ms=1_500
        ),
        execution_stats=ExecutionStats(
            run_count=3,
            failed_run_count=1,
            aborted_run_count=1,
            model_calls=7,
            tool_calls=9,
            failed_tool_calls=2,
            elapsed_ms=1_234,
            usage=TokenUsage(total_tokens=99),
        ),
        pending_tools=[ToolCall(call_id="call-1", name="shell", arguments='{"cmd": "ls"}')],
        pending_approval=PendingApproval(
            submission_id="submission-1",
            turn_id="turn-1",
            request_id="request-1",
            approval_call_ids=["call-1"],
            authorized_call_ids=[],
            calls=[ToolCall(call_id="call-1", name="shell", arguments='{"cmd": "ls"}')],
            reason="runs a command",
            sandbox_mode="workspace_write",
            network_access="restricted",
            decision_received=False,
        ),
    )


async def transcript_sequences(store, session_id: str) -> list[int]:
    """Every transcript batch sequence of a session, newest first."""
    page = await store.transcript_page(
        session_id, TranscriptPageRequest(before_sequence=None, max_batches=1_000)
    )
    return [batch.sequence for batch in page.batches]


async def test_load_returns_none_for_an_absent_session(store):
    """load returns None for a session that was never saved."""
    assert await store.load("missing") is None


async def test_every_checkpoint_field_round_trips(store):
    """load returns exactly the checkpoint save stored, every field included."""
    checkpoint = busy_checkpoint("session")
    await store.save(checkpoint)
    loaded = await store.load("session")
    assert loaded == checkpoint
    assert loaded.to_builtins() == checkpoint.to_builtins()


async def test_load_returns_the_latest_saved_checkpoint(store):
    """load returns the checkpoint of the highest saved sequence, not an earlier one."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint)
    for sequence in (1, 2, 5):
        checkpoint = msgspec.structs.replace(
            checkpoint, sequence=sequence, model_route=f"route-{sequence}"
        )
        await store.save(checkpoint)
    assert await store.load("session") == checkpoint
    assert (await store.load("session")).model_route == "route-5"


async def test_save_rejects_a_nonadvancing_sequence(store):
    """save rejects a checkpoint whose sequence equals or is lower than the stored one."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.sequence = 2
    await store.save(checkpoint)

    same = msgspec.structs.replace(checkpoint, model_route="same")
    with pytest.raises(turnstore.SequenceConflict) as equal:
        await store.save(same, [{"role": "user"}])
    assert str(equal.value) == "checkpoint sequence did not advance"

    older = msgspec.structs.replace(checkpoint, sequence=1, model_route="older")
    with pytest.raises(turnstore.SequenceConflict) as lower:
        await store.save(older, [{"role": "user"}], execution("session", 1))
    assert str(lower.value) == "checkpoint sequence did not advance"

    assert isinstance(lower.value, turnstore.TurnstoreError)
    assert await store.load("session") == checkpoint
    assert await transcript_sequences(store, "session") == []
    page = await store.execution_page("session", ExecutionPageRequest(limit=10))
    assert page.executions == []


async def test_sessions_are_independent(store):
    """Saving one session neither changes nor constrains another session's checkpoint."""
    first = Checkpoint.empty("first")
    first.sequence = 7
    second = Checkpoint.empty("second")
    await store.save(first, [{"n": 1}])
    await store.save(second, [{"n": 2}])
    assert await store.load("first") == first
    assert await store.load("second") == second
    assert await transcript_sequences(store, "first") == [7]
    assert await transcript_sequences(store, "second") == [0]


async def test_load_completes_while_another_connection_holds_a_write_transaction(store, database):
    """A reader is not blocked by another connection holding the write lock."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.context.append({"role": "user", "content": "hello"})
    await store.save(checkpoint)
    release = database.hold_write_lock()
    try:
        loaded = await asyncio.wait_for(store.load("session"), 1)
        summary = await asyncio.wait_for(store.session_summary("session"), 1)
    finally:
        release()
    assert loaded == checkpoint
    assert summary.sequence == 0


async def test_a_write_waits_for_another_connections_write_lock(store, database):
    """A save issued while another connection holds the write lock commits once it is released."""
    await store.save(Checkpoint.empty("session"))
    nxt = Checkpoint.empty("session")
    nxt.sequence = 1
    release = database.hold_write_lock()
    pending = asyncio.ensure_future(store.save(nxt, [{"role": "user"}]))
    try:
        await asyncio.sleep(0.2)
        waited = not pending.done()
    finally:
        release()
    await asyncio.wait_for(pending, 10)
    assert waited
    assert await store.load("session") == nxt


async def test_empty_transcript_delta_appends_no_batch(store):
    """A save with an empty transcript delta appends no transcript batch."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint, [])
    checkpoint.sequence = 1
    await store.save(checkpoint, [{"role": "user", "content": "hi"}])
    checkpoint.sequence = 2
    await store.save(checkpoint)
    assert await transcript_sequences(store, "session") == [1]


async def test_transcript_page_bounds_batches_and_continues_backward(store):
    """transcript_page returns at most max_batches newest first and a cursor to older ones."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint)
    for sequence in range(1, 4):
        checkpoint.sequence = sequence
        await store.save(checkpoint, [{"sequence": sequence}])

    first = await store.transcript_page(
        "session", TranscriptPageRequest(before_sequence=None, max_batches=2)
    )
    second = await store.transcript_page(
        "session",
        TranscriptPageRequest(before_sequence=first.next_before_sequence, max_batches=2),
    )
    assert (
        [batch.sequence for batch in first.batches],
        first.next_before_sequence,
        [batch.sequence for batch in second.batches],
        second.next_before_sequence,
    ) == ([3, 2], 2, [1], None)
    assert [batch.items for batch in first.batches] == [[{"sequence": 3}], [{"sequence": 2}]]
    assert second.batches[0].items == [{"sequence": 1}]
    assert all(batch.created_at > 0 for batch in first.batches)


async def test_transcript_page_of_an_absent_session_is_empty(store):
    """transcript_page of a session with no transcript returns no batches and no cursor."""
    page = await store.transcript_page("missing", TranscriptPageRequest(max_batches=5))
    assert (page.batches, page.next_before_sequence) == ([], None)


async def test_transcript_page_round_trips_positioned_items(store):
    """into_positioned_items_chronological yields stored items oldest first with positions."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint)
    batches = {
        1: [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}],
        2: [{"role": "user", "content": "u2"}],
        3: [{"role": "tool", "content": "t3"}, {"role": "assistant", "content": "a3"}],
    }
    for sequence, items in batches.items():
        checkpoint.sequence = sequence
        await store.save(checkpoint, items)

    page = await store.transcript_page("session", TranscriptPageRequest(max_batches=10))
    positioned = page.into_positioned_items_chronological()
    assert positioned == [
        (MessageTarget(checkpoint_sequence=1, batch_item_count=1), batches[1][0]),
        (MessageTarget(checkpoint_sequence=1, batch_item_count=2), batches[1][1]),
        (MessageTarget(checkpoint_sequence=2, batch_item_count=1), batches[2][0]),
        (MessageTarget(checkpoint_sequence=3, batch_item_count=1), batches[3][0]),
        (MessageTarget(checkpoint_sequence=3, batch_item_count=2), batches[3][1]),
    ]


async def test_execution_journal_pages_records_and_updates_catalog_stats(store):
    """Execution records page newest first and the catalog shows the checkpoint's stats."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint)
    records = []
    for turn in range(1, 4):
        record = execution("session", turn)
        records.append(record)
        checkpoint.sequence = turn
        assert checkpoint.execution_stats.checked_record(record)
        await store.save(checkpoint, [], record)

    first = await store.execution_page(
        "session", ExecutionPageRequest(before_sequence=None, limit=2)
    )
    second = await store.execution_page(
        "session",
        ExecutionPageRequest(before_sequence=first.next_before_sequence, limit=2),
    )
    catalog = await store.list_sessions_page(SessionPageRequest(limit=1))
    recent = await store.recent_executions(2)
    assert (
        [record.turn_id for record in first.executions],
        first.next_before_sequence,
        [record.turn_id for record in second.executions],
        second.next_before_sequence,
        catalog.sessions[0].execution_stats.run_count,
        [record.turn_id for record in recent],
    ) == (["turn-3", "turn-2"], 2, ["turn-1"], None, 3, ["turn-3", "turn-2"])
    assert first.executions == [records[2], records[1]]
    assert second.executions == [records[0]]
    assert catalog.sessions[0].execution_stats == checkpoint.execution_stats


async def test_recent_executions_order_by_start_time_across_sessions(store):
    """recent_executions returns the latest-started turns of all sessions, newest first."""
    starts = {"a": [100, 300], "b": [200, 400], "c": [250]}
    expected = []
    for session_id, started in starts.items():
        checkpoint = Checkpoint.empty(session_id)
        await store.save(checkpoint)
        for sequence, started_at_ms in enumerate(started, start=1):
            record = msgspec.structs.replace(
                execution(session_id, sequence),
                started_at_ms=started_at_ms,
                finished_at_ms=started_at_ms + 25,
            )
            expected.append(record)
            checkpoint.sequence = sequence
            await store.save(checkpoint, [], record)

    newest_first = sorted(expected, key=lambda record: record.started_at_ms, reverse=True)
    assert await store.recent_executions(3) == newest_first[:3]
    assert [(r.session_id, r.started_at_ms) for r in await store.recent_executions(3)] == [
        ("b", 400),
        ("a", 300),
        ("c", 250),
    ]
    assert await store.recent_executions(100) == newest_first


async def test_recent_executions_break_start_time_ties_by_session_then_sequence(store):
    """Turns started at the same instant order by session id, then sequence, descending."""
    for session_id in ("a", "b"):
        checkpoint = Checkpoint.empty(session_id)
        await store.save(checkpoint)
        for sequence in (1, 2):
            checkpoint.sequence = sequence
            record = msgspec.structs.replace(
                execution(session_id, sequence), started_at_ms=500, finished_at_ms=525
            )
            await store.save(checkpoint, [], record)
    recent = await store.recent_executions(4)
    assert [(record.session_id, record.turn_id) for record in recent] == [
        ("b", "turn-2"),
        ("b", "turn-1"),
        ("a", "turn-2"),
        ("a", "turn-1"),
    ]


async def test_first_user_message_keeps_the_first_value_in_the_catalog(store):
    """The catalog keeps the first non-empty first_user_message a session ever saved."""
    checkpoint = Checkpoint.empty("session")
    await store.save(checkpoint)
    assert (await store.session_summary("session")).first_user_message is None
    checkpoint.sequence = 1
    checkpoint.first_user_message = "hello"
    await store.save(checkpoint)
    checkpoint.sequence = 2
    checkpoint.first_user_message = "something else"
    await store.save(checkpoint)
    assert (await store.session_summary("session")).first_user_message == "hello"


async def test_execution_insert_failure_rolls_back_checkpoint_and_transcript(store, database):
    """A failed execution insert leaves the checkpoint and transcript exactly as before."""
    original = Checkpoint.empty("session")
    await store.save(original)
    database.fail_inserts_into("execution_journal")

    record = execution("session", 1)
    nxt = msgspec.structs.replace(original, sequence=1, context=[{"role": "assistant"}])
    nxt.execution_stats = ExecutionStats()
    assert nxt.execution_stats.checked_record(record)
    with pytest.raises(turnstore.StorageError) as caught:
        await store.save(nxt, [{"role": "assistant"}], record)
    assert "forced failure" in str(caught.value)

    assert await store.load("session") == original
    assert await transcript_sequences(store, "session") == []
    summary = await store.session_summary("session")
    assert (summary.sequence, summary.execution_stats) == (0, ExecutionStats())
    assert database.count("execution_journal") == 0
    assert database.count("transcript_delta") == 0


async def test_store_keeps_working_after_a_failed_save(store, database):
    """After a save fails in the database, the same save succeeds once the cause is gone."""
    original = Checkpoint.empty("session")
    await store.save(original)
    database.fail_inserts_into("execution_journal")
    record = execution("session", 1)
    nxt = msgspec.structs.replace(original, sequence=1)
    nxt.execution_stats = ExecutionStats()
    assert nxt.execution_stats.checked_record(record)
    with pytest.raises(turnstore.TurnstoreError):
        await store.save(nxt, [{"role": "assistant"}], record)

    database.stop_failing_inserts_into("execution_journal")
    await store.save(nxt, [{"role": "assistant"}], record)
    assert await store.load("session") == nxt
    assert await transcript_sequences(store, "session") == [1]
    page = await store.execution_page("session", ExecutionPageRequest(limit=10))
    assert page.executions == [record]


async def test_event_insert_failure_rolls_back_checkpoint_and_event_batch(store):
    """An invalid event in save_with_events leaves checkpoint, high-water and events unchanged."""
    original = Checkpoint.empty("session")
    await store.save(original)
    nxt = msgspec.structs.replace(original, sequence=1)

    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.save_with_events(
            nxt,
            [{"role": "assistant"}],
            None,
            [warning(10, "first"), warning(-1, "invalid")],
        )
    assert str(caught.value) == "event journal timestamp cannot be negative"
    assert isinstance(caught.value, turnstore.errors.CheckpointError)

    saved = await store.load("session")
    events = await store.event_page("session", EventPageRequest(before_sequence=None, limit=1))
    assert (saved, events.latest_sequence, events.events) == (original, 0, [])
    assert await transcript_sequences(store, "session") == []


async def test_forced_event_insert_failure_rolls_back_the_whole_save(store, database):
    """A failed event insert makes nothing of save_with_events visible."""
    original = Checkpoint.empty("session")
    await store.save(original)
    before = await store.append_event("session", 5, warning(5, "before").event)
    # A warning is journaled with its save's batch (event_batches), not a row of its own.
    database.fail_inserts_into("event_batches")

    record = execution("session", 1)
    nxt = msgspec.structs.replace(original, sequence=1, context=[{"role": "assistant"}])
    nxt.execution_stats = ExecutionStats()
    assert nxt.execution_stats.checked_record(record)
    with pytest.raises(turnstore.StorageError) as caught:
        await store.save_with_events(nxt, [{"role": "assistant"}], record, [warning(10, "lost")])
    assert "forced failure" in str(caught.value)

    assert await store.load("session") == original
    assert await transcript_sequences(store, "session") == []
    executions = await store.execution_page("session", ExecutionPageRequest(limit=10))
    assert executions.executions == []
    events = await store.event_page("session", EventPageRequest(limit=10))
    assert (events.latest_sequence, events.events) == (1, [before])
    summary = await store.session_summary("session")
    assert (summary.sequence, summary.execution_stats.run_count) == (0, 0)
    assert database.count("execution_journal") == 0
    assert database.count("transcript_delta") == 0
    assert database.count("event_batches") == 1
