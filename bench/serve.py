"""`turnstore serve` under load: flat endpoint latency, 100 live tails, saves beside NOTIFY.

python -m bench.serve [--small 1000] [--large 100000] [--rounds 400] [--clients 100]
    [--tail-sessions 10] [--tail-turns 200] [--writers 8] [--writer-turns 150]
    [--backends sqlite,postgres] [--postgres-url URL | --no-postgres] [--json PATH]
    [--dir DIR] [--smoke] [--quiet]

The targets (issue 14), each on SQLite and PostgreSQL:

* flat in the totals: p50 and p99 of every catalog and session endpoint with --large
  sessions in the catalog and a session of --large events are each at most 1.5x the same
  with --small (ratio printed per endpoint, PASS or MISS);
* 100 concurrent SSE clients on one server: the p99 of delivery latency is reported
  (no target: SQLite's figure is bounded below by its documented 0.1 s poll);
* on PostgreSQL, NOTIFY after commit does not serialise saves: 8 writers journaling events
  reach the same turns/s with the notification as with it switched off (ratio printed).

How each number is obtained:

* the data: per backend and size, one store holding N sessions (`bench-NNNNNNN`, ten owners,
  one small user item each, written many at a time through the async store; PostgreSQL's
  set-up connection runs with synchronous_commit=off, a set-up step only), then one session
  `big` saved turn by turn with `bench.turn_events` (four ~3 KB items, 17 events and an
  execution record per turn) until it holds N events, then 3 forks of it. The small and the
  large store are served at once by two `turnstore serve` processes (real uvicorn, loopback).
* the endpoint latencies: one keep-alive `httpx` client times every request with
  `time.perf_counter()`, from sending to the whole body read and checked for status 200.
  --rounds rounds; each round asks every endpoint once of each server, the two servers in
  alternating order, so drift in the machine's speed falls on both alike.
* the live tail: --clients `EventSource`-like clients (asyncio `httpx` streams in this
  process, spread evenly over --tail-sessions sessions of one server on the small store)
  connect and wait; a writer thread with its own store then saves --tail-turns turns with
  events round-robin over those sessions, one every 20 ms, and notes when each save returned
  (CLOCK_MONOTONIC). A client notes when the SSE id of a save's last event arrives; delivery
  latency = arrival - the save's return. Every client must receive exactly the events of
  its session, in order, once (the run fails otherwise). On PostgreSQL the server hears the
  writer's commits by LISTEN/NOTIFY; on SQLite by polling every 0.1 s.
* the writers beside NOTIFY (PostgreSQL): rounds of one writer, then --writers writers
  (asyncio tasks on one async store, one session each, `save_with_events`), each round once
  as shipped and once with the store's notification sender replaced by a no-op, while a
  second store LISTENs on the same schema. Reported: turns/s of each, median over rounds,
  and (with notify) / (without) at --writers writers, target >= 0.9.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

import turnstore
from bench.measure import percentile
from bench.peers import TurnstorePeer
from bench.postgres import DEFAULT_URL, unavailable, with_database
from bench.turn_events import TurnEvents
from bench.workload import make_turn
from turnstore import Checkpoint, SessionContext

SEED = 20_241_214
"""The workload's seed: every run writes the same bytes."""
FLAT = 1.5
"""Required: large / small latency at most this, at p50 and at p99."""
NOTIFY_FLOOR = 0.9
"""Required: 8-writer turns/s with notifications at least this share of without."""
SETUP_CHUNK = 512
"""Catalog sessions saved at once while setting up."""
OWNERS = 10
"""Catalog sessions are spread over this many owners."""
FORKS = 3
"""Forks of the big session."""
TAIL_INTERVAL_S = 0.02
"""Pause between the live writer's saves."""
NOTIFY_ROUNDS = 3
"""Alternating rounds of the writers-beside-NOTIFY measurement."""
BIG = "big"
"""The session whose events grow to the size."""


def say(args: argparse.Namespace, line: str) -> None:
    """Print a progress line unless --quiet."""
    if not args.quiet:
        print(line, flush=True)


# --- the data ---------------------------------------------------------------------------------


def catalog_id(index: int) -> str:
    """The id of the `index`-th catalog session."""
    return f"bench-{index:07d}"


