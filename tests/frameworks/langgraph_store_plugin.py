"""A pytest plugin that runs LangGraph's own store tests against `TurnstoreStore`.

Loaded (`-p langgraph_store_plugin`) into a pytest process run inside the unpacked source
distribution of `langgraph-checkpoint-sqlite` or `langgraph-checkpoint-postgres`. Before
pytest imports a test module it imports it itself and rebinds, in that module, the names the
tests build stores with: `SqliteStore`, `AsyncSqliteStore`, `PostgresStore`,
`AsyncPostgresStore`. Every store a test builds, through its `store` fixture or by hand, is
then the implementation under test (`--store-impl`) on the backend under test
(`--store-backend`):

* `turnstore`: `TurnstoreStore`, and for the async names `AsyncTurnstoreStore` (whose TTL
  methods are coroutines, as LangGraph's async stores have them);
* `langgraph`: LangGraph's own stores, the peer run: on the file's own backend nothing is
  rebound; on the other one the other package's classes stand in (`PostgresStore` in
  `SqliteStore`'s tests, and the reverse).

Each connection string a test opens is one database for the length of that test: a file in
a scratch directory, or on PostgreSQL a schema of its own, dropped when the run ends
(`:memory:` is a fresh database each time). The PostgreSQL package's tests make a whole
database per test through the server its conftest names (`DEFAULT_URI`); this plugin
swaps those fixtures for ones doing the same steps on one of these databases, and points
`DEFAULT_URI` at our server with a search path that names no schema, so that the conftest's
own clean-up (`DELETE FROM store`) finds no table to empty.

`--store-sample` keeps the first variant of each test's store fixture (`memory` of
memory/file, `default` of default/pipe/pool): turnstore is the same store under each.
"""

from __future__ import annotations

import importlib
import itertools
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

IMPL = "turnstore"
"""Whose store the tests build, set from `--store-impl`."""
BACKEND = "sqlite"
"""The backend under test, set from `--store-backend`."""
SAMPLE = False
"""Whether only the first variant of each store fixture runs (`--store-sample`)."""
POSTGRES_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REPORT = os.environ.get("TURNSTORE_LANGGRAPH_STORE_REPORT")
"""A file a test process adds a line to each time its tests open a store (written then, not
at the process's end, so a worker pytest-xdist tears down early loses no count)."""
NAMES = {
    "SqliteStore": ("sqlite", False),
    "AsyncSqliteStore": ("sqlite", True),
    "PostgresStore": ("postgres", False),
    "AsyncPostgresStore": ("postgres", True),
}
"""The names the tests build stores with: each one's own backend, and whether it is async."""
VARIANTS = ("store", "conn_type", "conn_string")
"""Parameters that only choose how a peer connects: `--store-sample` keeps the first."""
TTL_CONFIG = {
    "default_ttl": 6 / 60,
    "refresh_on_read": True,
    "sweep_interval_minutes": 3 / 60,
}
"""What the PostgreSQL package's `store` fixtures pass (its TTL_SECONDS is 6)."""
STORE = "tests/test_store.py::"
ASYNC = "tests/test_async_store.py::"
OMIT_EXPIRED = [
    "test_omit_expired_filters_read_paths",
    "test_omit_expired_disabled_preserves_expired_rows",
    "test_omit_expired_refresh_ttl_only_refreshes_live_rows",
    "test_omit_expired_search_pagination",
]
DESELECTED: dict[str, dict[str, list[str]]] = {
    "langgraph-checkpoint-sqlite": {
        "SqliteStore's own tables read with raw SQL (store.conn.cursor(), sqlite_master)": [
            STORE + "test_vector_store_initialization",
        ],
        "SqliteStore's migrations list (SqliteStore.MIGRATIONS)": [
            STORE + "test_nonnull_migrations",
        ],
        "the SQL text SqliteStore builds (BaseSqliteStore()._get_batch_list_namespaces_queries)": [
            STORE + "test_list_namespaces_prefix_uses_indexable_condition",
        ],
        "SqliteStore's private helpers, called without a store": [
            STORE + "test_escape_glob_literal",
            STORE + "test_namespace_match_pattern",
        ],
    },
    "langgraph-checkpoint-postgres": {
        "PostgresStore's own table rewritten with raw SQL (store._cursor(): expires_at and "
        "updated_at backdated)": [STORE + name for name in OMIT_EXPIRED]
        + [ASYNC + name for name in OMIT_EXPIRED],
        "PostgresStore's migrations list (PostgresStore.MIGRATIONS)": [
            STORE + "test_nonnull_migrations",
        ],
        "PostgresStore's connection pool (langgraph.checkpoint.postgres._ainternal patched)": [
            ASYNC + "test_abatch_uses_single_pool_checkout",
        ],
        "PostgresStore's private helpers, called without a store": [
            STORE + "test_escape_like_literal",
            STORE + "test_namespace_match_pattern",
        ],
    },
}
"""Distribution -> reason -> test ids (every variant of each) that cannot run on a store
but LangGraph's own."""
SLOW = [
    STORE + "test_store_ttl",
    ASYNC + "test_store_ttl",
    "tests/test_ttl.py::test_ttl_custom_value",
    "tests/test_ttl.py::test_ttl_override_default",
]
"""Left out of `--store-sample` runs: each sleeps 6 to 17 s (the full run has them; the
sample keeps the shorter TTL tests, refresh on read among them)."""
PGVECTOR_ONLY = "halfvec"
"""The variants of the PostgreSQL vector tests on pgvector's half-precision type: a storage
format of pgvector's, not a behaviour of the `BaseStore` API (the `vector` ones run)."""
_RUN = os.environ.get("TURNSTORE_LANGGRAPH_STORE_RUN") or secrets.token_hex(4)
"""In every schema's name: the suite names the run, so that it can drop what a test process
that died early (a pytest-xdist worker) left behind."""
_PROCESS = os.environ.get("PYTEST_XDIST_WORKER", "main")
_SERIAL = itertools.count()
_SCRATCH: list[Path] = []
"""The run's scratch directory for SQLite files, made when first needed."""
_PLACES: dict[str, str] = {}
"""This test's connection strings -> the database each one opens."""
_SCHEMAS: list[str] = []


