"""Contract: identifiers are UTF-8 text without NUL; content with NUL comes back as it was.

An identifier (a session, owner, workspace, state scope or key, node, frame, turn, batch,
claim, attachment, model-step or call id, a blob ref) holding NUL is refused with
`InvalidInput` on every backend before anything is written: PostgreSQL text cannot hold NUL,
and SQLite's JSON functions cut a string at it. Content (messages, transcript and context
items, event text, metadata, state values, queued items, graph payloads) holds NUL and
round-trips on every backend. The catalog's and the picker's first-user-message line shows a
NUL as U+FFFD; the record it comes from keeps the exact text.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from runtime_helpers import (
    LONG_LEASE_MS,
    append,
    entry,
    make_commit,
    message,
    node,
    part,
    replace,
    runtime,
    seed_session,
    snapshot,
    user,
)

from turnstore import (
    ActiveExecution,
    ActivePath,
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    HydratedSessionCheckpoint,
    InvalidInput,
    QueuedWorkBatchDraft,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    MessageAuthor,
    SessionContext,
    ToolCall,
    WarningEvent,
)
from turnstore.records import (
    ActiveModelStep,
    AgentFrameRecord,
    AttachmentIntent,
    ForkRelation,
    PendingApproval,
    QueuedMessage,
    QueuedWorkCompletion,
    SessionCursor,
    SessionMeta,
    SteerBoundary,
    TurnBoundary,
)

NUL_ID = "a\x00b"
SHOWN = "a\ufffdb"
"""How the catalog and the picker show the text `NUL_ID`."""


def warning(text: str = "w") -> TimestampedEvent:
    """A durable warning event."""
    return TimestampedEvent(recorded_at_ms=1, event=Event(msg=WarningEvent(message=text)))


def sessions_stored(database) -> int:
    """How many session rows exist."""
    return database.count("sessions")


# --- the checkpoint face: session ids ---------------------------------------------------------

SESSION_ID_CALLS: list[Any] = [
    pytest.param(lambda s: s.save(Checkpoint.empty(NUL_ID)), id="save"),
    pytest.param(lambda s: s.load(NUL_ID), id="load"),
    pytest.param(lambda s: s.session_summary(NUL_ID), id="session_summary"),
    pytest.param(lambda s: s.append_event(NUL_ID, 1, warning().event), id="append_event"),
    pytest.param(lambda s: s.event_page(NUL_ID, EventPageRequest(limit=1)), id="event_page"),
    pytest.param(lambda s: s.event_turn_page(NUL_ID), id="event_turn_page"),
    pytest.param(
        lambda s: s.transcript_page(NUL_ID, TranscriptPageRequest(max_batches=1)),
        id="transcript_page",
    ),
    pytest.param(
        lambda s: s.execution_page(NUL_ID, ExecutionPageRequest(limit=1)), id="execution_page"
    ),
    pytest.param(lambda s: s.fork(NUL_ID, 0, Checkpoint.empty("child")), id="fork-parent"),
    pytest.param(lambda s: s.fork("parent", 0, Checkpoint.empty(NUL_ID)), id="fork-child"),
    pytest.param(lambda s: s.delete_sessions(["parent", NUL_ID]), id="delete_sessions"),
]


@pytest.mark.parametrize("call", SESSION_ID_CALLS)
async def test_a_session_id_with_nul_is_refused_everywhere(store, database, call):
    """Every call naming a session refuses an id holding NUL, writing nothing."""
    await store.save(Checkpoint.empty("parent"))
    with pytest.raises(InvalidInput) as caught:
        await call(store)
    assert str(caught.value) == "session ID cannot contain NUL"
    assert sessions_stored(database) == 1
    assert await store.load("parent") == Checkpoint.empty("parent")


async def test_a_runtime_handle_refuses_a_session_id_with_nul(store):
    """A runtime handle cannot be bound to a session id holding NUL."""
    with pytest.raises(InvalidInput, match="session ID cannot contain NUL"):
        await runtime(store, NUL_ID)


async def test_a_parent_stays_deletable_when_a_fork_named_with_nul_is_refused(store, database):
    """The fork that would make its parent undeletable (SQLite's JSON cut the id) is refused."""
    await store.save(Checkpoint.empty("parent"))
    with pytest.raises(InvalidInput):
        await store.fork("parent", 0, Checkpoint.empty(NUL_ID))
    assert await store.delete_sessions(["parent"]) is True
    assert sessions_stored(database) == 0


# --- the checkpoint face: other identifiers ---------------------------------------------------


def _approval(**changes: Any) -> PendingApproval:
    approval = PendingApproval(
        submission_id="submission",
        turn_id="turn",
        request_id="request",
        approval_call_ids=["call"],
        authorized_call_ids=[],
        calls=[ToolCall(call_id="call", name="shell", arguments="{}")],
        reason="runs a command",
        sandbox_mode="read_only",
        network_access="restricted",
    )
    return msgspec.structs.replace(approval, **changes)


def _queued(**changes: Any) -> QueuedMessage:
    queued = QueuedMessage(
        owner="user",
        id="message-1",
        boundary=TurnBoundary(),
        author=MessageAuthor(role="user"),
        message="hello",
    )
    return msgspec.structs.replace(queued, **changes)


def _active(**changes: Any) -> ActiveExecution:
    return ActiveExecution(
        **({"submission_id": "submission", "turn_id": "turn", "started_at_ms": 1} | changes)
    )


CHECKPOINT_IDS: list[Any] = [
    pytest.param(
        {"session_context": SessionContext(owner_id=NUL_ID)}, "session owner ID", id="owner"
    ),
    pytest.param(
        {"session_context": SessionContext(workspace_id=NUL_ID)},
        "session workspace ID",
        id="workspace",
    ),
    pytest.param(
        {"active_execution": _active(submission_id=NUL_ID)},
        "active execution identifier",
        id="submission",
    ),
    pytest.param(
        {"active_execution": _active(turn_id=NUL_ID)}, "active execution identifier", id="turn"
    ),
    pytest.param(
        {
            "active_execution": _active(),
            "active_model_step": ActiveModelStep(
                model_step_id=NUL_ID, step_index=0, started_at_ms=1
            ),
        },
        "active model-step identifier",
        id="model-step",
    ),
    pytest.param(
        {"pending_messages": [_queued(owner=NUL_ID)]}, "queued message identifier", id="q-owner"
    ),
    pytest.param(
        {"pending_messages": [_queued(id=NUL_ID)]}, "queued message identifier", id="q-id"
    ),
    pytest.param(
        {"pending_messages": [_queued(boundary=SteerBoundary(turn_id=NUL_ID), message="steer")]},
        "queued message turn ID",
        id="q-turn",
    ),
    pytest.param(
        {"pending_approval": _approval(request_id=NUL_ID)},
        "pending approval identifier",
        id="approval-request",
    ),
    pytest.param(
        {"pending_approval": _approval(approval_call_ids=[NUL_ID])},
        "pending approval call ID",
        id="approval-call",
    ),
    pytest.param(
        {"pending_tools": [ToolCall(call_id=NUL_ID, name="shell", arguments="{}")]},
        "pending tool call ID",
        id="tool-call",
    ),
]


@pytest.mark.parametrize(("changes", "what"), CHECKPOINT_IDS)
async def test_a_checkpoint_identifier_with_nul_is_refused(store, database, changes, what):
    """Each identifier a checkpoint carries refuses NUL by name, and nothing is saved."""
    checkpoint = msgspec.structs.replace(Checkpoint(session_id="s", sequence=1), **changes)
    with pytest.raises(InvalidInput) as caught:
        await store.save(checkpoint)
    assert str(caught.value) == f"{what} cannot contain NUL"
    assert sessions_stored(database) == 0


@pytest.mark.parametrize("field", ["submission_id", "turn_id"])
async def test_an_execution_record_identifier_with_nul_is_refused(store, database, field):
    """An execution record's submission and turn ids refuse NUL; the save writes nothing."""
    record = ExecutionRecord(
        session_id="s",
        submission_id="submission",
        turn_id="turn",
        started_at_ms=1,
        finished_at_ms=2,
        elapsed_ms=1,
        outcome="completed",
    )
    with pytest.raises(InvalidInput, match="execution record identifier cannot contain NUL"):
        await store.save(
            Checkpoint(session_id="s", sequence=1),
            execution=msgspec.structs.replace(record, **{field: NUL_ID}),
        )
    assert sessions_stored(database) == 0


async def test_an_event_model_step_id_with_nul_is_refused(store, database):
    """The journal indexes events by model step, so that id refuses NUL; the save writes nothing."""
    delta = AgentMessageContentDeltaEvent(
        session_id="s", turn_id="t", model_step_id=NUL_ID, delta="x", phase="final_answer"
    )
    event = TimestampedEvent(recorded_at_ms=1, event=Event(msg=delta))
    with pytest.raises(InvalidInput, match="event model step ID cannot contain NUL"):
        await store.save_with_events(Checkpoint(session_id="s", sequence=1), events=[event])
    assert sessions_stored(database) == 0


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(SessionPageRequest(limit=5, owner_id=NUL_ID), id="owner"),
        pytest.param(
            SessionPageRequest(
                limit=5, cursor=SessionCursor(updated_at=1, sequence=0, session_id=NUL_ID)
            ),
            id="cursor",
        ),
    ],
)
async def test_a_catalog_page_refuses_nul_in_its_owner_or_cursor(store, page):
    """The catalog's owner filter and cursor session are identifiers."""
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await store.list_sessions_page(page)


