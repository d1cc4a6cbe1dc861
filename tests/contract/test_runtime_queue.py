"""Contract: durable queued work (enqueue, leased claims, renew, abandon, cancel, complete).

The `lash_core` store contract (seed 004): `claim_ready_queued_work` leases the next ready
group — consecutive batches at the head of the queue with the claim's boundary, at most
`max_batches`; `claim_ready_queued_work_by_batch_ids` claims exactly the ids it names or
nothing; a claim whose lease ran out is pending again and can neither be renewed nor completed
(`QueuedWorkClaimExpired`). Multi-process claim races are tested elsewhere.
"""

from __future__ import annotations

import asyncio

import pytest
from runtime_helpers import (
    LONG_LEASE_MS,
    SHORT_LEASE_MS,
    append,
    make_commit,
    node,
    runtime,
    seed_session,
    snapshot,
)

import turnstore
from turnstore import (
    QueuedWorkBatchDraft,
)
from turnstore.records import (
    QueuedWorkBatch,
    QueuedWorkCompletion,
)

EXPIRY_WAIT_S = 0.45


async def enqueue(rt, *specs: str) -> list[QueuedWorkBatch]:
    """Enqueue batches given as `id` (turn boundary) or `id:steer`."""
    stored = []
    for spec in specs:
        batch_id, _, boundary = spec.partition(":")
        stored.append(
            await rt.enqueue_queued_work(
                QueuedWorkBatchDraft(
                    batch_id=batch_id,
                    boundary=boundary or "turn",
                    items=[{"text": batch_id}],
                )
            )
        )
    return stored


def ids(batches) -> list[str]:
    """The batch ids of a claim's batches or a listing."""
    return [batch.batch_id for batch in batches]


# --- enqueue and list -------------------------------------------------------------------------


async def test_enqueue_stores_a_batch_with_a_generated_or_given_id(store):
    """enqueue returns the stored batch: given or generated id, next position, items, no claim."""
    rt = await runtime(store, "s")
    generated = await rt.enqueue_queued_work(QueuedWorkBatchDraft(items=["hello", {"n": 1}]))
    given = await rt.enqueue_queued_work(
        QueuedWorkBatchDraft(batch_id="mine", boundary="steer", items=[2])
    )
    another = await rt.enqueue_queued_work(QueuedWorkBatchDraft())

    assert generated.batch_id.strip()
    assert another.batch_id not in (generated.batch_id, "mine")
    assert (given.batch_id, given.boundary, given.items) == ("mine", "steer", [2])
    assert (generated.boundary, generated.items) == ("turn", ["hello", {"n": 1}])
    assert generated.position < given.position < another.position
    assert (generated.claim_id, generated.claim_owner_id, generated.lease_expires_at_ms) == (
        None,
        None,
        None,
    )
    assert await rt.list_queued_work() == [generated, given, another]
    assert await rt.list_pending_queued_work() == [generated, given, another]


async def test_a_duplicate_batch_id_is_refused(store, database):
    """Enqueueing a batch id the session's queue already holds raises InvalidInput."""
    rt = await runtime(store, "s")
    await enqueue(rt, "b1")
    before = snapshot(database, "s")
    with pytest.raises(turnstore.InvalidInput) as caught:
        await enqueue(rt, "b1")
    assert "b1" in str(caught.value)
    assert snapshot(database, "s") == before
    other = await runtime(store, "other")
    assert ids(await enqueue(other, "b1")) == ["b1"]


async def test_a_blank_batch_id_is_refused(store, database):
    """A batch id that is given must not be blank."""
    rt = await runtime(store, "s")
    with pytest.raises(turnstore.InvalidInput):
        await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="  "))
    assert database.count("queued_work") == 0


async def test_the_queue_of_an_unknown_session_is_empty(store):
    """Listing, claiming or cancelling in a session with no queue finds nothing."""
    rt = await runtime(store, "missing")
    assert await rt.list_queued_work() == []
    assert await rt.list_pending_queued_work() == []
    assert await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 1) is None
    assert await rt.cancel_queued_work_batch("b1") is None


