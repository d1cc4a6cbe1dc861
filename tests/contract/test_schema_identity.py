"""A database migrated from each kept fixture has exactly the schema of a fresh one.

The whole catalog is compared, on both backends: tables, columns (types, defaults,
nullability, collation), primary keys, indexes (with their definitions), constraints,
triggers and the recorded schema versions. A migration that leaves a migrated database
different from a fresh one fails here, whichever way the difference runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import turnstore
from conftest import POSTGRES_URL, Database, postgres_connection, restore_fixture

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
    if backend_name == "postgres":
        separator = "&" if "?" in POSTGRES_URL else "?"
        url = f"{POSTGRES_URL}{separator}schema={schema}"
    else:
        url = str(path)
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
