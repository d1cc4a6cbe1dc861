"""Internal: records of the conversation search: a request, its hits, a page of them."""

from __future__ import annotations

from typing import Literal, NamedTuple

import msgspec

from turnstore.records.base import I64, U64, Record

SearchOrder = Literal["newest", "best"]
"""`newest`: the most recently written items first; `best`: the best matches first (BM25 on
SQLite, `ts_rank_cd` on PostgreSQL)."""


class SearchRequest(Record, kw_only=True):
    """One page of a search over the text of every session's conversation.

    `query` is words and "quoted phrases", all of which must match; a word ending in `*`
    matches as a prefix. It is never read as the database's own query syntax.
    """

    query: str
    owner_id: str | None = None
    """Only sessions of this owner."""
    kind: str | None = None
    """Only sessions of this kind (`turnstore`, `openai-agents`, `adk`, `items`, …)."""
    since_ms: I64 | None = None
    """Only items written at or after this time (Unix milliseconds)."""
    until_ms: I64 | None = None
    """Only items written before this time (Unix milliseconds)."""
    order: SearchOrder = "newest"
    limit: U64 = 20
    cursor: str | None = None
    """The `next_cursor` of the page before, asked with the same request otherwise."""


class SearchHit(Record, kw_only=True):
    """One item whose text matches, and where to open it."""

    session_id: str
    kind: str | None
    owner_id: str | None
    sequence: U64 | None
    """The transcript batch holding the item; None for an item of a session's context."""
    item: U64
    """The item's index in its transcript batch, or in the context when `sequence` is None."""
    written_at_ms: I64
    snippet: str
    """The matching part of the item's text, cut at word bounds."""
    marks: list[tuple[U64, U64]] = msgspec.field(default_factory=list)
    """(start, end) character offsets of the matched words in `snippet`."""


class HitRow(NamedTuple):
    """One search hit as a database's text index reads it (its snippet is cut afterwards,
    from the item's own text)."""

    item_id: int
    session_id: str
    kind: str | None
    owner_id: str | None
    sequence: int | None
    item: int
    written_at_ms: int


class IndexItem(NamedTuple):
    """One searchable item as the indexer adds it: where it is, and its words
    (`rules.search_text`), which the text index keeps in its own form, never as text."""

    session_id: str
    sequence: int | None
    item: int
    in_context: bool
    words: str


class IndexedWords(NamedTuple):
    """An indexed item's row id and the words it was indexed by: what FTS5 without content
    must be handed to forget the row."""

    item_id: int
    words: str


class SearchPage(Record, kw_only=True):
    """One page of search hits in the order asked; `next_cursor` is None on the last page."""

    hits: list[SearchHit] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class ReindexProgress(Record, kw_only=True):
    """How far a build of the search index has come."""

    sessions_done: U64
    sessions_total: U64
    items_indexed: U64
    built: bool
