"""Queued work: durable ingress batches and the leases (claims) workers hold on them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

import msgspec

from turnstore.engine.protocol import Statements, Tx, insert, select, update
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.runtime import (
    QueuedWorkBatch,
    QueuedWorkBatchDraft,
    QueuedWorkClaim,
    QueuedWorkClaimBoundary,
)
from turnstore.rules.queue import (
    PreparedClaim,
    check_new_batch,
    held_batches,
    is_held,
    next_ready_group,
)
from turnstore.rules.validation import identifier
from turnstore.scripts import sessions
from turnstore.scripts.runtime_tables import now_ms


class BatchRow(NamedTuple):
    """One queued batch, its items still JSON."""

    batch_id: str
    position: int
    boundary: QueuedWorkClaimBoundary
    items_json: str
    enqueued_at_ms: int
    claim_id: str | None
    claim_owner_id: str | None
    lease_expires_at_ms: int | None


class BatchInsert(NamedTuple):
    """A queued-work batch as written, at the end of its session's queue."""

    session_id: str
    batch_id: str
    position: int
    boundary: str
    items_json: str
    enqueued_at_ms: int


class ClaimWrite(NamedTuple):
    """A claim's lease on one batch (the batch picked by the last two fields)."""

    claim_id: str
    claim_owner_id: str
    lease_expires_at_ms: int
    session_id: str
    batch_id: str


class Leased(NamedTuple):
    """What a claim took: the claim (None when nothing was ready) and the expired leases,
    by claim id, whose batches it took over."""

    claim: QueuedWorkClaim | None
    expired: frozenset[str] = frozenset()


class QueueSql(Statements):
    """Statements of the queued-work table."""

    batches = select(BatchRow, "FROM queued_work WHERE session_id = ? ORDER BY position")
    last_position = "SELECT COALESCE(MAX(position), 0) FROM queued_work WHERE session_id = ?"
    batch_exists = "SELECT 1 FROM queued_work WHERE session_id = ? AND batch_id = ?"
    insert_batch = insert(BatchInsert, "queued_work")
    claim_batch = update(ClaimWrite, "queued_work", keys=2)
    renew_claim = (
        "UPDATE queued_work SET lease_expires_at_ms = ? WHERE session_id = ? AND claim_id = ?"
    )
    release_claim = (
        "UPDATE queued_work SET claim_id = NULL, claim_owner_id = NULL,"
        " lease_expires_at_ms = NULL WHERE session_id = ? AND claim_id = ?"
    )
    delete_batch = "DELETE FROM queued_work WHERE session_id = ? AND batch_id = ?"


def _batch(session_id: str, row: BatchRow) -> QueuedWorkBatch:
    return QueuedWorkBatch(
        session_id=session_id,
        batch_id=row.batch_id,
        position=row.position,
        boundary=row.boundary,
        items=decode_stored(row.items_json, list[Any], "queued work", session_id),
        enqueued_at_ms=row.enqueued_at_ms,
        claim_id=row.claim_id,
        claim_owner_id=row.claim_owner_id,
        lease_expires_at_ms=row.lease_expires_at_ms,
    )


def batches(tx: Tx, session_id: str) -> list[QueuedWorkBatch]:
    """The session's queue in order."""
    rows = tx.rows(tx.sql(QueueSql).batches, (session_id,))
    return [_batch(session_id, row) for row in rows]


def enqueue(tx: Tx, session_id: str, draft: QueuedWorkBatchDraft) -> QueuedWorkBatch:
    """Append a batch at the end of the session's durable queue."""
    sql = tx.sql(QueueSql)
    sessions.ensure(tx, session_id)
    batch_id = draft.batch_id or uuid.uuid4().hex
    check_new_batch(tx.value(sql.batch_exists, (session_id, batch_id)), batch_id)
    position = int(tx.value(sql.last_position, (session_id,)) or 0) + 1
    now = now_ms(tx)
    items_json = encode_json(draft.items).decode()
    row = BatchInsert(session_id, batch_id, position, draft.boundary, items_json, now)
    tx.run(sql.insert_batch, row)
    return QueuedWorkBatch(
        session_id=session_id,
        batch_id=batch_id,
        position=position,
        boundary=draft.boundary,
        items=draft.items,
        enqueued_at_ms=now,
    )


