"""Contract: the performance shape — every hot statement is served by the index meant for it.

DESIGN.md promises that catalog, transcript, event and execution pages are keyset queries
(cost grows with the page, not the table) and that loading the latest checkpoint is one
indexed read. These tests fill a store through the public API (300 sessions of three owners,
30 forks, and one session with 500 saves carrying transcript batches, executions and
streamed events), take the backend's real statements (through `statement_sql`) and read
their query plans. One table, `PLAN_CASES`, names each hot statement, its parameters, and the
index and key bounds it must be served by:

- SQLite: `EXPLAIN QUERY PLAN` on the store's file, without `ANALYZE` (the store never runs
  it, so these are the plans a real store gets). A statement must `SEARCH` the intended index
  with the intended key constraint (an unbounded `SCAN … USING INDEX` is allowed only for the
  first page of a whole-table order, which `LIMIT` stops), never `SCAN` a table without an
  index, and never `USE TEMP B-TREE FOR ORDER BY`.
- PostgreSQL: `ANALYZE` first, then `EXPLAIN (FORMAT JSON)` with the real parameters, the
  custom plan the store gets. On tables this small the planner may legitimately prefer a
  sequential scan, or a bitmap scan plus a sort (the big session holds about half of some
  tables; a tenth of the catalog is cheaper to read whole and sort than to walk in order).
  When the real plan is not the intended one, the statement is planned again on one
  connection with `SET enable_seqscan = off` and `SET enable_sort = off` — which make those
  nodes prohibitively expensive, not impossible — and that plan must be an Index Scan
  (possibly Backward) or Index Only Scan of the intended index, with the keyset bounds in its
  Index Cond and no Sort node: proof that the index serves the query in order, so its cost
  follows the page once the tables are large. Statements without an order to keep (deletes,
  one-row lookups, the tree walk) may also read the index through a Bitmap Index Scan.

Long-term memory (10,000 items in 500 namespaces) is held to the real plans alone, never a
forced one: a search's page under a namespace prefix reads `memory_items` only through two
ranges of its (namespace, item_key) key's unique index (the primary key; on SQLite from schema
11 a unique constraint's): the prefix's own namespace and the namespaces below it, then sorts
those few rows; `get` is one lookup of that index. On PostgreSQL both the custom plan and the
generic plan a prepared statement switches to are checked, after `ANALYZE`.
"""

from __future__ import annotations

import importlib
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import turnstore
from conftest import (
    BACKENDS,
    Database,
    postgres_connection,
    postgres_store_url,
    require_postgres,
)
from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    SessionContext,
    TimestampedEvent,
)
from turnstore.engine.protocol import Dialect, Query, Statements
from turnstore.events import (
    AgentMessageContentDeltaEvent,
    AgentReasoningContentDeltaEvent,
    ModelStepCompleted,
    ModelStepCompletedEvent,
    ModelStepFailed,
    ModelStepStartedEvent,
    TokenCountEvent,
    TokenUsage,
    TurnCompleteEvent,
    TurnStartedEvent,
    WarningEvent,
)
from turnstore.records.memory import SEPARATOR, MemoryCall, MemoryPut, namespace_text

SESSIONS = 300
FORKS = 30
BIG = "big-session"
BIG_SAVES = 500
PAGE = 50
BEFORE = 250
"""The continuation cursor into the big session's journals: a sequence in the middle."""
FAILED_STEP = f"step-{BEFORE}"
"""A model step of the big session that failed, so its streamed deltas stay journaled."""
SMALL_OWNER = "owner-c"
"""The owner the owner-filtered pages ask for: it holds a tenth of the catalog."""
PRIMARY_KEY = "primary key"
"""Stands for a table's primary-key index, whatever the backend calls it."""
CATALOG_ORDER = ("updated_at", "latest_sequence", "session_id")
PREFIX_RANGE = ("session-0", "session-1")
"""The id range of the prefix `session-0`: a third of the catalog."""
NARROW_RANGE = ("session-00", "session-01")
"""The id range of the prefix `session-00`: ten sessions, few enough to read whole."""

Term = tuple[str | tuple[str, ...], str]
"""One bound the index must apply: a column (or a row of columns) and its operator."""
MEMORY_USERS = 500
MEMORY_PER_USER = 20
"""Memory items: 10,000 in 500 namespaces, so a prefix's rows are a sliver of the table."""
MEMORY_PREFIX = namespace_text(("users", "u042"))
"""The searched prefix: its own namespace holds nothing, the one below it 20 items."""
MEMORY_NAMESPACE = namespace_text(("users", "u042", "memories"))


# --- the data ----------------------------------------------------------------------------------


def _owner(index: int) -> str:
    """Seven sessions in ten belong to owner-a, two to owner-b, one to owner-c."""
    slot = index % 10
    return "owner-a" if slot < 7 else "owner-b" if slot < 9 else SMALL_OWNER


def _stamped(recorded_at_ms: int, msg: Any) -> TimestampedEvent:
    return TimestampedEvent(recorded_at_ms=recorded_at_ms, event=Event(msg=msg))


