"""Contract: what each read, page and upkeep call does for a session that does not exist.

`docs/reference/errors.md` ("A missing session") lists every call; this file covers those
that no other contract test does. None of these calls creates the session.
"""

from __future__ import annotations

import pytest
from runtime_helpers import LONG_LEASE_MS, runtime

from turnstore import (
    ExecutionPageRequest,
    InvalidInput,
    QueuedWorkClaimExpired,
    SessionNotFound,
)
from turnstore.cli.views import store_view
from turnstore.records import QueuedWorkClaim, VacuumReport


def _claim() -> QueuedWorkClaim:
    return QueuedWorkClaim(
        session_id="missing",
        claim_id="claim",
        owner_id="worker",
        boundary="turn",
        batches=[],
        lease_expires_at_ms=1,
    )


async def test_an_execution_page_of_a_missing_session_is_empty(store, database):
    """execution_page returns an empty page, as transcript_page does."""
    page = await store.execution_page("missing", ExecutionPageRequest(limit=5))
    assert (page.executions, page.next_before_sequence) == ([], None)
    assert database.count("sessions") == 0


async def test_runtime_upkeep_and_listing_of_a_missing_session_find_nothing(store, database):
    """Exact claims, attachment listings, forget, tombstones and vacuum find nothing."""
    rt = await runtime(store, "missing")
    assert await rt.claim_ready_queued_work_by_batch_ids("w", "turn", LONG_LEASE_MS, ["b"]) is None
    assert await rt.list_uncommitted(2**62) == []
    assert await rt.forget("attachment") is False
    await rt.commit_refs([])
    await rt.abandon_queued_work_claim(_claim())
    await rt.tombstone_nodes(["a"])
    assert await rt.vacuum() == VacuumReport(removed_node_count=0)
    assert database.count("sessions") == 0


async def test_renewing_a_claim_of_a_missing_session_says_it_expired(store, database):
    """renew_queued_work_claim raises QueuedWorkClaimExpired naming the session and the claim."""
    rt = await runtime(store, "missing")
    with pytest.raises(QueuedWorkClaimExpired) as caught:
        await rt.renew_queued_work_claim(_claim(), LONG_LEASE_MS)
    assert (caught.value.session_id, caught.value.claim_id) == ("missing", "claim")
    assert (
        str(caught.value) == "queued work claim `claim` for session `missing` is missing or expired"
    )
    assert database.count("sessions") == 0


async def test_committing_refs_in_a_missing_session_is_refused(store, database):
    """commit_refs of an attachment in a missing session has no recorded intent to stamp."""
    rt = await runtime(store, "missing")
    with pytest.raises(InvalidInput) as caught:
        await rt.commit_refs(["attachment"])
    assert str(caught.value) == (
        "attachment `attachment` has no recorded intent in session `missing`"
    )
    assert database.count("sessions") == 0


def test_the_cli_view_of_a_missing_session_names_it(blocking_store):
    """The CLI's session view raises SessionNotFound carrying the session id it names."""
    with pytest.raises(SessionNotFound) as caught:
        store_view(blocking_store, "missing")
    assert (str(caught.value), caught.value.session_id) == (
        "session missing does not exist",
        "missing",
    )