async def build(url: str, sessions: int, events: int) -> dict[str, Any]:
    """Write the catalog sessions and the big session; what the requests need to know."""
    async with turnstore.open(url) as store:

        async def one(index: int) -> None:
            checkpoint = Checkpoint(
                session_id=catalog_id(index),
                session_context=SessionContext(owner_id=f"owner-{index % OWNERS}"),
                first_user_message=f"question {index}",
                sequence=1,
            )
            await store.save(checkpoint, [{"type": "message", "role": "user", "content": "hi"}])

        for start in range(0, sessions, SETUP_CHUNK):
            await asyncio.gather(
                *(one(i) for i in range(start, min(sessions, start + SETUP_CHUNK)))
            )
    peer = TurnstorePeer(url, events=True)
    await peer.setup()
    stored = turns = 0
    while stored < events:
        turn = make_turn(SEED, BIG, turns)
        checkpoint = peer.next_checkpoint(BIG, turn)
        journal, execution = TurnEvents(checkpoint, turn).build()
        stored += len(await peer.store.save_with_events(checkpoint, turn.items, execution, journal))
        turns += 1
    for number in range(FORKS):
        child = Checkpoint.empty(f"{BIG}-fork-{number}")
        await peer.store.fork(BIG, 1 + number % turns, child)
    page = await peer.store.list_sessions_page(turnstore.SessionPageRequest(limit=50))
    await peer.close()
    return {"events": stored, "turns": turns, "middle": stored // 2, "cursor": page.next_cursor}


def endpoints(info: dict[str, Any]) -> dict[str, str]:
    """The requests timed, by name: catalog reads, then reads of the big session."""

    if info["cursor"] is None:
        raise ValueError("the catalog needs more than one page of 50 sessions")
    cursor = quote(info["cursor"].to_token())
    big = f"/api/sessions/{BIG}"
    return {
        "catalog": "/api/sessions?limit=50",
        "catalog page 2": f"/api/sessions?limit=50&cursor={cursor}",
        "catalog by owner": "/api/sessions?limit=50&owner=owner-3",
        "catalog by prefix": "/api/sessions?limit=50&prefix=bench-00000",
        "recent executions": "/api/executions/recent?limit=50",
        "summary": big,
        "stats": f"{big}/stats",
        "transcript": f"{big}/transcript?limit=50",
        "events": f"{big}/events?limit=100",
        "events, middle": f"{big}/events?limit=100&before={info['middle']}",
        "newest turn": f"{big}/turn",
        "executions": f"{big}/executions?limit=50",
        "forks": f"{big}/forks",
        "graph": f"{big}/graph",
        "queue": f"{big}/queue",
    }


# --- a server ---------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """One `turnstore serve` process on a loopback port."""

    url: str
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        command = [sys.executable, "-m", "turnstore", "serve", self.url, "--port", str(self.port)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"turnstore serve exited: {self.log.read_text()}")
            try:
                httpx.get(f"{self.base}/api/health", timeout=1).raise_for_status()
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"turnstore serve did not answer: {self.log.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- endpoint latency -------------------------------------------------------------------------


def latencies(
    servers: dict[str, Server], paths: dict[str, dict[str, str]], rounds: int
) -> dict[str, dict[str, list[float]]]:
    """Seconds of every request, by endpoint and size, the sizes alternating."""
    found: dict[str, dict[str, list[float]]] = {
        name: {size: [] for size in servers} for name in paths[next(iter(servers))]
    }
    sizes = list(servers)
    clients = {size: httpx.Client(base_url=servers[size].base, timeout=30) for size in sizes}
    try:
        for round_ in range(rounds):
            for name in found:
                for size in sizes[round_ % 2 :] + sizes[: round_ % 2]:
                    start = time.perf_counter()
                    response = clients[size].get(paths[size][name])
                    elapsed = time.perf_counter() - start
                    if response.status_code != 200:
                        raise RuntimeError(f"{name} on {size}: {response.status_code}")
                    found[name][size].append(elapsed)
    finally:
        for client in clients.values():
            client.close()
    return found


def flatness(found: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """Per endpoint: p50 and p99 of each size and large / small of each."""
    rows = []
    for name, by_size in found.items():
        small, large = by_size["small"], by_size["large"]
        row: dict[str, Any] = {"endpoint": name}
        for q in (50, 99):
            s, big = percentile(small, q / 100), percentile(large, q / 100)
            row |= {f"small_p{q}_ms": s * 1e3, f"large_p{q}_ms": big * 1e3, f"p{q}_ratio": big / s}
        row["pass"] = row["p50_ratio"] <= FLAT and row["p99_ratio"] <= FLAT
        rows.append(row)
    return rows


# --- the live tail ----------------------------------------------------------------------------


async def _client(
    base: str, session: str, ready: asyncio.Event, arrivals: dict[int, float], want: int
) -> None:
    """Tail `session` from its start; note each id's arrival until the id `want` came."""
    url = f"{base}/api/sessions/{session}/events/stream?after=0"
    headers = {"Accept": "text/event-stream"}
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(60, read=120)) as client,
        client.stream("GET", url, headers=headers) as stream,
    ):
        ready.set()
        async for line in stream.aiter_lines():
            if line.startswith("id:"):
                sequence = int(line[3:])
                if sequence in arrivals:
                    raise RuntimeError(f"{session}: event {sequence} came twice")
                arrivals[sequence] = time.monotonic()
                if sequence >= want:
                    return