# --- claiming -------------------------------------------------------------------------------


async def test_a_claim_takes_the_next_batches_sharing_its_boundary(store):
    """A claim takes consecutive ready batches with its boundary from the head of the queue."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2", "s1:steer", "t3")

    claim = await rt.claim_ready_queued_work("worker-1", "turn", LONG_LEASE_MS, 10)
    assert ids(claim.batches) == ["t1", "t2"]
    assert (claim.session_id, claim.owner_id, claim.boundary) == ("s", "worker-1", "turn")
    assert all(
        (b.claim_id, b.claim_owner_id, b.lease_expires_at_ms)
        == (claim.claim_id, "worker-1", claim.lease_expires_at_ms)
        for b in claim.batches
    )
    assert claim.lease_expires_at_ms > max(b.enqueued_at_ms for b in claim.batches)

    # The head of the ready queue is now a steer batch: no turn claim until it is taken.
    assert await rt.claim_ready_queued_work("worker-2", "turn", LONG_LEASE_MS, 10) is None
    steer = await rt.claim_ready_queued_work("worker-2", "steer", LONG_LEASE_MS, 10)
    assert ids(steer.batches) == ["s1"]
    last = await rt.claim_ready_queued_work("worker-3", "turn", LONG_LEASE_MS, 10)
    assert ids(last.batches) == ["t3"]
    assert len({claim.claim_id, steer.claim_id, last.claim_id}) == 3
    assert await rt.claim_ready_queued_work("worker-4", "turn", LONG_LEASE_MS, 10) is None


async def test_a_claim_takes_at_most_max_batches(store):
    """max_batches bounds the group a claim takes; the rest stay ready in order."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2", "t3")
    first = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 1)
    second = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 2)
    assert (ids(first.batches), ids(second.batches)) == (["t1"], ["t2", "t3"])


async def test_a_batch_with_another_boundary_at_the_head_means_no_claim(store):
    """When the first ready batch has another boundary, a claim returns None and takes nothing."""
    rt = await runtime(store, "s")
    await enqueue(rt, "s1:steer", "t1")
    assert await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 5) is None
    assert all(b.claim_id is None for b in await rt.list_queued_work())
    assert await rt.claim_ready_queued_work("w", "steer", LONG_LEASE_MS, 5) is not None


async def test_claiming_exact_batch_ids(store):
    """claim by batch ids claims exactly the next ready group it names."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2", "t3", "s1:steer")
    claim = await rt.claim_ready_queued_work_by_batch_ids("w", "turn", LONG_LEASE_MS, ["t1", "t2"])
    assert ids(claim.batches) == ["t1", "t2"]
    assert claim.owner_id == "w"
    rest = await rt.claim_ready_queued_work_by_batch_ids("w", "turn", LONG_LEASE_MS, ["t3"])
    assert ids(rest.batches) == ["t3"]
    listed = {b.batch_id: b.claim_id for b in await rt.list_queued_work()}
    assert listed == {"t1": claim.claim_id, "t2": claim.claim_id, "t3": rest.claim_id, "s1": None}


@pytest.mark.parametrize(
    "wanted",
    [
        pytest.param(["t2"], id="not-the-head"),
        pytest.param(["t2", "t1"], id="wrong-order"),
        pytest.param(["t1", "t3"], id="gap"),
        pytest.param(["t1", "t2", "t3", "s1"], id="crosses-a-boundary"),
        pytest.param(["t1", "missing"], id="unknown-id"),
        pytest.param(["s1"], id="other-boundary"),
    ],
)
async def test_claiming_batch_ids_that_are_not_the_next_group_claims_nothing(store, wanted):
    """claim by batch ids returns None and leaves every batch unclaimed when the ids differ."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2", "t3", "s1:steer")
    assert await rt.claim_ready_queued_work_by_batch_ids("w", "turn", LONG_LEASE_MS, wanted) is None
    assert [b.claim_id for b in await rt.list_queued_work()] == [None] * 4
    assert ids(await rt.list_pending_queued_work()) == ["t1", "t2", "t3", "s1"]