def _count_open() -> None:
    """One more store opened by a stand-in."""
    if REPORT:
        with Path(REPORT).open("a") as report:
            report.write("1\n")


# --- databases ---------------------------------------------------------------------------------


def _schema(create: bool) -> str:
    """A new schema name; created now for LangGraph's store, which does not create one."""
    name = f"lgstore_{_RUN}_{_PROCESS}_{next(_SERIAL)}"
    _SCHEMAS.append(name)
    if create:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
    return name


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def libpq_url(schema: str) -> str:
    """A plain libpq URL whose sessions create and find their tables in `schema`."""
    return _with_query(POSTGRES_URL, "options=" + quote(f"-csearch_path={schema}"))


def fresh_database(impl: str) -> str:
    """A new empty database on the backend under test, as `impl`'s stores are given one."""
    if BACKEND == "sqlite":
        if not _SCRATCH:
            base = os.environ.get("TURNSTORE_LANGGRAPH_STORE_SCRATCH")  # the suite's tmp_path
            _SCRATCH.append(Path(tempfile.mkdtemp(prefix="turnstore-langgraph-store-", dir=base)))
        return str(_SCRATCH[0] / f"store-{next(_SERIAL)}.sqlite3")
    if impl == "turnstore":
        return _with_query(POSTGRES_URL, f"schema={_schema(create=False)}")
    return libpq_url(_schema(create=True))


def database_for(conn_string: str, impl: str) -> str:
    """The database behind a test's connection string: the same one all through the test."""
    if conn_string == ":memory:":
        return fresh_database(impl)
    if conn_string not in _PLACES:
        _PLACES[conn_string] = fresh_database(impl)
    return _PLACES[conn_string]


def conn_string_for(name: str) -> str:
    """A connection string for a new database, for the store the module builds as `name`.

    LangGraph's own store on its own backend is handed a real URL; every stand-in maps the
    made-up one to a database of its own.
    """
    if _is_native(name):
        return libpq_url(_schema(create=True))
    return f"database-{next(_SERIAL)}"


def _is_native(name: str) -> bool:
    return IMPL == "langgraph" and NAMES[name][0] == BACKEND


# --- stand-ins ---------------------------------------------------------------------------------


def _turnstore_opener(asynchronous: bool) -> Callable[..., Any]:
    """`from_conn_string` for a turnstore stand-in: `AsyncTurnstoreStore` for the async names."""
    from turnstore.integrations.langgraph_store import AsyncTurnstoreStore, TurnstoreStore

    ours = AsyncTurnstoreStore if asynchronous else TurnstoreStore

    def opened(conn_string: str, *, index: Any = None, ttl: Any = None, **_: Any) -> Any:
        _count_open()
        url = database_for(conn_string, "turnstore")
        # The index as the test gives it: SqliteStore's `text_fields` key included.
        return ours.from_conn_string(url, index=index, ttl=ttl)

    return opened


PEER_OPTIONS = {"postgres": ("pipeline", "pool_config"), "sqlite": ()}
"""The peers' own `from_conn_string` options beyond `index` and `ttl`."""