@dataclass
class TailWriter:
    """The live writer: creates the tail sessions, then saves turns when told to go."""

    url: str
    sessions: list[str]
    turns: int
    acks: dict[str, dict[int, float]]
    created: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as error:  # reported by the caller
            self.errors.append(error)
            self.created.set()

    def _run(self) -> None:
        peer = TurnstorePeer(self.url, events=True)
        store = turnstore.open_blocking(self.url)
        try:
            opening = make_turn(SEED, "tail", -1)
            for session in self.sessions:
                store.save(peer.next_checkpoint(session, opening), opening.items)
            self.created.set()
            self.go.wait()
            self._turns(peer, store)
        finally:
            store.close()

    def _turns(self, peer: TurnstorePeer, store: turnstore.BlockingStore) -> None:
        sessions, acks = self.sessions, self.acks
        for index in range(self.turns):
            turn = make_turn(SEED, "tail", index)
            session = sessions[index % len(sessions)]
            checkpoint = peer.next_checkpoint(session, turn)
            journal, execution = TurnEvents(checkpoint, turn).build()
            stored = store.save_with_events(checkpoint, turn.items, execution, journal)
            acks[session][stored[-1].sequence] = time.monotonic()
            time.sleep(TAIL_INTERVAL_S)


def expected_last(sessions: int, turns: int, per_turn: int) -> list[int]:
    """The last event id each tail session will hold after the writer's turns."""
    return [per_turn * len(range(number, turns, sessions)) for number in range(sessions)]


