"""Contract: one error policy for both contracts.

Conflicts and lookups raise errors that carry the ids their message names as typed
attributes, with `str()` still the contract's message; anything wrong with what the store
itself holds is `CorruptRecord` (never `InvalidInput`, which blames the caller).
"""

from __future__ import annotations

import pytest
from runtime_helpers import append, entry, make_commit, runtime, user

import turnstore
from turnstore import (
    Checkpoint,
    CorruptRecord,
    Event,
    EventPageRequest,
    HeadRevisionConflict,
    HydratedSessionCheckpoint,
    InvalidInput,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    RuntimeTurnCommitConflict,
    SequenceConflict,
    SessionNotFound,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.errors import SessionExists
from turnstore.events import WarningEvent


async def test_a_sequence_conflict_names_the_session_and_both_sequences(store):
    """SequenceConflict carries session_id, the stored and the attempted sequence."""
    await store.save(Checkpoint(session_id="s", sequence=3))
    with pytest.raises(SequenceConflict) as caught:
        await store.save(Checkpoint(session_id="s", sequence=2))
    error = caught.value
    assert str(error) == "checkpoint sequence did not advance"
    assert (error.session_id, error.stored, error.attempted) == ("s", 3, 2)


async def test_missing_sessions_are_named_by_the_error(store):
    """SessionNotFound carries the id of the session that was not there."""
    warning = Event(msg=WarningEvent(message="w"))
    with pytest.raises(SessionNotFound) as appended:
        await store.append_event("absent", 1, warning)
    assert (str(appended.value), appended.value.session_id) == (
        "event journal session does not exist",
        "absent",
    )
    with pytest.raises(SessionNotFound) as paged:
        await store.event_page("gone", EventPageRequest(limit=1))
    assert paged.value.session_id == "gone"
    with pytest.raises(SessionNotFound) as forked:
        await store.fork("no-parent", 0, Checkpoint.empty("child"))
    assert str(forked.value) == "fork parent does not exist"
    assert forked.value.session_id == "no-parent"


async def test_a_fork_onto_an_existing_session_names_it(store):
    """SessionExists carries the id of the child that already exists."""
    await store.save(Checkpoint.empty("parent"))
    await store.save(Checkpoint.empty("child"))
    with pytest.raises(SessionExists) as caught:
        await store.fork("parent", 0, Checkpoint.empty("child"))
    assert (str(caught.value), caught.value.session_id) == (
        "fork child session already exists",
        "child",
    )


async def test_a_head_conflict_names_the_session_and_both_revisions(store):
    """HeadRevisionConflict carries session_id, expected and actual revisions."""
    rt = await runtime(store, "h")
    await rt.commit_runtime_state(make_commit("h", None, append([user("n1", None, "hi")])))
    with pytest.raises(HeadRevisionConflict) as caught:
        await rt.commit_runtime_state(RuntimeCommit(session_id="h", expected_head_revision=5))
    error = caught.value
    assert str(error) == "store head revision conflict: expected Some(5), actual 1"
    assert (error.session_id, error.expected, error.actual) == ("h", 5, 1)


async def test_a_turn_conflict_names_the_session_and_the_turn(store):
    """RuntimeTurnCommitConflict carries session_id and turn_id."""
    rt = await runtime(store, "t")
    await rt.commit_runtime_state(RuntimeCommit(session_id="t").with_turn_commit("turn-1"))
    different = RuntimeCommit(session_id="t", expected_head_revision=1, current_agent_frame_id="x")
    with pytest.raises(RuntimeTurnCommitConflict) as caught:
        await rt.commit_runtime_state(different.with_turn_commit("turn-1"))
    assert (caught.value.session_id, caught.value.turn_id) == ("t", "turn-1")


CORRUPTIONS = [
    pytest.param(
        "UPDATE graph_nodes SET record_json = 'not json'",
        "load_session",
        id="graph-node",
    ),
    pytest.param("UPDATE token_ledger SET entry_json = '[1]'", "load_session", id="token-ledger"),
    pytest.param("UPDATE runtime_heads SET config_json = '7'", "load_session", id="head-config"),
    pytest.param("DELETE FROM blobs", "load_session", id="missing-blob"),
    pytest.param("UPDATE queued_work SET items_json = '{'", "list_queued_work", id="queued-items"),
    pytest.param("UPDATE session_meta SET meta_json = 'null'", "load_session_meta", id="meta"),
    pytest.param("UPDATE graph_nodes SET record_json = '[]'", "load_node", id="one-node"),
]


@pytest.mark.parametrize(("damage", "read"), CORRUPTIONS)
async def test_corrupt_runtime_rows_raise_corrupt_record(store, database, damage, read):
    """A runtime row that no longer decodes raises CorruptRecord naming the session."""
    rt = await runtime(store, "c")
    checkpoint = HydratedSessionCheckpoint(tool_state={"cwd": "/"})
    graph = append([user("n1", None, "hi")])
    commit = make_commit("c", None, graph, checkpoint=checkpoint, usage_deltas=[entry("t", 5)])
    await rt.commit_runtime_state(commit)
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[{"text": "x"}]))
    await rt.save_session_meta(turnstore.records.SessionMeta(session_id="c"))
    database.query(damage)
    call = getattr(rt, read)
    with pytest.raises(CorruptRecord) as caught:
        await (call("n1") if read == "load_node" else call())
    assert not isinstance(caught.value, InvalidInput)
    assert caught.value.session_id == "c"


