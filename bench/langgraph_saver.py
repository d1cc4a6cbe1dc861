"""One ReAct-shaped LangGraph graph, many checkpointers, one run: turns/s, bytes, size, ratios.

python -m bench.langgraph_saver [--turns 50,200,800] [--window 20] [--size-turns 1000]
    [--savers memory,sqlite,...] [--size-all] [--postgres-url URL | --no-postgres]
    [--json PATH] [--dir DIR] [--smoke]

Why: a saver is only as fast as the graph lets it be, so every saver runs under the same
compiled agent ⇄ tools graph (`bench.peers.compile_react_graph`, four messages of about
3 KB a turn from `bench.workload.make_turn`), one `graph.invoke` per turn, one thread per
saver grown turn by turn. The savers: `InMemorySaver` (no I/O), `SqliteSaver` with the
default `add_messages` channel and with LangGraph 1.2's beta `DeltaChannel` for `messages`
(its default snapshot every 100 updates), `PostgresSaver`, and turnstore's `TurnstoreSaver`
on SQLite and on PostgreSQL (rows say "not available" until it imports). SQLite files are
WAL with synchronous=FULL, PostgreSQL commits with synchronous_commit=on.

How each number is obtained:

* turns/s at N: every saver's thread is grown to N turns, then a window of 2 x --window
  turns is timed there (wall time of `graph.invoke`), the turns alternating LangGraph's
  default durability ("async": a step's checkpoint is written while the next step runs) and
  `durability="sync"`. Both modes therefore share one thread per saver and see the same
  history. Every turn runs on every saver before the next turn, in an order rotated each
  turn, so a drift in disk speed lands on all savers alike. Reported: 1 / median seconds.
  Turns outside the windows use the default durability.
* bytes written: summed per saver over every `invoke` from turn 1, read before and after
  each. SQLite and memory savers: `write_bytes` of /proc/self/io (what this process sent
  to storage: WAL appends, checkpoints into the db file, page-granular), which counts
  LangGraph's background writer threads too because `invoke` returns only when its writes
  are done, and nothing of other processes. PostgreSQL savers: the server's WAL is shared
  by everyone on it (a test suite on the same server shows up in a plain
  `pg_current_wal_insert_lsn()` delta), so the insert LSNs around each invoke bound a
  range that `pg_walinspect` (created in the scratch database only) reads back: counted
  are the records touching the saver's own relations (tables, indexes, TOAST, full-page
  images included) and the other records of those transactions (commits). Without
  pg_walinspect the plain server-wide delta is used and the run says so. "other WAL" is
  what the server inserted meanwhile that was not the saver's: for the SQLite and memory
  savers, all of it. Ratio printed: cumulative bytes after the last --turns point / after
  the first (an append-only store's is about 800 / 50 = 16; one that rewrites the whole
  history each turn grows with the square of that).
* store size: after --size-turns turns (default 1000), the saver closed; SQLite: a
  `wal_checkpoint(TRUNCATE)` on a fresh connection, then every file in the saver's own
  directory; PostgreSQL: `pg_total_relation_size` (heap, TOAST, indexes) summed over every
  table in the saver's own schema. Divided by the raw payload: the compact JSON bytes of
  those turns' items (`Turn.payload_bytes`). Savers that rewrite the whole history every
  checkpoint (SqliteSaver and PostgresSaver on `add_messages`) take minutes and gigabytes
  per 100 turns past 800, so unless --size-all they are measured where the timing phase
  ends (about 840 turns) and say so; their ratio grows with the turn count, so this flatters
  them. InMemorySaver has no store and stops at the end of the timing phase too.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.langgraph_open import measure_open
from bench.langgraph_round_robin import THREADS, TURNS, run_round_robin
from bench.langgraph_round_robin import scratch as rr_scratch
from bench.langgraph_targets import targets
from bench.measure import ByteMeter, ProcIo, proc_io_available
from bench.peers import _Savers, build_react_graph, compile_react_graph, delta_react_state
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable
from bench.workload import Turn, make_turn

SEED = 20_240_601
"""The workload's seed: every saver is handed the same bytes."""
THREAD = "langgraph-saver-bench"
"""The one thread every saver grows."""
DEFAULT = "default"
"""LangGraph's default durability: `invoke` without `durability=` ("async" in 1.2)."""
MODES = (DEFAULT, "sync")
"""The durability modes each window alternates."""
BASELINE_MEMORY = "memory"
BASELINE_SQLITE = "sqlite"
BASELINE_LEAN = "lean"
BASELINE_POSTGRES = "postgres"
BASELINES = (
    ("vs_memory", BASELINE_MEMORY),
    ("vs_sqlite", BASELINE_SQLITE),
    ("vs_lean", BASELINE_LEAN),
    ("vs_postgres", BASELINE_POSTGRES),
)
TURNSTORE_SAVERS = ("turnstore", "turnstore-pg")
LOADS = 5
"""Loads of the latest state timed at each history length (the median is reported)."""


