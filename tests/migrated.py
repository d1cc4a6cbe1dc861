"""Databases already migrated to the current schema, cloned from one template per test run.

A store opened on a fresh database runs every migration (about 0.14 s on PostgreSQL, where a
copy takes 0.085 s, and 15 ms on SQLite, where a copy takes 2 ms). The contract tests mean to
test the store, not its migrations, so `store` and `blocking_store` open a copy of a database
that one store migrated at the start of the run (the tests of migration itself take
`store_url`, which stays empty). The template is made by the code under test, so it is
exactly what a fresh database would become.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import turnstore

TEMPLATE_PREFIX = "turnstore_template_"


class Templates:
    """One migrated database per backend, made on first use, and copies of it."""

    def __init__(self, folder: Path, postgres_url: str) -> None:
        self.folder = folder
        self.postgres_url = postgres_url
        self._sqlite: Path | None = None
        self._postgres: tuple[str, str] | None = None
        self._postgres_failed = False

    def clone(self, backend: str, store_url: str, pg_schema: str) -> None:
        """Put a migrated database where `store_url` points (schema `pg_schema` on PostgreSQL)."""
        if backend == "sqlite":
            # copy() keeps the template's 0600 mode, as the store itself would create the file.
            shutil.copy(self.sqlite_file(), store_url)
            return
        template = self.postgres_dump()
        if template is None:
            return  # no pg_dump here: the store migrates the empty schema itself
        name, dump = template
        from conftest import postgres_connection

        with postgres_connection() as connection:
            connection.execute(dump.replace(name, pg_schema).encode())

    def sqlite_file(self) -> Path:
        """A closed SQLite file a store created and migrated (its journal mode stays WAL)."""
        if self._sqlite is None:
            path = self.folder / "template.sqlite3"
            turnstore.open_blocking(str(path)).close()
            self._sqlite = path
        return self._sqlite

    def postgres_dump(self) -> tuple[str, str] | None:
        """The template schema's name and its pg_dump (schema and rows), or None."""
        if self._postgres is None and not self._postgres_failed:
            self._postgres = self._dump_postgres()
            self._postgres_failed = self._postgres is None
        return self._postgres

    def _dump_postgres(self) -> tuple[str, str] | None:
        from conftest import postgres_connection

        name = f"{TEMPLATE_PREFIX}{uuid.uuid4().hex}"
        separator = "&" if "?" in self.postgres_url else "?"
        try:
            turnstore.open_blocking(f"{self.postgres_url}{separator}schema={name}").close()
            done = subprocess.run(
                [
                    "pg_dump",
                    f"--dbname={self.postgres_url}",
                    f"--schema={name}",
                    *("--no-owner", "--no-privileges", "--no-comments", "--inserts"),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        # psql meta-commands (newer pg_dump writes \restrict) are not SQL.
        lines = [line for line in done.stdout.splitlines() if not line.startswith("\\")]
        return name, "\n".join(lines)