async def test_corrupt_journal_and_state_rows_raise_corrupt_record(store, database):
    """Stored events, transcript batches and middleware state that no longer decode are corrupt."""
    checkpoint = Checkpoint(session_id="j", sequence=1)
    warning = TimestampedEvent(recorded_at_ms=1, event=Event(msg=WarningEvent(message="w")))
    await store.save_with_events(checkpoint, ["item"], events=[warning])
    await store.save_state("scope", "key", {"a": 1})
    # The warning is stored in its save's batch: an event in it that no longer decodes.
    database.query("UPDATE event_batches SET events_json = '[[1,1,{},[]]]'")
    database.query("UPDATE transcript_delta SET items_json = 'x', context_start = NULL")
    database.query("UPDATE middleware_state SET value_json = '{'")
    with pytest.raises(CorruptRecord):
        await store.event_page("j", EventPageRequest(limit=5))
    with pytest.raises(CorruptRecord):
        await store.transcript_page("j", TranscriptPageRequest(max_batches=5))
    with pytest.raises(CorruptRecord):
        await store.load_state("scope", "key")


DEEP = [pytest.param(1_100, id="1100-levels"), pytest.param(20_000, id="20000-levels")]
"""Nestings past what any decoder recurses through (about 1,000 levels)."""


@pytest.mark.parametrize("levels", DEEP)
async def test_rows_nested_past_any_decoder_raise_corrupt_record(store, database, levels):
    """A stored row nested deeper than a decoder recurses is corrupt, not a RecursionError."""
    nest = "[" * levels + "]" * levels
    checkpoint = Checkpoint(session_id="d", sequence=1, context=["item"])
    warning = TimestampedEvent(recorded_at_ms=1, event=Event(msg=WarningEvent(message="w")))
    await store.save_with_events(checkpoint, ["item"], events=[warning])
    await store.save_state("scope", "key", {"a": 1})
    rt = await runtime(store, "r")
    await rt.commit_runtime_state(make_commit("r", None, append([user("n1", None, "hi")])))
    database.query(f"UPDATE context_chunks SET items_json = '[{nest}]'")
    database.query(
        f"UPDATE transcript_delta SET items_json = '[{nest}]' WHERE items_json IS NOT NULL"
    )
    # In a record, under a key: a decoder skipping an unknown field recurses as deep.
    database.query(f"UPDATE event_batches SET events_json = '[[1,1,{{\"x\":{nest}}},[]]]'")
    database.query(f"UPDATE middleware_state SET value_json = '{nest}'")
    database.query(f"UPDATE graph_nodes SET record_json = '{{\"x\":{nest}}}'")
    reads = [
        lambda: store.load("d"),
        lambda: store.transcript_page("d", TranscriptPageRequest(max_batches=5)),
        lambda: store.event_page("d", EventPageRequest(limit=5)),
        lambda: store.load_state("scope", "key"),
        lambda: rt.load_session(),
    ]
    for read in reads:
        with pytest.raises(CorruptRecord) as caught:
            await read()
        assert "nest" in str(caught.value)