# --- savers ------------------------------------------------------------------------------------


@dataclass
class Places:
    """Where the run's stores live: a scratch directory and, maybe, a scratch PG database."""

    directory: Path
    database: ScratchDatabase | None
    prefix: str = ""
    """Put before each schema's name: a second workload's savers get schemas of their own."""

    def own_directory(self, name: str) -> Path:
        """A fresh directory for one saver's files, so its size is all of them."""
        path = self.directory / name
        path.mkdir()
        return path

    def schema(self, name: str) -> str:
        """A fresh schema for one saver."""
        assert self.database is not None
        return self.database.schema(f"{self.prefix}{name}")


@dataclass
class Opened:
    """An open saver and how to close it and size its store (None: no store)."""

    saver: Any
    close: Callable[[], None]
    size: Callable[[], int] | None
    schema: str | None = None
    """The PostgreSQL schema holding every relation the saver writes."""


@dataclass(frozen=True)
class SaverSpec:
    """A checkpointer the run can compare: where it stores and how to open it."""

    name: str
    label: str
    backend: str
    open: Callable[[Places], Opened]
    delta: bool = False
    rewrites_history: bool = False
    """Every checkpoint holds the whole message list: its store grows with turns squared."""


def _memory(places: Places) -> Opened:
    from langgraph.checkpoint.memory import InMemorySaver

    return Opened(InMemorySaver(), lambda: None, None)


def _sqlite(places: Places, name: str) -> Opened:
    directory = places.own_directory(name)
    saver = _Savers.sqlite(directory / "checkpoints.sqlite3")
    return Opened(saver, saver.conn.close, lambda: sqlite_store_size(directory))


def _postgres(places: Places, name: str) -> Opened:
    assert places.database is not None
    database, schema = places.database, places.schema(name)
    saver = _Savers.postgres(database.libpq_url(schema))
    return Opened(saver, saver.conn.close, lambda: database.size(schema), schema)


def _lean(places: Places) -> Opened:
    from bench.lean_saver import LeanSaver

    directory = places.own_directory("lean")
    saver = LeanSaver(directory / "lean.sqlite3")
    return Opened(saver, saver.close, lambda: sqlite_store_size(directory))


def _turnstore_sqlite(places: Places) -> Opened:
    from turnstore.integrations.langgraph import TurnstoreSaver

    directory = places.own_directory("turnstore")
    saver = TurnstoreSaver(str(directory / "turnstore.sqlite3"))
    return Opened(saver, saver.close, lambda: sqlite_store_size(directory))


def _turnstore_pg(places: Places) -> Opened:
    from turnstore.integrations.langgraph import TurnstoreSaver

    assert places.database is not None
    database, schema = places.database, places.schema("turnstore_pg")
    saver = TurnstoreSaver(database.turnstore_url(schema))
    return Opened(saver, saver.close, lambda: database.size(schema), schema)


