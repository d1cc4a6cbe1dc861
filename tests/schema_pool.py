"""Migrated PostgreSQL schemas reused across the contract tests of one test process.

Creating and migrating a schema takes the server about 0.1 s of DDL, and dropping it more;
over some 1,500 PostgreSQL tests that was a third of the test time of `./dev test`. A test
that left its schema as it found it (the same tables, columns, indexes, constraints, triggers and
functions, no lock held) hands it back emptied instead: every table's rows deleted, its
identities restarted, and the rows migrations write (the search index's state) copied back
from a reference schema this process migrated once and never hands out. Anything else (a
test that dropped an index, installed a failing trigger, restored an old build's dump, or
left a connection holding a lock) drops its schema as before.

Only contract, server and browser tests that take their store from the `store` / `store_url`
fixtures are pooled: a test that names `pg_schema` or `restore_fixture` itself, or whose module
reads query plans, gets a schema no test used before, created by the store it opens.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

POOL_EXEMPT = ("pg_schema", "restore_fixture", "doctor", "bloat")
"""Words that keep a test off the pool: it makes or restores its own schema, or judges the
health of the one it has (dead rows and all)."""
PLANS = ("EXPLAIN", "ANALYZE")
"""Words that keep a whole module off the pool: it reads query plans, which a schema's past
(its statistics, its dead rows) could change."""

SHAPE = """
WITH owned AS (
    SELECT d.classid, d.objid FROM pg_depend AS d JOIN pg_namespace AS n ON d.refobjid = n.oid
    WHERE d.refclassid = 'pg_namespace'::regclass AND n.nspname = %s
)
SELECT
    (SELECT count(*) FROM owned),
    (SELECT count(*) FROM pg_depend AS d JOIN owned AS o
        ON d.refclassid = 'pg_class'::regclass AND d.refobjid = o.objid),
    (SELECT coalesce(sum(c.relnatts), 0) FROM pg_class AS c JOIN owned AS o
        ON o.classid = 'pg_class'::regclass AND c.oid = o.objid)
"""
"""What a schema holds, read through pg_depend's index (the catalogs bloat as tests make and
drop schemas, and a scan of them by namespace slows with it): the objects in it (tables,
functions, types), those that depend on its tables (indexes, constraints, triggers,
defaults) and its tables' columns. A test that created or dropped any of them changes it."""
REUSES = 40
"""How many tests one schema serves before it is dropped: emptying leaves dead rows behind
(this server runs without autovacuum), and a fresh schema sheds them."""
DEAD_ROWS = 100
"""The most rows, live or dead, any table of a schema may count (as the statistics have it)
to be emptied for the next test: few enough that what one test leaves can never reach the
dead rows `doctor` calls bloat (1,000), which a fresh schema would not show."""
ROWS_SEEN = """
SELECT coalesce(max(n_live_tup + n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = %s
"""


@cache
def _reads_plans(path: str) -> bool:
    with open(path, encoding="utf-8") as module:
        return any(word in module.read() for word in PLANS)


@cache
def pooled_test(function: Callable[..., Any]) -> bool:
    """Whether a test function takes its schema from the pool: not if its own text (its
    arguments included) names one of `POOL_EXEMPT`, nor if its module reads plans."""
    if _reads_plans(inspect.getfile(function)):
        return False
    source = inspect.getsource(function)
    return not any(word in source for word in POOL_EXEMPT)


class SchemaPool:
    """This test process's emptied schemas, and the reference they are checked against."""

    def __init__(self, connect: Callable[[], Any], open_store: Callable[[str], None]) -> None:
        self._connect = connect
        self._open_store = open_store
        self._free: list[str] = []
        self._reference: str | None = None
        self._served: dict[str, int] = {}
        self._connection: Any = None
        self._shape: tuple[int, ...] | None = None
        self._tables: list[str] = []
        self._identities: list[str] = []
        self._seeds: dict[str, str] = {}

    def take(self) -> str:
        """A migrated, empty schema: one handed back, or a new one."""
        if self._reference is None:
            self._reference = self._migrated()
            with self._connect() as connection:
                self._learn(connection, self._reference)
        return self._free.pop() if self._free else self._migrated()

    def give_back(self, schema: str) -> None:
        """Empty `schema` for the next test if it is as the migrations left it; else drop it."""
        self._served[schema] = self._served.get(schema, 0) + 1
        # One connection for the process: its cache of the tables' catalog entries stays warm.
        if self._connection is None or self._connection.closed:
            self._connection = self._connect()
        connection = self._connection
        if self._served[schema] < REUSES and self._reset(connection, schema):
            self._free.append(schema)
            return
        del self._served[schema]
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def close(self) -> None:
        """Drop every schema this pool holds, the reference too."""
        held = [*self._free, *([self._reference] if self._reference else [])]
        self._free, self._reference = [], None
        if self._connection is not None:
            self._connection.close()
        if held:
            with self._connect() as connection:
                for schema in held:
                    connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def _migrated(self) -> str:
        schema = f"test_{uuid.uuid4().hex}"
        self._open_store(schema)
        return schema

    def _learn(self, connection: Any, reference: str) -> None:
        """The reference's shape, its tables and identities, and what migrations wrote."""
        self._shape = connection.execute(SHAPE, (reference,)).fetchone()
        self._tables = [
            name
            for (name,) in connection.execute(
                "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')"
                " AND relnamespace = %s::regnamespace ORDER BY relname",
                (reference,),
            )
        ]
        self._identities = [
            f"{table}.{column}"
            for table, column in connection.execute(
                "SELECT c.relname, a.attname FROM pg_attribute AS a"
                " JOIN pg_class AS c ON c.oid = a.attrelid"
                " WHERE c.relnamespace = %s::regnamespace AND a.attidentity <> ''",
                (reference,),
            )
        ]
        for table in self._tables:
            holds = f"SELECT EXISTS (SELECT FROM {reference}.{table})"
            if connection.execute(holds).fetchone()[0]:
                columns = connection.execute(
                    "SELECT string_agg(attname, ', ' ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
                    " AND attgenerated = ''",
                    (f"{reference}.{table}",),
                ).fetchone()[0]
                self._seeds[table] = columns

    def _reset(self, connection: Any, schema: str) -> bool:
        """Empty `schema` and seed it as a fresh one, if its shape is the reference's and no
        other session holds a lock on it; whether it was."""
        if connection.execute(SHAPE, (schema,)).fetchone() != self._shape:
            return False
        if connection.execute(ROWS_SEEN, (schema,)).fetchone()[0] > DEAD_ROWS:
            return False
        # Rows, not files: a DELETE of a test's few rows costs a fraction of a TRUNCATE,
        # which makes new files for every table and index. Foreign keys are not checked
        # while every table empties (replica role).
        statements = [
            "SET LOCAL lock_timeout = '2s'",
            "SET LOCAL session_replication_role = replica",
            *(f"DELETE FROM {schema}.{table}" for table in self._tables),
            *(
                f"SELECT setval(pg_get_serial_sequence('{schema}.{table}', '{column}'), 1, false)"
                for table, column in (name.split(".") for name in self._identities)
            ),
            *(
                f"INSERT INTO {schema}.{table} ({columns}) OVERRIDING SYSTEM VALUE"
                f" SELECT {columns} FROM {self._reference}.{table}"
                for table, columns in self._seeds.items()
            ),
        ]
        try:
            with connection.transaction():
                connection.execute("; ".join(statements))
        except Exception:
            return False
        return True
