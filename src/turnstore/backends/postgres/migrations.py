"""Creating, checking and migrating a schema: its version in the `turnstore_schema` table."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from turnstore.backends.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import SchemaError


def migrate(
    connection: psycopg.Connection[Any], schema: str, *, read_only: bool, any_version: bool
) -> None:
    """Create or migrate `schema`, refusing one this build cannot use; read-only, only check."""
    with connection.transaction():
        # One migrator at a time per schema, across processes and hosts.
        connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"turnstore:{schema}",)
        )
        version = stored_version(connection, schema)
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f'PostgreSQL schema "{schema}" is at version {version}; this build of '
                f"turnstore supports version {SCHEMA_VERSION} (upgrade turnstore)"
            )
        if read_only:
            if version != SCHEMA_VERSION and not any_version:
                raise SchemaError(
                    f'PostgreSQL schema "{schema}" is at version {version}, not '
                    f"{SCHEMA_VERSION}; migrate it: run `turnstore migrate URL` (or call "
                    "turnstore.migrate(url)), or open it once for writing"
                )
            return
        _run_steps(connection, schema, version)


def _run_steps(connection: psycopg.Connection[Any], schema: str, version: int) -> None:
    connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    connection.execute("CREATE TABLE IF NOT EXISTS turnstore_schema (version INTEGER NOT NULL)")
    for number in range(version, SCHEMA_VERSION):
        connection.execute(MIGRATIONS[number])
        connection.execute("INSERT INTO turnstore_schema (version) VALUES (%s)", (number + 1,))


def stored_version(connection: psycopg.Connection[Any], schema: str) -> int:
    """The version `schema` is at; 0 for a schema turnstore has not created."""
    exists = connection.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.turnstore_schema",)
    ).fetchone()
    if not exists or not exists[0]:
        return 0
    row = connection.execute("SELECT max(version) FROM turnstore_schema").fetchone()
    return int(row[0] or 0) if row else 0
