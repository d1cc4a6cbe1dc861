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
    # Schema 9: the generated vector becomes a plain column, filled by each insert from the
    # words it is given (`backends/postgres/search.py`), and `body` goes. The GIN index's
    # pending list (fast update: inserts are queued there, uncompressed, and merged later)
    # is capped at 256 kB, not 4 MB: its pages stay allocated once used, 4.8 MB of GIN
    # against 1.1 MB for the benchmark's 3 MB of text, with the same insert cost. CLUSTER
    # rewrites the table and its indexes (inside the migration's transaction, unlike VACUUM
    # FULL), so a migrated store gives back the space the dropped column held.
    words_only="""
    ALTER TABLE search_items ALTER COLUMN body_vector DROP EXPRESSION;
    ALTER TABLE search_items DROP COLUMN body;
    ALTER TABLE search_items RENAME COLUMN body_vector TO words;
    ALTER INDEX search_items_body_idx RENAME TO search_items_words_idx;
    ALTER INDEX search_items_words_idx SET (gin_pending_list_limit = 256);
    CLUSTER search_items USING search_items_pkey;
    """,
    # Schema 11: an item's words as a vector, NULL for an item not searched by its text; the
    # GIN index forgets a row with the row, as `search_items`' does.
    memory_text="""
    ALTER TABLE memory_items ADD COLUMN words tsvector;
    CREATE INDEX memory_items_words_idx ON memory_items USING GIN (words)
        WITH (gin_pending_list_limit = 256);
    """,
    # Schema 12 is SQLite's alone: a PostgreSQL put writes its words itself.
    memory_pending="",
)
"""PostgreSQL's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations' SQL in these words; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