def saver_specs() -> list[SaverSpec]:
    """Every saver the benchmark knows; `postgres-delta` runs only when asked for."""
    return [
        SaverSpec("memory", "InMemorySaver", "memory", _memory),
        SaverSpec(
            "sqlite",
            "SqliteSaver (add_messages)",
            "sqlite",
            lambda p: _sqlite(p, "sqlite"),
            rewrites_history=True,
        ),
        SaverSpec(
            "sqlite-delta",
            "SqliteSaver (DeltaChannel)",
            "sqlite",
            lambda p: _sqlite(p, "sqlite_delta"),
            delta=True,
        ),
        SaverSpec(
            "postgres",
            "PostgresSaver (add_messages)",
            "postgres",
            lambda p: _postgres(p, "postgres"),
            rewrites_history=True,
        ),
        SaverSpec(
            "postgres-delta",
            "PostgresSaver (DeltaChannel)",
            "postgres",
            lambda p: _postgres(p, "postgres_delta"),
            delta=True,
        ),
        SaverSpec("lean", "lean saver (ceiling, SQLite)", "sqlite", _lean),
        SaverSpec("turnstore", "TurnstoreSaver (SQLite)", "sqlite", _turnstore_sqlite),
        SaverSpec("turnstore-pg", "TurnstoreSaver (PostgreSQL)", "postgres", _turnstore_pg),
    ]


DEFAULT_SAVERS = (
    "memory", "sqlite", "sqlite-delta", "lean", "postgres", "turnstore", "turnstore-pg",
)  # fmt: skip


def turnstore_unavailable() -> str | None:
    """Why turnstore's LangGraph saver cannot run here, or None when it imports."""
    try:
        from turnstore.integrations.langgraph import TurnstoreSaver  # noqa: F401
    except Exception as error:  # any import failure means "not written yet"
        return f"not available ({type(error).__name__}: {error})"
    return None