def _finish_turn(checkpoint: Checkpoint, turn_id: str, started_at_ms: int) -> Any:
    checkpoint.active_execution = ActiveExecution(
        submission_id=f"submission-{turn_id}", turn_id=turn_id, started_at_ms=started_at_ms
    )
    return checkpoint.finish_execution("completed", started_at_ms + 5)


def _fill_small_session(store: turnstore.BlockingStore, index: int) -> None:
    """Two saves, each with a transcript batch, an execution, a warning and a token count."""
    checkpoint = Checkpoint(
        session_id=f"session-{index:03d}",
        session_context=SessionContext(owner_id=_owner(index)),
        first_user_message=f"hello {index}",
    )
    for sequence in (1, 2):
        checkpoint.sequence = sequence
        checkpoint.context.append({"role": "user", "content": f"message {sequence}"})
        execution = _finish_turn(checkpoint, f"turn-{sequence}", index * 1_000 + sequence)
        events = [
            _stamped(sequence, WarningEvent(message=f"warning {sequence}")),
            _stamped(sequence, TokenCountEvent(total_usage=TokenUsage())),
        ]
        store.save_with_events(checkpoint, [{"text": f"batch {sequence}"}], execution, events)


def _fill_big_session(store: turnstore.BlockingStore) -> None:
    """500 saves: one turn each, whose model step streams two deltas and then completes.

    Every fifth step fails, so its deltas stay in the journal as an interrupted step's would.
    """
    checkpoint = Checkpoint(session_id=BIG, session_context=SessionContext(owner_id="owner-a"))
    for sequence in range(1, BIG_SAVES + 1):
        checkpoint.sequence = sequence
        checkpoint.context.append({"role": "assistant", "content": f"answer {sequence}"})
        turn, step = f"turn-{sequence}", f"step-{sequence}"
        execution = _finish_turn(checkpoint, turn, 10_000_000 + sequence)
        ids = {"session_id": BIG, "turn_id": turn, "model_step_id": step}
        outcome = ModelStepFailed(message="boom") if sequence % 5 == 0 else None
        events = [
            _stamped(sequence, TurnStartedEvent(turn_id=turn)),
            _stamped(sequence, ModelStepStartedEvent(**ids, step_index=0, started_at_ms=sequence)),
            _stamped(sequence, AgentReasoningContentDeltaEvent(**ids, delta="thinking")),
            _stamped(
                sequence, AgentMessageContentDeltaEvent(**ids, delta="answer", phase="final_answer")
            ),
            _stamped(
                sequence,
                ModelStepCompletedEvent(
                    **ids,
                    step_index=0,
                    started_at_ms=sequence,
                    completed_at_ms=sequence + 1,
                    outcome=outcome or ModelStepCompleted(end_turn=True),
                ),
            ),
            _stamped(sequence, TokenCountEvent(total_usage=TokenUsage())),
            _stamped(sequence, TurnCompleteEvent(turn_id=turn)),
        ]
        store.save_with_events(checkpoint, [{"text": f"batch {sequence}"}], execution, events)


def _fill_memory(store: turnstore.BlockingStore) -> None:
    """Every user's namespace `users.uNNN.memories`, its items under keys m0..m19."""
    for first in range(0, MEMORY_USERS, 50):
        writes = tuple(
            MemoryPut(("users", f"u{user:03d}", "memories"), f"m{key}", "{}", None, "users")
            for user in range(first, first + 50)
            for key in range(MEMORY_PER_USER)
        )
        store.memory.run(MemoryCall(writes=writes))


def _fill(url: str) -> None:
    with turnstore.open_blocking(url) as store, ThreadPoolExecutor(8) as pool:
        memory = pool.submit(_fill_memory, store)
        big = pool.submit(_fill_big_session, store)
        list(pool.map(lambda index: _fill_small_session(store, index), range(SESSIONS)))
        for index in range(FORKS):
            store.fork(f"session-{index:03d}", 1, Checkpoint.empty(f"fork-{index:03d}"))
        big.result()
        memory.result()


# --- where a backend keeps its statements -----------------------------------------------------


def _dialect(backend: str) -> Dialect:
    if backend == "sqlite":
        from turnstore.backends.sqlite.engine import SQLITE

        return SQLITE
    from turnstore.backends.postgres.engine import POSTGRES

    return POSTGRES


def statement_sql(backend: str, name: str) -> str:
    """The SQL text of statement `module.attribute` of `turnstore.scripts`, for `backend`.

    Each module there keeps one `Statements` table; the dialect formats it once.
    """
    module_name, _, attribute = name.partition(".")
    module = importlib.import_module(f"turnstore.scripts.{module_name}")
    (table,) = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Statements)
        and value is not Statements
        and value.__module__ == module.__name__
    ]
    statement = getattr(_dialect(backend).statements(table), attribute)
    sql = statement.sql if isinstance(statement, Query) else statement
    assert isinstance(sql, str), name
    return sql


