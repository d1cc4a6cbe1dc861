"""What a read refuses of stored rows: each check raises `CorruptRecord`, naming the session.

A script decodes a stored column with `decode_stored` (records/base.py) and hands what it read
here: a decoded record that breaks a rule, a row that does not match its index, a context
whose chunks do not add up, or None where a row another row names should be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from turnstore.errors import CorruptRecord, InvalidInput
from turnstore.records.checkpoint import Checkpoint

T = TypeVar("T")


def valid_stored(check: Callable[[T], object], value: T, what: str, session_id: str | None) -> T:
    """Return `value` if `check` accepts it; the `InvalidInput` it raises becomes corruption."""
    try:
        check(value)
    except InvalidInput as error:
        raise CorruptRecord(f"stored {what} is invalid: {error}", session_id=session_id) from None
    return value


def check_checkpoint_row(checkpoint: Checkpoint, session_id: str, latest_sequence: int) -> None:
    """Refuse a stored checkpoint that is not the one its session row indexes."""
    if checkpoint.session_id != session_id or checkpoint.sequence != latest_sequence:
        raise CorruptRecord("checkpoint row does not match its index", session_id=session_id)


def check_context_length(found: int, length: int, session_id: str) -> None:
    """Refuse a stored context of `found` items whose session row says `length`."""
    if found != length:
        raise CorruptRecord(
            "checkpoint context does not match its stored length", session_id=session_id
        )


def check_chunk_start(expected: int | None, start: int, session_id: str) -> None:
    """Refuse a context chunk not starting where the one read before it ended (`expected`)."""
    if expected is not None and start != expected:
        raise CorruptRecord("checkpoint context chunks are not contiguous", session_id=session_id)


def check_event_batch(
    sequences: list[int], first: int, last: int, count: int, session_id: str
) -> None:
    """Refuse a stored event batch whose events are not the run its index columns name."""
    if (
        not sequences
        or sequences != sorted(set(sequences))
        or (sequences[0], sequences[-1], len(sequences)) != (first, last, count)
    ):
        raise CorruptRecord("stored event batch does not match its index", session_id=session_id)


def stored_blob(data: Any, ref: str, session_id: str | None) -> bytes:
    """The bytes of a blob a stored row names, as read (None: absent, which is corrupt)."""
    if data is None:
        raise CorruptRecord(f"blob `{ref}` is missing from the store", session_id=session_id)
    return bytes(data)


def stored_lineage(row: T | None, lineage: int, session_id: str) -> T:
    """The row of a list lineage a stored row names, as read (None: absent, which is corrupt)."""
    if row is None:
        raise CorruptRecord(f"list lineage {lineage} is missing", session_id=session_id)
    return row


def check_list_items(found: int, length: int, channel: str, session_id: str) -> None:
    """Refuse a stored list value whose lineage ranges hold `found` of its `length` items."""
    if found != length:
        message = f"the list value of channel {channel!r} is missing items"
        raise CorruptRecord(message, session_id=session_id)
