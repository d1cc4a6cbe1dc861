"""Run the agent-loop workload against turnstore and its peers; print ratios, write JSON.

python -m bench.agent_loop [--sessions 20] [--turns 50] [--scaling 50,200,800]
    [--concurrency 32] [--postgres-url URL | --no-postgres] [--json PATH] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import phases, report
from bench.measure import (
    ByteMeter,
    NoBytes,
    ProcIo,
    current_rss_bytes,
    max_rss_bytes,
    proc_io_available,
)
from bench.peers import close_all
from bench.postgres import (
    DEFAULT_URL,
    ScratchDatabase,
    commit_ceiling,
    lone_commit_ceiling,
    unavailable,
)
from bench.specs import (
    SHM,
    PeerSpec,
    Places,
    open_peers,
    peer_specs,
    select_peers,
    tmpfs_directory,
)
from bench.tmpfs_rows import ROUNDS, tmpfs_rows
from bench.workload import SEED, STATE_BYTES, make_turn, session_id

PG_WRITERS = 8
"""Concurrent writers of the PostgreSQL concurrency rows."""
PG_ROUNDS = 3
"""Alternating rounds of one writer and PG_WRITERS writers."""
SQLITE_ROUNDS = 3
"""Rounds of each concurrent SQLite row, each between two disk-ceiling blocks."""
# --- the run ------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every phase in order; returns the JSON document."""
    started = time.perf_counter()
    rss_start = max_rss_bytes()
    pg_url = None if args.no_postgres else args.postgres_url
    pg_reason = "disabled with --no-postgres" if pg_url is None else unavailable(pg_url)
    specs, skipped = select_peers(peer_specs(), _wanted(args.peers), pg_reason)
    database = ScratchDatabase(pg_url) if pg_url and pg_reason is None else None
    with (
        tempfile.TemporaryDirectory(prefix="turnstore-bench-", dir=args.dir) as scratch,
        tmpfs_directory(args.tmpfs) as shm,
    ):
        places = Places(Path(scratch), database, shm)
        try:
            doc = await _phases(args, specs, places)
        finally:
            if database is not None:
                database.drop()
    doc["peers"] = _peer_table(specs, skipped, doc.pop("_peer_info"))
    doc["config"] = _config(args, pg_url, pg_reason)
    doc["environment"] = _environment()
    doc["rss"] = {
        "by_phase": doc.pop("rss_by_phase"),
        "start_bytes": rss_start,
        "peak_bytes": max_rss_bytes(),
        "growth_bytes": max_rss_bytes() - rss_start,
        "end_current_bytes": current_rss_bytes(),
    }
    if args.rss_probe:
        doc["rss"]["turnstore_only"] = _rss_probe(args, pg_url)
    doc["elapsed_s"] = time.perf_counter() - started
    doc["targets"] = report.targets(doc)
    return doc


def _wanted(peers: str | None) -> set[str] | None:
    return None if not peers else {name.strip() for name in peers.split(",") if name.strip()}


async def _phases(
    args: argparse.Namespace, specs: list[PeerSpec], places: Places
) -> dict[str, Any]:
    doc: dict[str, Any] = {"rss_by_phase": {}}
    peers = await open_peers(specs, places, "run")
    try:
        series = await phases.throughput(peers, SEED, args.sessions, args.turns)
        loads, pages = await phases.reads(peers, args.sessions, args.turns)
    finally:
        await close_all(peers)
    _rss_mark(doc, "throughput")
    doc["_peer_info"] = {peer.name: {"label": peer.label, "note": peer.note} for peer in peers}
    doc["payload"] = _payload(args.sessions, args.turns)
    doc["throughput"] = {
        peer.name: report.throughput_row(
            peer, series[peer.name], loads[peer.name], pages[peer.name], doc["payload"]
        )
        for peer in peers
    }
    if places.tmpfs is not None:
        workload = (SEED, args.sessions, args.turns)
        rounds = 1 if args.smoke else ROUNDS
        cpu = tmpfs_rows(specs, places.tmpfs, workload, doc["payload"], rounds)
        for name, row in cpu.items():
            doc["_peer_info"][name] = {"label": row.pop("label"), "note": row.pop("note")}
        doc["throughput"].update(cpu)
        _rss_mark(doc, "tmpfs")
    scaling_specs = [spec for spec in specs if spec.scaling]
    if args.scaling and scaling_specs:
        doc["scaling"] = await _scaling(scaling_specs, places, args.scaling, args.probes)
        _rss_mark(doc, "scaling")
    doc["concurrency"] = await _concurrency(args, specs, places)
    _rss_mark(doc, "concurrency")
    return doc


def _rss_mark(doc: dict[str, Any], phase: str) -> None:
    """Peak and current RSS after a phase, to tell which phase set the peak."""
    doc["rss_by_phase"][phase] = {"peak_bytes": max_rss_bytes(), "now_bytes": current_rss_bytes()}