async def test_claiming_no_batch_ids_claims_nothing(store):
    """claim by an empty list of batch ids returns None."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1")
    assert await rt.claim_ready_queued_work_by_batch_ids("w", "turn", LONG_LEASE_MS, []) is None
    assert [b.claim_id for b in await rt.list_queued_work()] == [None]


async def test_a_claim_never_jumps_over_a_batch_another_claim_holds(store):
    """The claimed group is consecutive: it stops at a batch held by a live claim."""
    rt = await runtime(store, "queue")
    for batch_id in ("a", "b", "c"):
        await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id=batch_id))
    claims = [await rt.claim_ready_queued_work("w", "turn", 60_000, 1) for _ in "abc"]
    assert [claim.batches[0].batch_id for claim in claims] == ["a", "b", "c"]
    await rt.abandon_queued_work_claim(claims[0])
    await rt.abandon_queued_work_claim(claims[2])
    group = await rt.claim_ready_queued_work("w2", "turn", 60_000, 5)
    assert [batch.batch_id for batch in group.batches] == ["a"]


# --- renew, abandon, expiry -----------------------------------------------------------------


async def test_renew_extends_the_lease(store):
    """renew moves the lease's expiry to now + the new ttl, on the claim and its batches."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2")
    claim = await rt.claim_ready_queued_work("w", "turn", 1_000, 2)
    renewed = await rt.renew_queued_work_claim(claim, LONG_LEASE_MS)

    assert renewed.lease_expires_at_ms >= claim.lease_expires_at_ms + LONG_LEASE_MS - 1_000
    assert (renewed.claim_id, renewed.owner_id, ids(renewed.batches)) == (
        claim.claim_id,
        "w",
        ["t1", "t2"],
    )
    assert [b.lease_expires_at_ms for b in await rt.list_queued_work()] == [
        renewed.lease_expires_at_ms
    ] * 2


async def test_a_renewed_short_lease_outlives_its_first_expiry(store):
    """A claim renewed before it expires is still live after its first lease would have ended."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1")
    claim = await rt.claim_ready_queued_work("w", "turn", SHORT_LEASE_MS * 2, 1)
    await rt.renew_queued_work_claim(claim, LONG_LEASE_MS)
    await asyncio.sleep(EXPIRY_WAIT_S)
    assert await rt.list_pending_queued_work() == []
    assert await rt.claim_ready_queued_work("w2", "turn", LONG_LEASE_MS, 1) is None


async def test_abandon_releases_the_batches(store):
    """abandon makes the claim's batches ready again; the old claim can no longer be renewed."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2")
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 2)
    await rt.abandon_queued_work_claim(claim)

    assert [b.claim_id for b in await rt.list_queued_work()] == [None, None]
    assert ids(await rt.list_pending_queued_work()) == ["t1", "t2"]
    again = await rt.claim_ready_queued_work("w2", "turn", LONG_LEASE_MS, 2)
    assert ids(again.batches) == ["t1", "t2"]
    assert again.claim_id != claim.claim_id
    with pytest.raises(turnstore.QueuedWorkClaimExpired):
        await rt.renew_queued_work_claim(claim, LONG_LEASE_MS)


