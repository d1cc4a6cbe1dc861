"""Moving LangGraph threads in and out: a `SqliteSaver` database copied into turnstore and back.

python -m bench.move [--threads 6] [--turns 30] [--postgres [URL]] [--dir DIR] [--json PATH]
    [--quiet] [--smoke]

The targets (issue 44): the copy into turnstore runs at >= 0.5x the rate at which
`SqliteSaver` alone reads the same checkpoints through the same API, with a peak RSS under
300 MB, into a store of at most 1/10 of the source's bytes; `--verify` takes at most 2x the
time it takes to read both sides; the way out (`export-to`) runs at >= 0.5x the rate at which
a fresh `SqliteSaver` accepts the same checkpoints. With `--postgres`, the same again from a
`PostgresSaver` into turnstore on PostgreSQL and back, with the byte target at most 1/5.

How each number is obtained:

* the source: a `SqliteSaver` file (WAL) grown by LangGraph itself: --threads threads of
  --turns turns, each turn one `graph.invoke` of the ReAct-shaped agent ⇄ tools graph of
  `bench.peers` (four messages of about 3 KB a turn from `bench.workload`) with LangGraph's
  default `add_messages` channel, which stores the whole history at every checkpoint: the
  source grows with the square of the turns, as the multi-GB tables users report do.
  Its bytes: the file and its log after a `wal_checkpoint(TRUNCATE)`.
* the measurements run in three fresh child processes (`python -m bench.move --child ...`),
  one after another: the two reading ceilings; the copy in, alone; then the rest. Each step
  opens its savers itself. Peak RSS: `VmHWM` of /proc/self/status
  (`bench.measure.max_rss_bytes`) after the step, the child's peak so far (the copy in's own).
* the reading ceiling: `SqliteSaver` alone (read-only connection) reads every checkpoint by
  `get_tuple`, thread by thread, oldest first, the ids taken from its tables, as the copy
  reads them; and, apart, every thread by `list` (newest first, one pass).
* the copy in: `copy_threads(SqliteSaver, TurnstoreSaver)` into a new turnstore SQLite file,
  the library call under `turnstore import-from langgraph`. Rate: checkpoints per second;
  ratio: over the `get_tuple` ceiling's rate. Turnstore's bytes: its file and log after a
  `wal_checkpoint(TRUNCATE)`.
* verify: `verify_threads(source, target)`, against the time both savers take to `list`
  every thread (the source's `list` row plus the same read of the turnstore store).
* the way out: `copy_threads(TurnstoreSaver, SqliteSaver)` into a new `SqliteSaver` file;
  its ceiling: a fresh `SqliteSaver` fed the same checkpoints (read from the source first,
  untimed) by `put` and `put_writes` alone, timed around those calls only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.measure import max_rss_bytes
from bench.peers import build_react_graph
from bench.postgres import DEFAULT_URL
from bench.workload import SEED, Turn, make_turn

TARGETS = {"copy": 0.5, "rss_mb": 300.0, "bytes": 0.1, "verify": 2.0, "export": 0.5}
"""The issue's targets: rate ratios (at least), peak MB, bytes ratio and time ratio (at most)."""
MB = 1_000_000


# --- the source, filled by LangGraph ----------------------------------------------------------


def fill(side: str, threads: int, turns: int, progress: Callable[[str], None]) -> float:
    """Grow `threads` threads of `turns` turns each on the saver `side` names; seconds."""
    from langchain_core.messages import HumanMessage

    began = time.perf_counter()
    with ExitStack() as stack:
        saver = _saver(stack, side, read_only=False)
        if side.startswith("sqlite:"):
            saver.conn.execute("PRAGMA journal_mode=WAL")
        holder: dict[str, Turn] = {}
        graph = build_react_graph(saver, lambda: holder["turn"])
        for number in range(threads):
            thread = f"move-{number:04d}"
            for index in range(turns):
                holder["turn"] = turn = make_turn(SEED, thread, index)
                user = HumanMessage(content=turn.user_text, id=f"user-{thread}-{index}")
                config = {"configurable": {"thread_id": thread}}
                graph.invoke({"messages": [user], "loop_state": turn.state}, config)
            progress(f"  filled {thread}: {turns} turns")
    return time.perf_counter() - began