def _peer_opener(backend: str, asynchronous: bool) -> Callable[..., Any]:
    """`from_conn_string` for LangGraph's store on `backend` standing in for the other one."""
    if backend == "sqlite":
        from langgraph.store.sqlite import AsyncSqliteStore, SqliteStore

        peer: Any = AsyncSqliteStore if asynchronous else SqliteStore
    else:
        from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

        peer = AsyncPostgresStore if asynchronous else PostgresStore

    def opened(conn_string: str, *, index: Any = None, ttl: Any = None, **options: Any) -> Any:
        kept = {key: value for key, value in options.items() if key in PEER_OPTIONS[backend]}
        _count_open()
        return peer.from_conn_string(
            database_for(conn_string, "langgraph"), index=index, ttl=ttl, **kept
        )

    return opened


class StandIn:
    """Put where a test module names a store class: only `from_conn_string` is used."""

    def __init__(self, name: str, opener: Callable[..., Any]) -> None:
        self.__name__ = name
        self.from_conn_string = opener


def stand_in(name: str) -> Any:
    """What the tests get for `name` under the implementation and backend being run."""
    asynchronous = NAMES[name][1]
    if IMPL == "turnstore":
        return StandIn(name, _turnstore_opener(asynchronous))
    return StandIn(name, _peer_opener(BACKEND, asynchronous))


# --- the PostgreSQL package's fixtures, on our databases ---------------------------------------


def _migrated_like_the_fixture(store: Any) -> None:
    """What the PostgreSQL fixtures do to LangGraph's store: TTL minutes as FLOAT, not INT."""
    migrations = getattr(store, "MIGRATIONS", None)
    if migrations:
        store.MIGRATIONS = [
            m.replace("ttl_minutes INT;", "ttl_minutes FLOAT;") if isinstance(m, str) else m
            for m in migrations
        ]


def _variant_options(variant: str) -> dict[str, Any]:
    if variant == "pipe":
        return {"pipeline": True}
    if variant == "pool":
        return {"pool_config": {"min_size": 1, "max_size": 10}}
    return {}


def sync_store_fixture(module: Any) -> Any:
    """The sync PostgreSQL `store` fixture: set up once, reopened as the variant asks."""

    @pytest.fixture(params=["default", "pipe", "pool"])
    def store(request: Any) -> Iterator[Any]:
        conn_string = conn_string_for("PostgresStore")
        with module.PostgresStore.from_conn_string(conn_string, ttl=TTL_CONFIG) as first:
            _migrated_like_the_fixture(first)
            first.setup()
        options = _variant_options(request.param)
        with module.PostgresStore.from_conn_string(
            conn_string, ttl=TTL_CONFIG, **options
        ) as opened:
            opened.start_ttl_sweeper()
            yield opened
            opened.stop_ttl_sweeper()

    return store


def async_store_fixture(module: Any) -> Any:
    """The async PostgreSQL `store` fixture, without its drop of LangGraph's migrations table."""

    @pytest.fixture(params=["default", "pipe", "pool"])
    async def store(request: Any) -> AsyncIterator[Any]:
        conn_string = conn_string_for("AsyncPostgresStore")
        async with module.AsyncPostgresStore.from_conn_string(conn_string, ttl=TTL_CONFIG) as first:
            _migrated_like_the_fixture(first)
            await first.setup()
        options = _variant_options(request.param)
        async with module.AsyncPostgresStore.from_conn_string(
            conn_string, ttl=TTL_CONFIG, **options
        ) as opened:
            await opened.start_ttl_sweeper()
            yield opened
            await opened.stop_ttl_sweeper()

    return store


def _vector_index(vector_type: str, distance_type: str, embeddings: Any, fields: Any) -> Any:
    return {
        "dims": embeddings.dims,
        "embed": embeddings,
        "ann_index_config": {"vector_type": vector_type},
        "distance_type": distance_type,
        "fields": fields,
    }