@pytest.mark.parametrize(("scope", "key"), [(NUL_ID, "k"), ("scope", NUL_ID)])
async def test_middleware_state_scope_and_key_refuse_nul(store, database, scope, key):
    """A state scope or key holding NUL is refused by save_state and load_state."""
    with pytest.raises(InvalidInput, match=r"middleware state (scope|key) cannot contain NUL"):
        await store.save_state(scope, key, 1)
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await store.load_state(scope, key)
    assert database.count("middleware_state") == 0


# --- the checkpoint face: content round-trips -------------------------------------------------


async def test_content_with_nul_round_trips_and_the_catalog_shows_it_as_a_replacement(store):
    """Checkpoint text, metadata, context, transcript, events and state keep their NUL."""
    items = [{"role": "user", "content": NUL_ID}, {"text\x00key": ["\x00"]}]
    checkpoint = Checkpoint(
        session_id="s",
        sequence=1,
        first_user_message=NUL_ID,
        model_route="route\x00",
        metadata={"note": "x\x00y", "k\x00": 1},
        context=list(items),
    )
    event = warning("warn\x00ing")
    stored = await store.save_with_events(checkpoint, items, events=[event])

    assert (await store.load("s")) == checkpoint
    transcript = await store.transcript_page("s", TranscriptPageRequest(max_batches=5))
    assert [batch.items for batch in transcript.batches] == [items]
    events = await store.event_page("s", EventPageRequest(limit=5))
    assert [e.event for e in events.events] == [event.event] == [stored[0].event]
    summary = await store.session_summary("s")
    assert summary.first_user_message == SHOWN

    # The checkpoint carries its first user message on every save: saving again works.
    checkpoint.sequence = 2
    await store.save(checkpoint)
    assert (await store.load("s")).first_user_message == NUL_ID

    await store.save_state("scope", "key", {"v\x00": ["\x00"]})
    assert await store.load_state("scope", "key") == {"v\x00": ["\x00"]}