@contextmanager
def closing_sqlite(path: Path, *, read_only: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection a saver may use from LangGraph's threads; closed on leaving."""
    target = f"{path.as_uri()}?mode=ro" if read_only else str(path)
    conn = sqlite3.connect(target, uri=read_only, check_same_thread=False)
    try:
        yield conn
    finally:
        conn.close()


def sqlite_bytes(path: Path) -> int:
    """A SQLite file and its log, the log folded in first (as the savers' sizes are read)."""
    with closing_sqlite(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


# --- the measured children --------------------------------------------------------------------


def child_main(argv: Sequence[str]) -> int:
    """`--child JSON`: the steps ([name, action, [side, ...]]) in turn, one JSON line out.

    Each step's `peak_rss` is the process's peak so far: exact for a child's first step.
    """
    found: dict[str, dict[str, Any]] = {}
    for name, action, sides in json.loads(argv[0]):
        with ExitStack() as stack:
            found[name] = ACTIONS[action](stack, *sides)
        found[name]["peak_rss"] = max_rss_bytes()
    print(json.dumps(found))
    return 0


def _saver(stack: ExitStack, side: str, *, read_only: bool) -> Any:
    """The saver a side names: `sqlite:PATH` (SqliteSaver), `postgres:URL` (PostgresSaver,
    its sessions read-only when reading), `turnstore:URL` (TurnstoreSaver on a store opened
    with its defaults)."""
    kind, where = side.split(":", 1)
    if kind != "turnstore":
        # The savers `turnstore import-from langgraph` opens from a path or a URL.
        from turnstore.cli.moves import langgraph_saver

        return langgraph_saver(where, read_only=read_only, stack=stack)
    import turnstore
    from turnstore.integrations.langgraph import TurnstoreSaver

    store = stack.enter_context(turnstore.open_blocking(where, read_only=read_only))
    return stack.enter_context(TurnstoreSaver(store))


def read_by_get_tuple(stack: ExitStack, source: str) -> dict[str, Any]:
    """Every checkpoint through `get_tuple`, oldest first per thread, as the copy reads."""
    from turnstore.integrations.langgraph_move import config_of, tables_of

    saver = _saver(stack, source, read_only=True)
    tables = tables_of(saver)
    count = 0
    began = time.perf_counter()
    for thread in tables.thread_ids():
        for ns, checkpoint_id in tables.checkpoint_ids(thread):
            count += saver.get_tuple(config_of(thread, ns, checkpoint_id)) is not None
    return {"checkpoints": count, "seconds": time.perf_counter() - began}


def read_by_list(stack: ExitStack, source: str) -> dict[str, Any]:
    """Every thread through `list`, newest first, as `verify_threads` reads each side."""
    from turnstore.integrations.langgraph_move import config_of, tables_of

    saver = _saver(stack, source, read_only=True)
    count = 0
    began = time.perf_counter()
    for thread in tables_of(saver).thread_ids():
        count += sum(1 for _ in saver.list(config_of(thread, "")))
    return {"checkpoints": count, "seconds": time.perf_counter() - began}


def copy(stack: ExitStack, source: str, target: str) -> dict[str, Any]:
    """`copy_threads` from one side into a new other: the library call under the commands."""
    from turnstore.integrations.langgraph_move import copy_threads

    report = copy_threads(
        _saver(stack, source, read_only=True), _saver(stack, target, read_only=False)
    )
    return _copied(report)


def _copied(report: Any) -> dict[str, Any]:
    if report.conflicts or report.skipped:
        raise RuntimeError(f"the copy found problems: {report.conflicts + report.skipped}")
    return {"checkpoints": report.checkpoint_count, "seconds": report.seconds}


def verify(stack: ExitStack, source: str, target: str) -> dict[str, Any]:
    """`verify_threads` over the source and the copy; fails on a difference."""
    from turnstore.integrations.langgraph_move import verify_threads

    report = verify_threads(
        _saver(stack, source, read_only=True), _saver(stack, target, read_only=True)
    )
    if report.difference is not None:
        raise RuntimeError(f"verify found a difference: {report.difference}")
    return {"checkpoints": report.checkpoint_count, "seconds": report.seconds}


def accept(stack: ExitStack, source: str, target: str) -> dict[str, Any]:
    """A fresh saver fed every source checkpoint by `put` / `put_writes` alone."""
    from turnstore.integrations.langgraph_move import config_of, tables_of

    reader = _saver(stack, source, read_only=True)
    writer = _saver(stack, target, read_only=False)
    tables = tables_of(reader)
    count, seconds = 0, 0.0
    for thread in tables.thread_ids():
        for ns, checkpoint_id in tables.checkpoint_ids(thread):
            item = reader.get_tuple(config_of(thread, ns, checkpoint_id))
            if item is None:
                continue
            parent = item.parent_config or {"configurable": {}}
            config = config_of(thread, ns, parent["configurable"].get("checkpoint_id"))
            versions = dict(item.checkpoint["channel_versions"])
            tasks: dict[str, list[tuple[str, Any]]] = {}
            for task_id, channel, value in item.pending_writes or []:
                tasks.setdefault(task_id, []).append((channel, value))
            began = time.perf_counter()
            stored = writer.put(config, item.checkpoint, item.metadata, versions)
            for task_id, writes in tasks.items():
                writer.put_writes(stored, writes, task_id)
            seconds += time.perf_counter() - began
            count += 1
    return {"checkpoints": count, "seconds": seconds}


ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "get_tuple": read_by_get_tuple,
    "list": read_by_list,
    "copy": copy,
    "verify": verify,
    "accept": accept,
}


def measure(steps: Sequence[tuple[str, str, Sequence[str]]]) -> dict[str, dict[str, Any]]:
    """(name, action, sides) steps in one fresh child process, in turn: their figures."""
    command = [sys.executable, "-m", "bench.move", "--child", json.dumps(steps)]
    done = subprocess.run(
        command, cwd=Path(__file__).parent.parent, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the child for {steps} failed:\n{done.stderr}")
    found: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    for figures in found.values():
        seconds = figures["seconds"]
        figures["rate"] = figures["checkpoints"] / seconds if seconds > 0 else 0.0
    return found


# --- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Fill each source, then each measurement in its child, in the order of the table."""
    parts = {"sqlite": run_sqlite(args)}
    if args.postgres is not None:
        parts["postgres"] = run_postgres(args, args.postgres)
    return {
        "config": {"threads": args.threads, "turns": args.turns, "smoke": args.smoke},
        "environment": environment(),
        "parts": parts,
    }


def run_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    """`SqliteSaver` files in and out of a turnstore SQLite store."""
    directory = Path(tempfile.mkdtemp(prefix="bench-move-", dir=args.dir))
    try:
        source, store = directory / "source.sqlite", directory / "copy.turnstore"
        out, accepted = directory / "out.sqlite", directory / "accepted.sqlite"
        args.progress(f"filling a SqliteSaver: {args.threads} threads x {args.turns} turns")
        fill_seconds = fill(f"sqlite:{source}", args.threads, args.turns, args.progress)
        steps = measure_all(
            f"sqlite:{source}", f"turnstore:sqlite:///{store}", f"sqlite:{out}",
            f"sqlite:{accepted}", args.progress,
        )  # fmt: skip
        sizes = {"source": sqlite_bytes(source), "turnstore": sqlite_bytes(store)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {"fill_seconds": round(fill_seconds, 1), "steps": steps, "bytes": sizes,
            "ratios": ratios(steps, sizes, TARGETS)}  # fmt: skip


def run_postgres(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """`PostgresSaver` schemas in and out of a turnstore PostgreSQL store, in a scratch
    database of the server at `url`; sizes are each schema's tables, indexes and TOAST."""
    from bench.postgres import ScratchDatabase

    database = ScratchDatabase(url)
    try:
        source, store, out, accepted = (
            database.schema(name) for name in ("source", "turnstore", "out", "accepted")
        )
        args.progress(f"filling a PostgresSaver: {args.threads} threads x {args.turns} turns")
        fill_seconds = fill(
            f"postgres:{database.libpq_url(source)}", args.threads, args.turns, args.progress
        )
        steps = measure_all(
            f"postgres:{database.libpq_url(source)}",
            f"turnstore:{database.turnstore_url(store)}",
            f"postgres:{database.libpq_url(out)}",
            f"postgres:{database.libpq_url(accepted)}",
            args.progress,
        )
        sizes = {"source": database.size(source), "turnstore": database.size(store)}
    finally:
        database.drop()
    return {"fill_seconds": round(fill_seconds, 1), "steps": steps, "bytes": sizes,
            "ratios": ratios(steps, sizes, {**TARGETS, "bytes": 0.2})}  # fmt: skip


def measure_all(
    source: str, store: str, out: str, accepted: str, progress: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Every step of the table, in three children: the copy in alone in its own, so its peak
    RSS is the copy's."""
    steps: dict[str, dict[str, Any]] = {}
    for group in (
        [("get_tuple", "get_tuple", [source]), ("list", "list", [source])],
        [("copy_in", "copy", [source, store])],
        [
            ("list_turnstore", "list", [store]),
            ("verify", "verify", [source, store]),
            ("accept", "accept", [source, accepted]),
            ("copy_out", "copy", [store, out]),
        ],
    ):
        progress(f"measuring {', '.join(name for name, _, _ in group)}")
        steps.update(measure(group))
    return steps


def ratios(
    steps: dict[str, dict[str, Any]], sizes: dict[str, int], targets: dict[str, float]
) -> dict[str, Any]:
    """Each target's measured figure and whether it holds."""
    both = steps["list"]["seconds"] + steps["list_turnstore"]["seconds"]
    measured = {
        "copy": steps["copy_in"]["rate"] / steps["get_tuple"]["rate"],
        "rss_mb": steps["copy_in"]["peak_rss"] / 2**20,
        "bytes": sizes["turnstore"] / sizes["source"],
        "verify": steps["verify"]["seconds"] / both if both > 0 else 0.0,
        "export": steps["copy_out"]["rate"] / steps["accept"]["rate"],
    }
    at_least = {"copy", "export"}
    return {
        name: {
            "measured": round(value, 3),
            "target": targets[name],
            "passed": value >= targets[name] if name in at_least else value <= targets[name],
        }
        for name, value in measured.items()
    }


def environment() -> dict[str, Any]:
    from bench.langgraph_saver import environment as langgraph_environment

    found = langgraph_environment(False, None)
    found["load_average"] = [round(value, 2) for value in os.getloadavg()]
    found["machine"] = platform.machine()
    return found


# --- printing ---------------------------------------------------------------------------------

ROWS = (
    ("get_tuple", "{saver} reads by get_tuple (ceiling in)", None),
    ("list", "{saver} reads by list", None),
    ("copy_in", "copy {saver} -> turnstore", "copy"),
    ("list_turnstore", "TurnstoreSaver reads by list", None),
    ("verify", "verify (vs both lists)", "verify"),
    ("accept", "{saver} accepts by put (ceiling out)", None),
    ("copy_out", "copy turnstore -> {saver}", "export"),
)
SAVERS = {"sqlite": "SqliteSaver", "postgres": "PostgresSaver"}


def render(doc: dict[str, Any]) -> str:
    config = doc["config"]
    smoke = " [SMOKE: tiny sizes, the numbers mean nothing]" if config["smoke"] else ""
    lines = [
        f"LangGraph threads moved in and out: {config['threads']} threads x {config['turns']}"
        f" turns{smoke}; load average at start {doc['environment']['load_average']}",
    ]
    for name, part in doc["parts"].items():
        lines += ["", *render_part(SAVERS[name], part)]
    return "\n".join(lines)


def render_part(saver: str, part: dict[str, Any]) -> list[str]:
    """One backend's table: its steps, ratios, bytes and peak RSS."""
    steps, found = part["steps"], part["ratios"]
    lines = [
        f"{saver} (filled in {part['fill_seconds']} s)",
        f"{'step':<46} {'checkpoints':>11} {'seconds':>9} {'per s':>9} {'peak MB':>8}"
        f" {'ratio':>7}  target",
    ]
    for key, label, target in ROWS:
        step = steps[key]
        ratio, verdict = "", ""
        if target is not None:
            mark = found[target]
            sign = ">=" if target in ("copy", "export") else "<="
            ratio = f"{mark['measured']:.2f}x"
            verdict = f"{sign} {mark['target']}: {'PASS' if mark['passed'] else 'MISS'}"
        lines.append(
            f"{label.format(saver=saver):<46} {step['checkpoints']:>11,}"
            f" {step['seconds']:>9.2f} {step['rate']:>9.0f} {step['peak_rss'] / 2**20:>8.0f}"
            f" {ratio:>7}  {verdict}"
        )
    sizes, rss, size = part["bytes"], found["rss_mb"], found["bytes"]
    return [
        *lines,
        f"bytes: source {sizes['source'] / MB:.1f} MB, turnstore {sizes['turnstore'] / MB:.1f} MB,"
        f" ratio {size['measured']:.3f} (<= {size['target']}:"
        f" {'PASS' if size['passed'] else 'MISS'})",
        f"peak RSS of the copy in: {rss['measured']:.0f} MB (< {rss['target']:.0f}:"
        f" {'PASS' if rss['passed'] else 'MISS'})",
    ]


# --- command line -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.move", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--threads", type=int, default=6, help="threads in the source")
    parser.add_argument(
        "--turns", type=int, default=30, help="turns per thread (6 x 30: about 50 MB)"
    )
    parser.add_argument("--dir", help="where the files go (default: a temp dir)")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
        metavar="URL",
        help="also move PostgresSaver threads into turnstore on PostgreSQL and back (a scratch"
        " database on the server at URL; default: the test server)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    if args.smoke:
        args.threads, args.turns = 2, 3
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
