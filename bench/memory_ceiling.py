"""The memory benchmark's ceilings: the mix in plain SQL, the API floor, the exact vector search.

A ceiling side runs the mix's five operations as the fastest durable store one could write:
one table `(namespace, key) -> value JSON` (with the two times every LangGraph item carries),
each put and delete one autocommitted statement (one commit), get / filtered search /
list_namespaces one SQL statement each with the filter in SQL, no `BaseStore` layer. On
SQLite: stdlib `sqlite3`, WAL, synchronous=FULL. On PostgreSQL: psycopg, autocommit, the
server at synchronous_commit=on. A search's page is the newest ten matches, as LangGraph's
stores return it. `ceiling ops/s / LangGraph store ops/s` is then the best ratio any store
could reach against the LangGraph store on this machine; a `BaseStore` also pays the API's
own cost, which `InMemoryStore` (no I/O) shows per read: the API floor.
"""

from __future__ import annotations

import heapq
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.memory_sides import SEED, Places, Side, SideSpec, items, namespace
from bench.peers import durable_sqlite

try:
    import orjson

    dumps: Callable[[Any], str | bytes] = orjson.dumps
    loads: Callable[[str | bytes], Any] = orjson.loads
except ImportError:  # the stdlib's is slower: the ceiling would only be lower
    dumps, loads = json.dumps, json.loads

READS = ("get", "search", "list")
"""The operations whose `InMemoryStore` cost is the API floor."""
FLOOR_CALLS = 1_000
"""Calls of each read the API floor is the median of."""


def _under(prefix: Sequence[str]) -> tuple[str, str, int]:
    """`prefix` and its namespaces: one range of the key (".", the separator, is just below
    "/"), in which the character after the prefix is none or "."."""
    text = ".".join(prefix)
    return text, text + "/", len(text) + 1


def _namespaces(rows: Sequence[Any]) -> list[tuple[str, ...]]:
    return [tuple(row[0].split(".")) for row in rows]


_SQLITE_TABLE = (
    "CREATE TABLE memory (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (namespace, key))"
)
# One range, not an OR of two: a planner without statistics reads it from the index.
_SQLITE_UNDER = "namespace >= ? AND namespace < ? AND substr(namespace, ?, 1) IN ('', '.')"


class SqliteCeiling:
    """The mix on stdlib `sqlite3` (WAL, synchronous=FULL), each write its own commit."""

    def __init__(self, path: Any) -> None:
        self.connection = durable_sqlite(path, isolation_level=None)
        self.connection.execute(_SQLITE_TABLE)

    def batch(self, ops: Sequence[Any]) -> None:
        """The fill: `PutOp`s in one transaction."""
        now = time.time()
        rows = [(".".join(op.namespace), op.key, dumps(op.value), now, now) for op in ops]
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany(
                "INSERT OR REPLACE INTO memory VALUES (?, ?, ?, ?, ?)", rows
            )

    def put(self, namespace: Sequence[str], key: str, value: Any) -> None:
        """Insert or update one item: one commit."""
        now = time.time()
        self.connection.execute(
            "INSERT INTO memory VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, key)"
            " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (".".join(namespace), key, dumps(value), now, now),
        )

    def get(self, namespace: Sequence[str], key: str) -> Any:
        """The item's value and times, or None."""
        row = self.connection.execute(
            "SELECT value, created_at, updated_at FROM memory WHERE namespace = ? AND key = ?",
            (".".join(namespace), key),
        ).fetchone()
        return None if row is None else (loads(row[0]), row[1], row[2])

    def search(self, prefix: Sequence[str], *, filter: dict[str, Any], limit: int) -> Any:
        """The newest `limit` items under `prefix` whose field equals the filter's value."""
        ((field, wanted),) = filter.items()
        rows = self.connection.execute(
            "SELECT namespace, key, value, created_at, updated_at FROM memory"
            f" WHERE {_SQLITE_UNDER} AND json_extract(value, ?) = ?"
            " ORDER BY updated_at DESC LIMIT ?",
            (*_under(prefix), f"$.{field}", wanted, limit),
        ).fetchall()
        return [(row[0], row[1], loads(row[2]), row[3], row[4]) for row in rows]

    def list_namespaces(self, *, prefix: Sequence[str], limit: int) -> Any:
        """The first `limit` namespaces under `prefix`."""
        rows = self.connection.execute(
            f"SELECT DISTINCT namespace FROM memory WHERE {_SQLITE_UNDER}"
            " ORDER BY namespace LIMIT ?",
            (*_under(prefix), limit),
        ).fetchall()
        return _namespaces(rows)

    def delete(self, namespace: Sequence[str], key: str) -> None:
        """Delete one item: one commit."""
        self.connection.execute(
            "DELETE FROM memory WHERE namespace = ? AND key = ?", (".".join(namespace), key)
        )


