"""PostgreSQL writes from many worker processes, directly and through PgBouncer.

python -m bench.processes [--processes 1,2,4,8] [--seconds 10] [--warmup 2] [--rounds 1]
    [--sessions 4] [--postgres-url URL] [--no-pgbouncer] [--json PATH] [--smoke]

The targets (issue 33): 8 worker processes saving through turnstore reach at least 0.6x
what the server commits for 8 plain clients (one one-row INSERT a commit each), and the
same 8 processes through PgBouncer in transaction mode at least 0.9x of them without it,
all measured in one run.

How each number is obtained:

* the rows, for each process count N: `ceiling` is N plain psycopg connections, one per
  process, each sending autocommitted one-row INSERTs (about 100 B of text) in a loop, with
  synchronous_commit=on: one round trip and one durable commit each, no library above the
  driver. `turnstore` is N processes, each with its own async store (`turnstore.open(url)`,
  `index_in_background=False`, pool of at most 2 connections) and one writer: plain `save`s
  of the agent-loop workload (`bench.workload`: four transcript items of about 3 KB and the
  loop state a turn), round-robin over --sessions sessions of its own; a session that
  reaches 50 turns is replaced by a fresh one, so one save in 50 creates a session, as in
  the agent-loop benchmark's 20 x 50. The `pgbouncer` rows are the same through one
  PgBouncer in transaction mode (`bench/pgbouncer.py`, a server pool as large as the
  largest N); the store's URL carries `pooler=transaction`, the plain clients set
  `prepare_threshold=None`.
* the clock: every process is started with multiprocessing's spawn, connects, saves (or
  inserts) once per session, then waits on a barrier with the parent. From the barrier's
  release each runs --warmup seconds uncounted, then counts what completes in the next
  --seconds (CLOCK_MONOTONIC, one clock for every process of the machine), then stops.
* reported per row: operations per second summed over the processes, p50/p99 of one
  operation, CPU per operation of the workers, of the whole machine (/proc/stat), of every
  `postgres` process and of PgBouncer (/proc/PID/stat), WAL bytes per operation
  (`pg_current_wal_insert_lsn()`, server-wide: run it alone), all over the window; for the
  turnstore rows, the schema's size afterwards per save. With --rounds above 1 every row
  runs that many times, rounds interleaved, and the summary takes each row's median rate.
  When the machine's CPUs are all busy, rates go as the inverse of the machine's CPU per
  operation: the summary's "CPU-bound" columns give the targets' ratios of those, what the
  targets could reach on this machine at all.

A scratch database `bench_<random>` is created on the server and dropped at the end, one
schema per turnstore row, one table per ceiling row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from bench.measure import PgWal, percentile
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable
from bench.report import table
from bench.workload import SEED, make_turn

TURNS_PER_SESSION = 50
"""A session's length before its slot starts a fresh one: the agent-loop workload's 50."""
POOL_MAX_SIZE = 2
"""Each worker's store pool: one writer needs one connection; the second covers a refill."""
START_TIMEOUT_S = 120.0
"""How long the barrier waits for every process to connect and warm up (spawn on a busy
2-core machine takes seconds per process)."""
CEILING = "ceiling"
TURNSTORE = "turnstore"
DIRECT = "direct"
PGBOUNCER = "pgbouncer"
TARGET_VS_CEILING = 0.6
TARGET_POOLER = 0.9


# --- one worker process ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """What one worker process does; picklable, as spawn sends it to the child."""

    kind: str
    url: str
    index: int
    tag: str
    sessions: int
    warmup_s: float
    window_s: float
    pooled: bool


@dataclass(slots=True)
class Tally:
    """What one worker counted inside the window."""

    index: int
    ops: int = 0
    total: int = 0
    """Every operation, the uncounted ones before and after the window included."""
    latencies_s: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    error: str | None = None


class Window:
    """The measured window of one worker: --warmup after the barrier, then --seconds."""

    def __init__(self, warmup_s: float, window_s: float) -> None:
        released = time.monotonic()
        self.start = released + warmup_s
        self.end = self.start + window_s
        self._cpu_start: float | None = None
        self.cpu_s = 0.0

    def running(self) -> bool:
        """Whether to begin another operation; starts the CPU clock at the window's start."""
        now = time.monotonic()
        if self._cpu_start is None and now >= self.start:
            self._cpu_start = time.process_time()
        if now >= self.end:
            if self._cpu_start is not None:
                self.cpu_s = time.process_time() - self._cpu_start
            return False
        return True

    def counts(self, done: float) -> bool:
        """Whether an operation that completed at `done` falls inside the window."""
        # Completions, not starts: over a window of seconds, one operation straddling each
        # edge is all either choice could miscount.
        return self.start <= done < self.end


