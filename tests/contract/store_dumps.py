"""Whole-database dumps, to prove that a refused call changed nothing.

SQLite: the `sqlite3` module's `iterdump()` of the file (schema and every row, as SQL).
PostgreSQL: every row of every table of the store's schema, sorted, with the table names.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from conftest import postgres_connection

PostgresDump = list[tuple[str, list[str]]]


def sqlite_dump(connection: sqlite3.Connection) -> list[str]:
    """The SQL text `iterdump()` gives for the database behind `connection`."""
    return list(connection.iterdump())


def postgres_dump(connection: Any, schema: str) -> PostgresDump:
    """Every table of `schema` with its rows in a stable order."""
    tables = [
        row[0]
        for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (schema,),
        ).fetchall()
    ]
    return [
        (table, sorted(map(repr, connection.execute(f'SELECT * FROM {schema}."{table}"'))))
        for table in tables
    ]


class Dumper:
    """Dumps one store's database over one connection kept open across dumps."""

    def __init__(self, backend: str, path: Path | None = None, schema: str = "") -> None:
        self.backend = backend
        self.schema = schema
        if backend == "postgres":
            self._postgres = postgres_connection(schema)
        else:
            assert path is not None
            self._sqlite = sqlite3.connect(path, isolation_level=None)

    def dump(self) -> object:
        """The whole database, comparable with `==`."""
        if self.backend == "postgres":
            return postgres_dump(self._postgres, self.schema)
        return sqlite_dump(self._sqlite)

    def close(self) -> None:
        """Close the connection."""
        if self.backend == "postgres":
            self._postgres.close()
        else:
            self._sqlite.close()


def dump_database(database: Any) -> object:
    """A one-off dump of a `conftest.Database`."""
    dumper = Dumper(database.backend, database.path, database.schema)
    try:
        return dumper.dump()
    finally:
        dumper.close()
