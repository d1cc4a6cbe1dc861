"""The memory benchmark's sides: each `BaseStore` opened durably, its size, and the workload.

Every side is opened on a fresh file or schema of its own: `InMemoryStore` (no I/O, the
reference), LangGraph's `SqliteStore` on a WAL file at `synchronous=FULL`, LangGraph's
`PostgresStore` (each statement autocommitted, the server at `synchronous_commit=on`, which
`bench.postgres.unavailable` checks), and turnstore's `TurnstoreStore` on SQLite and on
PostgreSQL at its defaults (WAL and `synchronous=FULL`; `synchronous_commit` on).
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.peers import durable_sqlite
from bench.postgres import ScratchDatabase

SEED = 20_261_207
"""The workload's seed: every side is handed the same items and the same operations."""
KINDS = ("fact", "preference", "summary")
"""A memory's `kind`: the value field the filtered searches select on."""
WORDS = [
    *("prefers", "tea", "mornings", "meeting", "travel", "budget", "window", "seat"),
    *("vegetarian", "deadline", "project", "alpha", "beta", "summary", "notes", "customer"),
    *("call", "quarterly", "review", "reminder", "birthday", "gift"),
]


@dataclass
class Places:
    """Where the sides' stores live: a scratch directory and, maybe, a scratch PG database."""

    directory: Path
    database: ScratchDatabase | None
    serial: int = 0

    def fresh(self, name: str) -> str:
        """A new unique name for one store of side `name`."""
        self.serial += 1
        return f"{name.replace('-', '_')}_{self.serial}"


@dataclass
class Side:
    """An open store, how to close it, how to size it once closed (None: no disk), and how to
    settle it after a bulk load as production would (None: nothing to settle)."""

    store: Any
    close: Callable[[], None]
    size: Callable[[], int] | None
    settle: Callable[[], None] | None = None
    indexed: Callable[[], None] | None = None
    """Waits until what a fill left for a background indexer is indexed (None: nothing)."""


@dataclass(frozen=True)
class SideSpec:
    """A store the run can compare."""

    name: str
    label: str
    backend: str
    open: Callable[[Places, Any], Side]


