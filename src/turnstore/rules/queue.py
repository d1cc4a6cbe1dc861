"""Rules of queued work: what a claim asks for, which batches it takes, when a lease holds,
what a batch or a completion refuses of the queue it read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from turnstore.errors import InvalidInput, QueuedWorkClaimExpired
from turnstore.records.runtime import QueuedWorkBatch, QueuedWorkBatchDraft, QueuedWorkClaim
from turnstore.rules.validation import identifier, identifiers, optional_identifier
from turnstore.rules.values import checked, integer, is_blank, nonblank, nonblank_list

MAX_LEASE_MS = 365 * 24 * 3600 * 1000
"""Longest lease a claim may ask for: one year."""


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    """A validated claim request: who claims, at which boundary, for how long, how much."""

    owner_id: str
    boundary: str
    lease_ttl_ms: int
    max_batches: int
    exact_ids: list[str] | None = None


def check_lease(lease_ttl_ms: object) -> int:
    """Return a lease length in milliseconds, refusing non-positive or absurd values."""
    ttl = integer(lease_ttl_ms, "lease_ttl_ms must be a positive integer", low=1, high=None)
    if ttl > MAX_LEASE_MS:
        raise InvalidInput("lease_ttl_ms must be at most one year")
    return ttl


def prepare_claim(
    owner_id: object,
    boundary: object,
    lease_ttl_ms: object,
    max_batches: object,
    exact_ids: list[str] | None = None,
) -> PreparedClaim:
    """Validate a claim of the next ready group (only `exact_ids`, when given)."""
    owner = identifier(nonblank(owner_id, "queued work owner cannot be empty"), "queued work owner")
    if boundary not in ("turn", "steer"):
        raise InvalidInput("queued work boundary must be `turn` or `steer`")
    ttl = check_lease(lease_ttl_ms)
    limit = integer(max_batches, "max_batches must be a positive integer", low=1)
    return PreparedClaim(owner, str(boundary), ttl, limit, exact_ids)


def prepare_claim_of(
    owner_id: object, boundary: object, lease_ttl_ms: object, batch_ids: object
) -> PreparedClaim | None:
    """Validate a claim of exactly `batch_ids`; None when there is nothing to claim."""
    ids = nonblank_list(batch_ids, "batch_ids")
    identifiers(ids, "queued work batch ID")
    if not ids:
        return None
    return prepare_claim(owner_id, boundary, lease_ttl_ms, len(ids), ids)


def prepare_enqueue(draft: object) -> QueuedWorkBatchDraft:
    """Validate a queued-work batch before it is stored."""
    batch, _ = checked(draft, QueuedWorkBatchDraft, "batch")
    if batch.batch_id is not None and is_blank(batch.batch_id):
        raise InvalidInput("queued work batch ID cannot be empty")
    optional_identifier(batch.batch_id, "queued work batch ID")
    return batch


def checked_claim(claim: object) -> QueuedWorkClaim:
    """Return a type-checked copy of a claim a caller hands back."""
    found = checked(claim, QueuedWorkClaim, "claim")[0]
    identifier(found.claim_id, "queued work claim ID")
    identifier(found.owner_id, "queued work owner")
    identifiers((batch.batch_id for batch in found.batches), "queued work batch ID")
    return found


def is_held(batch: QueuedWorkBatch, now_ms: int) -> bool:
    """Whether a live claim holds `batch` at `now_ms` (an expired lease holds nothing)."""
    return (
        batch.claim_id is not None
        and batch.lease_expires_at_ms is not None
        and batch.lease_expires_at_ms > now_ms
    )


def next_ready_group(
    queue: Iterable[QueuedWorkBatch], now_ms: int, claim: PreparedClaim
) -> list[QueuedWorkBatch]:
    """The batches a claim takes: the oldest ready run sharing its boundary, in order.

    The group is consecutive: it never jumps over a batch a live claim holds. With
    `exact_ids`, the group is taken only if it is exactly those batches.
    """
    group: list[QueuedWorkBatch] = []
    for batch in queue:
        if is_held(batch, now_ms):
            if group:
                break
            continue
        if batch.boundary != claim.boundary or len(group) == claim.max_batches:
            break
        group.append(batch)
    if claim.exact_ids is not None and [batch.batch_id for batch in group] != claim.exact_ids:
        return []
    return group


def check_new_batch(existing: object | None, batch_id: str) -> None:
    """Refuse to enqueue a batch whose id the session's queue holds (`existing` not None)."""
    if existing is not None:
        raise InvalidInput(f"queued work batch `{batch_id}` already exists")


def held_batches(
    queue: Iterable[QueuedWorkBatch],
    now_ms: int,
    session_id: str,
    claim_id: str,
    batch_ids: Iterable[str],
) -> list[QueuedWorkBatch]:
    """The batches of `queue` a live claim holds, refused unless it holds all of `batch_ids`."""
    wanted = set(batch_ids)
    found = [
        batch
        for batch in queue
        if batch.claim_id == claim_id and is_held(batch, now_ms) and batch.batch_id in wanted
    ]
    if not wanted or len(found) != len(wanted):
        raise QueuedWorkClaimExpired(
            f"queued work claim `{claim_id}` for session `{session_id}` is missing or expired",
            session_id=session_id,
            claim_id=claim_id,
        )
    return found
