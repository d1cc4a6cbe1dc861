"""A pytest plugin that runs LangGraph's own graph tests with turnstore's checkpointer.

Loaded (`-p langgraph_plugin`) into a pytest process run inside LangGraph's unpacked source
distribution. LangGraph's `tests/conftest.py` builds its checkpointers in the fixtures
`sync_checkpointer` and `async_checkpointer`, through helpers it imports by name from
`tests/conftest_checkpointer.py`. Once collection has imported it, this plugin puts its
own helpers in place of the two SQLite ones (`_checkpointer_sqlite`,
`_checkpointer_sqlite_aio`), so every test variant parametrized `sqlite` or `sqlite_aio`
runs on a `TurnstoreSaver`, and the graphs that take a store (`_store_memory`, LangGraph's
`InMemoryStore`) get a `TurnstoreStore`; it deselects every other variant (memory, encrypted SQLite,
LangGraph's PostgreSQL savers) and every test that takes no checkpointer, which have
nothing to say about turnstore.

Each saver gets a fresh database: a new SQLite file in a scratch directory, or on
PostgreSQL (`--turnstore-backend postgres`) an empty schema: a new one, or one a closed saver
used, emptied row by row (creating a schema costs about ten times as much, and the run builds
some 650 savers). The schemas are dropped when the run ends.
`--turnstore-backend langgraph` substitutes nothing: the same variants run on LangGraph's
own `SqliteSaver` / `AsyncSqliteSaver`, the baseline turnstore has to match.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from emptied_schemas import empty

BACKEND = "sqlite"
"""The backend under test, set from `--turnstore-backend`."""
POSTGRES_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REPORT = os.environ.get("TURNSTORE_LANGGRAPH_REPORT")
"""A file this plugin writes at the end: how many turnstore savers the tests built."""
CONFTEST = "tests.conftest"
"""LangGraph's conftest module, which holds the names of the checkpointer helpers."""
HELPERS = "tests.conftest_checkpointer"
"""The module those helpers come from (it also has `_apply_strict_msgpack`)."""
SELECTED = {"sync_checkpointer": "sqlite", "async_checkpointer": "sqlite_aio"}
"""The checkpointer fixtures, and the one parameter of each that runs on turnstore."""
_SCHEMAS: list[str] = []
_EMPTY: list[str] = []
"""Schemas whose saver is closed and whose rows are deleted: the next savers take these."""
_ADMIN: list[Any] = []
"""The one connection that empties schemas, opened when first needed."""
_BUILT = [0]
_SCRATCH = Path(tempfile.mkdtemp(prefix="turnstore-langgraph-"))
_RUN = secrets.token_hex(4)
# Not uuid4: some LangGraph tests patch `uuid.uuid4` to a fixed sequence of ids.
_SERIAL = itertools.count()


def store_url() -> str:
    """The URL of an empty turnstore database on the backend under test."""
    if BACKEND == "postgres":
        separator = "&" if "?" in POSTGRES_URL else "?"
        return f"{POSTGRES_URL}{separator}schema={_empty_schema()}"
    return str(_SCRATCH / f"checkpoints-{next(_SERIAL)}.sqlite3")


def _empty_schema() -> str:
    if _EMPTY:
        return _EMPTY.pop()
    schema = f"langgraph_{_RUN}_{next(_SERIAL)}"
    _SCHEMAS.append(schema)
    return schema


def _release(url: str) -> None:
    """Empty a closed saver's PostgreSQL schema (its tables stay) for the next saver."""
    if BACKEND != "postgres":
        return
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    if not _ADMIN:
        _ADMIN.append(psycopg.connect(POSTGRES_URL, autocommit=True))
    empty(_ADMIN[0], schema)
    _EMPTY.append(schema)


def new_saver(url: str) -> Any:
    """A `TurnstoreSaver` over an empty database: the one place the substitute is built."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    saver = TurnstoreSaver(url)
    # What LangGraph's helpers do to their savers too (a no-op unless the run asks for
    # LANGGRAPH_STRICT_MSGPACK).
    sys.modules[HELPERS]._apply_strict_msgpack(saver)
    _BUILT[0] += 1
    return saver


@contextmanager
def turnstore_checkpointer() -> Iterator[Any]:
    """Stands in for `_checkpointer_sqlite`: a saver used, and closed, synchronously."""
    url = store_url()
    with new_saver(url) as saver:
        yield saver
    _release(url)


@asynccontextmanager
async def turnstore_checkpointer_aio() -> AsyncIterator[Any]:
    """Stands in for `_checkpointer_sqlite_aio`: a saver used, and closed, asynchronously."""
    url = store_url()
    async with new_saver(url) as saver:
        yield saver
    _release(url)


@contextmanager
def turnstore_store() -> Iterator[Any]:
    """Stands in for `_store_memory`: the graphs' long-term memory a `TurnstoreStore` over an
    empty database (the sync and the async graph tests take it the same way), closed after."""
    from turnstore.integrations.langgraph_store import TurnstoreStore

    url = store_url()
    with TurnstoreStore.from_conn_string(url) as store:
        yield store
    _release(url)


SUBSTITUTES = {
    "_checkpointer_sqlite": turnstore_checkpointer,
    "_checkpointer_sqlite_aio": turnstore_checkpointer_aio,
    "_store_memory": turnstore_store,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--turnstore-backend",
        choices=("sqlite", "postgres", "langgraph"),
        default="sqlite",
        help="the backend the substituted savers use (langgraph: LangGraph's own savers)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global BACKEND
    BACKEND = config.getoption("--turnstore-backend")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Put the substitutes in the conftest's globals, where its fixtures look them up.

    The fixtures resolve the helpers' names when they run, so replacing them once every
    conftest is imported, before the first test, is enough.
    """
    if BACKEND == "langgraph":
        return
    conftest = sys.modules[CONFTEST]
    for name, substitute in SUBSTITUTES.items():
        assert hasattr(conftest, name), f"{CONFTEST} no longer imports {name}"
        setattr(conftest, name, substitute)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the SQLite checkpointer variants: the ones turnstore stands in for."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        runs_on_sqlite = any(params.get(name) == value for name, value in SELECTED.items())
        (kept if runs_on_sqlite else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str:
    if BACKEND == "langgraph":
        return "sqlite checkpointers are LangGraph's own SqliteSaver / AsyncSqliteSaver"
    return f"sqlite checkpointers are turnstore's TurnstoreSaver on {BACKEND}"


def pytest_unconfigure(config: pytest.Config) -> None:
    if REPORT:
        Path(REPORT).write_text(f"{_BUILT[0]}\n")
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    for connection in _ADMIN:
        connection.close()
    if not _SCHEMAS:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for schema in _SCHEMAS:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
