"""Moving OpenAI Agents SDK and Google ADK sessions into turnstore: rates against the
frameworks' own reading, peak RSS, `--verify`, and ADK's reads after the move.

python -m bench.move_sessions [--sessions 1000] [--items 400] [--events 200]
    [--long-events 3000] [--listed 5000] [--postgres [URL]] [--dir DIR] [--json PATH]
    [--quiet] [--smoke]

The targets (issue 45): a `SQLiteSession` file of --sessions x --items and a
`DatabaseSessionService` database of --sessions x --events (SQLite; PostgreSQL with
`--postgres`) move in at >= 0.5x the rate at which their own service reads the same sessions,
with a peak RSS under 300 MB; `--verify` takes at most 2x the time of reading both sides.
With `--postgres`, after a move: `get_session` of a --long-events session and `list_sessions`
at --listed sessions (of one user, and of the app without a user id) on our
`TurnstoreSessionService` at least 5x faster than `DatabaseSessionService`'s on the same
server.

How each number is obtained:

* the sources: filled by the frameworks' own code (`bench.session_sources`): `SQLiteSession`
  by `add_items`; ADK by `create_session`, then its events as the rows `append_event` writes,
  in bulk, checked against `append_event` itself.
* the measurements run in fresh child processes (`python -m bench.move_sessions --child
  ...`), one after another: the reading ceiling; the copy in, alone (its peak RSS: `VmHWM`
  of /proc/self/status, `bench.measure.max_rss_bytes`); then turnstore's reading and the
  verify.
* the reading ceiling: `SQLiteSession.get_items()` of every session (a session object each,
  timed around `get_items` alone), or `DatabaseSessionService.get_session` of every session
  (one service; the ids listed first, untimed).
* the copy in: what `turnstore import-from openai-agents|adk SOURCE STORE` runs: the source
  opened as the command opens it (read-only), the store by `turnstore.open_blocking(url,
  index_in_background=False)`, `acopy_sessions` on one event loop within the command's
  `frozen_heap()`; the report's seconds.
  Rate: items (events) per second; ratio: over the ceiling's rate.
* verify: `averify_sessions` as `--verify` runs it, against the time of reading both sides:
  the ceiling's read plus the same read of the copy (`TurnstoreSession.get_items()`, or
  `TurnstoreSessionService.get_session`, on the store opened as the command opens it).
* ADK's reads (`--postgres`): a second `DatabaseSessionService` schema of one session of
  --long-events events and --listed sessions of one user (a turn of four events each),
  copied into turnstore on the same server; then, in one child, each call's median over a
  few calls, ours and ADK's interleaved: `get_session` of the long session, `list_sessions`
  of the user, and of the app without a user id. Beside `get_session`, a ceiling: the long
  session's `Event` objects built alone (`Event.model_validate` of each stored event, as
  ours and ADK's both build them); ADK's time over it is the most any `get_session` that
  returns ADK's events can gain.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.postgres import DEFAULT_URL
from bench.session_steps import APP, LISTED, LONG, USERS, child_main

TARGETS = {"copy": 0.5, "rss_mb": 300.0, "verify": 2.0, "faster": 5.0}
"""The issue's targets: the rate ratio (at least), peak MB and time ratio (at most), and how
many times faster our ADK reads are (at least)."""


# --- measuring, in children -------------------------------------------------------------------


def measure(steps: Sequence[tuple[str, str, Sequence[Any]]]) -> dict[str, dict[str, Any]]:
    """(name, action, arguments) steps in one fresh child process, in turn: their figures."""
    command = [sys.executable, "-m", "bench.move_sessions", "--child", json.dumps(steps)]
    done = subprocess.run(
        command, cwd=Path(__file__).parent.parent, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the child for {steps} failed:\n{done.stderr}")
    found: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    for figures in found.values():
        if "count" in figures:
            seconds = figures["seconds"]
            figures["rate"] = figures["count"] / seconds if seconds > 0 else 0.0
    return found


def measure_move(
    actions: tuple[str, str, str], source: str, store: str, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """The ceiling, the copy in (alone in its child) and the verify with turnstore's read;
    with --smoke, all in one child (the framework is imported once: a quick check)."""
    read, read_turnstore, move = actions
    groups = [
        [("read", read, [source])],
        [("copy_in", move, [source, store, False])],
        [("read_turnstore", read_turnstore, [store]), ("verify", move, [source, store, True])],
    ]
    if args.smoke:
        groups = [[step for group in groups for step in group]]
    steps: dict[str, dict[str, Any]] = {}
    for group in groups:
        args.progress(f"measuring {', '.join(name for name, _, _ in group)}")
        steps.update(measure(group))
    return steps


def ratios(steps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each move target's measured figure and whether it holds."""
    both = steps["read"]["seconds"] + steps["read_turnstore"]["seconds"]
    measured = {
        "copy": steps["copy_in"]["rate"] / steps["read"]["rate"],
        "rss_mb": steps["copy_in"]["peak_rss"] / 2**20,
        "verify": steps["verify"]["seconds"] / both if both > 0 else 0.0,
    }
    return {
        name: {
            "measured": round(value, 3),
            "target": TARGETS[name],
            "passed": value >= TARGETS[name] if name == "copy" else value <= TARGETS[name],
        }
        for name, value in measured.items()
    }