def sqlite_directory_size(directory: Path) -> int:
    """Bytes of every file in a closed store's directory, its WAL folded in first."""
    for database in directory.glob("*.sqlite3"):
        with closing(sqlite3.connect(database)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def settle_sqlite(path: Path) -> None:
    """Gather the planner's statistics, then fold the WAL into the file and empty it."""
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        # The first ANALYZE creates sqlite_stat1, a schema change: the store's own
        # connections reload the schema, and the statistics with it, on their next statement.
        connection.execute("ANALYZE")
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise RuntimeError(f"{path}: a reader kept the WAL checkpoint from finishing")


def settle_postgres(database: ScratchDatabase, schema: str, table: str) -> None:
    """VACUUM (ANALYZE) the store's table (statistics, hint bits, the visibility map), then
    CHECKPOINT, so no page the fill or the vacuum dirtied is left to write."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(database.url, autocommit=True) as connection:
        name = sql.Identifier(schema, table)
        connection.execute(sql.SQL("VACUUM (ANALYZE) {}").format(name))
        connection.execute("CHECKPOINT")


def _memory(places: Places, index: Any) -> Side:
    from langgraph.store.memory import InMemoryStore

    return Side(InMemoryStore(index=index), lambda: None, None)


def _sqlite(places: Places, index: Any) -> Side:
    from langgraph.store.sqlite import SqliteStore

    directory = places.directory / places.fresh("sqlite")
    directory.mkdir()
    # As SqliteStore.from_conn_string opens it (autocommit), plus WAL and synchronous=FULL.
    connection = durable_sqlite(directory / "store.sqlite3", isolation_level=None)
    store = SqliteStore(connection, index=_sqlite_index(index))
    store.setup()
    return Side(
        store,
        connection.close,
        lambda: sqlite_directory_size(directory),
        lambda: settle_sqlite(directory / "store.sqlite3"),
    )


def _sqlite_index(index: Any) -> Any:
    """SqliteStore names IndexConfig's `fields` `text_fields`."""
    if index is None:
        return None
    return {**{k: v for k, v in index.items() if k != "fields"}, "text_fields": index["fields"]}


def _postgres(places: Places, index: Any) -> Side:
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    assert places.database is not None
    database = places.database
    schema = database.schema(places.fresh("postgres"))
    # As PostgresStore.from_conn_string opens it: autocommit, no prepared statements.
    connection = psycopg.connect(
        database.libpq_url(schema), autocommit=True, prepare_threshold=0, row_factory=dict_row
    )
    store = PostgresStore(connection, index=index)
    try:
        store.setup()
    except BaseException:
        connection.close()
        raise
    return Side(
        store,
        connection.close,
        lambda: database.size(schema),
        lambda: settle_postgres(database, schema, "store"),
    )


def _turnstore(places: Places, index: Any, words: bool = False) -> Side:
    from turnstore.integrations.langgraph_store import TurnstoreStore

    directory = places.directory / places.fresh("turnstore")
    directory.mkdir()
    path = directory / "turnstore.sqlite3"
    store = TurnstoreStore(str(path), index=index, words=words)
    store.setup()
    return Side(
        store,
        store.close,
        lambda: sqlite_directory_size(directory),
        lambda: settle_sqlite(path),
        lambda: index_words(str(path)),
    )


def index_words(url: str) -> None:
    """Index now the words a fill left for turnstore's background indexer (SQLite's puts
    leave them), so that no timed operation shares the machine with that indexing."""
    import turnstore

    with turnstore.open_blocking(url, index_in_background=False) as store:
        store.memory.index()


def _turnstore_pg(places: Places, index: Any, words: bool = False) -> Side:
    from turnstore.integrations.langgraph_store import TurnstoreStore

    assert places.database is not None
    database = places.database
    schema = places.fresh("turnstore_pg")
    store = TurnstoreStore(database.turnstore_url(schema), index=index, words=words)
    store.setup()
    return Side(
        store,
        store.close,
        lambda: database.size(schema),
        lambda: settle_postgres(database, schema, "memory_items"),
    )


def _with_words(opener: Callable[[Places, Any, bool], Side]) -> Callable[[Places, Any], Side]:
    """A side of ours that indexes its items' words for a query (`words=True`)."""
    return lambda places, index: opener(places, index, True)


SIDES = (
    SideSpec("memory", "InMemoryStore", "memory", _memory),
    SideSpec("sqlite", "SqliteStore", "sqlite", _sqlite),
    SideSpec("turnstore", "TurnstoreStore (SQLite)", "sqlite", _turnstore),
    SideSpec(
        "turnstore-words",
        "TurnstoreStore (SQLite, words=True)",
        "sqlite",
        _with_words(_turnstore),
    ),
    SideSpec("postgres", "PostgresStore", "postgres", _postgres),
    SideSpec("turnstore-pg", "TurnstoreStore (PostgreSQL)", "postgres", _turnstore_pg),
    SideSpec(
        "turnstore-pg-words",
        "TurnstoreStore (PostgreSQL, words=True)",
        "postgres",
        _with_words(_turnstore_pg),
    ),
)
"""Every side the benchmark knows, by name. The `-words` sides index their items' words for a
query (`TurnstoreStore(words=True)`); LangGraph's stores, and ours by default, index none."""
PEER_OF = {
    "turnstore": "sqlite",
    "turnstore-words": "sqlite",
    "turnstore-pg": "postgres",
    "turnstore-pg-words": "postgres",
}
"""Each of ours, and the LangGraph store on the same backend it is compared with."""


# --- the workload ------------------------------------------------------------------------------


def namespace(user: int) -> tuple[str, ...]:
    """One user's memories: the namespace a memory tool reads and writes."""
    return ("users", f"u{user:06d}", "memories")


def memory_value(rng: random.Random, serial: int) -> dict[str, Any]:
    """One memory: a kind (filtered on), a line of text (embedded), a score."""
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30)))
    return {"kind": KINDS[serial % len(KINDS)], "text": text, "score": rng.randint(0, 100)}


def payload_bytes(namespace_: Sequence[str], key: str, value: dict[str, Any]) -> int:
    """What the item carries: its compact JSON value, its key and its namespace's labels."""
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(compact.encode()) + len(key.encode()) + sum(len(p.encode()) for p in namespace_)


def items(users: Sequence[int], per_user: int, seed: int) -> Iterator[tuple[Any, str, Any]]:
    """`per_user` memories in each of `users`' namespaces, the same for every side."""
    rng = random.Random(seed)
    for user in users:
        for serial in range(per_user):
            yield namespace(user), f"m{serial}", memory_value(rng, serial)


class FakeEmbeddings:
    """A deterministic embedding: each distinct text a fixed unit vector (seeded by its text).

    Memoised as float32 arrays, so each side pays the store's cost, not this function's.
    """

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self._known: dict[str, array[float]] = {}

    def vector(self, text: str) -> array[float]:
        """The unit vector of `text`."""
        found = self._known.get(text)
        if found is None:
            rng = random.Random(f"{self.dims}:{text}")
            raw = [rng.gauss(0.0, 1.0) for _ in range(self.dims)]
            norm = math.sqrt(sum(x * x for x in raw)) or 1.0
            found = self._known[text] = array("f", (x / norm for x in raw))
        return found

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(text).tolist() for text in texts]
