"""What only PostgreSQL can do for an operator: table sizes, index checks, bloat, VACUUM."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from turnstore.backends.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.errors import ConfigError, ReadOnlyStore
from turnstore.schema.indexes import defined_indexes

T = TypeVar("T")


class UpkeepHost(Protocol):
    """What maintenance needs of the engine: its pool, schema and error translation."""

    @property
    def pool(self) -> Any:
        """The engine's pool of autocommit connections."""

    def connection(self) -> AbstractContextManager[Any]:
        """A pool connection in one transaction on the store's schema."""

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""

    @property
    def schema(self) -> str:
        """The store's schema."""

    def run_translated(self, call: Callable[[], T]) -> T:
        """Run `call`, turning driver errors into turnstore errors."""

    def schema_version(self) -> int:
        """The schema version the store's schema is at."""


_TABLES = (
    "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname"
)
_SIZE = (
    "SELECT CAST(coalesce(sum(pg_total_relation_size(c.oid)), 0) AS BIGINT)"
    " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
)
_INDEXES = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
# A fifth of the live rows dead (and more than a thousand): what autovacuum's default
# threshold would have collected by now, so a table past it is not being vacuumed.
_BLOATED = (
    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema()"
    " AND n_dead_tup > 1000 AND n_dead_tup > n_live_tup / 5 ORDER BY relname"
)


class PostgresUpkeep:
    """Maintenance of one store's schema, on connections of the engine's pool."""

    backend = "postgres"
    supported_version = SCHEMA_VERSION
    single_writer = False

    def __init__(self, engine: UpkeepHost) -> None:
        self._engine = engine

    def _values(self, sql: str) -> list[Any]:
        def run() -> list[Any]:
            with self._engine.connection() as connection:
                return [value for (value,) in connection.execute(sql)]

        return self._engine.run_translated(run)

    def schema_version(self) -> int:
        """The highest version in the schema's `turnstore_schema` table."""
        return self._engine.schema_version()

    def database_bytes(self) -> int:
        """The schema's tables with their indexes and TOAST data."""
        (size,) = self._values(_SIZE)
        return int(size)

    def wal_bytes(self) -> int | None:
        """The server's WAL is shared by every database: not the store's to report."""
        return None

    def integrity(self) -> list[str]:
        """PostgreSQL enforces the schema's keys and checks itself; nothing more is checked."""
        return []

    def missing_indexes(self) -> list[str]:
        """Indexes the migrations create that the schema lacks."""
        return sorted(defined_indexes(MIGRATIONS) - set(self._values(_INDEXES)))

    def bloated_tables(self) -> list[str]:
        """Tables with many dead rows by the statistics collector's count."""
        return [str(name) for name in self._values(_BLOATED)]

    def vacuum(self) -> None:
        """VACUUM (ANALYZE) each of the schema's tables (pool connections autocommit)."""
        if self._engine.read_only:
            raise ReadOnlyStore("the store was opened read-only")

        tables = self._values(_TABLES)

        def run() -> None:
            # VACUUM cannot run in a transaction, so each runs alone and names its schema:
            # behind a transaction pooler no search_path outlives a statement.
            with self._engine.pool.connection() as connection:
                for table in tables:
                    connection.execute(f'VACUUM (ANALYZE) "{self._engine.schema}"."{table}"')

        self._engine.run_translated(run)

    def backup(self, destination: str) -> int:
        """Refused: PostgreSQL's own tools back up a server."""
        raise ConfigError(
            "turnstore backs up SQLite files only; for PostgreSQL use pg_dump, e.g. "
            f"pg_dump --schema={self._engine.schema} --format=custom "
            f"--file={destination} DATABASE_URL"
        )
