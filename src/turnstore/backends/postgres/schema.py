"""PostgreSQL's schema: the shared migrations (`schema/ddl.py`) in PostgreSQL's words."""

from __future__ import annotations

from turnstore.schema.ddl import DdlWords, render

WORDS = DdlWords(
    id='TEXT COLLATE "C"',
    bigint="BIGINT",
    blob="BYTEA",
    flag="BOOLEAN",
    false="FALSE",
    checks_flags=False,
    # A time is stamped by the statement that writes the row (the dialect's `now`).
    now="",
    # Every PostgreSQL table is a heap beside its primary key's index.
    no_rowid="",
    hash=" USING hash ",
    serial_key="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    # The 'simple' configuration: lower-cased words, no stemming and no stop words, in every
    # language alike (as SQLite's unicode61 tokenizer; see docs/how-to/search.md).
    text_vector=(
        ",\n        body_vector tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED"
    ),
    text_index="CREATE INDEX search_items_body_idx ON search_items USING GIN (body_vector);",
    clear_text_index="TRUNCATE search_items;",
)
"""PostgreSQL's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations' SQL in these words; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
