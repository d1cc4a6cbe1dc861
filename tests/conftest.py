"""Fixtures shared by every test: a store per backend and face, and raw database access."""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import shutil
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import turnstore
from schema_pool import SchemaPool, pooled_test
from turnstore import (
    BlockingStore,
    Store,
)

BACKENDS = ["sqlite", "postgres"]
FACES = ["async", "blocking"]
POSTGRES_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REQUIRE_POSTGRES = os.environ.get("TURNSTORE_REQUIRE_POSTGRES") == "1"
THROUGH_PGBOUNCER = os.environ.get("TURNSTORE_TEST_PGBOUNCER") == "1"
"""Stores open through a PgBouncer in transaction mode (`./dev test-pgbouncer`); raw access
(`postgres_connection`, `Database`) still goes to the server itself."""
FRAMEWORK_TESTS = {
    "langgraph": (
        "test_langgraph_saver.py",
        "test_langgraph_from_conn_string.py",
        "test_langgraph_move.py",
        "test_langgraph_move_async.py",
        "test_langgraph_move_cli.py",
        "test_search_threads.py",
        "test_conversations.py",
        "test_langgraph_store_words.py",
        "test_langgraph_store_contract.py",
        "test_langgraph_crash_modes.py",
    ),
    "agents": ("test_agents_sdk_session.py", "test_agents_sdk_move.py"),
    "google.adk": ("test_adk_state_values.py", "test_adk_move.py", "test_adk_move_cli.py"),
    "pydantic_ai": ("test_pydantic_ai_store.py", "test_pydantic_ai_lifecycle.py"),
    "strands": (
        "test_strands_repository.py",
        "test_strands_suite.py",
        "test_strands_remembered.py",
    ),
}
"""Framework test modules that import their framework when collected, by that framework."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


# Every test in these modules is a `peers` test, which `./dev test-peers` runs with the
# frameworks installed; `./dev test` runs without them, so it must not even import them.
collect_ignore = [
    f"frameworks/{name}"
    for framework, names in FRAMEWORK_TESTS.items()
    if not _installed(framework)
    for name in names
]


PROCESS_HEAVY = ("browser", "server", "integration")
"""Test folders whose modules start servers, browsers and commands in processes of their
own: few tests, long ones. Scheduled first, they end beside the rest instead of after it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The frameworks' own suites first, then the modules that run processes, PostgreSQL's
    before SQLite's: the longest tests first.

    Started first, they run beside the rest instead of after it (`./dev test` and
    `./dev test-peers` keep this order with `--no-loadscope-reorder`).
    """

    def rank(item: pytest.Item) -> tuple[bool, bool, bool]:
        suite = item.get_closest_marker("framework_suite")
        heavy = any(folder in item.path.parts for folder in PROCESS_HEAVY)
        return suite is None, not heavy, getattr(item.cls, "backend", "") != "postgres"

    items.sort(key=rank)


@cache
def postgres_unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when a server answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'turnstore[postgres]')"
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as error:
        return f"no PostgreSQL server at TURNSTORE_TEST_POSTGRES_URL ({error})"
    return None


def require_postgres() -> None:
    """Skip the calling test without a server, or fail it when CI requires one."""
    reason = postgres_unavailable()
    if reason is None:
        return
    if REQUIRE_POSTGRES:
        pytest.fail(f"TURNSTORE_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


@cache
def pgbouncer() -> Any:
    """This test process's PgBouncer in transaction mode before the test server, started once.

    Skips the calling test when PgBouncer is not installed, or fails it when CI requires it.
    """
    require_postgres()
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from bench.pgbouncer import PgBouncer, binary

    if binary() is None:
        reason = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
        if REQUIRE_POSTGRES:
            pytest.fail(f"TURNSTORE_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    bouncer = PgBouncer(POSTGRES_URL)
    atexit.register(bouncer.close)
    return bouncer


def postgres_store_url(schema: str, *, through_pgbouncer: bool = THROUGH_PGBOUNCER) -> str:
    """The URL a test's store opens on `schema`, through PgBouncer when the run asks for it.

    Through PgBouncer the live tail listens on the server itself (`listen_url`), as
    docs/how-to/postgresql.md sets it up.
    """
    separator = "&" if "?" in POSTGRES_URL else "?"
    if not through_pgbouncer:
        return f"{POSTGRES_URL}{separator}schema={schema}"
    listen = quote(POSTGRES_URL, safe="")
    return (
        f"{pgbouncer().url(POSTGRES_URL)}{separator}schema={schema}"
        f"&pooler=transaction&listen_url={listen}"
    )


def fts5_terms(path: Path, table: str = "memory_fts") -> dict[str, int]:
    """Each term a SQLite store's FTS5 `table` holds, and in how many rows."""
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, {table}, row)")
        return dict(connection.execute("SELECT term, doc FROM temp.terms"))
    finally:
        connection.close()


def postgres_connection(schema: str | None = None) -> Any:
    """An autocommit psycopg connection to the test server, optionally inside `schema`."""
    import psycopg

    options = f"-c search_path={schema}" if schema else ""
    return psycopg.connect(POSTGRES_URL, autocommit=True, options=options)