def id_list(backend: str, ids: list[str]) -> object:
    """The parameter a backend's statements take for a list of session ids."""
    return _dialect(backend).id_list(ids)


# --- reading plans -----------------------------------------------------------------------------


class Plans:
    """A filled store of one backend, and sample parameters."""

    backend: str

    def __init__(self, database: Database) -> None:
        self.database = database
        catalog = f"SELECT {', '.join(CATALOG_ORDER)} FROM sessions"
        order = f" ORDER BY {' DESC, '.join(CATALOG_ORDER)} DESC LIMIT 1 OFFSET ?"
        (self.catalog_cursor,) = database.query(catalog + order, (100,))
        (self.owner_cursor,) = database.query(
            catalog + " WHERE owner_id = ?" + order, (SMALL_OWNER, 10)
        )
        ((self.latest_token_count,),) = database.query(
            "SELECT MAX(sequence) FROM event_journal"
            " WHERE session_id = ? AND event_kind = 'token_count'",
            (BIG,),
        )
        assert self.latest_token_count is not None
        deltas = database.count(
            "event_journal", "model_step_id = ? AND stream_phase IS NOT NULL", (FAILED_STEP,)
        )
        assert deltas == 2, "the failed step keeps its two deltas"
        (self.memory_cursor,) = database.query(
            "SELECT updated_at_ms, namespace, item_key FROM memory_items WHERE namespace = ?"
            " ORDER BY updated_at_ms DESC, namespace DESC, item_key DESC LIMIT 1 OFFSET 4",
            (MEMORY_NAMESPACE,),
        )

    def check_ranges(
        self,
        statement: str,
        params: Sequence[Any],
        *,
        table: str,
        key: tuple[str, ...],
        ranges: Sequence[Sequence[Term]],
    ) -> None:
        """Assert the real plan reads `table` only through the unique index of `key` (its
        primary key or a unique constraint's), in `ranges`: each one, and no other read."""
        raise NotImplementedError

    def check(
        self,
        statement: str,
        params: Sequence[Any],
        *,
        table: str,
        index: str,
        bounds: Sequence[Term] = (),
        ordered: bool = True,
    ) -> None:
        """Assert `statement` reads `table` through `index`, bounded by `bounds`.

        `ordered`: the index also delivers the statement's order, so nothing is sorted.
        """
        raise NotImplementedError


class SqlitePlans(Plans):
    backend = "sqlite"

    def _index_words(self, table: str, index: str) -> str:
        if index != PRIMARY_KEY:
            return f"INDEX {index}"
        ((schema,),) = self.database.query(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)
        )
        if "WITHOUT ROWID" in schema.upper():
            return "PRIMARY KEY"
        # A rowid table's non-integer primary key is a separate automatic index.
        (name,) = [
            row[1] for row in self.database.query(f"PRAGMA index_list({table})") if row[3] == "pk"
        ]
        return f"INDEX {name}"

    def plan(self, statement: str, params: Sequence[Any]) -> list[str]:
        """The detail lines of `EXPLAIN QUERY PLAN`."""
        return [
            row[3] for row in self.database.query("EXPLAIN QUERY PLAN " + statement, tuple(params))
        ]

    def check(self, statement, params, *, table, index, bounds=(), ordered=True):
        plan = self.plan(statement, params)
        shown = "\n  ".join([statement, *plan])
        tables = {row[0] for row in self.database.query("SELECT name FROM sqlite_schema")}
        full_scans = [line for line in plan if line.removeprefix("SCAN ") in tables | {table}]
        assert not full_scans, f"a table is scanned without an index:\n  {shown}"
        if ordered:
            assert not any(line.startswith("USE TEMP B-TREE") for line in plan), shown
        reads = [line for line in plan if re.match(rf"(SEARCH|SCAN) {table}\b", line)]
        assert len(reads) == 1, shown
        using = re.escape(self._index_words(table, index))
        match = re.fullmatch(
            rf"(SEARCH|SCAN) {table} USING (?:COVERING )?{using}(?: \((.*)\))?", reads[0]
        )
        assert match is not None, f"{index} is not used:\n  {shown}"
        if bounds:
            assert match[1] == "SEARCH", f"{index} is not searched by key:\n  {shown}"
            constraint = match[2] or ""
            assert constraint.startswith(_sqlite_bounds(bounds)), f"unbounded read:\n  {shown}"

    def _key_index_words(self, table: str, key: tuple[str, ...]) -> str:
        """How the plan names the unique index of exactly the columns `key`."""
        for row in self.database.query(f"PRAGMA index_list({table})"):
            columns = tuple(info[2] for info in self.database.query(f"PRAGMA index_info({row[1]})"))
            if row[2] and columns == key:
                return f"INDEX {row[1]}"
        return self._index_words(table, PRIMARY_KEY)  # a WITHOUT ROWID table's own key

    def check_ranges(self, statement, params, *, table, key, ranges):
        plan = self.plan(statement, params)
        shown = "\n  ".join([statement, *plan])
        using = re.escape(self._key_index_words(table, key))
        reads = [line for line in plan if re.match(rf"(SEARCH|SCAN) {table}\b", line)]
        found = [re.fullmatch(rf"SEARCH {table} USING {using} \((.*)\)", line) for line in reads]
        assert all(found), f"{table} is read other than by its key's index:\n  {shown}"
        wanted = sorted(_sqlite_bounds(bounds) for bounds in ranges)
        assert sorted(match[1] for match in found if match) == wanted, shown


