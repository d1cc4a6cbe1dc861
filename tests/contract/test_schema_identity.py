"""A database migrated from each kept fixture has exactly the schema of a fresh one.

The whole catalog is compared, on both backends: tables, columns (types, defaults,
nullability, collation), primary keys, indexes (with their definitions), constraints,
triggers and the recorded schema versions. A migration that leaves a migrated database
different from a fresh one fails here, whichever way the difference runs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import turnstore
from conftest import (
    Database,
    postgres_connection,
    postgres_store_url,
    require_postgres,
    restore_fixture,
)

Catalog = dict[str, list[tuple[Any, ...]]]


def _words(sql: object) -> str:
    """SQL text with its white space folded, as the comparison reads it."""
    return " ".join(str(sql).split())


def _sqlite_catalog(database: Database) -> Catalog:
    """Every object of the file with its SQL, and what the pragmas say of each table."""
    objects = database.query(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema"
        " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    )
    catalog: Catalog = {
        "objects": [(kind, name, table, _words(sql)) for kind, name, table, sql in objects],
        "version": database.query("PRAGMA user_version"),
    }
    for table in sorted(name for kind, name, _, _ in objects if kind == "table"):
        catalog[f"{table} columns"] = database.query(f"PRAGMA table_xinfo({table})")
        catalog[f"{table} foreign keys"] = database.query(f"PRAGMA foreign_key_list({table})")
        indexes = sorted(database.query(f"PRAGMA index_list({table})"), key=lambda row: row[1])
        catalog[f"{table} indexes"] = [row[1:] for row in indexes]
        for index in indexes:
            catalog[f"{index[1]} keys"] = database.query(f"PRAGMA index_xinfo({index[1]})")
    return catalog


_POSTGRES_QUERIES = {
    "relations": (
        "SELECT c.relname, c.relkind, c.relpersistence FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = ?"
        " ORDER BY c.relname"
    ),
    "columns": (
        "SELECT table_name, ordinal_position, column_name, data_type, column_default,"
        " is_nullable, collation_name, character_maximum_length, numeric_precision"
        " FROM information_schema.columns WHERE table_schema = ?"
        " ORDER BY table_name, ordinal_position"
    ),
    "indexes": (
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = ?"
        " ORDER BY tablename, indexname"
    ),
    "constraints": (
        "SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid, true)"
        " FROM pg_constraint AS k JOIN pg_class AS c ON c.oid = k.conrelid"
        " JOIN pg_namespace AS n ON n.oid = k.connamespace WHERE n.nspname = ?"
        " ORDER BY c.relname, k.conname"
    ),
    "triggers": (
        "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid, true) FROM pg_trigger AS t"
        " JOIN pg_class AS c ON c.oid = t.tgrelid JOIN pg_namespace AS n"
        " ON n.oid = c.relnamespace WHERE n.nspname = ? AND NOT t.tgisinternal"
        " ORDER BY c.relname, t.tgname"
    ),
}


def _postgres_catalog(database: Database) -> Catalog:
    """The schema's relations, columns, indexes, constraints and triggers, its name cut out."""
    schema = database.schema

    def unnamed(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            value.replace(f"{schema}.", "SCHEMA.") if isinstance(value, str) else value
            for value in row
        )

    catalog = {
        part: [unnamed(row) for row in database.query(query, (schema,))]
        for part, query in _POSTGRES_QUERIES.items()
    }
    catalog["version"] = database.query("SELECT version FROM turnstore_schema ORDER BY version")
    return catalog


def _catalog(database: Database) -> Catalog:
    if database.backend == "sqlite":
        return _sqlite_catalog(database)
    return _postgres_catalog(database)


@pytest.fixture
def fresh(backend_name: str, tmp_path: Path, pg_schema: str) -> Iterator[Database]:
    """A database a store of this build created, beside the one under test."""
    schema = f"{pg_schema}_fresh" if pg_schema else ""
    path = tmp_path / "fresh.sqlite3"
    url = postgres_store_url(schema) if backend_name == "postgres" else str(path)
    try:
        turnstore.open_blocking(url).close()
        yield Database(backend_name, path, schema)
    finally:
        if schema:
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("version", [2, 3, 4], ids=["schema-2", "schema-3", "schema-4"])
def test_a_database_migrated_from_a_fixture_has_the_schema_of_a_fresh_one(
    backend_name: str,
    database: Database,
    pg_schema: str,
    store_url: str,
    fresh: Database,
    version: int,
) -> None:
    """Catalog for catalog, part by part, so a failure names the part that differs."""
    restore_fixture(backend_name, database, pg_schema, version)
    before = _catalog(database)
    turnstore.open_blocking(store_url).close()
    migrated = _catalog(database)
    expected = _catalog(fresh)
    assert migrated != before
    assert sorted(migrated) == sorted(expected)
    for part, rows in expected.items():
        assert migrated[part] == rows, part