async def test_a_first_user_message_found_in_the_transcript_is_shown_with_a_replacement(store):
    """A catalog line taken from a user message holding NUL shows U+FFFD; the item keeps NUL."""
    items = [{"role": "user", "content": NUL_ID}]
    await store.save(Checkpoint(session_id="s", sequence=1, context=list(items)), items)
    assert (await store.session_summary("s")).first_user_message == SHOWN
    assert (await store.load("s")).context == items


# --- the session id's own messages ------------------------------------------------------------


@pytest.mark.parametrize(
    ("session_id", "text"),
    [
        pytest.param(7, "session ID must be a string", id="integer"),
        pytest.param(None, "session ID must be a string", id="none"),
        pytest.param("\ud800", "session ID is not UTF-8 text", id="lone-surrogate"),
        pytest.param("x\udfff" * 600, "session ID is not UTF-8 text", id="long-surrogates"),
        pytest.param(NUL_ID, "session ID cannot contain NUL", id="nul"),
        pytest.param("  ", "session ID cannot be empty", id="blank"),
        pytest.param("s" * 1025, "session ID is too long", id="too-long"),
    ],
)
async def test_each_bad_session_id_is_refused_with_its_own_message(store, session_id, text):
    """A wrong type, a lone surrogate, NUL, blank and too long each say what is wrong."""
    with pytest.raises(InvalidInput) as caught:
        await store.load(session_id)
    assert str(caught.value) == text