def _sqlite_bounds(bounds: Sequence[Term]) -> str:
    def term(column: str | tuple[str, ...], op: str) -> str:
        # EXPLAIN QUERY PLAN shows a range's bound without its equality: `>=` as `>`.
        op = op.rstrip("=") or op
        if isinstance(column, str):
            return f"{column}{op}?"
        return f"({','.join(column)}){op}({','.join('?' * len(column))})"

    return " AND ".join(term(column, op) for column, op in bounds)


class PostgresPlans(Plans):
    backend = "postgres"

    def plan(self, statement: str, params: Sequence[Any], *, forced: bool) -> dict[str, Any]:
        """The JSON plan's root node, planned on one connection (with seqscan and sort off)."""
        with postgres_connection(self.database.schema) as connection:
            if forced:
                connection.execute("SET enable_seqscan = off")
                connection.execute("SET enable_sort = off")
            row = connection.execute("EXPLAIN (FORMAT JSON) " + statement, tuple(params)).fetchone()
        assert row is not None
        root: dict[str, Any] = row[0][0]["Plan"]
        return root

    def check(self, statement, params, *, table, index, bounds=(), ordered=True):
        index = f"{table}_pkey" if index == PRIMARY_KEY else index
        real = self.plan(statement, params, forced=False)
        if not _pg_problems(real, table, index, bounds, ordered):
            return
        forced = self.plan(statement, params, forced=True)
        problems = _pg_problems(forced, table, index, bounds, ordered)
        assert not problems, (
            f"{statement}\nreal plan:\n{_pg_show(real)}\n"
            f"plan with enable_seqscan and enable_sort off:\n{_pg_show(forced)}\n"
            + "\n".join(problems)
        )

    def check_ranges(self, statement, params, *, table, key, ranges):
        # The unique index on exactly `key`, found from this schema's table alone: a filter on
        # `pg_indexes.indexdef` may run `pg_get_indexdef` over every index in the database
        # before the schema filter, and fail on one another test process has just dropped.
        ((index,),) = self.database.query(
            "SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid"
            " WHERE x.indrelid = to_regclass(%s) AND x.indisunique"
            " AND ARRAY(SELECT a.attname::text FROM unnest(x.indkey::int2[]) WITH ORDINALITY"
            " AS k(attnum, place) JOIN pg_attribute a ON a.attrelid = x.indrelid"
            " AND a.attnum = k.attnum ORDER BY k.place) = %s::text[]",
            (table, list(key)),
        )
        for generic in (False, True):
            root = (
                self.generic_plan(statement, params)
                if generic
                else self.plan(statement, params, forced=False)
            )
            problems = _pg_range_problems(root, table, index, ranges)
            kind = "generic" if generic else "custom"
            assert not problems, f"{statement}\n{kind} plan:\n{_pg_show(root)}\n" + "\n".join(
                problems
            )

    def generic_plan(self, statement: str, params: Sequence[Any]) -> dict[str, Any]:
        """The plan a prepared statement gets once PostgreSQL stops planning it per call."""
        from psycopg import sql

        numbered = iter(range(1, len(params) + 1))
        text = re.sub("%s", lambda _: f"${next(numbered)}", statement)
        types = ", ".join("bigint" if isinstance(value, int) else "text" for value in params)
        values = sql.SQL(", ").join(sql.Literal(value) for value in params)
        with postgres_connection(self.database.schema) as connection:
            connection.execute("SET plan_cache_mode = force_generic_plan")
            connection.execute(f"PREPARE page({types}) AS {text}")
            explain = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE page({})").format(values)
            row = connection.execute(explain).fetchone()
        assert row is not None
        root: dict[str, Any] = row[0][0]["Plan"]
        return root


def _pg_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _pg_nodes(child)


def _pg_show(node: dict[str, Any], depth: int = 0) -> str:
    keys = ("Relation Name", "Index Name", "Scan Direction", "Index Cond", "Filter", "Sort Key")
    details = ", ".join(f"{key}: {node[key]}" for key in keys if key in node)
    lines = [f"{'  ' * depth}{node['Node Type']} ({details})"]
    lines.extend(_pg_show(child, depth + 1) for child in node.get("Plans", ()))
    return "\n".join(lines)


def _pg_bound(column: str | tuple[str, ...], op: str) -> str:
    if isinstance(column, str):
        return f"{column} {op} "
    return f"ROW({', '.join(column)}) {op} ROW("


