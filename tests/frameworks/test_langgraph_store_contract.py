"""turnstore's LangGraph store contract (`turnstore.testing.langgraph_store`), run as a user
would run it: by subclassing, against `TurnstoreStore` and `AsyncTurnstoreStore` on both
backends and against LangGraph's own `InMemoryStore` and `SqliteStore`.

Where a peer does otherwise, its case is an expected failure (strict: it fails the run the
day the peer changes) with what the peer does; the contract is not bent to fit it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from conftest import FRESH_SCHEMAS, postgres_connection, require_postgres, schema_pool
from turnstore.integrations.langgraph_store import AsyncTurnstoreStore, TurnstoreStore
from turnstore.testing.langgraph_store import AsyncStoreContract, StoreContract

pytestmark = pytest.mark.peers


@pytest.fixture
def pg_schema(backend_name: str) -> Iterator[str]:
    """conftest's `pg_schema`, pooled as the contract tests' are (`tests/schema_pool.py`):
    these tests only put and delete items, and a schema migrated per test would be most of
    this module's time."""
    if backend_name != "postgres":
        yield ""
        return
    require_postgres()
    if FRESH_SCHEMAS:
        schema = f"test_{uuid.uuid4().hex}"
        yield schema
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        return
    pool = schema_pool()
    pooled = pool.take()
    yield pooled
    pool.give_back(pooled)


TTL = {"refresh_on_read": True}
"""The stores that keep TTLs restart one on a read, so the refresh test runs on them."""

RESETS_CREATED_AT = "{} writes a new created_at when a put replaces an item"
LISTS_EMPTY_NAMESPACES = (
    "InMemoryStore lists a namespace once a get has looked in it, and after its last item "
    "is deleted"
)
NO_NESTED_FILTER = (
    "SqliteStore reads a nested object in a filter as operators and raises "
    "ValueError('Unsupported operator: name')"
)


class TestTurnstoreStore(StoreContract):
    @pytest.fixture
    def store(self, store_url: str) -> Iterator[BaseStore]:
        with TurnstoreStore.from_conn_string(store_url, ttl=TTL) as opened:
            opened.setup()
            yield opened


class TestAsyncTurnstoreStore(AsyncStoreContract):
    @pytest.fixture
    async def store(self, store_url: str) -> AsyncIterator[BaseStore]:
        async with AsyncTurnstoreStore.from_conn_string(store_url, ttl=TTL) as opened:
            await opened.setup()
            yield opened


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> BaseStore:
        return InMemoryStore()

    @pytest.mark.xfail(strict=True, reason=RESETS_CREATED_AT.format("InMemoryStore"))
    def test_a_put_over_an_item_keeps_its_creation_time(self, store: BaseStore) -> None:
        super().test_a_put_over_an_item_keeps_its_creation_time(store)

    @pytest.mark.xfail(strict=True, reason=LISTS_EMPTY_NAMESPACES)
    def test_only_namespaces_holding_items_are_listed(self, store: BaseStore) -> None:
        super().test_only_namespaces_holding_items_are_listed(store)


class TestInMemoryStoreAsync(AsyncStoreContract):
    @pytest.fixture
    def store(self) -> BaseStore:
        return InMemoryStore()


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[BaseStore]:
        with SqliteStore.from_conn_string(str(tmp_path / "peer.sqlite3"), ttl=TTL) as opened:
            opened.setup()
            yield opened

    @pytest.mark.xfail(strict=True, reason=RESETS_CREATED_AT.format("SqliteStore"))
    def test_a_put_over_an_item_keeps_its_creation_time(self, store: BaseStore) -> None:
        super().test_a_put_over_an_item_keeps_its_creation_time(store)

    @pytest.mark.xfail(strict=True, reason=NO_NESTED_FILTER)
    def test_filter_on_a_nested_object_matches_the_fields_it_names(self, store: BaseStore) -> None:
        super().test_filter_on_a_nested_object_matches_the_fields_it_names(store)


def test_the_module_is_a_plugin_that_marks_the_contract(tmp_path: Path) -> None:
    """`-p turnstore.testing.langgraph_store` marks the contract's tests `store_contract`, in a
    user's subclass, and no test of the user's own."""
    (tmp_path / "test_mine.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from langgraph.store.memory import InMemoryStore
            from turnstore.testing.langgraph_store import StoreContract

            class TestMine(StoreContract):
                @pytest.fixture
                def store(self):
                    return InMemoryStore()

                def test_of_my_own(self):
                    assert True
            """
        )
    )
    command = [sys.executable, "-m", "pytest", "-p", "turnstore.testing.langgraph_store"]
    options = ["-p", "no:cacheprovider", "--strict-markers", "--collect-only", "-q"]
    done = subprocess.run(
        [*command, *options, "-m", "store_contract", "test_mine.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line]
    contract = sorted(name for name in vars(StoreContract) if name.startswith("test_"))
    assert sorted(collected) == contract