# --- the runtime face: identifiers ------------------------------------------------------------


def _frames(frame_id: str = "main", parent: str | None = None) -> list[AgentFrameRecord]:
    return [AgentFrameRecord(frame_id=frame_id, agent_name="main", parent_frame_id=parent)]


COMMIT_IDS: list[Any] = [
    pytest.param(lambda: make_commit("s", 1, append([node(NUL_ID, "a")])), id="node"),
    pytest.param(lambda: make_commit("s", 1, append([node("n", NUL_ID)])), id="parent"),
    pytest.param(
        lambda: make_commit("s", 1, append([node("n", "a")], leaf=NUL_ID)), id="append-leaf"
    ),
    pytest.param(lambda: make_commit("s", 1, current_agent_frame_id=NUL_ID), id="current-frame"),
    pytest.param(lambda: make_commit("s", 1, agent_frames=_frames(NUL_ID)), id="frame"),
    pytest.param(lambda: make_commit("s", 1, agent_frames=_frames("f", NUL_ID)), id="frame-parent"),
    pytest.param(lambda: make_commit("s", 1, usage_deltas=[entry(NUL_ID, 1)]), id="ledger-turn"),
    pytest.param(lambda: make_commit("s", 1).with_turn_commit(NUL_ID), id="turn-stamp"),
    pytest.param(
        lambda: make_commit("s", 1).completing_queue_claims(
            QueuedWorkCompletion(claim_id=NUL_ID, batch_ids=["b"])
        ),
        id="claim",
    ),
    pytest.param(
        lambda: make_commit("s", 1).completing_queue_claims(
            QueuedWorkCompletion(claim_id="c", batch_ids=[NUL_ID])
        ),
        id="claim-batch",
    ),
    pytest.param(lambda: make_commit("s", 1).with_committed_attachments([NUL_ID]), id="attachment"),
    pytest.param(
        lambda: make_commit(
            "s", 1, checkpoint=HydratedSessionCheckpoint(tool_state_ref="sha256:\x00")
        ),
        id="blob-ref",
    ),
]


@pytest.mark.parametrize("build", COMMIT_IDS)
async def test_a_commit_identifier_with_nul_is_refused_and_writes_nothing(store, database, build):
    """Every identifier a runtime commit carries refuses NUL; the session is unchanged."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await rt.commit_runtime_state(build())
    assert snapshot(database, "s") == before


async def test_runtime_reads_and_upkeep_refuse_a_node_id_with_nul(store, database):
    """load_node, an ActivePath leaf and tombstone_nodes refuse a node id holding NUL."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    for call in (
        lambda: rt.load_node(NUL_ID),
        lambda: rt.load_session(ActivePath(leaf_node_id=NUL_ID)),
        lambda: rt.tombstone_nodes([NUL_ID]),
    ):
        with pytest.raises(InvalidInput, match="cannot contain NUL"):
            await call()
    assert snapshot(database, "s") == before
    # Refused before the session is looked at, so an unknown session says the same.
    missing = await runtime(store, "missing")
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await missing.load_session(ActivePath(leaf_node_id=NUL_ID))


QUEUE_CALLS: list[Any] = [
    pytest.param(
        lambda rt, claim: rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id=NUL_ID)),
        id="enqueue",
    ),
    pytest.param(
        lambda rt, claim: rt.claim_ready_queued_work(NUL_ID, "turn", LONG_LEASE_MS, 1),
        id="claim-owner",
    ),
    pytest.param(
        lambda rt, claim: rt.claim_ready_queued_work_by_batch_ids(
            "w", "turn", LONG_LEASE_MS, [NUL_ID]
        ),
        id="claim-batch-ids",
    ),
    pytest.param(lambda rt, claim: rt.cancel_queued_work_batch(NUL_ID), id="cancel"),
    pytest.param(
        lambda rt, claim: rt.renew_queued_work_claim(
            msgspec.structs.replace(claim, claim_id=NUL_ID), LONG_LEASE_MS
        ),
        id="renew",
    ),
    pytest.param(
        lambda rt, claim: rt.abandon_queued_work_claim(
            msgspec.structs.replace(claim, claim_id=NUL_ID)
        ),
        id="abandon",
    ),
]


