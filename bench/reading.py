"""Reading a LangGraph thread's newest messages: `store.conversation` at 50 and 800 turns.

    python -m bench.reading [--small 50] [--large 800] [--limit 50] [--rounds 200]
        [--warmup 10] [--backends sqlite,postgres] [--postgres-url URL] [--dir DIR]
        [--json PATH] [--quiet] [--smoke]

The target (a LangGraph thread's conversation read as a window of its stored list lineage):
reading a thread's newest 50 messages at 800 turns costs at most 1.3x what it costs at 50
turns, on SQLite and on PostgreSQL.

How each number is obtained:

* the data: per backend one store, a SQLite file on disk (in a new directory under the temp
  dir, or under --dir; mind a TMPDIR on tmpfs) or a fresh schema in the PostgreSQL test
  database (dropped at the end). Thread A gets --small turns, then thread B --large turns,
  each turn one `graph.invoke` of the ReAct-shaped agent ⇄ tools graph of `bench.peers`
  (four messages of about 3 KB a turn from `bench.workload`) compiled with
  `turnstore.integrations.langgraph.TurnstoreSaver`, at LangGraph's default durability.
  The writing store runs without the background indexer, so nothing is left to index while
  the reads are timed; it is closed before they start.
* the reads: a fresh read-only blocking store on the same place times
  `store.conversation("langgraph/<thread>", ConversationRequest(limit=--limit))`; as the
  reference, LangGraph's own read of the same thread through a `TurnstoreSaver` on that
  store, `graph.get_state(config).values["messages"][-limit:]`, which loads and decodes the
  whole checkpoint. Before timing, both reads of both threads are checked to give the same
  newest messages (ids, in order). Then one read at a time: --warmup untimed calls at each
  size, then --rounds rounds each timing it once at each size (`time.perf_counter()` around
  the call), the two sizes' order alternating, and `gc.collect()` before every call so no
  call pays for an earlier one's garbage. Reported: the median per read and size, and the
  ratio of the medians, large over small.
* PostgreSQL is read twice: as written, and after `ANALYZE` of the schema's tables (on a
  fresh reader). The planner picks plans from table statistics; a server running autovacuum
  gathers them as tables grow, one without it (the test server here, `autovacuum = off`)
  never does, and with no statistics a plan may scan a whole thread's rows.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import turnstore
from bench.langgraph_saver import environment as langgraph_environment
from bench.peers import build_react_graph
from bench.postgres import DEFAULT_URL, unavailable, with_database
from bench.workload import SEED, Turn, make_turn
from turnstore.records import ConversationRequest

TARGET = 1.3
"""The most the newest-messages read may cost at --large turns over --small turns."""
THREADS = {"small": "reading-a", "large": "reading-b"}
"""The LangGraph thread ids of the small and the large thread."""
READS = ("conversation", "get_state")
"""turnstore's window read, then LangGraph's whole-checkpoint read (the reference)."""


# --- places and writing --------------------------------------------------------------------------


@contextmanager
def place(backend: str, args: argparse.Namespace) -> Iterator[str]:
    """A fresh store URL: a SQLite file on disk, or a PostgreSQL schema; removed afterwards."""
    if backend == "postgres":
        import psycopg

        schema = f"bench_reading_{uuid.uuid4().hex[:10]}"
        try:
            database = urlsplit(args.postgres_url).path.lstrip("/")
            yield with_database(args.postgres_url, database, schema=schema)
        finally:
            with psycopg.connect(args.postgres_url, autocommit=True) as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        return
    root = Path(tempfile.mkdtemp(prefix="bench-reading-", dir=args.dir))
    try:
        yield str(root / "reading.sqlite3")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def write_thread(graph: Any, holder: dict[str, Turn], thread: str, turns: int) -> float:
    """Grow `thread` by `turns` graph invocations; the seconds it took."""
    from langchain_core.messages import HumanMessage

    began = time.perf_counter()
    for index in range(turns):
        turn = make_turn(SEED, thread, index)
        holder["turn"] = turn
        user = HumanMessage(content=turn.user_text, id=f"user-{thread}-{index}")
        graph.invoke({"messages": [user], "loop_state": turn.state}, config(thread))
    return time.perf_counter() - began


def write(url: str, sizes: dict[str, int], progress: Callable[[str], None]) -> dict[str, float]:
    """Both threads through the graph on TurnstoreSaver, the small one first."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    seconds = {}
    with turnstore.open_blocking(url, index_in_background=False) as store:
        saver = TurnstoreSaver(store)
        holder: dict[str, Turn] = {}
        graph = build_react_graph(saver, lambda: holder["turn"])
        for size, thread in THREADS.items():
            seconds[size] = write_thread(graph, holder, thread, sizes[size])
            progress(f"  wrote {thread}: {sizes[size]} turns in {seconds[size]:.1f}s")
        saver.close()
    return seconds