def _pg_problems(
    root: dict[str, Any], table: str, index: str, bounds: Sequence[Term], ordered: bool
) -> list[str]:
    nodes = list(_pg_nodes(root))
    problems = [
        f"sequential scan of {node['Relation Name']}"
        for node in nodes
        if node["Node Type"] == "Seq Scan"
    ]
    if ordered:
        problems.extend(
            f"{node['Node Type']} node" for node in nodes if "Sort" in node["Node Type"]
        )
    kinds = ("Index Scan", "Index Only Scan") + (() if ordered else ("Bitmap Index Scan",))
    scans = [node for node in nodes if node.get("Index Name") == index]
    if not scans:
        return [*problems, f"{index} is not used"]
    for scan in scans:
        if scan["Node Type"] not in kinds:
            problems.append(f"{index} is read by a {scan['Node Type']}, not {' or '.join(kinds)}")
        condition = scan.get("Index Cond", "")
        problems.extend(
            f"{_pg_bound(column, op).strip()} is not in the Index Cond of {index}"
            for column, op in bounds
            if _pg_bound(column, op) not in condition
        )
    return problems


def _pg_range_problems(
    root: dict[str, Any], table: str, index: str, ranges: Sequence[Sequence[Term]]
) -> list[str]:
    nodes = list(_pg_nodes(root))
    problems = [f"{node['Node Type']} node" for node in nodes if node["Node Type"] == "Seq Scan"]
    reads = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
    problems += [
        f"{node['Node Type']} of {node.get('Index Name', node.get('Relation Name'))}"
        for node in nodes
        if (node.get("Relation Name") == table or "Index Name" in node)
        and not (node["Node Type"] in reads and node.get("Index Name") == index)
        and node["Node Type"] != "Bitmap Heap Scan"
    ]
    conditions = [node.get("Index Cond", "") for node in nodes if node.get("Index Name") == index]

    def within(condition: str, bounds: Sequence[Term]) -> bool:
        return all(_pg_bound(column, op) in condition for column, op in bounds)

    problems += [
        f"no read of {index} by {bounds}"
        for bounds in ranges
        if not any(within(condition, bounds) for condition in conditions)
    ]
    problems += [
        f"{index} read by {condition!r}, none of the ranges"
        for condition in conditions
        if not any(within(condition, bounds) for bounds in ranges)
    ]
    return problems


@pytest.fixture(scope="module", params=BACKENDS)
def plans(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plans]:
    """A store of each backend filled once for the module."""
    backend = str(request.param)
    if backend == "sqlite":
        path = tmp_path_factory.mktemp("plans") / "turnstore.sqlite3"
        _fill(str(path))
        yield SqlitePlans(Database(backend, path, ""))
        return
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    try:
        _fill(postgres_store_url(schema))
        database = Database(backend, Path(), schema)
        tables = (
            "sessions, context_chunks, transcript_delta, execution_journal, event_journal,"
            " memory_items"
        )
        database.query(f"ANALYZE {tables}")
        yield PostgresPlans(database)
    finally:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# --- the hot statements ------------------------------------------------------------------------


class PlanCase(NamedTuple):
    """A hot statement and the index that must serve it."""

    rule: str
    """The rule, in one line."""
    statement: str
    """The statement's name, for `statement_sql`."""
    params: Callable[[Plans], Sequence[Any]]
    """Its parameters, from the filled store."""
    table: str | dict[str, str]
    """The table read through `index`, or that table's name per backend."""
    index: str
    bounds: Sequence[Term] = ()
    """The keyset bounds the index must apply."""
    ordered: bool = True
    """The index also delivers the statement's order, so nothing is sorted."""


JOURNAL_FIRST: tuple[Term, ...] = (("session_id", "="),)
JOURNAL_NEXT: tuple[Term, ...] = (("session_id", "="), ("sequence", "<"))
STEP: tuple[Term, ...] = (("session_id", "="), ("model_step_id", "="))


def _case(case_id: str, *fields: Any, **options: Any) -> Any:
    return pytest.param(PlanCase(*fields, **options), id=case_id)


