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
    # Schema 11: `item_id` names an item's FTS5 row; `text_indexed` says FTS5 holds its words,
    # which a change of the item hands FTS5 again (read from its value) to take them out. The
    # vectors' table is rebuilt first, so dropping the old items cascades to nothing.
    memory_text="""
    CREATE TABLE memory_items_11 (
        item_id INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        item_key TEXT NOT NULL,
        owner_id TEXT,
        value_json TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        ttl_ms INTEGER CHECK (ttl_ms > 0),
        expires_at_ms INTEGER,
        text_indexed INTEGER NOT NULL DEFAULT 0 CHECK (text_indexed IN (0, 1)),
        CHECK ((ttl_ms IS NULL) = (expires_at_ms IS NULL)),
        UNIQUE (namespace, item_key)
    );
    INSERT INTO memory_items_11 (namespace, item_key, owner_id, value_json, created_at_ms,
        updated_at_ms, ttl_ms, expires_at_ms)
        SELECT namespace, item_key, owner_id, value_json, created_at_ms, updated_at_ms, ttl_ms,
            expires_at_ms FROM memory_items ORDER BY namespace, item_key;
    CREATE TABLE memory_vectors_11 (
        namespace TEXT NOT NULL,
        item_key TEXT NOT NULL,
        field TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (namespace, item_key, field),
        FOREIGN KEY (namespace, item_key) REFERENCES memory_items_11(namespace, item_key)
            ON DELETE CASCADE
    );
    INSERT INTO memory_vectors_11 SELECT namespace, item_key, field, vector FROM memory_vectors;
    DROP TABLE memory_vectors;
    DROP TABLE memory_items;
    ALTER TABLE memory_items_11 RENAME TO memory_items;
    ALTER TABLE memory_vectors_11 RENAME TO memory_vectors;
    CREATE INDEX memory_items_expiry_idx ON memory_items(expires_at_ms)
        WHERE expires_at_ms IS NOT NULL;
    CREATE INDEX memory_items_owner_idx ON memory_items(owner_id) WHERE owner_id IS NOT NULL;
    CREATE VIRTUAL TABLE memory_fts USING fts5(
        words, content='', tokenize='unicode61 remove_diacritics 2'
    );
    """,
    # Schema 12: a put searched by its text leaves its words for the indexer, which the
    # partial index finds; FTS5 without content is handed the words it holds to forget
    # them, so what it still holds of such an item is kept in `stale_words` (`text_indexed`
    # with them, or with the value's words when NULL) until the indexer swaps them.
    memory_pending="""
    ALTER TABLE memory_items ADD COLUMN words_pending INTEGER NOT NULL DEFAULT 0
        CHECK (words_pending IN (0, 1));
    ALTER TABLE memory_items ADD COLUMN stale_words TEXT;
    CREATE INDEX memory_items_pending_idx ON memory_items(item_id) WHERE words_pending = 1;
    """,
)
"""SQLite's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations' SQL in these words; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