def worker(job: Job, barrier: Any, finish: Any, results: Any) -> None:
    """A child process's entry point: run `job`, put its Tally (or its error) on `results`.

    `barrier` starts the window in every process at once; `finish` holds each process, its
    connections open, until the parent has read the window's end: a server process that
    exited before that read would take its CPU seconds with it.
    """
    try:
        tally = (
            asyncio.run(_turnstore(job, barrier, finish))
            if job.kind == TURNSTORE
            else _ceiling(job, barrier, finish)
        )
    except BaseException as error:
        # Release the others (and the parent) at once instead of leaving them at the barrier.
        barrier.abort()
        finish.abort()
        results.put(asdict(Tally(job.index, error=f"{type(error).__name__}: {error}")))
        return
    results.put(asdict(tally))


def _ceiling(job: Job, barrier: Any, finish: Any) -> Tally:
    import psycopg

    # Through a transaction pooler no statement may be prepared by name (PgBouncer 1.18
    # cannot route them); directly, psycopg's default prepares it after 5 executions.
    threshold = None if job.pooled else 5
    insert = f"INSERT INTO {job.tag} VALUES (%s, %s, %s)"
    body = "x" * 100
    tally = Tally(job.index)
    with psycopg.connect(job.url, autocommit=True, prepare_threshold=threshold) as connection:
        for n in range(10):
            connection.execute(insert, (job.index, n, body))
            tally.total += 1
        barrier.wait(START_TIMEOUT_S)
        window = Window(job.warmup_s, job.window_s)
        n = 0
        while window.running():
            began = time.monotonic()
            connection.execute(insert, (job.index, n, body))
            done = time.monotonic()
            n += 1
            tally.total += 1
            if window.counts(done):
                tally.ops += 1
                tally.latencies_s.append(done - began)
        finish.wait(START_TIMEOUT_S)
    tally.cpu_s = window.cpu_s
    return tally


async def _turnstore(job: Job, barrier: Any, finish: Any) -> Tally:
    import turnstore
    from bench.peers import advance, first_checkpoint
    from turnstore import Checkpoint

    # One set of 50 turns reused by every session of this process: the store sees the same
    # bytes a turn either way, and generating text inside the window would cost CPU.
    turns = [make_turn(SEED, f"{job.tag}-p{job.index}", i) for i in range(TURNS_PER_SESSION)]
    generation = [0] * job.sessions
    checkpoints: list[Checkpoint] = []

    def fresh(slot: int) -> Checkpoint:
        generation[slot] += 1
        return first_checkpoint(f"{job.tag}-p{job.index}-s{slot}-g{generation[slot]}", turns[0])

    async def save(slot: int) -> None:
        checkpoint = checkpoints[slot]
        if checkpoint.sequence == TURNS_PER_SESSION:
            checkpoint = checkpoints[slot] = fresh(slot)
        turn = turns[checkpoint.sequence]
        await store.save(advance(checkpoint, turn), turn.items)

    tally = Tally(job.index)
    store = turnstore.open(job.url, index_in_background=False)
    try:
        checkpoints.extend(fresh(slot) for slot in range(job.sessions))
        for slot in range(job.sessions):
            await save(slot)
            tally.total += 1
        # In a thread: the pool's maintenance tasks keep running on the loop meanwhile.
        await asyncio.to_thread(barrier.wait, START_TIMEOUT_S)
        window = Window(job.warmup_s, job.window_s)
        slot = 0
        while window.running():
            began = time.monotonic()
            await save(slot)
            done = time.monotonic()
            slot = (slot + 1) % job.sessions
            tally.total += 1
            if window.counts(done):
                tally.ops += 1
                tally.latencies_s.append(done - began)
        tally.cpu_s = window.cpu_s
        await asyncio.to_thread(finish.wait, START_TIMEOUT_S)
    finally:
        await store.close()
    return tally


# --- one row: N processes at once -------------------------------------------------------------