async def test_pending_excludes_live_claims_and_includes_expired_ones(store):
    """list_pending leaves out batches of a live claim and lists those whose claim expired."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2", "s1:steer", "t3")
    short = await rt.claim_ready_queued_work("w", "turn", SHORT_LEASE_MS, 2)
    long = await rt.claim_ready_queued_work("w", "steer", LONG_LEASE_MS, 1)
    assert ids(await rt.list_pending_queued_work()) == ["t3"]

    await asyncio.sleep(EXPIRY_WAIT_S)
    pending = await rt.list_pending_queued_work()
    assert ids(pending) == ["t1", "t2", "t3"]
    assert [b.claim_id for b in pending] == [short.claim_id, short.claim_id, None]
    assert ids(await rt.list_queued_work()) == ["t1", "t2", "s1", "t3"]
    assert long.claim_id in {b.claim_id for b in await rt.list_queued_work()}


async def test_an_expired_claim_can_neither_renew_nor_complete(store, database):
    """A claim past its lease raises QueuedWorkClaimExpired on renew and on a completing commit."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    await enqueue(rt, "t1")
    claim = await rt.claim_ready_queued_work("w", "turn", SHORT_LEASE_MS, 1)
    await asyncio.sleep(EXPIRY_WAIT_S)
    message = f"queued work claim `{claim.claim_id}` for session `s` is missing or expired"

    with pytest.raises(turnstore.QueuedWorkClaimExpired) as caught:
        await rt.renew_queued_work_claim(claim, LONG_LEASE_MS)
    assert str(caught.value) == message
    assert (caught.value.session_id, caught.value.claim_id) == ("s", claim.claim_id)

    before = snapshot(database, "s")
    commit = make_commit("s", 1, append([node("b", "a")])).completing_queue_claims(
        claim.completion()
    )
    with pytest.raises(turnstore.QueuedWorkClaimExpired) as caught:
        await rt.commit_runtime_state(commit)
    assert str(caught.value) == message
    assert snapshot(database, "s") == before
    assert ids(await rt.list_pending_queued_work()) == ["t1"]


async def test_an_expired_claim_taken_over_cannot_complete(store):
    """After another worker reclaims expired batches, the first claim cannot complete them."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    await enqueue(rt, "t1")
    stale = await rt.claim_ready_queued_work("w1", "turn", SHORT_LEASE_MS, 1)
    await asyncio.sleep(EXPIRY_WAIT_S)
    fresh = await rt.claim_ready_queued_work("w2", "turn", LONG_LEASE_MS, 1)
    assert ids(fresh.batches) == ["t1"]

    with pytest.raises(turnstore.QueuedWorkClaimExpired):
        await rt.commit_runtime_state(
            make_commit("s", 1).completing_queue_claims(stale.completion())
        )
    with pytest.raises(turnstore.QueuedWorkClaimExpired):
        await rt.renew_queued_work_claim(stale, LONG_LEASE_MS)
    await rt.commit_runtime_state(make_commit("s", 1).completing_queue_claims(fresh.completion()))
    assert await rt.list_queued_work() == []


@pytest.mark.parametrize(
    "completion",
    [
        pytest.param(lambda c: QueuedWorkCompletion(claim_id="nope", batch_ids=["t1"]), id="id"),
        pytest.param(
            lambda c: QueuedWorkCompletion(claim_id=c.claim_id, batch_ids=["t1", "t2"]),
            id="batch-not-held",
        ),
        pytest.param(
            lambda c: QueuedWorkCompletion(claim_id=c.claim_id, batch_ids=[]), id="no-batches"
        ),
    ],
)
async def test_completing_a_claim_that_does_not_hold_the_batches_is_refused(
    store, database, completion
):
    """A completion naming an unknown claim or batches it does not hold raises; no write."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    await enqueue(rt, "t1", "t2:steer")
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 5)
    before = snapshot(database, "s")
    with pytest.raises(turnstore.QueuedWorkClaimExpired):
        await rt.commit_runtime_state(
            make_commit("s", 1).completing_queue_claims(completion(claim))
        )
    assert snapshot(database, "s") == before


