"""Property: every query a user can type is a page or `InvalidInput`, alike on both backends.

Hypothesis types hostile queries at a SQLite store and a PostgreSQL store that hold the same
items: quotes, stars and the operators of FTS5 and tsquery, prefixes of characters that are
no word (`²*`, `❺*`), HTML tags and entities, characters of every Unicode category, NUL,
lone surrogates and strings past the length limit. Each query must end the same way on both:
a page, or `InvalidInput` with the same message. Anything else (a `StorageError` from a
query the database could not read, as `²*` once was on PostgreSQL) fails the property.

Inputs are derandomized, so CI runs the same ones every time.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, example, given, settings

import sizes
import turnstore
from conftest import postgres_connection, postgres_store_url, require_postgres
from turnstore import BlockingStore, InvalidInput
from turnstore.records import SearchRequest
from turnstore.rules.search import MAX_QUERY_CHARS

EXAMPLES = sizes.pick(600, 150)
"""Hostile queries each run checks, every one on both backends."""
ITEMS = [
    "Where is the lighthouse keeper? He sleeps at noon.",
    "x² + y² = z², ❺ circled, ½ a loaf, ① first, ₂ below",
    "Ο φάρος είναι κλειστός; 東京タワー tickets; ٣ ⅷ ๆ ـ ª 〇",
    "<b>bold</b> &amp; x&#x41;y http://example.com/a/b foo-bar 3.14 -1 a_b it's",
    "emoji 🙂a ™ ℃ and marks a\u0301 ω\u0303 zero\u200bwidth \ue000private\ue001",
    "SELECT * FROM t WHERE a:* & !b | (c <-> d) NEAR(e f) OR g AND NOT h",
    "line one\nline two\ttabbed\r\nline three",
]
"""Item texts with a word of each shape both parsers treat differently."""
PIECES = [
    '"',
    '""',
    "*",
    "**",
    ":*",
    "-",
    "--",
    "&",
    "|",
    "!",
    "(",
    ")",
    "<->",
    "<2>",
    "'",
    "''",
    "\\",
    ":",
    "^",
    "+",
    "NEAR(",
    "AND",
    "OR",
    "NOT",
    "²",
    "❺",
    "½",
    "①",
    "™",
    "🙂",
    "\u0301",
    "\u200b",
    "\ue000",
    "\ue001",
    "\x00",
    "\ud800",
    "\x01",
    "\x1c",
    "\n",
    "\t",
    " ",
    "\u3000",
    "<b>",
    "&amp;",
    "&#x41;",
    "http://example.com/a",
    "foo-bar",
    "3.14",
    "a_b",
    "x²",
    "light",
    "keeper",
    "東京",
    "φάρος",
    "٣",
    "ⅷ",
    "\u19b0",  # a letter to Python since Unicode 8, a separator to SQLite's tables
    "\U0001e900",  # a letter of a script newer than some databases' tables
]
"""Fragments of queries: syntax of both engines, words, and characters that are no word."""
CATEGORIES = (
    *("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps"),
    *("Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs"),
    *("Co", "Cn"),
)
"""Every Unicode general category."""

ANY_CHARACTER = st.sampled_from(CATEGORIES).flatmap(lambda name: st.characters(categories=[name]))
"""A character of any category, each category as likely as the next."""
PIECE = st.one_of(
    st.sampled_from(PIECES),
    st.text(ANY_CHARACTER, min_size=1, max_size=4),
    st.sampled_from(PIECES).map(lambda piece: piece + "*"),
    st.sampled_from(PIECES).map(lambda piece: f'"{piece}"*'),
)
QUERIES = st.one_of(
    st.lists(PIECE, max_size=12).map("".join),
    st.lists(PIECE, max_size=12).map(" ".join),
    st.text(ANY_CHARACTER, max_size=40),
    # Around the length limit, and past the term limit.
    st.tuples(st.sampled_from(PIECES), st.integers(1, MAX_QUERY_CHARS + 20)).map(
        lambda repeated: (repeated[0] * repeated[1])[: MAX_QUERY_CHARS + 20]
    ),
)
"""Queries a user might type, by mistake or on purpose."""


def outcome(store: BlockingStore, query: str) -> tuple[str, Any]:
    """("page", its hit count) or ("refused", the message); any other exception propagates."""
    try:
        page = store.search(SearchRequest(query=query, limit=5))
    except InvalidInput as refused:
        return "refused", str(refused)
    return "page", len(page.hits)


@contextmanager
def both_stores(tmp_path: Path) -> Iterator[tuple[BlockingStore, BlockingStore]]:
    """A SQLite store and a PostgreSQL store, each holding `ITEMS`."""
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    try:
        with (
            turnstore.open_blocking(tmp_path / "q.sqlite3", index_in_background=False) as lite,
            turnstore.open_blocking(postgres_store_url(schema), index_in_background=False) as pg,
        ):
            for store in (lite, pg):
                store.append_context("s", [{"role": "user", "content": text} for text in ITEMS])
            yield lite, pg
    finally:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_every_query_is_a_page_or_invalid_input_alike_on_both_backends(tmp_path: Path) -> None:
    """A query is a page on both backends, or refused on both with the same message."""
    with both_stores(tmp_path) as (lite, pg):

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(QUERIES)
        @example("²*")
        @example("❺*")
        @example('"²"*')
        @example("hello ²*")
        @example("<b>*")
        @example("keeper <b>*")
        @example("\u19b0*")
        @example("\U0001e900*")
        @example("foo-bar*")
        @example("x" * MAX_QUERY_CHARS)
        @example("東" * MAX_QUERY_CHARS)
        @example("𞤀" * (MAX_QUERY_CHARS - 1) + "*")
        @example(" ".join(["w"] * 16) + " ²")
        @example("a\x00*")
        @example("\ud800*")
        def check(query: str) -> None:
            on_sqlite, on_postgres = outcome(lite, query), outcome(pg, query)
            assert on_sqlite[0] == on_postgres[0], (query, on_sqlite, on_postgres)
            if on_sqlite[0] == "refused":
                assert on_sqlite == on_postgres, query

        check()


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("lighthouse ²*", True),  # a term of no word drops out; the rest must match
        ("lighthouse -- ❺ ½*", True),
        ('"lighthouse keep"*', True),
        ("light*", True),
        ("light* nowhere*", False),
        ("foo-bar*", True),  # PostgreSQL parsed the hyphenated word twice and found nothing
    ],
)
def test_terms_without_a_word_drop_out_alike(tmp_path: Path, query: str, found: bool) -> None:
    """Where the backends' words agree, a query finds the same on both."""
    with both_stores(tmp_path) as (lite, pg):
        assert outcome(lite, query) == outcome(pg, query) == ("page", int(found))