def claim(tx: Tx, session_id: str, request: PreparedClaim) -> Leased:
    """Lease the next ready group: the oldest ready batches sharing the claim's boundary."""
    if not sessions.lock(tx, session_id):
        return Leased(None)
    now = now_ms(tx)
    group = next_ready_group(batches(tx, session_id), now, request)
    if not group:
        return Leased(None)
    # A ready batch that still names a claim is one whose lease ran out.
    expired = frozenset(batch.claim_id for batch in group if batch.claim_id is not None)
    claim_id = uuid.uuid4().hex
    expires = now + request.lease_ttl_ms
    sql = tx.sql(QueueSql)
    for batch in group:
        lease = ClaimWrite(claim_id, request.owner_id, expires, session_id, batch.batch_id)
        tx.run(sql.claim_batch, lease)
        batch.claim_id = claim_id
        batch.claim_owner_id = request.owner_id
        batch.lease_expires_at_ms = expires
    found = QueuedWorkClaim(
        session_id=session_id,
        claim_id=claim_id,
        owner_id=request.owner_id,
        boundary=group[0].boundary,
        batches=group,
        lease_expires_at_ms=expires,
    )
    return Leased(found, expired)


def held(tx: Tx, session_id: str, claim_id: str, batch_ids: Iterable[str]) -> list[QueuedWorkBatch]:
    """Return the batches of a live claim, or raise QueuedWorkClaimExpired."""
    sessions.lock(tx, session_id)
    now = now_ms(tx)
    return held_batches(batches(tx, session_id), now, session_id, claim_id, batch_ids)


def complete(tx: Tx, session_id: str, claim_id: str, batch_ids: list[str]) -> None:
    """Remove the batches a live claim completes."""
    for batch in held(tx, session_id, claim_id, batch_ids):
        tx.run(tx.sql(QueueSql).delete_batch, (session_id, batch.batch_id))


def renew(tx: Tx, claim: QueuedWorkClaim, lease_ttl_ms: int) -> QueuedWorkClaim:
    """Extend a live claim's lease; an expired or missing claim cannot be renewed."""
    ids = [batch.batch_id for batch in claim.batches]
    found = held(tx, claim.session_id, claim.claim_id, ids)
    expires = now_ms(tx) + lease_ttl_ms
    tx.run(tx.sql(QueueSql).renew_claim, (expires, claim.session_id, claim.claim_id))
    for batch in found:
        batch.lease_expires_at_ms = expires
    return msgspec.structs.replace(claim, batches=found, lease_expires_at_ms=expires)


def abandon(tx: Tx, claim: QueuedWorkClaim) -> None:
    """Release a claim's batches so they are ready again."""
    tx.run(tx.sql(QueueSql).release_claim, (claim.session_id, claim.claim_id))


def cancel(tx: Tx, session_id: str, batch_id: str) -> QueuedWorkBatch | None:
    """Remove an unclaimed batch; None when it is missing or a live claim holds it."""
    identifier(batch_id, "queued work batch ID")
    if not sessions.lock(tx, session_id):
        return None
    now = now_ms(tx)
    for batch in batches(tx, session_id):
        if batch.batch_id == batch_id:
            if is_held(batch, now):
                return None
            tx.run(tx.sql(QueueSql).delete_batch, (session_id, batch_id))
            return batch
    return None


def listed(tx: Tx, session_id: str, pending_only: bool) -> list[QueuedWorkBatch]:
    """The session's queue in order; pending leaves out batches a live claim holds."""
    found = batches(tx, session_id)
    if not pending_only:
        return found
    now = now_ms(tx)
    return [batch for batch in found if not is_held(batch, now)]