class BlockingAsAsync:
    """Runs a `BlockingStore` (or its `upkeep`) from async tests: one suite checks both faces."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name in ("upkeep", "memory"):  # faces of their own, their methods awaitable too
            return BlockingAsAsync(method)
        if name in ("writer_stats", "backend") or not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


class Database:
    """Direct access to the database under a store, for what the public API cannot do.

    Statements use `?` placeholders on every backend.
    """

    def __init__(self, backend: str, path: Path, schema: str) -> None:
        self.backend = backend
        self.path = path
        self.schema = schema

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh connection and return its rows."""
        if self.backend == "postgres":
            with postgres_connection(self.schema) as connection:
                cursor = connection.execute(sql.replace("?", "%s"), params)
                return cursor.fetchall() if cursor.description else []
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            return connection.execute(sql, params).fetchall()
        finally:
            connection.close()

    def count(self, table: str, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> int:
        """Count rows of `table` matching `where`."""
        return int(self.query(f"SELECT COUNT(*) FROM {table} WHERE {where}", params)[0][0])

    def fail_inserts_into(self, table: str, message: str = "forced failure") -> None:
        """Make every later INSERT into `table` fail, as the seed's trigger does."""
        if self.backend == "postgres":
            self.query(
                f"CREATE FUNCTION reject_{table}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{message}'; END $$"
            )
            self.query(
                f"CREATE TRIGGER reject_{table} BEFORE INSERT ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION reject_{table}()"
            )
            return
        self.query(
            f"CREATE TRIGGER reject_{table} BEFORE INSERT ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )

    def stop_failing_inserts_into(self, table: str) -> None:
        """Undo `fail_inserts_into(table)`."""
        on_table = f" ON {table}" if self.backend == "postgres" else ""
        self.query(f"DROP TRIGGER reject_{table}{on_table}")

    def hold_write_lock(self) -> Callable[[], None]:
        """Block writers (not readers) from another connection; return what releases them."""
        if self.backend == "postgres":
            pg = postgres_connection(self.schema)
            pg.execute("BEGIN")
            pg.execute("LOCK TABLE sessions IN EXCLUSIVE MODE")

            def release_postgres() -> None:
                pg.execute("COMMIT")
                pg.close()

            return release_postgres
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute("BEGIN IMMEDIATE")

        def release() -> None:
            connection.execute("COMMIT")
            connection.close()

        return release


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend under test."""
    return str(request.param)


FRESH_SCHEMAS = os.environ.get("TURNSTORE_TEST_FRESH_SCHEMAS") == "1"
"""Every PostgreSQL test on a schema of its own, created by its store: no pool."""


@cache
def schema_pool() -> SchemaPool:
    """This test process's pool of migrated schemas (tests/schema_pool.py)."""

    def open_store(schema: str) -> None:
        url = postgres_store_url(schema, through_pgbouncer=False)
        turnstore.open_blocking(url, index_in_background=False).close()

    pool = SchemaPool(postgres_connection, open_store)
    atexit.register(pool.close)
    return pool


@pytest.fixture
def pg_schema(backend_name: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A PostgreSQL schema for one test, as fresh as a new one (empty on SQLite).

    A contract, server or browser test that takes its store from `store` or `store_url`
    gets a migrated schema another test emptied (`tests/schema_pool.py`); any other test a new
    name, dropped after.
    """
    if backend_name != "postgres":
        yield ""
        return
    require_postgres()
    folders = {"contract", "server", "browser"} & set(request.path.parts)
    if not FRESH_SCHEMAS and folders and pooled_test(request.function):
        pool = schema_pool()
        pooled = pool.take()
        yield pooled
        pool.give_back(pooled)
        return
    schema = f"test_{uuid.uuid4().hex}"
    yield schema
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def store_url(backend_name: str, tmp_path: Path, pg_schema: str) -> str:
    """A URL of a fresh, empty database of the backend under test."""
    if backend_name == "postgres":
        return postgres_store_url(pg_schema)
    return str(tmp_path / "turnstore.sqlite3")


@pytest.fixture
def database(backend_name: str, tmp_path: Path, pg_schema: str) -> Database:
    """Raw access to the database behind `store`."""
    return Database(backend_name, tmp_path / "turnstore.sqlite3", pg_schema)


@pytest.fixture(params=FACES)
async def store(request: pytest.FixtureRequest, store_url: str) -> AsyncIterator[Any]:
    """A fresh store on every backend, through the async face and the blocking face."""
    # Without the background indexer: tests that compare the database before and after a
    # refused call, or count commits, would see its commits land in between. A search still
    # indexes what it needs first; tests/contract/test_search_indexer.py runs the thread.
    if request.param == "async":
        async_store: Store = turnstore.open(store_url, index_in_background=False)
        yield async_store
        await async_store.close()
    else:
        blocking = turnstore.open_blocking(store_url, index_in_background=False)
        yield BlockingAsAsync(blocking)
        blocking.close()


@pytest.fixture
def blocking_store(store_url: str) -> Iterator[BlockingStore]:
    """A fresh blocking store on the backend under test."""
    with turnstore.open_blocking(store_url, index_in_background=False) as opened:
        yield opened


FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_SCHEMA = "turnstore_fixture"
"""The PostgreSQL schema name the fixture dumps were taken from."""


def restore_fixture(backend: str, database: Database, pg_schema: str, version: int) -> None:
    """Put the database an earlier build wrote at schema `version` where a store will open."""
    if backend == "sqlite":
        shutil.copyfile(FIXTURES / f"schema_v{version}.sqlite3", database.path)
        return
    dump = (FIXTURES / f"schema_v{version}.postgres.sql").read_text(encoding="utf-8")
    with postgres_connection() as connection:
        connection.execute(dump.replace(FIXTURE_SCHEMA, pg_schema).encode())