_PG_TABLE = (
    'CREATE TABLE memory (namespace TEXT COLLATE "C" NOT NULL, key TEXT NOT NULL,'
    " value JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " updated_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (namespace, key))"
)
_PG_UNDER = "namespace >= %s AND namespace < %s AND substr(namespace, %s, 1) IN ('', '.')"


class PostgresCeiling:
    """The mix on psycopg, autocommit statements (each write its own commit)."""

    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg.types.json import Jsonb, set_json_dumps, set_json_loads

        self.connection = psycopg.connect(url, autocommit=True)
        set_json_dumps(dumps, self.connection)
        set_json_loads(loads, self.connection)
        self.jsonb = Jsonb
        self.connection.execute(_PG_TABLE)

    def batch(self, ops: Sequence[Any]) -> None:
        """The fill: `PutOp`s in one transaction."""
        rows = [(".".join(op.namespace), op.key, self.jsonb(op.value)) for op in ops]
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory (namespace, key, value) VALUES (%s, %s, %s)", rows
            )

    def put(self, namespace: Sequence[str], key: str, value: Any) -> None:
        """Insert or update one item: one commit."""
        self.connection.execute(
            "INSERT INTO memory (namespace, key, value) VALUES (%s, %s, %s)"
            " ON CONFLICT (namespace, key)"
            " DO UPDATE SET value = excluded.value, updated_at = now()",
            (".".join(namespace), key, self.jsonb(value)),
        )

    def get(self, namespace: Sequence[str], key: str) -> Any:
        """The item's value and times, or None."""
        return self.connection.execute(
            "SELECT value, created_at, updated_at FROM memory WHERE namespace = %s AND key = %s",
            (".".join(namespace), key),
        ).fetchone()

    def search(self, prefix: Sequence[str], *, filter: dict[str, Any], limit: int) -> Any:
        """The newest `limit` items under `prefix` whose field equals the filter's value."""
        ((field, wanted),) = filter.items()
        return self.connection.execute(
            "SELECT namespace, key, value, created_at, updated_at FROM memory"
            f" WHERE {_PG_UNDER} AND value ->> %s = %s ORDER BY updated_at DESC LIMIT %s",
            (*_under(prefix), field, wanted, limit),
        ).fetchall()

    def list_namespaces(self, *, prefix: Sequence[str], limit: int) -> Any:
        """The first `limit` namespaces under `prefix`."""
        rows = self.connection.execute(
            f"SELECT DISTINCT namespace FROM memory WHERE {_PG_UNDER} ORDER BY namespace LIMIT %s",
            (*_under(prefix), limit),
        ).fetchall()
        return _namespaces(rows)

    def delete(self, namespace: Sequence[str], key: str) -> None:
        """Delete one item: one commit."""
        self.connection.execute(
            "DELETE FROM memory WHERE namespace = %s AND key = %s", (".".join(namespace), key)
        )


def _sqlite_ceiling(places: Places, index: Any) -> Side:
    directory = places.directory / places.fresh("ceiling")
    directory.mkdir()
    store = SqliteCeiling(directory / "ceiling.sqlite3")
    return Side(store, store.connection.close, None)