# SQLite and PostgreSQL, compared table by table: both render `schema/ddl.py`, so this
# holds the dialect words to their meaning. Defaults and CHECKs are left out on purpose:
# SQLite's creation times default to `unixepoch()` where PostgreSQL's statements stamp them,
# and SQLite's flags carry a CHECK (0 or 1) that PostgreSQL's BOOLEAN needs no more.
_FAMILIES = {
    "text": "text",
    "integer": "integer",
    "bigint": "integer",
    # SQLite has no booleans: a flag is an INTEGER checked to hold 0 or 1.
    "boolean": "integer",
    "blob": "bytes",
    "bytea": "bytes",
}
_ON_DELETE = {"c": "CASCADE", "a": "NO ACTION"}
# The text index over `search_items` is each engine's own (DdlWords.words_only): SQLite's
# FTS5 table without content (with its shadow tables), PostgreSQL's tsvector column and GIN
# index. Everything else of the search tables is compared like any table.
_SQLITE_TEXT_INDEX = re.compile(r"(search|memory)_fts(_\w+)?$")
_PG_TEXT_INDEX = {
    ("search_items", "words"),
    ("search_items", "search_items_words_idx"),
    ("memory_items", "words"),
    ("memory_items", "memory_items_words_idx"),
}
# Memory's FTS5 rows are named by a row id no VACUUM renumbers, so SQLite's `memory_items` is
# keyed by `item_id`, with the key PostgreSQL's primary key is as a UNIQUE constraint, and
# says which items FTS5 holds (schema 11); the items whose words wait for the indexer, and
# the words FTS5 holds of an item a put replaced until the indexer swaps them (schema 12),
# are SQLite's alone too: a PostgreSQL put writes its words itself.
_SQLITE_TEXT_COLUMNS = {
    ("memory_items", "item_id"),
    ("memory_items", "text_indexed"),
    ("memory_items", "stale_words"),
    ("memory_items", "words_pending"),
}
_PENDING_INDEX = "memory_items_pending_idx"
"""SQLite's index of the memory items pending for the indexer (schema 12)."""


def _predicate_words(predicate: str, columns: set[str]) -> tuple[str, ...]:
    """The columns, string literals, NOT and NULL of a partial index's predicate, in order.

    The dialects spell the rest apart (`IN (...)` is `= ANY (ARRAY[...])` in PostgreSQL).
    """
    words = re.findall(r"'[^']*'|\bNOT\b|\bNULL\b|[a-z_]+", predicate)
    return tuple(w for w in words if w in columns or w[0] == "'" or w in ("NOT", "NULL"))


def _index_shape(definition: str, columns: set[str]) -> tuple[Any, ...]:
    """Uniqueness, key columns (with DESC) and predicate words of a CREATE INDEX statement."""
    found = re.search(r"\((.*?)\)(?: WHERE (.*))?$", _words(definition), re.DOTALL)
    assert found, definition
    keys = tuple(" ".join(key.replace('"', "").split()) for key in found.group(1).split(","))
    predicate = _predicate_words(found.group(2) or "", columns)
    return ("UNIQUE" in definition.split("(")[0], keys, predicate)


