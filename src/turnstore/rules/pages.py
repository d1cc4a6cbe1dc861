"""Page requests: cursor and limit validation, and splitting fetched rows into a page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from turnstore.errors import InvalidInput
from turnstore.records.base import I64_MAX, I64_MIN
from turnstore.records.checkpoint import (
    EventPageRequest,
    ExecutionPageRequest,
    SessionCursor,
    SessionPageRequest,
    TranscriptPageRequest,
)
from turnstore.rules.validation import MAX_SESSION_ID_BYTES, identifier, validate_session_id
from turnstore.rules.values import integer, require, too_long

T = TypeVar("T")

MAX_FORK_TREE_LIMIT = 10_000
"""Most sessions one `fork_tree` call returns."""
_TOP = "\U0010ffff"
"""The greatest code point: ids compare by it as by their UTF-8 bytes."""
_ABOVE_EVERY_ID = _TOP * (MAX_SESSION_ID_BYTES // len(_TOP.encode()) + 1)
"""Text greater than every session id (each is at most `MAX_SESSION_ID_BYTES` long)."""

JournalRequest = EventPageRequest | TranscriptPageRequest | ExecutionPageRequest
"""A newest-first page request of one session's journal."""

# What each journal's messages call it: (page, cursor).
_JOURNAL_NAMES: dict[type, tuple[str, str]] = {
    EventPageRequest: ("event journal page", "event journal cursor"),
    TranscriptPageRequest: ("transcript page", "transcript cursor"),
    ExecutionPageRequest: ("execution page", "execution cursor"),
}


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """A validated journal page request: rows before `before`, `limit` of them per page."""

    session_id: str
    before: int | None
    limit: int

    @property
    def fetch(self) -> int:
        """Rows to read: one more than the page, to learn whether another page follows."""
        return self.limit + 1


@dataclass(frozen=True, slots=True)
class CatalogQuery:
    """A validated catalog page request."""

    owner_id: str | None
    after: tuple[int, int, str] | None
    limit: int
    id_range: tuple[str, str] | None = None
    """The ids `[low, high)` that start with the request's `id_prefix`, if it has one."""

    @property
    def fetch(self) -> int:
        """Rows to read: one more than the page, to learn whether another page follows."""
        return self.limit + 1


def page_limit(limit: object, what: str) -> int:
    """Return a page's row limit, refusing non-positive values and values with no room for +1."""
    checked = integer(limit, f"{what} limit must be positive", low=1, high=None)
    if checked >= I64_MAX:
        raise InvalidInput(f"{what} limit is too large")
    return checked


def journal_query(session_id: object, request: object, type_: type[JournalRequest]) -> JournalQuery:
    """Validate a journal page request of `type_` for one session."""
    session = validate_session_id(session_id)
    page_name, cursor_name = _JOURNAL_NAMES[type_]
    checked = require(request, type_, "request")
    limit = page_limit(
        checked.max_batches if isinstance(checked, TranscriptPageRequest) else checked.limit,
        page_name,
    )
    before = checked.before_sequence
    if before is not None:
        before = integer(before, f"{cursor_name} exceeds SQLite INTEGER")
    return JournalQuery(session, before, limit)


def catalog_query(request: object) -> CatalogQuery:
    """Validate a catalog page request: its limit, owner and keyset cursor."""
    checked = require(request, SessionPageRequest, "request")
    limit = page_limit(checked.limit, "session page")
    after = None
    if checked.cursor is not None:
        cursor = require(checked.cursor, SessionCursor, "cursor")
        sequence = integer(cursor.sequence, "session cursor sequence exceeds SQLite INTEGER")
        updated_at = integer(
            cursor.updated_at, "session cursor is invalid", low=I64_MIN, high=I64_MAX
        )
        if not isinstance(cursor.session_id, str):
            raise InvalidInput("session cursor is invalid")
        after = (updated_at, sequence, identifier(cursor.session_id, "session cursor session_id"))
    owner = None if checked.owner_id is None else identifier(checked.owner_id, "owner_id")
    return CatalogQuery(owner, after, limit, id_prefix_range(checked.id_prefix))


def id_prefix_range(prefix: object) -> tuple[str, str] | None:
    """The half-open id range `[low, high)` of ids starting with `prefix`; None for no filter.

    Ids compare by their UTF-8 bytes on both backends (code point order), so the ids that
    start with `prefix` are those from `prefix` up to, not including, the next text after
    every such id: `prefix` without its trailing U+10FFFF characters, its last one plus 1.
    """
    if prefix is None:
        return None
    checked = identifier(prefix, "id_prefix")
    if too_long(checked, MAX_SESSION_ID_BYTES):
        raise InvalidInput("id_prefix is too long")
    if not checked:
        return None
    head = checked.rstrip(_TOP)
    if not head:
        return checked, _ABOVE_EVERY_ID
    following = ord(head[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are no text; the next character is U+E000
        following = 0xE000
    return checked, head[:-1] + chr(following)


def owner_filter(owner_id: object) -> str | None:
    """Validate an optional owner filter."""
    return None if owner_id is None else identifier(owner_id, "owner_id")


def fork_tree_limit(limit: object) -> int:
    """Validate the number of sessions a fork tree read may return."""
    return integer(
        limit, f"fork tree limit must be 1..{MAX_FORK_TREE_LIMIT}", low=1, high=MAX_FORK_TREE_LIMIT
    )


def recent_limit(limit: object) -> int:
    """Validate the number of recent executions asked for."""
    checked = integer(limit, "recent execution limit must be positive", low=1, high=None)
    if checked > I64_MAX:
        raise InvalidInput("recent execution limit is too large")
    return checked


def split_page(rows: Sequence[T], limit: int) -> tuple[list[T], T | None]:
    """Return a page's rows and, when more rows follow, its last row (the next cursor)."""
    page = list(rows[:limit])
    return page, (page[-1] if len(rows) > limit and page else None)