def _payload(sessions: int, turns: int) -> dict[str, Any]:
    items = sum(
        make_turn(SEED, session_id(number), index).payload_bytes()
        for number in range(sessions)
        for index in range(turns)
    )
    return {
        "turns": sessions * turns,
        "item_bytes": items,
        "state_bytes": sessions * STATE_BYTES,
        "raw_bytes": items + sessions * STATE_BYTES,
        "bytes_per_turn": items / (sessions * turns),
    }


async def _scaling(
    specs: list[PeerSpec], places: Places, points: list[int], probes: int
) -> dict[str, Any]:
    peers = await open_peers(specs, places, "scaling")
    try:
        results = await phases.scaling(peers, SEED, points, probes)
    finally:
        await close_all(peers)
    return {name: [asdict(point) for point in rows] for name, rows in results.items()}


async def _concurrency(
    args: argparse.Namespace, specs: list[PeerSpec], places: Places
) -> dict[str, Any]:
    names = {spec.name for spec in specs}
    out: dict[str, Any] = {}
    if "turnstore" in names and args.concurrency > 0:
        out["sqlite"] = await _sqlite_concurrency(args, places)
    if "turnstore-pg" in names and places.database is not None and args.pg_writers > 0:
        out["postgres"] = await _postgres_concurrency(args, places)
    return out


async def _sqlite_concurrency(args: argparse.Namespace, places: Places) -> dict[str, Any]:
    """Concurrent rows between disk-ceiling blocks: each is judged against the blocks beside it.

    The disk's commit latency drifts over seconds on shared hardware, so the ceiling a row is
    compared with is the mean of the blocks measured just before and just after it.
    """
    meter: ByteMeter = ProcIo() if proc_io_available() else NoBytes()
    work = phases.pregenerate(SEED, "conc", args.concurrency, args.turns)

    async def async_tasks(url: str) -> phases.ConcurrencyRow:
        return await phases.async_writers(url, work, meter)

    async def threads(url: str) -> phases.ConcurrencyRow:
        return await asyncio.to_thread(phases.thread_writers, url, work, meter)

    async def one_task(url: str) -> phases.ConcurrencyRow:
        return await phases.async_writers(url, work, meter, one_writer=True)

    async def grouped(url: str) -> phases.ConcurrencyRow:
        return await phases.same_work_grouped(Path(url.removeprefix("sqlite:///")), work, meter)

    runs = {
        "asyncio tasks": async_tasks,
        "threads": threads,
        "asyncio, 1 task": one_task,
        phases.GROUPED: grouped,
    }
    ceilings = [await phases.ceiling_block(places.directory / "ceiling-0.log")]
    rows = []
    for round_ in range(SQLITE_ROUNDS):
        for number, (mode, run_row) in enumerate(runs.items()):
            if mode == "asyncio, 1 task" and round_ > 0:
                continue  # the sequential reference, once
            row = report.concurrency_row(
                await run_row(places.sqlite_url("conc", f"{round_}-{number}"))
            )
            ceilings.append(
                await phases.ceiling_block(places.directory / f"ceiling-{len(ceilings)}.log")
            )
            row["ceiling_commits_per_s"] = (ceilings[-2] + ceilings[-1]) / 2
            row["vs_ceiling"] = row["turns_per_s"] / row["ceiling_commits_per_s"]
            rows.append(row)
    return {
        "ceiling_commits_per_s": _median(ceilings),
        "ceiling_blocks": ceilings,
        "rows": rows,
        "modes": {mode: _mode_summary([r for r in rows if r["mode"] == mode]) for mode in runs},
    }


def _mode_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "writers": rows[0]["writers"],
        "rounds": len(rows),
        "turns_per_s": _median([row["turns_per_s"] for row in rows]),
        "vs_ceiling": _median([row["vs_ceiling"] for row in rows]),
        "ceiling_commits_per_s": _median([row["ceiling_commits_per_s"] for row in rows]),
        "writes_per_transaction": _median([row["writes_per_transaction"] or 0 for row in rows]),
        "bytes_written_per_turn": _median([row["bytes_written_per_turn"] for row in rows]),
    }