def _sqlite_shape(database: Database) -> dict[str, Any]:
    shape: dict[str, Any] = {}
    tables = database.query("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    for (table,) in tables:
        if _SQLITE_TEXT_INDEX.match(table):
            continue
        info = [
            row
            for row in database.query(f"PRAGMA table_info({table})")
            if (table, row[1]) not in _SQLITE_TEXT_COLUMNS
        ]
        names = {str(row[1]) for row in info}
        indexes = database.query(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?"
            " AND sql IS NOT NULL ORDER BY name",
            (table,),
        )
        keys = database.query(f"PRAGMA foreign_key_list({table})")
        shape[table] = {
            # A primary key column is NOT NULL in PostgreSQL; SQLite's rowid tables do not
            # say so, and the store never writes a NULL key.
            "columns": [(c[1], _FAMILIES[c[2].lower()], bool(c[3] or c[5])) for c in info],
            "primary key": [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]]
            or _unique_key(database, table),
            "indexes": {
                name: _index_shape(sql, names) for name, sql in indexes if name != _PENDING_INDEX
            },
            "foreign keys": sorted((k[3], k[2], k[4], k[6]) for k in keys),
        }
    return shape


def _unique_key(database: Database, table: str) -> list[str]:
    """The columns of a table's UNIQUE constraint: the key of a table keyed by a row id."""
    found = [row[1] for row in database.query(f"PRAGMA index_list({table})") if row[3] == "u"]
    if len(found) != 1:
        return []
    return [row[2] for row in database.query(f"PRAGMA index_info({found[0]})")]


_PG_TABLES = "SELECT table_name FROM information_schema.tables WHERE table_schema = ?"
_PG_COLUMNS = (
    "SELECT column_name, data_type, is_nullable = 'NO' FROM information_schema.columns"
    " WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position"
)
_PG_PRIMARY_KEY = (
    "SELECT a.attname FROM pg_index AS i JOIN pg_attribute AS a ON a.attrelid = i.indrelid"
    " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(?) AND i.indisprimary"
    " ORDER BY array_position(i.indkey::int2[], a.attnum)"
)
_PG_INDEXES = (
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = ? AND tablename = ?"
    " AND indexname <> tablename || '_pkey'"
)
_PG_FOREIGN_KEYS = (
    # Every column pair of a key, as SQLite's foreign_key_list gives a composite key's.
    "SELECT a.attname, r.relname, f.attname, k.confdeltype FROM pg_constraint AS k"
    " CROSS JOIN LATERAL unnest(k.conkey, k.confkey) AS pair(own, referenced)"
    " JOIN pg_class AS r ON r.oid = k.confrelid"
    " JOIN pg_attribute AS a ON a.attrelid = k.conrelid AND a.attnum = pair.own"
    " JOIN pg_attribute AS f ON f.attrelid = k.confrelid AND f.attnum = pair.referenced"
    " WHERE k.contype = 'f' AND k.conrelid = to_regclass(?)"
)


def _postgres_shape(database: Database) -> dict[str, Any]:
    schema = database.schema
    shape: dict[str, Any] = {}
    tables = sorted(table for (table,) in database.query(_PG_TABLES, (schema,)))
    for table in (table for table in tables if table != "turnstore_schema"):
        info = [
            row
            for row in database.query(_PG_COLUMNS, (schema, table))
            if (table, row[0]) not in _PG_TEXT_INDEX
        ]
        names = {str(row[0]) for row in info}
        keys = database.query(_PG_FOREIGN_KEYS, (f"{schema}.{table}",))
        shape[table] = {
            "columns": [(name, _FAMILIES[kind], not_null) for name, kind, not_null in info],
            "primary key": [
                row[0] for row in database.query(_PG_PRIMARY_KEY, (f"{schema}.{table}",))
            ],
            "indexes": {
                name: _index_shape(definition, names)
                for name, definition in database.query(_PG_INDEXES, (schema, table))
                if (table, name) not in _PG_TEXT_INDEX
            },
            "foreign keys": sorted((a, r, f, _ON_DELETE[d]) for a, r, f, d in keys),
        }
    return shape


def test_sqlite_and_postgres_have_the_same_tables_columns_keys_and_indexes(
    tmp_path: Path,
) -> None:
    """Column by column (name, type family, nullability), key by key, index by index."""
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    path = tmp_path / "fresh.sqlite3"
    try:
        turnstore.open_blocking(postgres_store_url(schema)).close()
        turnstore.open_blocking(path).close()
        sqlite = _sqlite_shape(Database("sqlite", path, ""))
        postgres = _postgres_shape(Database("postgres", path, schema))
    finally:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    assert sorted(sqlite) == sorted(postgres)
    for table, parts in sqlite.items():
        for part, value in parts.items():
            assert postgres[table][part] == value, f"{table} {part}"