# --- reading -----------------------------------------------------------------------------------


def readers(store: Any, graph: Any, limit: int) -> dict[tuple[str, str], Callable[[], list[str]]]:
    """Each (read, size) as a call returning the newest `limit` messages' ids, oldest first."""
    request = ConversationRequest(limit=limit)

    def conversation(thread: str) -> Callable[[], list[str]]:
        def read() -> list[str]:
            page = store.conversation(f"langgraph/{thread}", request)
            return [message.item["id"] for message in page.messages]

        return read

    def get_state(thread: str) -> Callable[[], list[str]]:
        def read() -> list[str]:
            messages = graph.get_state(config(thread)).values["messages"][-limit:]
            return [message.id for message in messages]

        return read

    calls: dict[tuple[str, str], Callable[[], list[str]]] = {}
    for size, thread in THREADS.items():
        calls["conversation", size] = conversation(thread)
        calls["get_state", size] = get_state(thread)
    return calls


def check(
    store: Any,
    calls: dict[tuple[str, str], Callable[[], list[str]]],
    limit: int,
    sizes: dict[str, int],
) -> None:
    """Both reads of each thread give the same newest messages; the page counts the list."""
    for size, thread in THREADS.items():
        ours, theirs = calls["conversation", size](), calls["get_state", size]()
        expected = min(limit, 4 * sizes[size])
        if ours != theirs or len(ours) != expected:
            raise AssertionError(
                f"{thread}: conversation gave {len(ours)} messages ending {ours[-2:]},"
                f" get_state {len(theirs)} ending {theirs[-2:]}; expected {expected} alike"
            )
        page = store.conversation(f"langgraph/{thread}", ConversationRequest(limit=limit))
        if page.total != 4 * sizes[size]:
            raise AssertionError(f"{thread}: total {page.total}, expected {4 * sizes[size]}")


def time_reads(
    calls: dict[tuple[str, str], Callable[[], list[str]]], warmup: int, rounds: int
) -> dict[tuple[str, str], list[float]]:
    """Seconds of each call per round: one read at a time, its two sizes alternating."""
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
    for read in READS:
        pair = [(read, "small"), (read, "large")]
        for key in pair:
            for _ in range(warmup):
                calls[key]()
        for number in range(rounds):
            for key in pair if number % 2 == 0 else pair[::-1]:
                gc.collect()  # no garbage of an earlier call is collected inside this one
                began = time.perf_counter()
                calls[key]()
                seconds[key].append(time.perf_counter() - began)
    return seconds


def analyze(postgres_url: str, url: str) -> None:
    """ANALYZE every table of the store's schema: what autovacuum would have done by now."""
    import psycopg
    from psycopg import sql

    schema = dict(parse_qsl(urlsplit(url).query))["schema"]
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            connection.execute(
                sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            )


def read_row(url: str, args: argparse.Namespace, sizes: dict[str, int]) -> dict[str, Any]:
    """Each read's median at both sizes and the ratio, on a fresh read-only store."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    with turnstore.open_blocking(url, read_only=True) as store:
        saver = TurnstoreSaver(store)
        graph = build_react_graph(saver, lambda: None)
        calls = readers(store, graph, args.limit)
        check(store, calls, args.limit, sizes)
        seconds = time_reads(calls, args.warmup, args.rounds)
        saver.close()
    reads: dict[str, Any] = {}
    for read in READS:
        found: dict[str, Any] = {}
        for size in sizes:
            samples = sorted(seconds[read, size])
            found[size] = {
                "turns": sizes[size],
                "messages": 4 * sizes[size],
                "median_ms": round(statistics.median(samples) * 1000, 4),
                "p10_ms": round(samples[len(samples) // 10] * 1000, 4),
                "p90_ms": round(samples[len(samples) * 9 // 10] * 1000, 4),
            }
        found["ratio"] = round(found["large"]["median_ms"] / found["small"]["median_ms"], 3)
        reads[read] = found
    return {
        "reads": reads,
        "target": {
            "what": f"conversation(limit={args.limit}) @{args.large} / @{args.small} turns",
            "required": f"<= {TARGET}",
            "measured": reads["conversation"]["ratio"],
            "passed": reads["conversation"]["ratio"] <= TARGET,
        },
    }


def measure(backend: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One backend's rows: SQLite's; PostgreSQL's as written and after ANALYZE."""
    sizes = {"small": args.small, "large": args.large}
    args.progress(f"{backend}: writing {args.small} + {args.large} turns")
    rows = []
    with place(backend, args) as url:
        written = {
            size: round(value, 2) for size, value in write(url, sizes, args.progress).items()
        }
        passes = (
            [("disk", None)]
            if backend == "sqlite"
            else [("not analyzed", False), ("analyzed", True)]
        )
        for where, analyzed in passes:
            if analyzed:
                analyze(args.postgres_url, url)
            args.progress(f"{backend} ({where}): timing {args.rounds} rounds of each read")
            row = {"backend": backend, "place": f"{backend} ({where})", "analyzed": analyzed}
            rows.append({**row, "write_seconds": written, **read_row(url, args, sizes)})
    return rows