@pytest.mark.parametrize("call", QUEUE_CALLS)
async def test_queue_identifiers_with_nul_are_refused(store, database, call):
    """Batch ids, claim owners and claim ids refuse NUL; the queue is unchanged."""
    rt = await runtime(store, "s")
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=["x"]))
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b2", items=["y"]))
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 1)
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await call(rt, claim)
    assert snapshot(database, "s") == before


def _intent(attachment_id: str = "att", uri: str = "/files/att") -> AttachmentIntent:
    return AttachmentIntent(
        attachment_id=attachment_id, session_id="s", canonical_uri=uri, intent_at_epoch_ms=1
    )


ATTACHMENT_CALLS: list[Any] = [
    pytest.param(lambda rt: rt.record_intent(_intent(NUL_ID)), id="intent-id"),
    pytest.param(lambda rt: rt.record_intent(_intent("other", "/files/\x00")), id="intent-uri"),
    pytest.param(lambda rt: rt.commit_refs([NUL_ID]), id="commit_refs"),
    pytest.param(lambda rt: rt.forget(NUL_ID), id="forget"),
]


@pytest.mark.parametrize("call", ATTACHMENT_CALLS)
async def test_attachment_identifiers_with_nul_are_refused(store, database, call):
    """Attachment ids and canonical URIs refuse NUL; the manifest is unchanged."""
    rt = await runtime(store, "s")
    await rt.record_intent(_intent())
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput, match="cannot contain NUL"):
        await call(rt)
    assert snapshot(database, "s") == before


async def test_a_meta_relation_naming_a_parent_with_nul_is_refused(store, database):
    """SessionMeta's relation names a parent session: that id refuses NUL; nothing is saved."""
    rt = await runtime(store, "s")
    meta = SessionMeta(session_id="s", relation=ForkRelation(parent_session_id=NUL_ID))
    with pytest.raises(InvalidInput, match="parent session ID cannot contain NUL"):
        await rt.save_session_meta(meta)
    assert sessions_stored(database) == 0


# --- the runtime face: content round-trips ----------------------------------------------------


async def test_runtime_content_with_nul_round_trips(store):
    """Node payloads, frame state, checkpoint parts, queued items and meta keep their NUL."""
    rt = await runtime(store, "s")
    said = user("u1", None, NUL_ID)
    frames = [AgentFrameRecord(frame_id="main", agent_name="agent\x00", state={"k\x00": "\x00"})]
    checkpoint = HydratedSessionCheckpoint(
        tool_state={"cwd": "/\x00"}, plugin_snapshot=["\x00"], execution_state=b"\x00"
    )
    commit = make_commit(
        "s",
        None,
        replace([said, node("a1", "u1", text="reply\x00")]),
        agent_frames=frames,
        checkpoint=checkpoint,
    )
    await rt.commit_runtime_state(commit)
    batch = await rt.enqueue_queued_work(QueuedWorkBatchDraft(items=[{"t": "q\x00"}]))
    meta = SessionMeta(session_id="s", session_name="n\x00", cwd="/w\x00", model="m\x00")
    await rt.save_session_meta(meta)

    read = await rt.load_session()
    assert read.graph.nodes == [said, node("a1", "u1", text="reply\x00")]
    assert read.agent_frames == frames
    hydrated = read.checkpoint
    assert (hydrated.tool_state, hydrated.plugin_snapshot, hydrated.execution_state) == (
        {"cwd": "/\x00"},
        ["\x00"],
        b"\x00",
    )
    assert await rt.load_node("u1") == said
    assert await rt.list_queued_work() == [batch]
    assert batch.items == [{"t": "q\x00"}]
    assert await rt.load_session_meta() == meta
    info = await rt.picker_info()
    assert (info.first_user_message, info.cwd) == (SHOWN, "/w\x00")
    assert (await store.session_summary("s")).first_user_message == SHOWN


async def test_a_user_message_with_nul_in_parts_is_counted_and_shown(store):
    """A user message whose parts hold NUL counts for the picker and shows as U+FFFD."""
    rt = await runtime(store, "s")
    said = node("u", None, role="user", text="x")
    said.payload = message("user", part("a\x00"), part("b"))
    await rt.commit_runtime_state(make_commit("s", None, replace([said])))
    await rt.commit_runtime_state(make_commit("s", 1, append([user("u2", "u", "again")])))
    info = await rt.picker_info()
    assert (info.first_user_message, info.user_message_count) == ("a\ufffdb", 2)
    assert (await rt.load_node("u")).payload == message("user", part("a\x00"), part("b"))