def sync_vector_store(module: Any) -> Callable[..., Any]:
    """The sync `_create_vector_store`, without its drop of LangGraph's migrations table."""

    @contextmanager
    def create(
        vector_type: str,
        distance_type: str,
        fake_embeddings: Any,
        text_fields: list[str] | None = None,
        enable_ttl: bool = True,
    ) -> Iterator[Any]:
        index = _vector_index(vector_type, distance_type, fake_embeddings, text_fields)
        ttl = {"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None
        conn_string = conn_string_for("PostgresStore")
        with module.PostgresStore.from_conn_string(conn_string, index=index, ttl=ttl) as store:
            store.setup()
            store.setup()  # the fixture's check that setting up twice is harmless
            yield store

    return create


def async_vector_store(module: Any) -> Callable[..., Any]:
    """The async `_create_vector_store` on one of this plugin's databases."""

    @asynccontextmanager
    async def create(
        vector_type: str,
        distance_type: str,
        fake_embeddings: Any,
        text_fields: list[str] | None = None,
    ) -> AsyncIterator[Any]:
        index = _vector_index(vector_type, distance_type, fake_embeddings, text_fields)
        conn_string = conn_string_for("AsyncPostgresStore")
        async with module.AsyncPostgresStore.from_conn_string(conn_string, index=index) as store:
            await store.setup()
            yield store

    return create


# --- hooks -------------------------------------------------------------------------------------


def patch_module(module: Any) -> None:
    """Rebind the store classes a test module names and, in the PostgreSQL package's, the
    fixtures and helpers that make a database per test."""
    for name in NAMES:
        if hasattr(module, name) and not _is_native(name):
            setattr(module, name, stand_in(name))
    if hasattr(module, "DEFAULT_URI"):
        module.DEFAULT_URI = NO_TABLES_URL
    if hasattr(module, "PostgresStore") and hasattr(module, "store"):
        module.store = sync_store_fixture(module)
        module._create_vector_store = sync_vector_store(module)
    if hasattr(module, "AsyncPostgresStore") and hasattr(module, "store"):
        module.store = async_store_fixture(module)
        module._create_vector_store = async_vector_store(module)


NO_TABLES_URL = libpq_url(f"lgstore_{_RUN}_absent")
"""Our server, with a search path naming a schema that never exists: the PostgreSQL
conftest's autouse clean-up connects here and finds none of the tables it empties."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-impl",
        choices=("turnstore", "langgraph"),
        default="turnstore",
        help="whose store the tests build (langgraph: LangGraph's own, the peer run)",
    )
    parser.addoption("--store-backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.addoption(
        "--store-sample", action="store_true", help="only each store fixture's first variant"
    )


def pytest_configure(config: pytest.Config) -> None:
    global IMPL, BACKEND, SAMPLE
    IMPL = config.getoption("--store-impl")
    BACKEND = config.getoption("--store-backend")
    SAMPLE = config.getoption("--store-sample")
    # pytest-retry's marker (LangGraph's dev dependency, not installed here): no retries, so
    # a timing-sensitive TTL test has to pass the first time.
    config.addinivalue_line("markers", "flaky(retries): retried by pytest-retry, not here")
    conftest = sys.modules.get("tests.conftest")
    if conftest is not None and hasattr(conftest, "DEFAULT_URI"):
        conftest.DEFAULT_URI = NO_TABLES_URL


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> None:
    """Import a test module before pytest does, and patch it: pytest then takes it as is."""
    if module_path.parent.name != "tests" or not module_path.name.startswith("test_"):
        return
    patch_module(importlib.import_module(f"tests.{module_path.stem}"))


def _deselected_names(config: pytest.Config) -> list[str]:
    """The `DESELECTED` ids of the distribution this run is in (its root's name says which)."""
    package = "postgres" if "postgres" in config.rootpath.name else "sqlite"
    return [
        name for group in DESELECTED[f"langgraph-checkpoint-{package}"].values() for name in group
    ]


def _matches(nodeid: str, names: list[str]) -> list[str]:
    return [name for name in names if nodeid == name or nodeid.startswith(name + "[")]


def _later_variant(params: dict[str, Any]) -> bool:
    return any(params.get(name) not in (None, "memory", "default") for name in VARIANTS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the deselected tests (each must still exist) and the `halfvec` variants; under
    `--store-sample` also all but each store fixture's first variant, and `SLOW`."""
    names, seen = _deselected_names(config), set()
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        matched = _matches(item.nodeid, names)
        seen.update(matched)
        out = bool(matched) or any(PGVECTOR_ONLY in str(value) for value in params.values())
        out = out or (SAMPLE and (_later_variant(params) or bool(_matches(item.nodeid, SLOW))))
        (dropped if out else kept).append(item)
    collected = {item.nodeid.split("::")[0] for item in items}
    missing = [name for name in names if name.split("::")[0] in collected and name not in seen]
    if missing:
        raise pytest.UsageError(f"deselected tests no longer in the suite: {missing}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """Each test's connection strings name databases of its own."""
    _PLACES.clear()


def pytest_report_header(config: pytest.Config) -> str:
    if IMPL == "langgraph":
        return f"store tests on LangGraph's own stores, on {BACKEND}"
    return f"store tests on turnstore's TurnstoreStore, on {BACKEND}"


def pytest_unconfigure(config: pytest.Config) -> None:
    for directory in _SCRATCH:
        shutil.rmtree(directory, ignore_errors=True)
    if not _SCHEMAS:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for schema in _SCHEMAS:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