PLAN_CASES = [
    # journals
    _case(
        "transcript-first-page",
        "The transcript's first page is a backward range scan of transcript_delta's primary key.",
        "journals.transcript_first_page",
        lambda plans: (BIG, PAGE),
        "transcript_delta",
        PRIMARY_KEY,
        JOURNAL_FIRST,
    ),
    _case(
        "transcript-continuation-page",
        "The transcript's continuation page is a primary-key range scan bounded by the cursor.",
        "journals.transcript_next_page",
        lambda plans: (BIG, BEFORE, PAGE),
        "transcript_delta",
        PRIMARY_KEY,
        JOURNAL_NEXT,
    ),
    _case(
        "event-first-page",
        "The event journal's first page is a backward range scan of event_journal's primary key.",
        "journals.event_first_page",
        lambda plans: (BIG, PAGE),
        "event_journal",
        PRIMARY_KEY,
        JOURNAL_FIRST,
    ),
    _case(
        "event-continuation-page",
        "The event journal's continuation page is a primary-key range scan bounded by the cursor.",
        "journals.event_next_page",
        lambda plans: (BIG, BEFORE, PAGE),
        "event_journal",
        PRIMARY_KEY,
        JOURNAL_NEXT,
    ),
    _case(
        "events-after",
        "Events after a cursor are a forward primary-key range scan bounded by the cursor.",
        "journals.events_after",
        lambda plans: (BIG, BEFORE, PAGE),
        "event_journal",
        PRIMARY_KEY,
        (("session_id", "="), ("sequence", ">")),
    ),
    _case(
        "batches-newest",
        "The newest event batches are a backward range scan of event_batches' primary key.",
        "journals.batches_newest",
        lambda plans: (BIG, 16),
        "event_batches",
        PRIMARY_KEY,
        JOURNAL_FIRST,
    ),
    _case(
        "batches-before",
        "Event batches before a cursor are a primary-key range scan bounded by the cursor.",
        "journals.batches_before",
        lambda plans: (BIG, BEFORE, 16),
        "event_batches",
        PRIMARY_KEY,
        (("session_id", "="), ("first_sequence", "<")),
    ),
    _case(
        "batch-holding",
        "The batch holding a forward cursor is a backward primary-key range scan bounded by it.",
        "journals.batch_holding",
        lambda plans: (BIG, BEFORE),
        "event_batches",
        PRIMARY_KEY,
        (("session_id", "="), ("first_sequence", "<=")),
    ),
    _case(
        "batches-after",
        "Event batches after a cursor are a forward primary-key range scan bounded by it.",
        "journals.batches_after",
        lambda plans: (BIG, BEFORE, 16),
        "event_batches",
        PRIMARY_KEY,
        (("session_id", "="), ("first_sequence", ">")),
    ),
    _case(
        "execution-first-page",
        "The execution journal's first page is a backward range scan of its primary key.",
        "journals.execution_first_page",
        lambda plans: (BIG, PAGE),
        "execution_journal",
        PRIMARY_KEY,
        JOURNAL_FIRST,
    ),
    _case(
        "execution-continuation-page",
        "The execution journal's continuation page is a primary-key range scan from the cursor.",
        "journals.execution_next_page",
        lambda plans: (BIG, BEFORE, PAGE),
        "execution_journal",
        PRIMARY_KEY,
        JOURNAL_NEXT,
    ),
    _case(
        "recent-executions",
        "Recent executions across sessions are the head of execution_journal_recent_idx.",
        "journals.recent_executions",
        lambda plans: (PAGE,),
        "execution_journal",
        "execution_journal_recent_idx",
    ),
    _case(
        "owner-recent-executions",
        "An owner's recent executions walk execution_journal_recent_idx in order, to LIMIT.",
        "journals.owner_recent_executions",
        lambda plans: (SMALL_OWNER, PAGE),
        "execution_journal",
        "execution_journal_recent_idx",
    ),
    # catalog
    _case(
        "catalog-first-page",
        "The catalog's first page is the head of sessions_recent_idx, in index order.",
        "sessions.first_page",
        lambda plans: (PAGE,),
        "sessions",
        "sessions_recent_idx",
    ),
    _case(
        "catalog-continuation-page",
        "The catalog's continuation page is an index range scan of sessions_recent_idx.",
        "sessions.next_page",
        lambda plans: (*plans.catalog_cursor, PAGE),
        "sessions",
        "sessions_recent_idx",
        ((CATALOG_ORDER, "<"),),
    ),
    _case(
        "owner-catalog-first-page",
        "An owner's first catalog page is an index range scan of sessions_owner_recent_idx.",
        "sessions.owner_first_page",
        lambda plans: (SMALL_OWNER, PAGE),
        "sessions",
        "sessions_owner_recent_idx",
        (("owner_id", "="),),
    ),
    _case(
        "owner-catalog-continuation-page",
        "An owner's continuation page is a sessions_owner_recent_idx range bounded by the cursor.",
        "sessions.owner_next_page",
        lambda plans: (SMALL_OWNER, *plans.owner_cursor, PAGE),
        "sessions",
        "sessions_owner_recent_idx",
        (("owner_id", "="), (CATALOG_ORDER, "<")),
    ),
    # Sessions' state by id prefix (ADK's list_sessions): the sessions' key, in order.
    _case(
        "session-states-page",
        "Sessions' state by id prefix walks the sessions' primary key within the range.",
        "checkpoints.sessions_state",
        lambda plans: ("record", *PREFIX_RANGE, "", PAGE),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">"), ("session_id", "<")),
    ),
    # A wide id prefix filters the catalog's order as it is walked: no sort of every match.
    _case(
        "prefix-catalog-first-page",
        "An id prefix's first catalog page walks sessions_recent_idx in order, to LIMIT.",
        "sessions.prefix_first_page",
        lambda plans: (*PREFIX_RANGE, PAGE),
        "sessions",
        "sessions_recent_idx",
    ),
    _case(
        "prefix-catalog-continuation-page",
        "An id prefix's continuation page is a sessions_recent_idx range from the cursor.",
        "sessions.prefix_next_page",
        lambda plans: (*PREFIX_RANGE, *plans.catalog_cursor, PAGE),
        "sessions",
        "sessions_recent_idx",
        ((CATALOG_ORDER, "<"),),
    ),
    _case(
        "owner-prefix-catalog-first-page",
        "An owner's id-prefix page is a sessions_owner_recent_idx range of that owner.",
        "sessions.owner_prefix_first_page",
        lambda plans: (SMALL_OWNER, *PREFIX_RANGE, PAGE),
        "sessions",
        "sessions_owner_recent_idx",
        (("owner_id", "="),),
    ),
    _case(
        "owner-prefix-catalog-continuation-page",
        "An owner's id-prefix continuation is a sessions_owner_recent_idx range from the cursor.",
        "sessions.owner_prefix_next_page",
        lambda plans: (SMALL_OWNER, *PREFIX_RANGE, *plans.owner_cursor, PAGE),
        "sessions",
        "sessions_owner_recent_idx",
        (("owner_id", "="), (CATALOG_ORDER, "<")),
    ),
    # A narrow id prefix reads its few ids whole through the primary key, then sorts them.
    _case(
        "narrow-prefix-count",
        "Counting a prefix's ids (to NARROW_PREFIX + 1) is a primary-key range of the prefix.",
        "sessions.prefix_probe",
        lambda plans: (*PREFIX_RANGE, 2001),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">="), ("session_id", "<")),
        ordered=False,
    ),
    _case(
        "narrow-prefix-catalog-first-page",
        "A narrow id prefix's first page is a primary-key range of the prefix, sorted.",
        "sessions.narrow_first_page",
        lambda plans: (*NARROW_RANGE, PAGE),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">="), ("session_id", "<")),
        ordered=False,
    ),
    _case(
        "narrow-prefix-catalog-continuation-page",
        "A narrow id prefix's continuation page is the same primary-key range, sorted.",
        "sessions.narrow_next_page",
        lambda plans: (*NARROW_RANGE, *plans.catalog_cursor, PAGE),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">="), ("session_id", "<")),
        ordered=False,
    ),
    _case(
        "owner-narrow-prefix-catalog-first-page",
        "An owner's narrow id-prefix page is a primary-key range of the prefix, sorted.",
        "sessions.owner_narrow_first_page",
        lambda plans: (*NARROW_RANGE, SMALL_OWNER, PAGE),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">="), ("session_id", "<")),
        ordered=False,
    ),
    _case(
        "owner-narrow-prefix-catalog-continuation-page",
        "An owner's narrow id-prefix continuation is the same primary-key range, sorted.",
        "sessions.owner_narrow_next_page",
        lambda plans: (*NARROW_RANGE, SMALL_OWNER, *plans.owner_cursor, PAGE),
        "sessions",
        PRIMARY_KEY,
        (("session_id", ">="), ("session_id", "<")),
        ordered=False,
    ),
    # retention: each prune batch continues down the catalog's index from the last one
    _case(
        "prune-batch",
        "A prune batch is a sessions_recent_idx range below the last batch's root.",
        "upkeep.old_roots",
        lambda plans: (2**40, *plans.catalog_cursor, PAGE),
        "sessions",
        "sessions_recent_idx",
        (("updated_at", "<"),),
    ),
    _case(
        "owner-prune-batch",
        "An owner's prune batch is a sessions_owner_recent_idx range of that owner.",
        "upkeep.old_owner_roots",
        lambda plans: (SMALL_OWNER, 2**40, *plans.owner_cursor, PAGE),
        "sessions",
        "sessions_owner_recent_idx",
        (("owner_id", "="),),
    ),
    # loading and saving
    _case(
        "load-checkpoint-row",
        "Loading the latest checkpoint reads one sessions row through its primary key.",
        "checkpoints.stored",
        lambda plans: (BIG,),
        "sessions",
        PRIMARY_KEY,
        (("session_id", "="),),
        ordered=False,
    ),
    _case(
        "load-context-chunks",
        "A checkpoint's context chunks are one context_chunks primary-key range, in order.",
        "checkpoints.chunks",
        lambda plans: (BIG,),
        "context_chunks",
        PRIMARY_KEY,
        (("session_id", "="),),
    ),
    # The step index is (session_id, model_step_id, event_kind, sequence, ...) and covers the
    # columns read; the statement has no ORDER BY (the caller sorts the one step's rows).
    _case(
        "step-deltas",
        "A save's completed model steps read their deltas through event_journal_step_idx.",
        "journals.step_deltas",
        lambda plans: (BIG, id_list(plans.backend, [FAILED_STEP, "step-1"])),
        "event_journal",
        "event_journal_step_idx",
        STEP,
        ordered=False,
    ),
    _case(
        "delete-step-deltas",
        "Compacting a completed step deletes its deltas through event_journal_step_idx.",
        "journals.delete_step_deltas",
        lambda plans: (BIG, FAILED_STEP),
        "event_journal",
        "event_journal_step_idx",
        STEP,
        ordered=False,
    ),
    _case(
        "delete-older-token-counts",
        "A token count deletes the older ones through the partial event_journal_token_count_idx.",
        "journals.delete_older_token_counts",
        lambda plans: (BIG, plans.latest_token_count),
        "event_journal",
        "event_journal_token_count_idx",
        (("session_id", "="), ("event_kind", "="), ("sequence", "<")),
        ordered=False,
    ),
    # deletion
    _case(
        "session-tree",
        "A session tree finds each node's children by a lookup of sessions_parent_idx.",
        "checkpoints.tree",
        lambda plans: (id_list(plans.backend, ["session-000"]),),
        # SQLite names the recursive step's table by its alias.
        {"sqlite": "child", "postgres": "sessions"},
        "sessions_parent_idx",
        (("parent_session_id", "="),),
        ordered=False,
    ),
    _case(
        "fork-tree",
        "A fork tree's rows are found by the same walk down sessions_parent_idx.",
        "transfer.tree_rows",
        lambda plans: ("session-000",),
        {"sqlite": "child", "postgres": "sessions"},
        "sessions_parent_idx",
        (("parent_session_id", "="),),
        ordered=False,
    ),
]


