"""SQLite's schema: the shared migrations (`backends/sql/ddl.py`) in SQLite's words."""

from __future__ import annotations

from turnstore.backends.sql.ddl import DdlWords, render

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
)
"""SQLite's words for the shared DDL."""

MIGRATIONS: tuple[str, ...] = render(WORDS)
"""The ordered migrations; a list index + 1 is a schema version."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build creates and reads."""
