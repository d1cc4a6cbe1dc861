"""Contract: the session catalog (summaries, keyset pages, owners) and forks.

Ports the seed-003 tests `session_context_round_trips_through_save_catalog_and_fork`,
`session_catalog_reads_context_without_decoding_the_checkpoint`,
`session_catalog_continues_from_a_stable_cursor`, `fork_preserves_a_historical_parent_sequence`,
`fork_rejects_a_future_parent_sequence`, `fork_rejects_a_missing_parent` and
`metadata_round_trips_through_save_and_fork`, plus seed-002's owner filter and summary.
"""

from __future__ import annotations

import pytest

import turnstore
from turnstore import (
    Checkpoint,
    SessionContext,
    SessionPageRequest,
    TranscriptPageRequest,
)
from turnstore.events import (
    TokenUsage,
)
from turnstore.records import (
    FIGURES,
    ExecutionStats,
    SessionCursor,
    SessionSummary,
)


async def all_session_ids(store, owner_id: str | None = None) -> list[str]:
    """Every session id in the catalog, newest first, following cursors one by one."""
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_sessions_page(
            SessionPageRequest(limit=1, owner_id=owner_id, cursor=cursor)
        )
        ids.extend(session.session_id for session in page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            return ids


async def test_session_context_round_trips_through_save_catalog_and_fork(store):
    """A session context is returned unchanged by load, fork and the catalog."""
    context = SessionContext(
        workspace_id="workspace-1", workspace_label="Project One", origin_label="cron"
    )
    parent = Checkpoint.empty("parent")
    parent.session_context = context
    await store.save(parent)
    child = Checkpoint.empty("child")
    child.session_context = context
    fork = await store.fork(parent.session_id, parent.sequence, child)
    page = await store.list_sessions_page(SessionPageRequest(cursor=None, limit=10))
    assert (
        (await store.load("parent")).session_context,
        fork.session_context,
        [session.session_context for session in page.sessions],
    ) == (context, context, [context, context])
    assert (await store.load("child")).session_context == context


async def test_session_catalog_reads_context_without_decoding_the_checkpoint(store, database):
    """The catalog and session_summary work even when the stored checkpoint is corrupt."""
    context = SessionContext(workspace_id="workspace-1")
    checkpoint = Checkpoint.empty("session")
    checkpoint.session_context = context
    checkpoint.first_user_message = "hello"
    await store.save(checkpoint)
    database.query(
        "UPDATE sessions SET checkpoint_state_json = 'invalid' WHERE session_id = ?",
        ("session",),
    )

    page = await store.list_sessions_page(SessionPageRequest(cursor=None, limit=1))
    assert page.sessions[0].session_context == context
    summary = await store.session_summary("session")
    assert summary == page.sessions[0]
    assert (summary.session_id, summary.first_user_message) == ("session", "hello")
    with pytest.raises(turnstore.CorruptRecord):
        await store.load("session")


async def test_session_catalog_continues_from_a_stable_cursor(store):
    """list_sessions_page pages newest first and continues exactly after its cursor."""
    for session_id in ["a", "b", "c"]:
        await store.save(Checkpoint.empty(session_id))
    first = await store.list_sessions_page(SessionPageRequest(cursor=None, limit=2))
    second = await store.list_sessions_page(SessionPageRequest(cursor=first.next_cursor, limit=2))
    assert (
        [session.session_id for session in first.sessions],
        first.next_cursor.session_id if first.next_cursor else None,
        [session.session_id for session in second.sessions],
        second.next_cursor,
    ) == (["c", "b"], "b", ["a"], None)
    b = first.sessions[1]
    assert first.next_cursor == SessionCursor(
        updated_at=b.updated_at, sequence=b.sequence, session_id="b"
    )


async def test_session_catalog_orders_by_update_time_then_sequence_then_id(store, database):
    """The catalog is ordered by updated_at, then sequence, then session id, all descending."""
    for session_id, sequence in [("a", 0), ("b", 5), ("c", 0), ("d", 1)]:
        checkpoint = Checkpoint.empty(session_id)
        checkpoint.sequence = sequence
        await store.save(checkpoint)
    database.query("UPDATE sessions SET updated_at = 1000")
    database.query("UPDATE sessions SET updated_at = 2000 WHERE session_id = 'a'")
    assert await all_session_ids(store) == ["a", "b", "d", "c"]
    page = await store.list_sessions_page(SessionPageRequest(limit=10))
    assert [session.session_id for session in page.sessions] == ["a", "b", "d", "c"]
    assert page.next_cursor is None


async def test_session_catalog_filters_by_owner(store):
    """owner_id restricts the catalog and its cursor continuation to that owner's sessions."""
    for session_id, owner in [
        ("a-1", "a"),
        ("b-1", "b"),
        ("a-2", "a"),
        ("b-2", "b"),
        ("a-3", "a"),
        ("none", None),
    ]:
        checkpoint = Checkpoint.empty(session_id)
        checkpoint.session_context = SessionContext(owner_id=owner)
        await store.save(checkpoint)

    pages = []
    cursor = None
    while True:
        page = await store.list_sessions_page(
            SessionPageRequest(limit=1, owner_id="a", cursor=cursor)
        )
        pages.append([session.session_id for session in page.sessions])
        assert all(session.session_context.owner_id == "a" for session in page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            break
        assert len(pages) < 10
    assert pages == [["a-3"], ["a-2"], ["a-1"]]

    only_b = await store.list_sessions_page(SessionPageRequest(limit=10, owner_id="b"))
    assert [session.session_id for session in only_b.sessions] == ["b-2", "b-1"]
    assert only_b.next_cursor is None
    nobody = await store.list_sessions_page(SessionPageRequest(limit=10, owner_id="c"))
    assert (nobody.sessions, nobody.next_cursor) == ([], None)
    assert sorted(await all_session_ids(store)) == ["a-1", "a-2", "a-3", "b-1", "b-2", "none"]


async def test_session_summary_describes_one_session(store):
    """session_summary returns the session's catalog entry, and None for an absent session."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.sequence = 3
    checkpoint.catalog_visible = False
    checkpoint.first_user_message = "hi there"
    checkpoint.session_context = SessionContext(owner_id="owner", workspace_label="Label")
    checkpoint.execution_stats = ExecutionStats(
        run_count=2, failed_run_count=1, elapsed_ms=40, usage=TokenUsage(total_tokens=9)
    )
    checkpoint.context = [{"role": "user", "content": "hi there"}]
    await store.save(checkpoint)

    summary = await store.session_summary("session")
    assert isinstance(summary, SessionSummary)
    assert summary == SessionSummary(
        session_id="session",
        session_context=checkpoint.session_context,
        parent_session_id=None,
        parent_sequence=None,
        sequence=3,
        catalog_visible=False,
        first_user_message="hi there",
        execution_stats=checkpoint.execution_stats,
        created_at=summary.created_at,
        updated_at=summary.updated_at,
        kind="turnstore",
        measured=list(FIGURES),  # a session of checkpoint saves records every figure
        waiting=[],
    )
    assert summary.created_at > 0
    assert summary.updated_at >= summary.created_at
    page = await store.list_sessions_page(SessionPageRequest(limit=5))
    assert page.sessions == [summary]
    assert await store.session_summary("missing") is None


async def test_fork_preserves_a_historical_parent_sequence(store):
    """A fork may branch at any durable parent sequence up to the latest."""
    parent = Checkpoint.empty("parent")
    await store.save(parent)
    for sequence in (1, 2):
        parent.sequence = sequence
        await store.save(parent)
    fork = await store.fork("parent", 1, Checkpoint.empty("child"))
    assert fork.parent_sequence == 1
    assert fork.parent_session_id == "parent"
    summary = await store.session_summary("child")
    assert (summary.parent_session_id, summary.parent_sequence) == ("parent", 1)
    assert await store.load("parent") == parent


async def test_fork_at_the_latest_parent_sequence(store):
    """A fork may branch at exactly the parent's latest sequence."""
    parent = Checkpoint.empty("parent")
    parent.sequence = 4
    await store.save(parent)
    fork = await store.fork("parent", 4, Checkpoint.empty("child"))
    assert (fork.parent_session_id, fork.parent_sequence, fork.sequence) == ("parent", 4, 0)


async def test_fork_rejects_a_future_parent_sequence(store):
    """A fork point newer than the parent's latest checkpoint is refused."""
    await store.save(Checkpoint.empty("parent"))
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.fork("parent", 1, Checkpoint.empty("child"))
    assert str(caught.value) == "fork point is newer than the parent checkpoint"
    assert await store.load("child") is None


async def test_fork_rejects_a_missing_parent(store):
    """A fork of an absent parent is refused."""
    with pytest.raises(turnstore.SessionNotFound) as caught:
        await store.fork("missing", 0, Checkpoint.empty("child"))
    assert str(caught.value) == "fork parent does not exist"
    assert isinstance(caught.value, turnstore.TurnstoreError)
    assert await store.load("child") is None


async def test_metadata_round_trips_through_save_and_fork(store):
    """Checkpoint metadata is returned unchanged for a saved parent and its fork."""
    parent = Checkpoint.empty("parent")
    parent.metadata["gateway.chat"] = {"workspace": "/srv/project"}
    await store.save(parent)
    child = Checkpoint.empty("child")
    child.metadata = dict(parent.metadata)
    await store.fork(parent.session_id, parent.sequence, child)
    loaded_parent = await store.load("parent")
    loaded_child = await store.load("child")
    assert (loaded_parent.metadata, loaded_child.metadata) == (parent.metadata, child.metadata)
    assert loaded_child == child


async def test_fork_summary_describes_the_child(store):
    """fork returns the child's catalog summary, identical to session_summary of the child."""
    parent = Checkpoint.empty("parent")
    parent.sequence = 2
    await store.save(parent)
    child = Checkpoint.empty("child")
    child.catalog_visible = False
    child.first_user_message = "from the fork"
    child.session_context = SessionContext(owner_id="owner")
    fork = await store.fork("parent", 2, child)
    assert fork == await store.session_summary("child")
    assert (
        fork.session_id,
        fork.parent_session_id,
        fork.parent_sequence,
        fork.sequence,
        fork.catalog_visible,
        fork.first_user_message,
        fork.session_context,
        fork.execution_stats,
    ) == ("child", "parent", 2, 0, False, "from the fork", child.session_context, ExecutionStats())
    assert fork.created_at > 0


async def test_fork_child_starts_with_its_context_as_first_transcript_batch(store):
    """A fork's starting context is its first transcript batch, at sequence 0."""
    parent = Checkpoint.empty("parent")
    parent.sequence = 1
    await store.save(parent, [{"role": "user", "content": "parent"}])
    child = Checkpoint.empty("child")
    child.context = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    ]
    await store.fork("parent", 1, child)

    page = await store.transcript_page("child", TranscriptPageRequest(max_batches=10))
    assert [(batch.sequence, batch.items) for batch in page.batches] == [(0, child.context)]
    assert page.next_before_sequence is None
    assert await store.load("child") == child

    child.sequence = 1
    child.context.append({"role": "user", "content": "next"})
    await store.save(child, [{"role": "user", "content": "next"}])
    page = await store.transcript_page("child", TranscriptPageRequest(max_batches=10))
    assert [batch.sequence for batch in page.batches] == [1, 0]
    assert await store.load("child") == child
    parent_page = await store.transcript_page("parent", TranscriptPageRequest(max_batches=10))
    assert [batch.items for batch in parent_page.batches] == [
        [{"role": "user", "content": "parent"}]
    ]


async def test_fork_with_an_empty_context_has_no_transcript(store):
    """A fork whose context is empty starts with no transcript batch."""
    await store.save(Checkpoint.empty("parent"))
    await store.fork("parent", 0, Checkpoint.empty("child"))
    page = await store.transcript_page("child", TranscriptPageRequest(max_batches=10))
    assert page.batches == []


async def test_fork_children_can_fork_again(store):
    """A fork is a session like any other: it can itself be forked."""
    await store.save(Checkpoint.empty("parent"))
    await store.fork("parent", 0, Checkpoint.empty("child"))
    grandchild = await store.fork("child", 0, Checkpoint.empty("grandchild"))
    assert (grandchild.parent_session_id, grandchild.parent_sequence) == ("child", 0)
    assert sorted(await all_session_ids(store)) == ["child", "grandchild", "parent"]


async def test_failed_fork_leaves_no_child_session(store, database):
    """A fork whose transcript insert fails leaves no trace of the child."""
    parent = Checkpoint.empty("parent")
    await store.save(parent)
    database.fail_inserts_into("transcript_delta")
    child = Checkpoint.empty("child")
    child.context = [{"role": "user", "content": "hello"}]
    with pytest.raises(turnstore.StorageError) as caught:
        await store.fork("parent", 0, child)
    assert "forced failure" in str(caught.value)

    assert await store.load("child") is None
    assert await store.session_summary("child") is None
    assert database.count("sessions", "session_id = ?", ("child",)) == 0
    assert database.count("context_chunks", "session_id = ?", ("child",)) == 0
    assert await all_session_ids(store) == ["parent"]
    assert await store.load("parent") == parent
