"""The conversation search: what text of an item is indexed, and how a query is read.

An item's searchable text is every string in it but those under keys that name ids, roles,
types, metadata or opaque data (`SKIPPED_KEYS`, and its kind's `SessionKind.unsearched`):
message text, tool names, tool arguments and tool results, in the shapes of the OpenAI
Responses and chat APIs, ADK events and others alike.

A query is words and "quoted phrases", every one of which must match; a word or phrase that
ends in `*` matches as a prefix. The query is parsed here and handed to the database as
quoted terms, so no text a user types is read as the engine's own query syntax. A term is
kept only if it holds a letter or digit (`search_text.is_word_char`), and both backends get
it as the index's own words (`indexed`): the index holds an item's words as `search_text`
reads them (case folded, Latin diacritics dropped, CJK runs as pairs), never the text, so
both find the same items; a snippet is cut from the item's own text (`search_text.snippet`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from turnstore.errors import InvalidInput, SearchIndexNotBuilt
from turnstore.records.base import I64_MAX, I64_MIN
from turnstore.records.kinds import SessionKind, Storage, kind_of
from turnstore.records.search import SearchRequest
from turnstore.rules.langgraph_values import OPAQUE
from turnstore.rules.search_text import QueryWords, index_text, is_word_char, query_words
from turnstore.rules.validation import optional_identifier
from turnstore.rules.values import integer, is_blank, require, text, too_long

SKIPPED_KEYS = frozenset(
    {
        "id",
        "call_id",
        "tool_call_id",
        "response_metadata",
        OPAQUE,
        "type",
        "role",
        "status",
        "author",
        "invocation_id",
        "timestamp",
        "encrypted_content",
        "signature",
        "thought_signature",
        "annotations",
        "logprobs",
        "actions",
        "usage",
        "usage_metadata",
        "model_version",
        "branch",
        "custom_metadata",
        "grounding_metadata",
        "citation_metadata",
        "long_running_tool_ids",
        "finish_reason",
        "mime_type",
        "inline_data",
        "file_data",
        "image_url",
        "file_id",
    }
)
"""Keys whose values are not conversation text: ids, roles, types, metadata, binary data."""
MAX_KIND_BYTES = 64
"""The longest session kind, in UTF-8 bytes."""
MAX_STRING_CHARS = 16 * 1024
"""The most characters indexed of one string of an item."""
MAX_ITEM_CHARS = 64 * 1024
"""The most characters indexed of one item."""
MAX_QUERY_CHARS = 500
"""The longest query, in characters."""
MAX_TERMS = 16
"""The most words and phrases in one query."""
MAX_LIMIT = 100
"""The most hits one page holds."""
_DEPTH = 16
# A NUL shows as U+FFFD in a snippet, as text on both backends can hold it.
_NUL = str.maketrans({"\x00": "\ufffd"})


def items_kind(kind: object) -> str:
    """A kind `append_context` may create a session as; `InvalidInput` if it may not."""
    kind = text(kind, "session kind")
    if is_blank(kind) or too_long(kind, MAX_KIND_BYTES) or "\x00" in kind:
        raise InvalidInput(f"session kind must be 1..{MAX_KIND_BYTES} bytes of text without NUL")
    if kind_of(kind).storage is not Storage.CONTEXT:
        raise InvalidInput(f"session kind {kind!r} is not a kind of session of items")
    return kind


def skipped_keys(kind: SessionKind | None) -> frozenset[str]:
    """The keys search skips in an item of `kind` (None: of any kind)."""
    return SKIPPED_KEYS if kind is None else _skipped(kind.unsearched)


@functools.cache
def _skipped(unsearched: frozenset[str]) -> frozenset[str]:
    return SKIPPED_KEYS | unsearched


def item_text(item: Any, kind: SessionKind | None = None) -> str:
    """The searchable text of one item of `kind`: its strings, one per line; "" when it has
    none."""
    found: list[str] = []
    _collect(item, found, 0, skipped_keys(kind))
    joined = "\n".join(found)[:MAX_ITEM_CHARS]
    return joined.translate(_NUL)


def _collect(value: Any, found: list[str], depth: int, skipped: frozenset[str]) -> None:
    kind = type(value)
    if kind is str:
        if not is_blank(value):
            found.append(value[:MAX_STRING_CHARS])
    elif depth >= _DEPTH:
        return
    elif kind is dict:
        for key, inner in value.items():
            if key not in skipped:
                _collect(inner, found, depth + 1, skipped)
    elif kind is list:
        for inner in value:
            _collect(inner, found, depth + 1, skipped)
    elif isinstance(value, dict):  # a frozen or held item
        _collect(dict(value), found, depth, skipped)
    elif isinstance(value, list):
        _collect(list(value), found, depth, skipped)


def index_texts(items: Iterable[Any], kind: SessionKind | None = None) -> list[tuple[int, str]]:
    """(index, the words the index holds) of each item of `kind` that has searchable words."""
    found = ((index, index_text(item_text(item, kind))) for index, item in enumerate(items))
    return [(index, words) for index, words in found if words]


def value_words(value_json: str) -> str | None:
    """The words the index holds of a memory item's value, read as a session's item is; None
    when it has none. `InvalidInput` when the value is not JSON."""
    return index_text(item_text(memory_value(value_json))) or None


def memory_value(value_json: str) -> Any:
    """A memory item's value decoded; `InvalidInput` when it is not JSON (Python's, which
    writes a float that is no number as `NaN` or `Infinity`, as LangGraph's values may)."""
    try:
        return msgspec.json.decode(value_json)
    except msgspec.DecodeError as error:
        try:
            return json.loads(value_json)
        except ValueError:
            raise InvalidInput(f"memory value is not JSON: {error}") from None