@pytest.mark.parametrize("case", PLAN_CASES)
def test_a_hot_statement_is_served_by_the_index_meant_for_it(plans, case):
    """The statement reads its table through its index, bounded by its keys (see `case.rule`)."""
    table = case.table if isinstance(case.table, str) else case.table[plans.backend]
    plans.check(
        statement_sql(plans.backend, case.statement),
        case.params(plans),
        table=table,
        index=case.index,
        bounds=case.bounds,
        ordered=case.ordered,
    )


# --- long-term memory: the real plans only ---------------------------------------------------


class MemoryCase(NamedTuple):
    """A memory statement and the ranges of memory_items' key it may read."""

    rule: str
    statement: str
    params: Callable[[Plans], Sequence[Any]]
    ranges: Sequence[Sequence[Term]]


UNDER = (MEMORY_PREFIX, MEMORY_PREFIX + SEPARATOR, MEMORY_PREFIX + chr(ord(SEPARATOR) + 1))
"""A search's prefix bounds: its own namespace, and the range of those below it."""
PREFIX_RANGES: tuple[tuple[Term, ...], ...] = (
    (("namespace", "="),),
    (("namespace", ">="), ("namespace", "<")),
)
KEY: tuple[tuple[Term, ...], ...] = ((("namespace", "="), ("item_key", "=")),)
SPAN = (MEMORY_PREFIX, UNDER[2], MEMORY_PREFIX, UNDER[1])
"""The catalog's prefix bounds: one range from the prefix to past the namespaces below it."""
SPAN_RANGE: tuple[tuple[Term, ...], ...] = ((("namespace", ">="), ("namespace", "<")),)


