"""PostgreSQL's schema: the shared migrations (`backends/sql/ddl.py`) in PostgreSQL's words."""

from __future__ import annotations

from turnstore.backends.sql.ddl import DdlWords, render

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
)
"""PostgreSQL's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