class MachineCpu:
    """Busy share of every CPU of the machine between two reads of /proc/stat."""

    @staticmethod
    def read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = [int(value) for value in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    @staticmethod
    def busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
        if before is None or after is None or after[0] == before[0]:
            return None
        total, idle = after[0] - before[0], after[1] - before[1]
        return (total - idle) / total


def program_cpu_s(name: str) -> dict[int, float] | None:
    """CPU seconds (user + system) of every live process called `name`, by PID (/proc).

    PostgreSQL runs a process per connection: compared across the window (`_per_op_us`),
    what the server spent, other databases' sessions included (so the run must be alone).
    """
    found: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    per_tick = 1 / os.sysconf("SC_CLK_TCK")
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                line = stat.read()
        except OSError:
            continue  # exited meanwhile
        # The name is in parentheses and may hold spaces; the fields after it are numbers.
        command, _, rest = line.partition(" (")[2].rpartition(")")
        if command == name:
            fields = rest.split()
            found[int(entry)] = (int(fields[11]) + int(fields[12])) * per_tick  # utime, stime
    return found


def _per_op_us(
    before: dict[int, float] | None, after: dict[int, float] | None, ops: int
) -> float | None:
    """CPU per operation of the processes alive at the window's end; one that started within
    it counts whole, one that ended within it is missed (the workers' connections live
    through it)."""
    if before is None or after is None or not ops:
        return None
    spent = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
    return spent / ops * 1e6


def run_row(
    kind: str, via: str, url: str, processes: int, tag: str, args: argparse.Namespace, wal: PgWal
) -> dict[str, Any]:
    """Start `processes` workers on `url`, release them together, gather their tallies."""
    context = multiprocessing.get_context("spawn")
    barrier, finish = context.Barrier(processes + 1), context.Barrier(processes + 1)
    results = context.Queue()
    jobs = [
        Job(kind, url, index, tag, args.sessions, args.warmup, args.seconds, via == PGBOUNCER)
        for index in range(processes)
    ]
    children = [
        context.Process(target=worker, args=(job, barrier, finish, results)) for job in jobs
    ]
    for child in children:
        child.start()
    tallies: list[dict[str, Any]] = []
    try:
        try:
            barrier.wait(START_TIMEOUT_S)
        except threading.BrokenBarrierError:
            tallies = _gather(results, processes, 10.0)
            raise RuntimeError(f"{kind} {via} x{processes}: {_errors(tallies)}") from None
        released = time.monotonic()
        _sleep_until(released + args.warmup)
        cpu_before, wal_before = MachineCpu.read(), wal.read()
        server_before, pooler_before = program_cpu_s("postgres"), program_cpu_s("pgbouncer")
        _sleep_until(released + args.warmup + args.seconds)
        cpu_after, wal_after = MachineCpu.read(), wal.read()
        server_after, pooler_after = program_cpu_s("postgres"), program_cpu_s("pgbouncer")
        with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed: see below
            finish.wait(START_TIMEOUT_S)
        tallies = _gather(results, processes, 60.0 + args.seconds)
    finally:
        for child in children:
            child.join(10)
            if child.is_alive():
                child.terminate()
                child.join()
    if any(t["error"] for t in tallies):
        raise RuntimeError(f"{kind} {via} x{processes}: {_errors(tallies)}")
    ops = sum(t["ops"] for t in tallies)
    busy = MachineCpu.busy(cpu_before, cpu_after)
    latencies = [s for t in tallies for s in t["latencies_s"]]
    return {
        "kind": kind,
        "via": via,
        "processes": processes,
        "ops": ops,
        "seconds": args.seconds,
        "ops_per_s": ops / args.seconds,
        "per_process_ops": sorted(t["ops"] for t in tallies),
        "total_ops": sum(t["total"] for t in tallies),
        "p50_ms": percentile(latencies, 0.5) * 1e3 if latencies else None,
        "p99_ms": percentile(latencies, 0.99) * 1e3 if latencies else None,
        "client_cpu_us_per_op": sum(t["cpu_s"] for t in tallies) / ops * 1e6 if ops else None,
        "machine_busy": busy,
        # Every CPU second of the machine in the window (the server's, PgBouncer's and the
        # workers' alike) per operation: what one more core would buy, when they are all busy.
        "machine_cpu_us_per_op": busy * (os.cpu_count() or 1) * args.seconds / ops * 1e6
        if busy is not None and ops
        else None,
        "server_cpu_us_per_op": _per_op_us(server_before, server_after, ops),
        "pgbouncer_cpu_us_per_op": _per_op_us(pooler_before, pooler_after, ops)
        if via == PGBOUNCER
        else None,
        "wal_bytes_per_op": (wal_after - wal_before) / ops if ops else None,
    }


def _gather(results: Any, count: int, timeout: float) -> list[dict[str, Any]]:
    import queue

    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        try:
            out.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            break
    return out


def _errors(tallies: list[dict[str, Any]]) -> str:
    errors = [f"process {t['index']}: {t['error']}" for t in tallies if t["error"]]
    return "; ".join(errors) or "a worker did not reach the barrier"


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


# --- the run ------------------------------------------------------------------------------------


def with_query(url: str, **query: str) -> str:
    """`url` with extra query parameters (kept percent-encoded the way libpq reads them)."""
    parts = urlsplit(url)
    merged = urlencode({**dict(parse_qsl(parts.query)), **query}, quote_via=quote)
    return urlunsplit(parts._replace(query=merged))


def pooler_supported() -> bool:
    """Whether this turnstore takes the `pooler=transaction` URL option."""
    from turnstore.backends.postgres import options

    return "pooler" in options.OWN_PARAMETERS


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every row, for every process count, rounds interleaved; returns the JSON document."""
    started = time.perf_counter()
    environment = _environment(args.postgres_url)
    pooler_reason = _pooler_unavailable(args)
    database = ScratchDatabase(args.postgres_url)
    rows: list[dict[str, Any]] = []
    try:
        with ExitStack() as stack:
            bouncer = None
            if pooler_reason is None:
                from bench.pgbouncer import PgBouncer

                bouncer = stack.enter_context(
                    PgBouncer(args.postgres_url, pool_size=max(args.processes))
                )
            for processes in args.processes:
                for round_ in range(args.rounds):
                    for kind, via in _row_order(bouncer is not None, processes + round_):
                        tag = f"{kind}_{via}_{processes}_{round_}"
                        with _place(database, kind, tag) as url:
                            if via == PGBOUNCER:
                                assert bouncer is not None
                                url = bouncer.url(url)
                                if kind == TURNSTORE:
                                    url = with_query(url, pooler="transaction")
                            try:
                                row = run_row(kind, via, url, processes, tag, args, database.wal)
                            except RuntimeError as error:
                                if bouncer is None:
                                    raise
                                # A worker waiting on the pooler shows there, not in its error.
                                tail = "\n".join(bouncer.log().splitlines()[-20:])
                                raise RuntimeError(f"{error}\nPgBouncer's log:\n{tail}") from None
                        if kind == TURNSTORE:
                            # Every table of the row's schema with its indexes and TOAST, over
                            # every save it took (warm-up included): what a turn leaves on disk.
                            row["store_bytes_per_op"] = database.size(tag) / row["total_ops"]
                        row["round"] = round_
                        rows.append(row)
                        if not args.quiet:
                            print(_progress(row), file=sys.stderr, flush=True)
    finally:
        database.drop()
    return {
        "config": {
            "processes": args.processes,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "rounds": args.rounds,
            "sessions_per_process": args.sessions,
            "turns_per_session": TURNS_PER_SESSION,
            "smoke": args.smoke,
            "pgbouncer": pooler_reason or "ran",
        },
        "environment": environment,
        "rows": rows,
        "summary": summarize(rows),
        "elapsed_s": time.perf_counter() - started,
    }


def _pooler_unavailable(args: argparse.Namespace) -> str | None:
    from bench.pgbouncer import binary

    if args.no_pgbouncer:
        return "skipped with --no-pgbouncer"
    if binary() is None:
        return "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    if not pooler_supported():
        return "this turnstore has no pooler=transaction URL option yet"
    return None


def _row_order(pooled: bool, turn: int) -> list[tuple[str, str]]:
    """The rows of one process count, rotated each round so none always runs first."""
    order = [(CEILING, DIRECT), (TURNSTORE, DIRECT)]
    if pooled:
        order += [(TURNSTORE, PGBOUNCER), (CEILING, PGBOUNCER)]
    shift = turn % len(order)
    return order[shift:] + order[:shift]


@contextmanager
def _place(database: ScratchDatabase, kind: str, tag: str) -> Iterator[str]:
    """A fresh schema the store created (turnstore) or a fresh table (ceiling); its URL."""
    import psycopg

    if kind == TURNSTORE:
        import turnstore

        url = database.turnstore_url(tag, pool_max_size=str(POOL_MAX_SIZE))
        # Created here, directly, once: the workers then only open it.
        turnstore.open_blocking(url, index_in_background=False).close()
        yield url
        return
    with psycopg.connect(database.url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {tag} (client INTEGER, n INTEGER, body TEXT)")
    yield database.url


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process count: each row's median-round rate, and the two ratios of the targets."""
    out: dict[str, Any] = {}
    for processes in sorted({row["processes"] for row in rows}):
        rates: dict[str, float] = {}
        for kind in (CEILING, TURNSTORE):
            for via in (DIRECT, PGBOUNCER):
                found = [
                    r["ops_per_s"]
                    for r in rows
                    if (r["processes"], r["kind"], r["via"]) == (processes, kind, via)
                ]
                if found:
                    rates[f"{kind}_{via}"] = sorted(found)[len(found) // 2]
        ceiling, direct = rates.get("ceiling_direct"), rates.get("turnstore_direct")
        pooled = rates.get("turnstore_pgbouncer")
        cpu = {
            f"{kind}_{via}": _median_of(rows, processes, kind, via, "machine_cpu_us_per_op")
            for kind in (CEILING, TURNSTORE)
            for via in (DIRECT, PGBOUNCER)
        }
        out[str(processes)] = {
            **rates,
            "vs_ceiling": direct / ceiling if direct and ceiling else None,
            "pgbouncer_vs_direct": pooled / direct if pooled and direct else None,
            # When every CPU is busy, rates stand as the inverse of the machine's CPU per
            # operation: the ratio a target could reach on this machine at all.
            "cpu_bound_vs_ceiling": _ratio(cpu["ceiling_direct"], cpu["turnstore_direct"]),
            "cpu_bound_pgbouncer": _ratio(cpu["turnstore_direct"], cpu["turnstore_pgbouncer"]),
        }
    return out


def _median_of(
    rows: list[dict[str, Any]], processes: int, kind: str, via: str, key: str
) -> float | None:
    found = sorted(
        r[key]
        for r in rows
        if (r["processes"], r["kind"], r["via"]) == (processes, kind, via) and r[key] is not None
    )
    return found[len(found) // 2] if found else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top and bottom else None


def targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's two targets at the largest process count measured."""
    if not summary:
        return []
    largest = max(summary, key=int)
    at = summary[largest]
    out = []
    for name, measured, required, bound in (
        (
            f"{largest} processes / {largest}-client ceiling",
            at["vs_ceiling"],
            TARGET_VS_CEILING,
            at["cpu_bound_vs_ceiling"],
        ),
        (
            f"{largest} processes: PgBouncer / direct",
            at["pgbouncer_vs_direct"],
            TARGET_POOLER,
            at["cpu_bound_pgbouncer"],
        ),
    ):
        status = "n/a" if measured is None else "PASS" if measured >= required else "MISS"
        out.append(
            {
                "name": name,
                "measured": measured,
                "required": required,
                "status": status,
                "cpu_bound": bound,
            }
        )
    return out


def _environment(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        version = connection.execute("SHOW server_version").fetchone()
        commit = connection.execute("SHOW synchronous_commit").fetchone()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "postgresql": version[0] if version else None,
        "synchronous_commit": commit[0] if commit else None,
    }


# --- output ----------------------------------------------------------------------------------


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _progress(row: dict[str, Any]) -> str:
    return (
        f"{row['kind']} {row['via']} x{row['processes']} (round {row['round']}):"
        f" {_num(row['ops_per_s'])}/s"
    )


def render(doc: dict[str, Any]) -> str:
    """The printed report: the rows, the summary per process count, the targets."""
    config, env = doc["config"], doc["environment"]
    load = ", ".join(f"{value:.2f}" for value in env["load_average"])
    header = (
        f"turnstore many-processes benchmark: {config['seconds']:g} s counted after"
        f" {config['warmup']:g} s of warm-up, {config['rounds']} round(s);"
        f" {config['sessions_per_process']} sessions per process, {config['turns_per_session']}"
        f" turns each, then a fresh one"
        + (" [SMOKE: tiny sizes, numbers mean nothing]" if config["smoke"] else "")
        + f"\nPython {env['python']}, {env['cpus']} CPUs, load average at start {load};"
        f" PostgreSQL {env['postgresql']}, synchronous_commit={env['synchronous_commit']};"
        f" PgBouncer: {config['pgbouncer']}; run took {doc['elapsed_s']:.0f} s"
    )
    rows = [
        [
            f"{row['kind']} {row['via']}",
            str(row["processes"]),
            str(row["round"]),
            _num(row["ops_per_s"]),
            "-" if row["p50_ms"] is None else f"{row['p50_ms']:.2f}",
            "-" if row["p99_ms"] is None else f"{row['p99_ms']:.2f}",
            _num(row["client_cpu_us_per_op"]),
            _num(row["machine_cpu_us_per_op"]),
            _num(row["server_cpu_us_per_op"]),
            _num(row["pgbouncer_cpu_us_per_op"]),
            "-" if row["machine_busy"] is None else f"{row['machine_busy']:.0%}",
            _num(row["wal_bytes_per_op"]),
            _num(row.get("store_bytes_per_op")),
        ]
        for row in doc["rows"]
    ]
    headers = [
        "row",
        "procs",
        "round",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "workers µs/op",
        "machine µs/op",
        "server µs/op",
        "PgBouncer µs/op",
        "busy",
        "WAL B/op",
        "stored B/op",
    ]
    summary = [
        [
            n,
            _num(s.get("ceiling_direct")),
            _num(s.get("turnstore_direct")),
            _times(s["vs_ceiling"]),
            _num(s.get("turnstore_pgbouncer")),
            _times(s["pgbouncer_vs_direct"]),
            _num(s.get("ceiling_pgbouncer")),
            _times(s["cpu_bound_vs_ceiling"]),
            _times(s["cpu_bound_pgbouncer"]),
        ]
        for n, s in doc["summary"].items()
    ]
    summary_headers = [
        "procs",
        "ceiling commits/s",
        "turnstore saves/s",
        "÷ ceiling",
        "via PgBouncer",
        "÷ direct",
        "ceiling via PgBouncer",
        "CPU-bound: ÷ ceiling",
        "÷ direct",
    ]
    lines = [
        header,
        "Rows (ops: one-row commits for ceiling, saves for turnstore; CPU per op: the"
        " workers', the whole machine's, every postgres process's and PgBouncer's; busy: the"
        " machine's CPUs)\n" + table(headers, rows),
        "Per process count\n" + table(summary_headers, summary),
    ]
    judged = targets(doc["summary"])
    if judged:
        lines.append(
            "Targets\n"
            + "\n".join(
                f"{t['name']}: {'-' if t['measured'] is None else format(t['measured'], '.2f')}"
                f" (>= {t['required']:g}) {t['status']};"
                f" the same ratio of the machine's CPU per operation: {_times(t['cpu_bound'])}"
                for t in judged
            )
        )
    return "\n\n".join(lines)


# --- command line ------------------------------------------------------------------------------


def _counts(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or any(count <= 0 for count in counts):
        raise argparse.ArgumentTypeError("process counts must be positive integers")
    return counts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.processes",
        description="PostgreSQL saves from N worker processes, directly and through PgBouncer,"
        " beside N plain clients' one-row commit ceiling, all in one run.",
    )
    parser.add_argument(
        "--processes", type=_counts, default=[1, 2, 4, 8], help="process counts (default 1,2,4,8)"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="counted window (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="uncounted warm-up (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every row (default 1)")
    parser.add_argument("--sessions", type=int, default=4, help="sessions per process (default 4)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
        help="a server to create the scratch database on",
    )
    parser.add_argument("--no-pgbouncer", action="store_true", help="skip the PgBouncer rows")
    parser.add_argument("--json", help="also write the results here as JSON")
    parser.add_argument("--quiet", action="store_true", help="print nothing; use with --json")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="1 and 2 processes, 0.3 s windows: checks the machinery, the numbers mean nothing",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.processes, args.seconds, args.warmup, args.rounds = [1, 2], 0.3, 0.1, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the tables unless --quiet; write --json if asked."""
    args = parse_args(argv)
    # A SIGTERM unwinds like Ctrl-C, so the workers, PgBouncer and the scratch database are
    # cleaned up rather than left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    reason = unavailable(args.postgres_url)
    if reason is not None:
        print(f"bench.processes needs PostgreSQL: {reason}", file=sys.stderr)
        return 2
    doc = run(args)
    doc["targets"] = targets(doc["summary"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if not args.quiet:
        print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