def _postgres_ceiling(places: Places, index: Any) -> Side:
    assert places.database is not None
    schema = places.database.schema(places.fresh("ceiling_pg"))
    store = PostgresCeiling(places.database.libpq_url(schema))
    return Side(store, store.connection.close, None)


CEILINGS = {
    "sqlite": SideSpec("ceiling-sqlite", "ceiling: plain SQL (SQLite)", "sqlite", _sqlite_ceiling),
    "postgres": SideSpec(
        "ceiling-pg", "ceiling: plain SQL (PostgreSQL)", "postgres", _postgres_ceiling
    ),
}
"""The ceiling side run beside each LangGraph store (by the LangGraph store's side name)."""
TARGET_OVER = {"sqlite": 1.5, "postgres": 2.0}
"""Issue 46's mix target: ours over the LangGraph store, per LangGraph store."""


def api_floor(calls: int = FLOOR_CALLS) -> dict[str, float]:
    """Median microseconds per read, as the mix calls it, of an `InMemoryStore` holding one
    namespace's three memories: LangGraph's `BaseStore` API with next to nothing to scan.
    (In the mix `InMemoryStore` scans every namespace per search and list.)"""
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    for ns, key, value in items([0], 3, SEED):
        store.put(ns, key, value)
    under = namespace(0)[:2]
    reads: dict[str, Callable[[], Any]] = {
        "get": lambda: store.get(namespace(0), "m1"),
        "search": lambda: store.search(under, filter={"kind": "fact"}, limit=10),
        "list": lambda: store.list_namespaces(prefix=under, limit=10),
    }
    spent: dict[str, list[float]] = {kind: [] for kind in reads}
    for _ in range(calls):
        for kind, read in reads.items():
            began = time.perf_counter()
            read()
            spent[kind].append(time.perf_counter() - began)
    return {kind: statistics.median(s) * 1e6 for kind, s in spent.items()}


def ceiling_rows(mix: dict[str, Any]) -> list[dict[str, Any]]:
    """Per backend: the ceiling's ops/s over the LangGraph store's, beside the target; and
    the same with the API floor of the mix's reads added to the ceiling's time per op."""
    rows, counts, floor = mix["sides"], mix["counts"], mix.get("api_floor_us")
    found = []
    for peer, spec in CEILINGS.items():
        if spec.name not in rows or peer not in rows:
            continue
        ceiling, langgraph = rows[spec.name]["ops_per_s"], rows[peer]["ops_per_s"]
        with_floor = None
        if floor is not None:
            reads_s = sum(counts.get(kind, 0) * floor[kind] for kind in READS) * 1e-6
            with_floor = sum(counts.values()) / (sum(counts.values()) / ceiling + reads_s)
        found.append(
            {
                "peer": peer,
                "ceiling": spec.name,
                "ceiling_ops_per_s": ceiling,
                "peer_ops_per_s": langgraph,
                "ratio": ceiling / langgraph,
                "with_floor_ops_per_s": with_floor,
                "with_floor_ratio": with_floor / langgraph if with_floor else None,
                "target": TARGET_OVER[peer],
            }
        )
    return found


def exact_ceiling(vectors: Sequence[Any], queries: Sequence[Any]) -> tuple[float, str]:
    """Median seconds of a brute-force top-10 cosine over `vectors`, and what computed it."""
    try:
        import numpy
    except ImportError:
        numpy = None
    spent = []
    if numpy is not None:
        matrix = numpy.array(vectors, dtype=numpy.float32)
        for query in queries:
            began = time.perf_counter()
            scores = matrix @ numpy.array(query, dtype=numpy.float32)
            numpy.argpartition(-scores, min(10, len(scores) - 1))[:10]
            spent.append(time.perf_counter() - began)
        return statistics.median(spent), f"numpy {numpy.__version__}"
    for query in queries:
        began = time.perf_counter()
        # Unit vectors: the dot product is the cosine.
        heapq.nlargest(10, ((sum(map(float.__mul__, query, v)), i) for i, v in enumerate(vectors)))
        spent.append(time.perf_counter() - began)
    return statistics.median(spent), "pure Python (numpy is not installed)"