async def test_a_commit_completing_a_claim_removes_its_batches(store):
    """A commit carrying claim.completion() deletes the claimed batches and nothing else."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    await enqueue(rt, "t1", "t2", "s1:steer", "t3")
    turn = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 5)
    steer = await rt.claim_ready_queued_work("w", "steer", LONG_LEASE_MS, 5)
    await rt.commit_runtime_state(
        make_commit("s", 1, append([node("b", "a")])).completing_queue_claims(
            turn.completion(), steer.completion()
        )
    )
    assert ids(await rt.list_queued_work()) == ["t3"]
    with pytest.raises(turnstore.QueuedWorkClaimExpired):
        await rt.renew_queued_work_claim(turn, LONG_LEASE_MS)


# --- cancel ---------------------------------------------------------------------------------


async def test_cancel_removes_an_unclaimed_batch_and_returns_it(store):
    """cancel of an unclaimed batch removes it from the queue and returns it."""
    rt = await runtime(store, "s")
    stored = await enqueue(rt, "t1", "t2", "t3")
    removed = await rt.cancel_queued_work_batch("t2")
    assert removed == stored[1]
    assert ids(await rt.list_queued_work()) == ["t1", "t3"]
    assert await rt.cancel_queued_work_batch("t2") is None
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 5)
    assert ids(claim.batches) == ["t1", "t3"]


async def test_cancel_returns_none_for_a_live_claim_or_a_missing_batch(store):
    """cancel returns None, removing nothing, when a live claim holds the batch or it is missing."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2")
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 1)
    assert await rt.cancel_queued_work_batch("t1") is None
    assert await rt.cancel_queued_work_batch("missing") is None
    assert ids(await rt.list_queued_work()) == ["t1", "t2"]
    assert (await rt.list_queued_work())[0].claim_id == claim.claim_id


async def test_cancel_removes_a_batch_whose_claim_expired(store):
    """A batch whose claim expired is pending again and can be cancelled."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1", "t2")
    claim = await rt.claim_ready_queued_work("w", "turn", SHORT_LEASE_MS, 1)
    await asyncio.sleep(EXPIRY_WAIT_S)
    removed = await rt.cancel_queued_work_batch("t1")
    assert (removed.batch_id, removed.claim_id) == ("t1", claim.claim_id)
    assert ids(await rt.list_queued_work()) == ["t2"]


# --- bad inputs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "boundary", "lease", "max_batches"),
    [
        pytest.param("w", "turn", 0, 1, id="lease-zero"),
        pytest.param("w", "turn", -5, 1, id="lease-negative"),
        pytest.param("w", "turn", 1.5, 1, id="lease-float"),
        pytest.param("w", "turn", LONG_LEASE_MS, 0, id="max-batches-zero"),
        pytest.param("w", "turn", LONG_LEASE_MS, -1, id="max-batches-negative"),
        pytest.param("", "turn", LONG_LEASE_MS, 1, id="owner-empty"),
        pytest.param("   ", "turn", LONG_LEASE_MS, 1, id="owner-blank"),
        pytest.param("w", "idle", LONG_LEASE_MS, 1, id="boundary-unknown"),
        pytest.param("w", "", LONG_LEASE_MS, 1, id="boundary-empty"),
    ],
)
async def test_bad_claim_inputs_are_refused(store, owner, boundary, lease, max_batches):
    """A claim with a non-positive lease or size, a blank owner or a bad boundary is refused."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1")
    with pytest.raises(turnstore.InvalidInput):
        await rt.claim_ready_queued_work(owner, boundary, lease, max_batches)
    if max_batches > 0:
        with pytest.raises(turnstore.InvalidInput):
            await rt.claim_ready_queued_work_by_batch_ids(owner, boundary, lease, ["t1"])
    assert [b.claim_id for b in await rt.list_queued_work()] == [None]


@pytest.mark.parametrize("lease", [0, -1])
async def test_renewing_with_a_non_positive_lease_is_refused(store, lease):
    """renew refuses a lease that is not a positive number of milliseconds."""
    rt = await runtime(store, "s")
    await enqueue(rt, "t1")
    claim = await rt.claim_ready_queued_work("w", "turn", LONG_LEASE_MS, 1)
    with pytest.raises(turnstore.InvalidInput):
        await rt.renew_queued_work_claim(claim, lease)
    assert (await rt.list_queued_work())[0].lease_expires_at_ms == claim.lease_expires_at_ms


async def test_a_bad_boundary_in_a_batch_is_refused(store, database):
    """A batch draft with a boundary other than turn or steer is refused."""
    rt = await runtime(store, "s")
    with pytest.raises(turnstore.InvalidInput):
        await rt.enqueue_queued_work(QueuedWorkBatchDraft(boundary="idle"))
    assert database.count("queued_work") == 0