def stored_value_words(value_json: str) -> str:
    """`value_words` of a value the store holds, as the indexer hands them to the index: ""
    for none, or for a value stored before values had to be JSON, so that the index gets a
    row of every item either way."""
    try:
        return value_words(value_json) or ""
    except InvalidInput:
        return ""


def memory_terms(query: object) -> tuple[Term, ...]:
    """A memory search's query as the index's terms (`parse_query`, then `indexed`)."""
    return tuple(indexed(term) for term in parse_query(query))


def query_term_words(query: object) -> list[tuple[str, ...]]:
    """Each term of a memory search's query as the index's words (`InvalidInput` for a query
    the store refuses): what an item must hold for the term to match."""
    return [tuple(term.text.split()) for term in memory_terms(query)]


def value_word_list(value_json: str) -> tuple[str, ...]:
    """The index's words of a memory item's value, in order, as a search by words finds it
    (a term matches where its words follow one another)."""
    return tuple((value_words(value_json) or "").split())


class Term(NamedTuple):
    """One word or quoted phrase of a query; `prefix` when its last word may be a prefix."""

    text: str
    prefix: bool


def parse_query(query: object) -> tuple[Term, ...]:
    """The terms of a query, or `InvalidInput` naming what is wrong with it."""
    query = text(query, "search query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"search query is longer than {MAX_QUERY_CHARS} characters")
    if "\x00" in query:
        raise InvalidInput("search query cannot contain NUL")
    terms: list[Term] = []
    at = 0
    while at < len(query):
        char = query[at]
        if char.isspace():
            at += 1
            continue
        if char == '"':
            end = query.find('"', at + 1)
            if end < 0:
                raise InvalidInput('search query has an unclosed quote (")')
            body, at = query[at + 1 : end], end + 1
            prefix = query.startswith("*", at)
            at += prefix
        else:
            end = at
            while end < len(query) and not query[end].isspace() and query[end] != '"':
                end += 1
            body, at = query[at:end], end
            prefix = body.endswith("*")
            body = body.rstrip("*")
        # Punctuation and symbols separate words within a term; a term of nothing else is
        # all separator, which no backend can match, so it is dropped, as a separator is.
        if has_word(body):
            terms.append(Term(" ".join(body.split()), prefix))
    if not terms:
        if is_blank(query):
            raise InvalidInput("search query is empty")
        raise InvalidInput(
            "search query has no word to search for: it holds no letter or digit (punctuation,"
            " symbols, superscripts and fractions only separate words)"
        )
    if len(terms) > MAX_TERMS:
        raise InvalidInput(f"search query has more than {MAX_TERMS} words and phrases")
    return tuple(terms)


def has_word(text: str) -> bool:
    """Whether `text` holds a word character (`search_text.is_word_char`)."""
    return any(map(is_word_char, text))


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A validated search request."""

    terms: tuple[Term, ...]
    owner_id: str | None
    kind: str | None
    since_ms: int
    until_ms: int
    best: bool
    limit: int
    after_item: int | None
    """Newest first: hits below this item id (the cursor)."""
    offset: int
    """Best first: hits after this many (the cursor)."""

    @property
    def fetch(self) -> int:
        """Rows to read: one more than the page, to learn whether another page follows."""
        return self.limit + 1

    @property
    def below(self) -> int:
        """Newest first: the item id every hit is below (past the newest item on page one)."""
        return self.after_item if self.after_item is not None else I64_MAX


def search_query(request: object) -> SearchQuery:
    """Validate a `SearchRequest`; `InvalidInput` says what is wrong."""
    given = require(request, SearchRequest, "search request")
    best = given.order == "best"
    if given.order not in ("newest", "best"):
        raise InvalidInput("search order must be 'newest' or 'best'")
    limit = integer(given.limit, f"search limit must be 1..{MAX_LIMIT}", low=1, high=MAX_LIMIT)
    since = _time(given.since_ms, I64_MIN, "since_ms")
    until = _time(given.until_ms, I64_MAX, "until_ms")
    after_item, offset = None, 0
    if given.cursor is not None:
        cursor = text(given.cursor, "search cursor")
        mark, digits = cursor[:1], cursor[1:]
        if mark != ("b" if best else "n") or not digits.isascii() or not digits.isdigit():
            raise InvalidInput(f"{cursor[:80]!r} is not a cursor of a {given.order}-first search")
        number = int(digits)
        if number > I64_MAX:
            raise InvalidInput("search cursor is out of range")
        if best:
            offset = number
        else:
            after_item = number
    return SearchQuery(
        terms=tuple(indexed(term) for term in parse_query(given.query)),
        owner_id=optional_identifier(given.owner_id, "owner ID"),
        kind=optional_identifier(given.kind, "session kind"),
        since_ms=since,
        until_ms=until,
        best=best,
        limit=limit,
        after_item=after_item,
        offset=offset,
    )


def indexed(term: Term) -> Term:
    """A query's term as the index's words (`search_text`), one space apart: what both
    backends look for, as a phrase."""
    found = query_words(term.text, term.prefix)
    return Term(" ".join(found.forms), found.prefix)


def term_words(term: Term) -> QueryWords:
    """An `indexed` term's words, as a snippet finds them."""
    return QueryWords(tuple(term.text.split()), term.prefix)


def _time(value: object, default: int, name: str) -> int:
    if value is None:
        return default
    return integer(value, f"{name} must be a time in Unix milliseconds", low=I64_MIN)


def require_index_built(built: bool) -> None:
    """`SearchIndexNotBuilt` unless the store's search index is `built`."""
    if not built:
        raise SearchIndexNotBuilt(
            "the search index of this store is not built yet (the store was written before"
            " search existed): run `turnstore reindex URL`, or `store.upkeep.reindex()`"
        )


def next_cursor(query: SearchQuery, last_item: int) -> str:
    """The cursor of the page after one whose last hit is `last_item`."""
    return f"b{query.offset + query.limit}" if query.best else f"n{last_item}"