async def live_tail(base: str, url: str, clients: int, sessions: int, turns: int) -> dict[str, Any]:
    """Delivery latency of the writer's saves to every client, and the check that all came."""
    names = [f"tail-{number}" for number in range(sessions)]
    per_turn = _events_per_turn()
    last = expected_last(sessions, turns, per_turn)
    acks: dict[str, dict[int, float]] = {name: {} for name in names}
    arrivals = [dict[int, float]() for _ in range(clients)]
    readies = [asyncio.Event() for _ in range(clients)]
    writer = TailWriter(url, names, turns, acks)
    thread = threading.Thread(target=writer.run, name="bench-tail-writer")
    thread.start()
    await asyncio.to_thread(writer.created.wait)
    if writer.errors:
        raise RuntimeError("the tail writer failed") from writer.errors[0]
    tasks = [
        asyncio.create_task(
            _client(base, names[c % sessions], readies[c], arrivals[c], last[c % sessions])
        )
        for c in range(clients)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    await asyncio.sleep(0.5)  # every server-side wait has begun
    writer.go.set()
    await asyncio.to_thread(thread.join)
    if writer.errors:
        raise RuntimeError("the tail writer failed") from writer.errors[0]
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    stored = _stored_sequences(url, names)
    delays = []
    for number, got in enumerate(arrivals):
        name = names[number % sessions]
        # In arrival order: every stored event once, in order (compacted deltas are not stored).
        if list(got) != stored[name]:
            raise RuntimeError(f"client {number} of {name} got {list(got)}, not {stored[name]}")
        delays += [got[sequence] - acked for sequence, acked in acks[name].items()]
    return {
        "clients": clients,
        "sessions": sessions,
        "saves": turns,
        "deliveries": len(delays),
        "p50_ms": percentile(delays, 0.50) * 1e3,
        "p99_ms": percentile(delays, 0.99) * 1e3,
        "max_ms": max(delays) * 1e3,
    }


def _stored_sequences(url: str, sessions: list[str]) -> dict[str, list[int]]:
    """The sequences each session's journal holds, oldest first."""
    found: dict[str, list[int]] = {}
    with turnstore.open_blocking(url) as store:
        for session in sessions:
            page = store.events_after(session, 0, 1_000_000)
            found[session] = [event.sequence for event in page.events]
    return found


def _events_per_turn() -> int:
    checkpoint = Checkpoint(session_id="probe", sequence=1)
    return len(TurnEvents(checkpoint, make_turn(SEED, "probe", 0)).build()[0])


# --- writers beside NOTIFY --------------------------------------------------------------------


async def _writers(url: str, writers: int, turns: int, tag: str, notify: bool) -> float:
    """Turns/s of `writers` tasks saving with events on one store; notify off when asked."""
    peer = TurnstorePeer(url, events=True, backend="postgres")
    await peer.setup()
    if not notify:
        # The cost being measured: the store's sender, replaced by nothing.
        watch = peer.store._driver.engine.watch()
        watch._publish = lambda session_ids: None  # type: ignore[method-assign]
    work = {
        f"{tag}-{n}": [make_turn(SEED, f"{tag}-{n}", i) for i in range(turns)]
        for n in range(writers)
    }

    async def writer(session: str) -> None:
        for turn in work[session]:
            await peer.save_turn(session, turn)

    start = time.perf_counter()
    await asyncio.gather(*(writer(session) for session in work))
    seconds = time.perf_counter() - start
    await peer.close()
    return writers * turns / seconds


async def beside_notify(url: str, writers: int, turns: int) -> dict[str, Any]:
    """1 and N writers, with and without the notification, while another store listens."""
    listener = turnstore.open(url)
    stop = asyncio.Event()

    async def listen() -> None:
        while not stop.is_set():
            await listener.wait_for_events("notify-r0-n-0", 0, 0.5)

    listening = asyncio.create_task(listen())
    rates: dict[str, list[float]] = {}
    for round_ in range(NOTIFY_ROUNDS):
        for notify in (True, False) if round_ % 2 == 0 else (False, True):
            label = "notify" if notify else "no notify"
            for count in (1, writers):
                tag = f"notify-r{round_}-{'n' if notify else 'x'}{count}"
                rate = await _writers(url, count, turns, tag, notify)
                rates.setdefault(f"{label}, {count} writer(s)", []).append(rate)
    stop.set()
    await listening
    await listener.close()
    medians = {key: sorted(values)[len(values) // 2] for key, values in rates.items()}
    ratio = medians[f"notify, {writers} writer(s)"] / medians[f"no notify, {writers} writer(s)"]
    return {
        "writers": writers,
        "turns_per_writer": turns,
        "turns_per_s": medians,
        "notify_ratio": ratio,
        "scaling_notify": medians[f"notify, {writers} writer(s)"] / medians["notify, 1 writer(s)"],
        "pass": ratio >= NOTIFY_FLOOR,
    }


# --- one backend ------------------------------------------------------------------------------


@dataclass
class Backend:
    """Where one backend's stores live: a URL per store name."""

    name: str
    store_url: Callable[..., str]
    """The URL of the store `tag`, with extra query parameters."""
    setup_url: Callable[[str], str]
    cleanup: Callable[[], None] = lambda: None


def sqlite_backend(directory: Path) -> Backend:
    def url(tag: str, **query: str) -> str:
        return f"sqlite:///{directory / f'serve-{tag}.sqlite3'}"

    return Backend("sqlite", url, url)


def postgres_backend(server: str) -> Backend:
    import psycopg

    database = _database(server)
    schemas = [f"bench_serve_{tag}" for tag in ("small", "large", "tail", "notify")]

    def url(tag: str, **query: str) -> str:
        return with_database(server, database, schema=f"bench_serve_{tag}", **query)

    def setup(tag: str) -> str:
        # A set-up step only: the data need not be durable. No space after -c (see bench.prune).
        return url(tag, options="-csynchronous_commit=off", pool_max_size="16")

    def cleanup() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            for schema in schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    cleanup()
    return Backend("postgres", url, setup, cleanup)


def _database(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


def run_backend(backend: Backend, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """Every measurement on one backend."""
    result: dict[str, Any] = {"backend": backend.name}
    sizes = {"small": args.small, "large": args.large}
    infos = {}
    for size, count in sizes.items():
        started = time.perf_counter()
        infos[size] = asyncio.run(build(backend.setup_url(size), count, count))
        say(
            args,
            f"{backend.name}: {size} store ({count:,} sessions, {infos[size]['events']:,}"
            f" events) written in {time.perf_counter() - started:.0f}s",
        )
    servers = {
        size: Server(backend.store_url(size), logs / f"{backend.name}-{size}.log") for size in sizes
    }
    try:
        for server in servers.values():
            server.start()
        found = latencies(servers, {s: endpoints(infos[s]) for s in sizes}, args.rounds)
    finally:
        for server in servers.values():
            server.stop()
    result["sizes"] = {size: {"sessions": sizes[size], **infos[size]} for size in sizes}
    for info in result["sizes"].values():
        info.pop("cursor", None)
    result["flat"] = flatness(found)
    tail_url = backend.store_url("tail")
    turnstore.open_blocking(tail_url).close()
    tail = Server(tail_url, logs / f"{backend.name}-tail.log").start()
    try:
        result["tail"] = asyncio.run(
            live_tail(tail.base, tail_url, args.clients, args.tail_sessions, args.tail_turns)
        )
    finally:
        tail.stop()
    if backend.name == "postgres" and args.writers > 0:
        url = backend.store_url("notify", pool_max_size=str(args.writers + 2))
        result["notify"] = asyncio.run(beside_notify(url, args.writers, args.writer_turns))
    return result


# --- the report -------------------------------------------------------------------------------


def report(results: list[dict[str, Any]]) -> list[str]:
    """The lines printed at the end, one per judged figure."""
    lines = []
    for result in results:
        name = result["backend"]
        small, large = result["sizes"]["small"], result["sizes"]["large"]
        lines.append(
            f"{name}: {small['sessions']:,} vs {large['sessions']:,} sessions,"
            f" {small['events']:,} vs {large['events']:,} events in the session"
        )
        for row in result["flat"]:
            lines.append(
                f"flat {name} {row['endpoint']}: p50 {row['small_p50_ms']:.2f} ->"
                f" {row['large_p50_ms']:.2f} ms = {row['p50_ratio']:.2f}x, p99"
                f" {row['small_p99_ms']:.2f} -> {row['large_p99_ms']:.2f} ms ="
                f" {row['p99_ratio']:.2f}x (<= {FLAT}x) {'PASS' if row['pass'] else 'MISS'}"
            )
        tail = result["tail"]
        lines.append(
            f"tail {name}: {tail['clients']} clients, {tail['saves']} saves, "
            f"{tail['deliveries']} deliveries: p50 {tail['p50_ms']:.1f} ms,"
            f" p99 {tail['p99_ms']:.1f} ms, max {tail['max_ms']:.1f} ms"
        )
        notify = result.get("notify")
        if notify is not None:
            rates = ", ".join(f"{k} {v:.0f}" for k, v in notify["turns_per_s"].items())
            lines.append(f"notify {name} turns/s: {rates}")
            lines.append(
                f"notify {name}: {notify['writers']} writers with / without notify ="
                f" {notify['notify_ratio']:.2f}x (>= {NOTIFY_FLOOR}x)"
                f" {'PASS' if notify['pass'] else 'MISS'}; {notify['writers']} writers / 1 ="
                f" {notify['scaling_notify']:.2f}x"
            )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--tail-sessions", type=int, default=10)
    parser.add_argument("--tail-turns", type=int, default=200)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-turns", type=int, default=150)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--postgres-url", default=os.environ.get("TURNSTORE_BENCH_PG", DEFAULT_URL))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dir", type=Path, help="where the SQLite files go (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check it runs")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.small, args.large, args.rounds = 60, 240, 5
        args.clients, args.tail_sessions, args.tail_turns = 6, 2, 6
        args.writers, args.writer_turns = 2, 5
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = args.backends.split(",")
    directory = Path(tempfile.mkdtemp(prefix="turnstore-bench-serve-", dir=args.dir))
    results = []
    skipped: dict[str, str] = {}
    try:
        if "sqlite" in wanted:
            results.append(run_backend(sqlite_backend(directory), args, directory))
        if "postgres" in wanted:
            reason = "--no-postgres" if args.no_postgres else unavailable(args.postgres_url)
            if reason is None:
                backend = postgres_backend(args.postgres_url)
                try:
                    results.append(run_backend(backend, args, directory))
                finally:
                    backend.cleanup()
            else:
                skipped["postgres"] = reason
                say(args, f"postgres: skipped ({reason})")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    lines = report(results)
    print("\n".join(lines))
    if args.json is not None:
        machine = {"python": platform.python_version(), "cpus": os.cpu_count()}
        doc = {"results": results, "skipped": skipped, "machine": machine, "smoke": args.smoke}
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