async def _postgres_concurrency(args: argparse.Namespace, places: Places) -> dict[str, Any]:
    """Alternate one writer and N writers on the same sessions' shape, several rounds."""
    writers = args.pg_writers
    assert places.database is not None
    url = places.turnstore_pg("conc", "ts", False, pool_max_size=str(max(writers, 2))).url
    meter = places.database.wal
    per_writer = max(2, args.turns // 2)
    single: list[dict[str, Any]] = []
    many: list[dict[str, Any]] = []
    for round_ in range(PG_ROUNDS):
        one = phases.pregenerate(SEED, f"pg1-{round_}", writers, per_writer)
        row = await phases.async_writers(url, one, meter, one_writer=True)
        single.append(report.concurrency_row(row))
        spread = phases.pregenerate(SEED, f"pgn-{round_}", writers, per_writer)
        many.append(report.concurrency_row(await phases.async_writers(url, spread, meter)))
    ceilings = [
        commit_ceiling(places.database.url, writers, max(20, per_writer * 2))
        for _ in range(PG_ROUNDS)
    ]
    lone = [lone_commit_ceiling(places.database.url, max(20, per_writer * 2)) for _ in ceilings]
    return {
        "writers": writers,
        "lone_commits_per_s": _median(lone),
        "one_writer_turns_per_s": _median([r["turns_per_s"] for r in single]),
        "many_writers_turns_per_s": _median([r["turns_per_s"] for r in many]),
        "server_commits_per_s": _median(ceilings),
        "rounds": {"one": single, "many": many},
    }


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _peer_table(
    specs: list[PeerSpec], skipped: dict[str, str], info: dict[str, dict[str, str]]
) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for spec in specs:
        table[spec.name] = {"status": "ran", "backend": spec.backend, **info.get(spec.name, {})}
    for name, reason in skipped.items():
        table[name] = {"status": "skipped", "reason": reason}
    for name, peer in info.items():
        if name not in table:  # a tmpfs twin
            table[name] = {"status": "ran", "backend": "sqlite", **peer}
    return table


def _config(args: argparse.Namespace, pg_url: str | None, pg_reason: str | None) -> dict[str, Any]:
    return {
        "sessions": args.sessions,
        "turns": args.turns,
        "scaling": args.scaling,
        "concurrency": args.concurrency,
        "pg_writers": args.pg_writers,
        "seed": SEED,
        "smoke": args.smoke,
        "postgres": None if pg_url is None or pg_reason else _redact(pg_url),
        "postgres_skipped": pg_reason,
        "tmpfs": args.tmpfs,
    }


def _redact(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


def _environment() -> dict[str, Any]:
    versions = {}
    for package in (
        "turnstore",
        "msgspec",
        "psycopg",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "openai-agents",
        "aiosqlite",
    ):
        versions[package] = _version(package)
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "packages": versions,
    }


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _rss_probe(args: argparse.Namespace, pg_url: str | None) -> dict[str, Any] | None:
    """The same phases for turnstore alone, in a child process: its own memory footprint."""
    with tempfile.TemporaryDirectory(prefix="turnstore-bench-rss-") as scratch:
        out = Path(scratch) / "rss.json"
        command = [
            sys.executable,
            "-m",
            "bench.agent_loop",
            "--peers",
            "turnstore,turnstore+events,turnstore-pg,turnstore-pg+events",
            "--sessions",
            str(args.sessions),
            "--turns",
            str(args.turns),
            "--scaling",
            ",".join(map(str, args.scaling)),
            "--concurrency",
            str(args.concurrency),
            "--pg-writers",
            str(args.pg_writers),
            "--no-rss-probe",
            "--no-tmpfs",
            "--quiet",
            "--json",
            str(out),
        ]
        command += ["--postgres-url", pg_url] if pg_url else ["--no-postgres"]
        done = subprocess.run(command, cwd=Path(__file__).parent.parent, check=False)
        if done.returncode != 0 or not out.exists():
            return None
        return dict(json.loads(out.read_text())["rss"])


# --- command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent_loop",
        description="The agent-loop benchmark: turnstore against LangGraph's savers, the "
        "OpenAI Agents SDK's SQLiteSession, plain sqlite3 and the disk's commit ceiling.",
    )
    parser.add_argument("--sessions", type=int, default=20, help="sessions (default 20)")
    parser.add_argument("--turns", type=int, default=50, help="turns per session (default 50)")
    parser.add_argument(
        "--scaling",
        type=_points,
        default=[50, 200, 800],
        help="lengths of the growing session to report at (default 50,200,800; '' skips)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=32, help="concurrent sessions on SQLite (default 32)"
    )
    parser.add_argument(
        "--pg-writers", type=int, default=PG_WRITERS, help="concurrent PostgreSQL writers"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
        help="a server to create scratch databases on (rows are skipped if it does not answer)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL rows")
    parser.add_argument(
        "--probes",
        type=int,
        default=phases.SCALING_PROBES,
        help="saves timed at each scaling point (default %(default)s)",
    )
    parser.add_argument("--peers", help="comma-separated peer names to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--dir", help="where the scratch stores go (default: the temp dir)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes (2 sessions x 3 turns, scaling 2,4, concurrency 4): checks, not numbers",
    )
    parser.add_argument(
        "--no-rss-probe",
        dest="rss_probe",
        action="store_false",
        help="skip the turnstore-only child process that measures turnstore's own memory",
    )
    parser.add_argument(
        "--no-tmpfs",
        dest="tmpfs",
        action="store_false",
        help=f"skip the tmpfs rows (the same peers with their files on {SHM})",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing; use with --json")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sessions, args.turns, args.scaling = 2, 3, [2, 4]
        args.concurrency, args.pg_writers, args.rss_probe, args.probes = 4, 2, False, 3
    return args


def _points(text: str) -> list[int]:
    points = sorted({int(part) for part in text.split(",") if part.strip()})
    if any(point <= 0 for point in points):
        raise argparse.ArgumentTypeError("scaling points must be positive turn counts")
    return points


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table unless --quiet; write --json if asked."""
    args = parse_args(argv)
    doc = asyncio.run(run(args))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if not args.quiet:
        print(report.render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
