"""Fixtures shared by every test: a store per backend and face, and raw database access."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import BlockingStore, Store

BACKENDS = ["sqlite"]
FACES = ["async", "blocking"]


class BlockingAsAsync:
    """Runs a `BlockingStore` from async tests, so one contract suite checks both faces."""

    def __init__(self, store: BlockingStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name in ("writer_stats", "backend") or not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


class Database:
    """Direct access to the database under a store, for what the public API cannot do."""

    def __init__(self, backend: str, path: Path) -> None:
        self.backend = backend
        self.path = path

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh connection and return its rows."""
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
        self.query(
            f"CREATE TRIGGER reject_{table} BEFORE INSERT ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )

    def hold_write_lock(self) -> Callable[[], None]:
        """Open a write transaction on another connection; return the function that ends it."""
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


@pytest.fixture
def store_url(backend_name: str, tmp_path: Path) -> str:
    """A URL of a fresh, empty database of the backend under test."""
    return str(tmp_path / "turnstore.sqlite3")


@pytest.fixture
def database(backend_name: str, tmp_path: Path, store_url: str) -> Database:
    """Raw access to the database behind `store`."""
    return Database(backend_name, Path(store_url))


@pytest.fixture(params=FACES)
async def store(request: pytest.FixtureRequest, store_url: str) -> AsyncIterator[Any]:
    """A fresh store on every backend, through the async face and the blocking face."""
    if request.param == "async":
        async_store: Store = turnstore.open(store_url)
        yield async_store
        await async_store.close()
    else:
        blocking = turnstore.open_blocking(store_url)
        yield BlockingAsAsync(blocking)
        blocking.close()


@pytest.fixture
def blocking_store(store_url: str) -> Iterator[BlockingStore]:
    """A fresh blocking store on the backend under test."""
    with turnstore.open_blocking(store_url) as opened:
        yield opened