# --- report --------------------------------------------------------------------------------------


def environment(postgres_url: str | None) -> dict[str, Any]:
    """The machine, versions and load of a run: the LangGraph bench's, with the load average."""
    found = langgraph_environment(postgres_url is not None, postgres_url)
    found["load_average"] = [round(load, 2) for load in os.getloadavg()]
    return found


def render(doc: dict[str, Any]) -> str:
    config_ = doc["config"]
    small, large, limit = config_["small"], config_["large"], config_["limit"]
    smoke = " [SMOKE: tiny sizes, the numbers mean nothing]" if config_["smoke"] else ""
    lines = [
        f"A LangGraph thread's newest {limit} messages, {small} against {large} turns"
        f" (4 messages a turn){smoke}",
        f"median of {config_['rounds']} rounds after {config_['warmup']} warm-up calls;"
        f" load average at start {doc['environment']['load_average']}",
        "",
        f"{'store':<24} {'read':<44} {f'@{small} ms':>10} {f'@{large} ms':>10} {'ratio':>7}"
        "  target",
    ]
    labels = {
        "conversation": f"store.conversation(limit={limit})",
        "get_state": f"graph.get_state(...)['messages'][-{limit}:]",
    }
    for row in doc["rows"]:
        for read in READS:
            found = row["reads"][read]
            verdict = ""
            if read == "conversation":
                verdict = f"<= {TARGET}: {'PASS' if row['target']['passed'] else 'MISS'}"
            line = (
                f"{row['place']:<24} {labels[read]:<44} {found['small']['median_ms']:>10.3f}"
                f" {found['large']['median_ms']:>10.3f} {found['ratio']:>6.2f}x  {verdict}"
            )
            lines.append(line.rstrip())
    if any(row["analyzed"] is False for row in doc["rows"]):
        lines.append(
            "postgres (not analyzed): the tables as written, without planner statistics;"
            " (analyzed): after ANALYZE"
        )
    lines.append("")
    for row in doc["rows"]:
        if row["analyzed"]:
            continue
        written = row["write_seconds"]
        lines.append(
            f"{row['backend']}: writing took {written['small']}s ({small} turns)"
            f" and {written['large']}s ({large} turns)"
        )
    for backend, why in doc["skipped"].items():
        lines.append(f"{backend}: skipped ({why})")
    lines.append(f"elapsed {doc['elapsed_s']:.0f}s")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reading", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--small", type=int, default=50, help="turns of thread A")
    parser.add_argument("--large", type=int, default=800, help="turns of thread B")
    parser.add_argument("--limit", type=int, default=50, help="newest messages read")
    parser.add_argument("--rounds", type=int, default=200, help="timed calls of each read")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls of each read")
    parser.add_argument("--backends", default="sqlite,postgres", help="which backends to run")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
    )
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    if args.smoke:
        args.small, args.large, args.limit, args.rounds, args.warmup = 3, 6, 5, 3, 1
    args.progress = (lambda _: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    backends = [name for name in args.backends.split(",") if name]
    skipped: dict[str, str] = {}
    if "postgres" in backends and (reason := unavailable(args.postgres_url)) is not None:
        skipped["postgres"] = reason
        backends.remove("postgres")
    doc: dict[str, Any] = {
        "config": {
            "small": args.small,
            "large": args.large,
            "limit": args.limit,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "target": TARGET,
            "smoke": args.smoke,
        },
        "environment": environment(args.postgres_url if "postgres" in backends else None),
    }
    doc["rows"] = [row for backend in backends for row in measure(backend, args)]
    doc["skipped"] = skipped
    doc["elapsed_s"] = round(time.perf_counter() - began, 1)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
