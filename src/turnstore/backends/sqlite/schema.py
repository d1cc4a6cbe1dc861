"""SQLite's schema: the shared migrations (`schema/ddl.py`) in SQLite's words."""

from __future__ import annotations

from turnstore.schema.ddl import DdlWords, render

WORDS = DdlWords(
    id="TEXT",
    bigint="INTEGER",
    blob="BLOB",
    flag="INTEGER",
    false="0",
    checks_flags=True,
    now=" DEFAULT (unixepoch())",
    no_rowid=" WITHOUT ROWID",
    hash="",
    serial_key="INTEGER PRIMARY KEY",
    text_vector="",
    # Schema 7's (schema 9 replaces it: `words_only`): external content, the text stored
    # in search_items, triggers removing deleted rows, cascaded deletes included.
    text_index="""
    CREATE VIRTUAL TABLE search_fts USING fts5(
        body, content='search_items', content_rowid='item_id',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER search_items_removed AFTER DELETE ON search_items BEGIN
        INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.item_id, old.body);
    END;
    CREATE TRIGGER search_items_changed AFTER UPDATE OF body ON search_items BEGIN
        INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.item_id, old.body);
        INSERT INTO search_fts (rowid, body) VALUES (new.item_id, new.body);
    END;
    """,
    # Schema 8's: row by row, the trigger would hand FTS5 each row's words to take out.
    clear_text_index="""
    DROP TRIGGER search_items_removed;
    DELETE FROM search_items;
    INSERT INTO search_fts (search_fts) VALUES ('delete-all');
    CREATE TRIGGER search_items_removed AFTER DELETE ON search_items BEGIN
        INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.item_id, old.body);
    END;
    """,
    # Schema 9: FTS5 without content, filled from the words `body` still holds, so the index
    # survives the migration; then `body` goes. Without content FTS5 cannot read a row's
    # words back, so the scripts hand them to it to forget a row (`scripts/search_words.py`),
    # and no trigger can: the triggers go too.
    words_only="""
    DROP TRIGGER search_items_removed;
    DROP TRIGGER search_items_changed;
    DROP TABLE search_fts;
    CREATE VIRTUAL TABLE search_fts USING fts5(
        body, content='', tokenize='unicode61 remove_diacritics 2'
    );
    INSERT INTO search_fts (rowid, body) SELECT item_id, body FROM search_items;
    ALTER TABLE search_items DROP COLUMN body;
    """,
)
"""SQLite's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations' SQL in these words; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