def sqlite_store_size(directory: Path) -> int:
    """Bytes of every file in a closed SQLite saver's directory, its WAL folded in first."""
    for database in directory.glob("*.sqlite3"):
        with closing(sqlite3.connect(database)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


# --- one saver under the graph -----------------------------------------------------------------


OWN_WAL = """
WITH rels AS (
    SELECT oid, reltoastrelid FROM pg_class WHERE relnamespace = %(schema)s::regnamespace
), nodes AS (
    SELECT relfilenode::text AS node FROM pg_class
    WHERE oid IN (SELECT oid FROM rels)
       OR oid IN (SELECT reltoastrelid FROM rels)
       OR oid IN (SELECT indexrelid FROM pg_index
                  WHERE indrelid IN (SELECT reltoastrelid FROM rels))
), rec AS (
    SELECT row_number() OVER () AS id, xid, record_length, block_ref
    FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
), touching AS (
    SELECT DISTINCT rec.id, rec.xid FROM rec,
        regexp_matches(rec.block_ref, 'rel [0-9]+/([0-9]+)/([0-9]+)', 'g') AS m
    WHERE m[1] = %(database)s AND m[2] IN (SELECT node FROM nodes)
)
SELECT coalesce(sum(record_length), 0)::bigint FROM rec
WHERE xid IN (SELECT xid FROM touching WHERE xid <> 0)
   OR id IN (SELECT id FROM touching)
"""
"""WAL bytes in [start, end) of records that touch a relation of `schema` (its tables,
indexes, TOAST tables and their indexes), plus every other record of those transactions
(their commit records): what one saver made the server write, whoever else was writing."""


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL spells it."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class WalInspector:
    """Attributes WAL records to a saver's own relations with `pg_walinspect`.

    The extension is created in the run's scratch database only, which is dropped at the
    end; a server-wide LSN delta would also count anyone else writing to the server.
    """

    def __init__(self, database: ScratchDatabase) -> None:
        import psycopg

        self.connection: Any = psycopg.connect(database.url, autocommit=True)
        self.connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        row = self.connection.execute(
            "SELECT oid::text FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        self.database: str = row[0] if row else ""
        self.failures = 0

    def own(self, schema: str, start: int, end: int) -> int | None:
        """The schema's WAL bytes between two insert LSNs; None if the WAL cannot be read."""
        import psycopg

        flushed = self.connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        high, low = flushed[0].split("/")
        end = min(end, (int(high, 16) << 32) + int(low, 16))
        if end <= start:
            return 0
        query = {"schema": schema, "start": lsn_text(start), "end": lsn_text(end)}
        try:
            row = self.connection.execute(OWN_WAL, {**query, "database": self.database})
            return int(row.fetchone()[0])
        except psycopg.Error:
            self.failures += 1
            return None

    def close(self) -> None:
        self.connection.close()


class Meters:
    """The byte counters: this process's storage writes, the server's WAL and its owner."""

    def __init__(self, database: ScratchDatabase | None) -> None:
        self.local: ByteMeter | None = ProcIo() if proc_io_available() else None
        self.wal: ByteMeter | None = database.wal if database is not None else None
        self.inspector: WalInspector | None = None
        self.inspector_error = ""
        if database is not None:
            try:
                self.inspector = WalInspector(database)
            except Exception as error:  # no pg_walinspect: fall back to server-wide deltas
                self.inspector_error = f"{type(error).__name__}: {error}".strip()

    def read(self) -> tuple[int, int]:
        local = self.local.read() if self.local is not None else 0
        wal = self.wal.read() if self.wal is not None else 0
        return local, wal

    def described(self) -> dict[str, Any]:
        if self.inspector is not None:
            postgres = (
                "pg_walinspect: WAL records of the saver's own relations (and their"
                " transactions' other records) between the insert LSNs around each invoke"
            )
        elif self.wal is not None:
            postgres = (
                "pg_current_wal_insert_lsn() delta, server-wide (pg_walinspect unavailable:"
                f" {self.inspector_error})"
            )
        else:
            postgres = None
        return {
            "sqlite": "/proc/self/io write_bytes" if self.local is not None else None,
            "postgres": postgres,
            "walinspect_failures": self.inspector.failures if self.inspector else None,
        }

    def close(self) -> None:
        if self.inspector is not None:
            self.inspector.close()


@dataclass
class Row:
    """One saver compiled into the graph, and what the run measured of it."""

    spec: SaverSpec
    opened: Opened
    graph: Any
    holder: dict[str, Turn]
    turns: int = 0
    written: int = 0
    server_wal: int = 0
    foreign_wal: int = 0
    stray_local: int = 0
    written_at: dict[int, int] = field(default_factory=dict)
    seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    history_at: dict[int, int] = field(default_factory=dict)
    size_bytes: int | None = None
    size_turns: int | None = None
    size_note: str = ""
    messages: int | None = None
    loads: dict[int, list[float]] = field(default_factory=dict)
    """Seconds of `graph.get_state` (the latest state loaded) at each history length."""

    def load(self, point: int) -> None:
        """Time one load of the latest state, at most `LOADS` times a point."""
        taken = self.loads.setdefault(point, [])
        if len(taken) < LOADS:
            started = time.perf_counter()
            self.graph.get_state(config())
            taken.append(time.perf_counter() - started)

    def invoke(self, turn: Turn, index: int, mode: str, meters: Meters) -> tuple[float, int]:
        """One turn through the graph; its wall time and the bytes it wrote."""
        from langchain_core.messages import HumanMessage

        self.holder["turn"] = turn
        user = HumanMessage(content=turn.user_text, id=f"user-{index}")
        inputs = {"messages": [user], "loop_state": turn.state}
        options: dict[str, Any] = {} if mode == DEFAULT else {"durability": mode}
        local_before, wal_before = meters.read()
        started = time.perf_counter()
        self.graph.invoke(inputs, config(), **options)
        elapsed = time.perf_counter() - started
        local_after, wal_after = meters.read()
        local, wal = local_after - local_before, wal_after - wal_before
        if self.spec.backend == "postgres":
            ours: int | None = wal
            if meters.inspector is not None and self.opened.schema is not None:
                ours = meters.inspector.own(self.opened.schema, wal_before, wal_after)
            ours = wal if ours is None else ours
            self.stray_local += local
        else:
            ours = local
        self.turns += 1
        self.written += ours
        self.server_wal += wal
        self.foreign_wal += wal - ours if self.spec.backend == "postgres" else wal
        return elapsed, ours


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": THREAD}}


def open_row(spec: SaverSpec, places: Places) -> Row:
    """Open `spec`'s saver and compile the graph (with the delta state if it asks)."""
    opened = spec.open(places)
    holder: dict[str, Turn] = {}
    if spec.delta:
        graph = compile_react_graph(delta_react_state(), opened.saver, lambda: holder["turn"])
    else:
        graph = build_react_graph(opened.saver, lambda: holder["turn"])
    return Row(spec, opened, graph, holder)


# --- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One turn of the schedule: its index, durability mode and the point it is timed at."""

    index: int
    mode: str
    point: int | None


def schedule(points: Sequence[int], window: int, size_turns: int) -> tuple[list[Step], int]:
    """Growth to each point, a window there alternating modes, growth to the size turn count.

    Returns the steps and where the timing phase ends.
    """
    steps: list[Step] = []
    index = 0
    for point in points:
        while index < point:
            steps.append(Step(index, DEFAULT, None))
            index += 1
        for number in range(window * len(MODES)):
            steps.append(Step(index, MODES[number % len(MODES)], point))
            index += 1
    timing_end = index
    while index < size_turns:
        steps.append(Step(index, DEFAULT, None))
        index += 1
    return steps, timing_end


def rotated(rows: Sequence[Row], by: int) -> list[Row]:
    by %= max(len(rows), 1)
    return [*rows[by:], *rows[:by]]


def drive(
    rows: list[Row],
    steps: list[Step],
    timing_end: int,
    points: Sequence[int],
    meters: Meters,
    size_all: bool,
    progress: Callable[[str], None],
) -> None:
    """Run the schedule on every row, interleaved; rows stop when they have no more to give."""
    started = time.perf_counter()
    for step in steps:
        live = [row for row in rows if row.graph is not None]
        if step.index >= timing_end:
            for row in live:
                if not keeps_growing(row, size_all):
                    finish(row, "stops with the timing phase")
            live = [row for row in rows if row.graph is not None]
        if not live:
            break
        turn = make_turn(SEED, THREAD, step.index)
        for row in rotated(live, step.index):
            if step.point is not None:
                row.history_at.setdefault(step.point, row.turns)
            elapsed, _ = row.invoke(turn, step.index, step.mode, meters)
            if step.point is not None:
                row.seconds.setdefault(step.mode, {}).setdefault(step.point, []).append(elapsed)
                row.load(step.point)
            if row.turns in points:
                row.written_at[row.turns] = row.written
        if (step.index + 1) % 50 == 0:
            progress(f"turn {step.index + 1}/{len(steps)}, {time.perf_counter() - started:.0f}s")
    for row in rows:
        if row.graph is not None:
            finish(row, "")


def keeps_growing(row: Row, size_all: bool) -> bool:
    """Whether a row goes on past the timing phase towards the size turn count."""
    if row.opened.size is None:
        return False
    return size_all or not row.spec.rewrites_history


def finish(row: Row, note: str) -> None:
    """Check the thread holds every message, close the saver, size its store, free memory."""
    state = row.graph.get_state(config())
    row.messages = len(state.values.get("messages", []))
    expected = 4 * row.turns
    if row.messages != expected:
        raise RuntimeError(f"{row.spec.name} holds {row.messages} messages, not {expected}")
    row.opened.close()
    if row.opened.size is not None:
        row.size_bytes = row.opened.size()
        row.size_turns = row.turns
        row.size_note = note
    row.graph = None
    row.opened.saver = None
    gc.collect()


def payload_bytes(turns: int) -> int:
    """Compact JSON bytes of the first `turns` turns' items."""
    return sum(make_turn(SEED, THREAD, index).payload_bytes() for index in range(turns))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Open every saver, drive the schedule, size the stores; the JSON document."""
    started = time.perf_counter()
    wanted = [name.strip() for name in args.savers.split(",") if name.strip()]
    known = {spec.name: spec for spec in saver_specs()}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit(f"unknown savers: {', '.join(unknown)} (known: {', '.join(known)})")
    pg_url = None if args.no_postgres else args.postgres_url
    pg_reason = "disabled with --no-postgres" if pg_url is None else unavailable(pg_url)
    ts_reason = turnstore_unavailable()
    skipped: dict[str, str] = {}
    chosen: list[SaverSpec] = []
    for name in wanted:
        spec = known[name]
        if name in TURNSTORE_SAVERS and ts_reason is not None:
            skipped[name] = ts_reason
        elif spec.backend == "postgres" and pg_reason is not None:
            skipped[name] = pg_reason
        else:
            chosen.append(spec)
    steps, timing_end = schedule(args.points, args.window, args.size_turns)
    database = ScratchDatabase(pg_url) if pg_url and pg_reason is None else None
    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-langgraph-", dir=args.dir))
    rows: list[Row] = []
    meters = Meters(database)
    try:
        places = Places(scratch, database)
        for spec in chosen:
            rows.append(open_row(spec, places))
        drive(rows, steps, timing_end, args.points, meters, args.size_all, args.progress)
        args.progress("round-robin workload")
        round_robin = run_round_robin(
            chosen,
            Places(rr_scratch(scratch), database, prefix="rr_"),
            open_row,
            SEED,
            args.rr_threads,
            args.rr_turns,
        )
        args.progress("opening to the first put")
        opens = measure_open(open_sides(scratch, database, chosen), args.open_repeats)
    finally:
        meters.close()
        for row in rows:
            if row.graph is not None:
                row.opened.close()
        if database is not None:
            database.drop()
        shutil.rmtree(scratch, ignore_errors=True)
    doc: dict[str, Any] = {
        "config": {
            "points": list(args.points),
            "window_per_mode": args.window,
            "size_turns": args.size_turns,
            "timing_phase_turns": timing_end,
            "size_all": args.size_all,
            "smoke": args.smoke,
            "seed": SEED,
            "postgres_skipped": pg_reason,
        },
        "environment": environment(database is not None, pg_url),
        "bytes_measured_as": meters.described(),
        "savers": {row.spec.name: saver_doc(row, args.points) for row in rows},
        "skipped": skipped,
        "round_robin": round_robin,
        "open": opens,
    }
    sizes = {row.size_turns for row in rows if row.size_turns is not None}
    doc["payload"] = {turns: payload_bytes(turns) for turns in sorted(sizes)}
    for row_doc in doc["savers"].values():
        if row_doc["size_bytes"] is not None:
            raw = doc["payload"][row_doc["size_turns"]]
            row_doc["raw_payload_bytes"] = raw
            row_doc["size_vs_payload"] = row_doc["size_bytes"] / raw
    add_ratios(doc)
    doc["targets"] = targets(doc)
    doc["elapsed_s"] = time.perf_counter() - started
    return doc


def open_sides(
    scratch: Path, database: ScratchDatabase | None, chosen: Sequence[SaverSpec]
) -> dict[str, tuple[str, str]]:
    """Where each saver of the opening measurement opens: a fresh file or schema of its own."""
    names = {spec.name for spec in chosen}
    sides: dict[str, tuple[str, str]] = {}
    if "sqlite" in names:
        sides["sqlite"] = ("sqlite", str(scratch / "open-sqlite.sqlite3"))
    if "turnstore" in names:
        sides["turnstore"] = ("turnstore", str(scratch / "open-turnstore.sqlite3"))
    if database is not None and "postgres" in names:
        sides["postgres"] = ("postgres", database.libpq_url(database.schema("open_postgres")))
    if database is not None and "turnstore-pg" in names:
        schema = database.schema("open_turnstore")
        sides["turnstore-pg"] = ("turnstore", database.turnstore_url(schema))
    return sides


def saver_doc(row: Row, points: Sequence[int]) -> dict[str, Any]:
    low, high = points[0], points[-1]
    first, last = row.written_at.get(low), row.written_at.get(high)
    measured = row.spec.backend != "memory"
    modes: dict[str, Any] = {}
    for mode, per_point in row.seconds.items():
        modes[mode] = {
            str(point): {
                "history_turns": row.history_at.get(point),
                "turns_timed": len(seconds),
                "median_ms": statistics.median(seconds) * 1e3,
                "turns_per_s": 1 / statistics.median(seconds),
                "mean_turns_per_s": len(seconds) / sum(seconds),
            }
            for point, seconds in per_point.items()
        }
    return {
        "label": row.spec.label,
        "backend": row.spec.backend,
        "delta_channel": row.spec.delta,
        "turns": row.turns,
        "messages": row.messages,
        "modes": modes,
        "bytes_written_at": {str(k): v for k, v in row.written_at.items()} if measured else {},
        "bytes_ratio": last / first if measured and first and last else None,
        "load_ms": {str(k): statistics.median(v) * 1e3 for k, v in row.loads.items() if v},
        "server_wal_bytes": row.server_wal,
        "foreign_wal_bytes": row.foreign_wal,
        "stray_local_bytes": row.stray_local,
        "size_bytes": row.size_bytes,
        "size_turns": row.size_turns,
        "size_note": row.size_note,
    }


def add_ratios(doc: dict[str, Any]) -> None:
    """Each row's turns/s over InMemorySaver's and SqliteSaver's, same mode and point."""
    savers = doc["savers"]
    for row in savers.values():
        for mode, per_point in row["modes"].items():
            for point, measured in per_point.items():
                for key, baseline in BASELINES:
                    base = savers.get(baseline, {}).get("modes", {}).get(mode, {}).get(point)
                    measured[key] = measured["turns_per_s"] / base["turns_per_s"] if base else None


def environment(postgres: bool, pg_url: str | None) -> dict[str, Any]:
    packages: dict[str, str | None] = {}
    for package in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "turnstore",
        "psycopg",
    ):
        try:
            packages[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            packages[package] = None
    server = None
    if postgres and pg_url is not None:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as connection:
            row = connection.execute("SHOW server_version").fetchone()
            server = row[0] if row else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "postgres": server,
        "packages": packages,
    }


# --- printing ----------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def render(doc: dict[str, Any]) -> str:
    """The results as text tables and PASS/MISS lines."""
    config_ = doc["config"]
    points = [str(point) for point in config_["points"]]
    smoke = " [SMOKE: tiny sizes, the numbers mean nothing]" if config_["smoke"] else ""
    lines = [
        f"LangGraph ReAct graph, one thread per saver, 4 messages (~3 KB) per turn{smoke}",
        f"turns/s = 1 / median invoke time over {config_['window_per_mode']} turns per mode at"
        " each history length; x mem / x sqlite = over InMemorySaver / SqliteSaver, same mode",
        "",
    ]
    head = f"{'saver':<30} {'durability':<10}"
    for point in points:
        head += f" {'@' + point + ' t/s':>10} {'x mem':>6} {'x sqlite':>8}"
    lines.append(head)
    for row in doc["savers"].values():
        for mode in MODES:
            line = f"{row['label']:<30} {mode:<10}"
            for point in points:
                at = row["modes"].get(mode, {}).get(point, {})
                line += f" {_num(at.get('turns_per_s')):>10}"
                line += f" {_num(at.get('vs_memory'), 2, 'x'):>6}"
                line += f" {_num(at.get('vs_sqlite'), 2, 'x'):>8}"
            lines.append(line)
    labels = {spec.name: spec.label for spec in saver_specs()}
    for name, why in doc["skipped"].items():
        lines.append(f"{labels.get(name, name):<30} {why}")
    low, high = points[0], points[-1]
    lines += [
        "",
        f"{'saver':<30} {'written @' + low:>12} {'written @' + high:>13} {'ratio':>7}"
        f" {'other WAL':>9} {'store':>10} {'at turns':>8} {'x payload':>9}",
    ]
    for row in doc["savers"].values():
        written = row["bytes_written_at"]
        note = f"  ({row['size_note']})" if row["size_note"] else ""
        lines.append(
            f"{row['label']:<30} {_bytes(written.get(low)):>12} {_bytes(written.get(high)):>13}"
            f" {_num(row['bytes_ratio']):>7} {_bytes(row['foreign_wal_bytes']):>9}"
            f" {_bytes(row['size_bytes']):>10} {row['size_turns'] or '-':>8}"
            f" {_num(row.get('size_vs_payload')):>9}{note}"
        )
    measured_as = doc["bytes_measured_as"]
    lines += [
        "",
        f"bytes written: SQLite/memory = {measured_as['sqlite']}; PostgreSQL ="
        f" {measured_as['postgres']}",
        "other WAL = WAL the server inserted during the saver's invokes that was not the"
        " saver's (someone else on the server, or the other PG saver's autovacuum)",
        "store: SQLite files after wal_checkpoint(TRUNCATE); PostgreSQL pg_total_relation_size"
        " of the saver's schema; payload = the items' compact JSON bytes",
        "",
        _round_robin_lines(doc),
        "",
        "Targets",
    ]
    lines.append(f"{'target':<50} {'measured':>9} {'required':>8}  verdict  SqliteSaver here")
    for target in doc["targets"]:
        if target["passed"] is None:
            verdict, measured = "n/a", "-"
        else:
            verdict = "PASS" if target["passed"] else "MISS"
            measured = f"{target['measured']:.2f}"
        reference = _num(target["sqlite_saver"], 2) if target["sqlite_saver"] is not None else ""
        line = f"{target['target']:<50} {measured:>9} {target['required']:>8}  {verdict:<7}"
        lines.append(f"{line}  {reference}".rstrip())
    missing = sorted({t["why_missing"] for t in doc["targets"] if t["why_missing"]})
    lines += [f"n/a: {why}" for why in missing]
    lines.append(f"\nelapsed {doc['elapsed_s']:.0f}s")
    return "\n".join(lines)


def _round_robin_lines(doc: dict[str, Any]) -> str:
    found = doc.get("round_robin") or {}
    lines = [
        f"Round-robin: {found.get('threads')} threads x {found.get('turns_per_thread')} turns,"
        " default durability, turns / summed invoke time"
    ]
    for row in found.get("savers", {}).values():
        lines.append(f"{row['label']:<30} {_num(row['turns_per_s']):>10} turns/s")
    return "\n".join(lines)


# --- command line ------------------------------------------------------------------------------


def _points(text: str) -> list[int]:
    points = sorted({int(part) for part in text.split(",") if part.strip()})
    if not points or any(point <= 0 for point in points):
        raise argparse.ArgumentTypeError("history lengths must be positive turn counts")
    return points


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.langgraph_saver",
        description="The same LangGraph ReAct graph on different checkpointers, one run.",
    )
    parser.add_argument(
        "--turns", dest="points", type=_points, default=[50, 200, 800], help="history lengths"
    )
    parser.add_argument("--window", type=int, default=20, help="turns timed per mode per length")
    parser.add_argument("--size-turns", type=int, default=1000, help="turns before sizing")
    parser.add_argument("--savers", default=",".join(DEFAULT_SAVERS), help="savers to run")
    parser.add_argument(
        "--size-all",
        action="store_true",
        help="grow the history-rewriting savers to --size-turns too (slow: gigabytes)",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL savers")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--dir", help="where the scratch SQLite stores go (default: temp dir)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    args.rr_threads, args.rr_turns, args.open_repeats = THREADS, TURNS, 5
    if args.smoke:
        args.points, args.window, args.size_turns = [3, 6], 1, 10
        args.rr_threads, args.rr_turns, args.open_repeats = 2, 3, 1
    args.progress = (lambda _: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print it, write --json if asked."""
    args = parse_args(argv)
    doc = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