# --- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Each part in turn: fill its source, then measure it in children."""
    doc: dict[str, Any] = {"config": config(args), "environment": environment(), "parts": {}}
    directory = Path(tempfile.mkdtemp(prefix="bench-move-sessions-", dir=args.dir))
    try:
        doc["parts"]["agents"] = run_agents(args, directory)
        url = f"sqlite+aiosqlite:///{directory / 'adk.db'}"
        doc["parts"]["adk_sqlite"] = run_adk(args, url, f"sqlite:///{directory / 'adk.ts'}")
        if args.postgres is not None:
            doc["parts"].update(run_postgres(args))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    doc["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    return doc


def environment() -> dict[str, Any]:
    import importlib.metadata
    import platform
    import sqlite3

    packages: dict[str, str | None] = {}
    for package in ("turnstore", "openai-agents", "google-adk", "sqlalchemy", "aiosqlite",
                    "psycopg"):  # fmt: skip
        try:
            packages[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            packages[package] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "packages": packages,
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }


def config(args: argparse.Namespace) -> dict[str, Any]:
    names = ("sessions", "items", "events", "long_events", "listed", "calls", "smoke")
    return {name: getattr(args, name) for name in names}


def run_agents(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """A `SQLiteSession` file into a turnstore SQLite store."""
    from bench.session_sources import fill_agents

    source, store = directory / "agents.db", directory / "agents.ts"
    args.progress(f"filling a SQLiteSession file: {args.sessions} x {args.items} items")
    filled = fill_agents(source, args.sessions, args.items, args.progress)
    actions = ("agents_read", "agents_read_turnstore", "agents_move")
    steps = measure_move(actions, str(source), f"sqlite:///{store}", args)
    return {"fill_seconds": round(filled, 1), "steps": steps, "ratios": ratios(steps),
            "source_bytes": os.path.getsize(source)}  # fmt: skip


def adk_plan(args: argparse.Namespace) -> list[Any]:
    """The ADK source: --sessions sessions of --events events, over `USERS` users."""
    from bench.session_sources import Planned

    users = min(USERS, args.sessions)
    return [
        Planned(APP, f"user-{number % users:02d}", f"chat-{number:05d}", args.events)
        for number in range(args.sessions)
    ]


def fill_adk(url: str, plan: list[Any], progress: Callable[[str], None]) -> float:
    """The planned sessions in a `DatabaseSessionService` database, checked; seconds."""
    from bench.session_sources import check_adk
    from bench.session_sources import fill_adk as fill

    began = time.perf_counter()
    kept = asyncio.run(fill(url, plan, progress))
    filled = time.perf_counter() - began
    asyncio.run(check_adk(url, plan, kept))
    return filled


def run_adk(args: argparse.Namespace, source: str, store: str) -> dict[str, Any]:
    """A `DatabaseSessionService` database into a turnstore store."""
    plan = adk_plan(args)
    args.progress(f"filling a DatabaseSessionService: {args.sessions} x {args.events} events")
    filled = fill_adk(source, plan, args.progress)
    steps = measure_move(("adk_read", "adk_read_turnstore", "adk_move"), source, store, args)
    return {"fill_seconds": round(filled, 1), "steps": steps, "ratios": ratios(steps)}


def run_postgres(args: argparse.Namespace) -> dict[str, Any]:
    """ADK's database on PostgreSQL into turnstore on PostgreSQL, then the reads after a move,
    in a scratch database of the server at --postgres (dropped at the end)."""
    from bench.postgres import ScratchDatabase
    from bench.session_sources import Planned

    database = ScratchDatabase(args.postgres)
    try:
        source, store, listing, read_store = (
            database.schema(name) for name in ("adk", "turnstore", "adk_read", "turnstore_read")
        )
        parts = {
            "adk_postgres": run_adk(args, adk_url(database, source), database.turnstore_url(store))
        }
        plan = [Planned(*LONG, args.long_events)] + [
            Planned(*LISTED, f"listed-{number:05d}", 4) for number in range(args.listed)
        ]
        args.progress(
            f"filling a DatabaseSessionService: a {args.long_events}-event session and"
            f" {args.listed} sessions of one user"
        )
        filled = fill_adk(adk_url(database, listing), plan, args.progress)
        args.progress("copying them into turnstore, then timing the reads")
        source_url, store_url = adk_url(database, listing), database.turnstore_url(read_store)
        copy = ("copy_in", "adk_move", [source_url, store_url, False])
        read = ("reads", "adk_reads", [source_url, store_url, args.calls])
        groups = [[copy, read]] if args.smoke else [[copy], [read]]
        found = {name: figures for group in groups for name, figures in measure(group).items()}
        copied, reads = {"copy_in": found["copy_in"]}, {"reads": found["reads"]}
        parts["adk_reads"] = {
            "fill_seconds": round(filled, 1),
            "copy_in": copied["copy_in"],
            "reads": reads["reads"],
            "ratios": read_ratios(reads["reads"]),
        }
    finally:
        database.drop()
    return parts


def adk_url(database: Any, schema: str) -> str:
    """ADK's async URL for `schema` of the scratch database (psycopg, its search_path)."""
    return database.libpq_url(schema).replace("postgresql://", "postgresql+psycopg://", 1)


def read_ratios(reads: dict[str, Any]) -> dict[str, Any]:
    """How many times faster ours is than ADK's, each read; at least `TARGETS["faster"]`."""
    found = {}
    for name, figures in reads.items():
        if name == "peak_rss":
            continue
        value = figures["theirs"] / figures["ours"] if figures["ours"] > 0 else 0.0
        found[name] = {"measured": round(value, 2), "target": TARGETS["faster"],
                       "passed": value >= TARGETS["faster"]}  # fmt: skip
        if "built" in figures:
            found[name]["ceiling"] = round(figures["theirs"] / figures["built"], 2)
    return found


# --- printing ---------------------------------------------------------------------------------

PARTS = {
    "agents": ("OpenAI Agents SDK: SQLiteSession -> turnstore SQLite", "items",
               "SQLiteSession.get_items", "TurnstoreSession.get_items"),
    "adk_sqlite": ("Google ADK: DatabaseSessionService (SQLite) -> turnstore SQLite", "events",
                   "DatabaseSessionService.get_session", "TurnstoreSessionService.get_session"),
    "adk_postgres": ("Google ADK: DatabaseSessionService (PostgreSQL) -> turnstore PostgreSQL",
                     "events", "DatabaseSessionService.get_session",
                     "TurnstoreSessionService.get_session"),
}  # fmt: skip
READS = {
    "get_session": "get_session of a {size:,}-event session",
    "list_user": "list_sessions(app, user): {size:,} sessions",
    "list_app": "list_sessions(app): {size:,} sessions",
}


def render(doc: dict[str, Any]) -> str:
    config = doc["config"]
    smoke = " [SMOKE: tiny sizes, the numbers mean nothing]" if config["smoke"] else ""
    lines = [
        f"Agent sessions moved in: {config['sessions']} sessions x {config['items']} items"
        f" (Agents SDK), x {config['events']} events (ADK){smoke}; load average at start"
        f" {doc['environment']['load_average']}, at end {doc['load_average_at_end']}"
        f" ({doc['environment']['cpus']} CPUs)",
    ]
    for name, part in doc["parts"].items():
        lines.append("")
        lines += render_reads(part) if name == "adk_reads" else render_part(name, part)
    return "\n".join(lines)


def render_part(name: str, part: dict[str, Any]) -> list[str]:
    """One move's table: its steps, ratios and the copy's peak RSS."""
    title, unit, theirs, ours = PARTS[name]
    steps, found = part["steps"], part["ratios"]
    rows = (
        ("read", f"{theirs} (ceiling)", None),
        ("copy_in", "copy in (import-from)", "copy"),
        ("read_turnstore", ours, None),
        ("verify", "--verify (vs both reads)", "verify"),
    )
    lines = [
        f"{title} (source filled in {part['fill_seconds']} s)",
        f"{'step':<46} {unit:>9} {'seconds':>9} {'per s':>9} {'peak MB':>8} {'ratio':>7}  target",
    ]
    for key, label, target in rows:
        step, ratio, verdict = steps[key], "", ""
        if target is not None:
            mark = found[target]
            sign = ">=" if target == "copy" else "<="
            ratio = f"{mark['measured']:.2f}x"
            verdict = f"{sign} {mark['target']}: {_verdict(mark)}"
        lines.append(
            f"{label:<46} {step['count']:>9,} {step['seconds']:>9.2f} {step['rate']:>9.0f}"
            f" {step['peak_rss'] / 2**20:>8.0f} {ratio:>7}  {verdict}"
        )
    rss = found["rss_mb"]
    return [
        *lines,
        f"peak RSS of the copy in: {rss['measured']:.0f} MB (< {rss['target']:.0f}:"
        f" {_verdict(rss)})",
    ]


def render_reads(part: dict[str, Any]) -> list[str]:
    """The reads after a move: ours beside ADK's, medians."""
    copied = part["copy_in"]
    lines = [
        "Google ADK on PostgreSQL after a move: TurnstoreSessionService beside"
        f" DatabaseSessionService (medians; source filled in {part['fill_seconds']} s, copied"
        f" in {copied['seconds']:.1f} s, {copied['rate']:.0f} events/s)",
        f"{'read':<44} {'ADK ms':>9} {'ours ms':>9} {'faster':>7}  target",
    ]
    for name, figures in part["reads"].items():
        if name == "peak_rss":
            continue
        mark = part["ratios"][name]
        lines.append(
            f"{READS[name].format(size=figures['size']):<44} {figures['theirs'] * 1000:>9.1f}"
            f" {figures['ours'] * 1000:>9.1f} {mark['measured']:>6.1f}x"
            f"  >= {mark['target']}: {_verdict(mark)}"
        )
        if "built" in figures:
            lines.append(
                f"{'  its Event objects built alone (a ceiling)':<44} {'':>9}"
                f" {figures['built'] * 1000:>9.1f} {mark['ceiling']:>6.1f}x  (the most any"
                " service returning ADK's events can be faster)"
            )
    return lines


def _verdict(mark: dict[str, Any]) -> str:
    return "PASS" if mark["passed"] else "MISS"


# --- command line -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.move_sessions",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--sessions", type=int, default=1_000, help="sessions in each source")
    parser.add_argument("--items", type=int, default=400, help="items per SQLiteSession session")
    parser.add_argument("--events", type=int, default=200, help="events per ADK session")
    parser.add_argument(
        "--long-events", type=int, default=3_000, help="events of the long ADK session read"
    )
    parser.add_argument("--listed", type=int, default=5_000, help="ADK sessions listed")
    parser.add_argument("--calls", type=int, default=5, help="calls per read compared (median)")
    parser.add_argument("--dir", help="where the files go (default: a temp dir)")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
        metavar="URL",
        help="also ADK's database on PostgreSQL, and the reads after a move (a scratch database"
        " on the server at URL; default: the test server)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sessions, args.items, args.events = 3, 8, 8
        args.long_events, args.listed, args.calls = 20, 6, 1
    args.progress = (lambda _: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    args = parse_args(argv)
    doc = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