def _after(plans: Plans) -> tuple[Any, ...]:
    """The continuation page's cursor: the fifth row of the prefix's first page."""
    updated, namespace, key = plans.memory_cursor
    return (*UNDER, updated, updated, namespace, namespace, key, PAGE)


def _memory_case(case_id: str, *fields: Any) -> Any:
    return pytest.param(MemoryCase(*fields), id=case_id)


MEMORY_CASES = [
    _memory_case(
        "memory-search-first-page",
        "A search's first page reads the prefix's two key ranges, of live items, no more.",
        "memory.under_live",
        lambda plans: (*UNDER, PAGE),
        PREFIX_RANGES,
    ),
    _memory_case(
        "memory-search-continuation-page",
        "A search's next page reads the same two key ranges, whatever the cursor.",
        "memory.under_live_after",
        _after,
        PREFIX_RANGES,
    ),
    _memory_case(
        "memory-search-expired-too",
        "A search that keeps expired items reads the same two key ranges.",
        "memory.under",
        lambda plans: (*UNDER, PAGE),
        PREFIX_RANGES,
    ),
    _memory_case(
        "memory-catalog-under-a-prefix",
        "The memory catalog of a prefix reads the prefix's two key ranges, of live items.",
        "memory.catalog_under",
        lambda plans: (*SPAN, PAGE + 1),
        SPAN_RANGE,
    ),
    _memory_case(
        "memory-catalog-under-a-prefix-after-a-namespace",
        "Its next page reads the same two key ranges, past the last namespace.",
        "memory.catalog_under_after",
        lambda plans: (*SPAN, MEMORY_NAMESPACE, PAGE + 1),
        SPAN_RANGE,
    ),
    _memory_case(
        "memory-get",
        "A get is one lookup of the key's index by its namespace and key.",
        "memory.get_live",
        lambda plans: (MEMORY_NAMESPACE, "m7"),
        KEY,
    ),
]


@pytest.mark.parametrize("case", MEMORY_CASES)
def test_a_memory_read_is_served_by_its_key_alone(plans, case):
    """memory_items is read only through ranges of its key's index (see `case.rule`)."""
    plans.check_ranges(
        statement_sql(plans.backend, case.statement),
        case.params(plans),
        table="memory_items",
        key=("namespace", "item_key"),
        ranges=case.ranges,
    )
