"""Rules a code review found broken, each pinned by the test that failed before the fix."""

from __future__ import annotations

import asyncio
import threading

import pytest
from runtime_helpers import runtime

import turnstore
from conftest import postgres_connection, require_postgres
from turnstore import (
    AttachmentIntent,
    Checkpoint,
    InvalidInput,
    QueuedWorkBatchDraft,
    SessionCursor,
    SessionPageRequest,
)


async def test_a_claim_never_jumps_over_a_batch_another_claim_holds(store):
    """The claimed group is consecutive: it stops at a batch held by a live claim."""
    rt = await runtime(store, "queue")
    for batch_id in ("a", "b", "c"):
        await rt.enqueue_queued_work(QueuedWorkBatchDraft(session_id="queue", batch_id=batch_id))
    claims = [await rt.claim_ready_queued_work("queue", "w", "turn", 60_000, 1) for _ in "abc"]
    assert [claim.batches[0].batch_id for claim in claims] == ["a", "b", "c"]
    await rt.abandon_queued_work_claim(claims[0])
    await rt.abandon_queued_work_claim(claims[2])
    group = await rt.claim_ready_queued_work("queue", "w2", "turn", 60_000, 5)
    assert [batch.batch_id for batch in group.batches] == ["a"]


async def test_forget_keeps_an_attachment_committed_after_it_was_listed(store):
    """forget removes only uncommitted rows: a commit between listing and forgetting wins."""
    rt = await runtime(store, "files")
    intent = AttachmentIntent(
        attachment_id="x", session_id="files", canonical_uri="/nowhere/x", intent_at_epoch_ms=1
    )
    await rt.record_intent(intent)
    assert [entry.attachment_id for entry in await rt.list_uncommitted(10)] == ["x"]
    await rt.commit_refs("files", ["x"])
    assert await rt.forget("x") is False
    assert await rt.list_uncommitted(10) == []
    await rt.commit_refs("files", ["x"])  # still recorded, so committing again is accepted


@pytest.mark.parametrize(
    "request_",
    [
        SessionPageRequest(limit=1, owner_id=5),  # type: ignore[arg-type]
        SessionPageRequest(
            limit=1, cursor=SessionCursor(updated_at=2**70, sequence=0, session_id="a")
        ),
        SessionPageRequest(
            limit=1, cursor=SessionCursor(updated_at=True, sequence=0, session_id="a")
        ),
        SessionPageRequest(limit=1, cursor=SessionCursor(updated_at=1, sequence=0, session_id=3)),  # type: ignore[arg-type]
    ],
    ids=["owner-not-text", "updated-at-too-large", "updated-at-bool", "session-id-not-text"],
)
async def test_a_malformed_catalog_request_is_refused_with_a_typed_error(store, request_):
    """Catalog requests with a wrongly typed owner or cursor raise InvalidInput."""
    await store.save(Checkpoint.empty("a"))
    with pytest.raises(InvalidInput):
        await store.list_sessions_page(request_)


@pytest.mark.parametrize("backend_name", ["postgres"])
def test_delete_returns_false_when_a_selected_session_vanishes_while_it_waits(
    backend_name, store_url, pg_schema
):
    """A session deleted by another caller while delete_sessions waits makes it delete nothing.

    PostgreSQL only: on SQLite the one writer never lets another delete interleave.
    """
    require_postgres()
    with turnstore.open_blocking(store_url) as store:
        store.save(Checkpoint.empty("a"))
        store.save(Checkpoint.empty("b"))
        blocker = postgres_connection(pg_schema)
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM sessions WHERE session_id = 'b' FOR UPDATE")
        outcome: list[bool] = []
        deleter = threading.Thread(target=lambda: outcome.append(store.delete_sessions(["a", "b"])))
        deleter.start()
        deleter.join(timeout=1.0)
        assert deleter.is_alive()  # waiting on b's row lock
        blocker.execute("DELETE FROM sessions WHERE session_id = 'b'")
        blocker.execute("COMMIT")
        blocker.close()
        deleter.join(timeout=30)
        assert outcome == [False]
        assert store.load("a") == Checkpoint.empty("a")


async def test_a_step_that_outlives_close_sees_a_closed_store(store_url):
    """A read or write step issued after close (an operation racing it) raises StoreClosed."""
    store = turnstore.open(store_url)
    await store.save(Checkpoint.empty("a"))
    await store.close()
    with pytest.raises(turnstore.StoreClosed):
        await store._read(asyncio.get_running_loop(), lambda: None)
    with pytest.raises(turnstore.StoreClosed):
        store.backend.engine.write(lambda tx: None)