# --- the audit: every text column a caller's string reaches ------------------------------------

IDENTIFIER_COLUMNS = {
    ("memory_items", "namespace"),
    ("memory_items", "item_key"),
    ("memory_items", "owner_id"),
    ("memory_vectors", "namespace"),
    ("memory_vectors", "item_key"),
    ("memory_vectors", "field"),
    ("middleware_state", "scope"),
    ("middleware_state", "key"),
    ("sessions", "session_id"),
    ("sessions", "parent_session_id"),
    ("sessions", "owner_id"),
    ("event_journal", "model_step_id"),
    ("runtime_heads", "current_agent_frame_id"),
    ("runtime_heads", "leaf_node_id"),
    ("runtime_heads", "checkpoint_ref"),
    ("graph_nodes", "node_id"),
    ("graph_nodes", "parent_node_id"),
    ("turn_commits", "turn_id"),
    ("queued_work", "batch_id"),
    ("queued_work", "claim_id"),
    ("queued_work", "claim_owner_id"),
    ("attachment_manifest", "attachment_id"),
    ("attachment_manifest", "canonical_uri"),
    ("blobs", "blob_ref"),
    # A session's kind (`append_context(kind=...)`), and the session id a search index build
    # goes on after.
    ("sessions", "kind"),
    ("search_index_state", "resume_after"),
    # The LangGraph saver's keys: thread namespaces, checkpoint, run and task ids, channels.
    ("lg_checkpoints", "checkpoint_ns"),
    ("lg_checkpoints", "checkpoint_id"),
    ("lg_checkpoints", "parent_checkpoint_id"),
    ("lg_checkpoints", "run_id"),
    ("lg_blobs", "checkpoint_ns"),
    ("lg_blobs", "channel"),
    ("lg_blobs", "version"),
    ("lg_writes", "checkpoint_ns"),
    ("lg_writes", "checkpoint_id"),
    ("lg_writes", "task_id"),
    ("lg_writes", "task_path"),
    ("lg_writes", "channel"),
    # The type tags of the LangGraph saver's serializer, refused with NUL like identifiers.
    ("lg_checkpoints", "checkpoint_type"),
    ("lg_checkpoints", "metadata_type"),
    ("lg_blobs", "value_type"),
    ("lg_items", "value_type"),
    ("lg_writes", "value_type"),
}
"""Columns holding a caller's identifier as is: `InvalidInput` refuses NUL before a write."""
DISPLAY_COLUMNS = {
    ("sessions", "first_user_message"),
    ("runtime_heads", "first_user_message"),
}
"""Columns holding text shown to people: a NUL is stored as U+FFFD."""
STORE_MADE_COLUMNS = {
    ("event_journal", "event_kind"),
    ("event_journal", "stream_phase"),
    ("queued_work", "boundary"),
    ("turn_commits", "commit_hash"),
    # SQLite's: the index words FTS5 holds of a memory item, made from its value's strings.
    ("memory_items", "stale_words"),
}
"""Columns whose text the store itself makes (tags, phases, hashes, index words)."""
SQLITE_ONLY = {("memory_items", "stale_words")}
"""Columns only SQLite's schema has."""


def _text_columns(database) -> set[tuple[str, str]]:
    if database.backend == "postgres":
        rows = database.query(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = ? AND data_type = 'text'",
            (database.schema,),
        )
        return {(table, column) for table, column in rows}
    tables = database.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {
        (table, column[1])
        for (table,) in tables
        for column in database.query(f"PRAGMA table_info({table})")
        if column[2].upper() == "TEXT"
    }


async def test_every_text_column_holding_a_callers_string_is_classified(store, database):
    """Each text column not holding JSON is an identifier, a display line or store-made."""
    await store.save(Checkpoint.empty("s"))
    found = {
        (table, column)
        for table, column in _text_columns(database)
        if not column.endswith("_json") and table != "turnstore_schema" and column != "session_id"
    }
    known = IDENTIFIER_COLUMNS | DISPLAY_COLUMNS | STORE_MADE_COLUMNS
    absent = SQLITE_ONLY if database.backend == "postgres" else set()
    assert found == known - {("sessions", "session_id")} - absent
