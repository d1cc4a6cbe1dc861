"""Framework sessions on turnstore against the frameworks' own stores; ratios from one run.

python -m bench.frameworks [--points 50,800] [--probes 40] [--json PATH] [--smoke]

OpenAI Agents SDK: what its runner does with a session on every turn, `get_items(limit)` then
`add_items` of the turn's four items (about 3 KB, the agent-loop workload's), timed on one
session grown to each history length, for `TurnstoreSession` (SQLite and PostgreSQL), the
SDK's `SQLiteSession` and its `SQLAlchemySession` (SQLite through aiosqlite). Every peer
is timed at each length side by side, in one interleaved round, since a disk's speed drifts.
Also `pop_item` at each length, and a full `get_items()` read.

Google ADK: a `list_sessions` page (20 sessions of one user) with 100 and with 10,000
sessions stored, against `DatabaseSessionService`'s (SQLite) full `list_sessions` at
10,000, which has no pages; and `get_session` with the last 50 events of a session of 100
and of 3,000 events.

Strands Agents and Pydantic AI: a turn's save through each framework's own write path and a
load of the latest state at 50 and 800 turns, against Strands' `FileSessionManager` and
Pydantic AI's `InMemoryConversationStore` (`bench.framework_turns`, which runs alone too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import framework_turns
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable
from bench.workload import make_turn

SEED = 20_240_601
ITEMS_PER_TURN = 4
READ_LIMIT = 20
"""The runner's history read per turn: `session_settings.limit`, as a long chat would set."""


@dataclass
class Point:
    """One peer at one history length: median seconds of each operation."""

    items: int
    turn: float
    add: float
    get_limited: float
    get_all: float
    pop: float


@dataclass
class PeerResult:
    """A peer's points, or why it did not run."""

    name: str
    status: str = "ran"
    points: list[Point] = field(default_factory=list)


Factory = Callable[[str], Awaitable[Any]]


def _items(session: str, turn: int) -> list[dict[str, Any]]:
    return make_turn(SEED, session, turn).items


async def _grow(session: Any, name: str, turns: range) -> None:
    for turn in turns:
        await session.add_items(_items(name, turn))


async def _timed(operation: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await operation()
    return time.perf_counter() - started


async def _measure(session: Any, name: str, items: int, probes: int) -> Point:
    """Time `probes` runner turns at a history of about `items` items, then pops and reads."""
    first = items // ITEMS_PER_TURN
    turns, adds, reads = [], [], []
    for probe in range(probes):
        batch = _items(name, first + probe)
        read = await _timed(lambda: session.get_items(READ_LIMIT))
        add = await _timed(lambda batch=batch: session.add_items(batch))
        turns.append(read + add)
        adds.append(add)
        reads.append(read)
        # Back to the same length, so every probe sees the history the point names.
        for _ in range(ITEMS_PER_TURN):
            await session.pop_item()
    pops = []
    for probe in range(probes):
        await session.add_items(_items(name, first + probes + probe)[:1])
        pops.append(await _timed(session.pop_item))
    full = [await _timed(session.get_items) for _ in range(max(3, probes // 10))]
    return Point(
        items=items,
        turn=statistics.median(turns),
        add=statistics.median(adds),
        get_limited=statistics.median(reads),
        get_all=statistics.median(full),
        pop=statistics.median(pops),
    )


async def run(points: Sequence[int], probes: int, postgres_url: str | None) -> dict[str, Any]:
    """Every peer at every point, interleaved per point; the JSON document of the run."""
    from agents import SQLiteSession

    from turnstore.integrations.openai_agents import TurnstoreSession

    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-frameworks-"))
    peers: dict[str, Factory] = {}
    results: dict[str, PeerResult] = {}

    async def turnstore_sqlite(name: str) -> Any:
        return TurnstoreSession(name, str(scratch / "turnstore.sqlite3"))

    async def sqlite_session(name: str) -> Any:
        return SQLiteSession(name, scratch / "sqlitesession.db")

    peers["turnstore"] = turnstore_sqlite
    peers["agents-sqlitesession"] = sqlite_session
    try:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        async def sqlalchemy_session(name: str) -> Any:
            url = f"sqlite+aiosqlite:///{scratch / 'sqlalchemy.db'}"
            return SQLAlchemySession.from_url(name, url=url, create_tables=True)

        peers["agents-sqlalchemysession"] = sqlalchemy_session
    except ImportError as error:
        results["agents-sqlalchemysession"] = PeerResult(
            "agents-sqlalchemysession", f"skipped: {error}"
        )
    database = None
    if postgres_url is not None:
        why = unavailable(postgres_url)
        if why is None:
            database = ScratchDatabase(postgres_url)
            url = database.turnstore_url(database.schema("turnstore"))

            async def turnstore_pg(name: str) -> Any:
                return TurnstoreSession(name, url)

            peers["turnstore-pg"] = turnstore_pg
        else:
            results["turnstore-pg"] = PeerResult("turnstore-pg", f"skipped: {why}")
    sessions = {name: await factory(f"bench-{name}") for name, factory in peers.items()}
    for name in peers:
        results[name] = PeerResult(name)
    try:
        grown = 0
        for point in points:
            for name, session in sessions.items():
                await _grow(session, f"bench-{name}", range(grown, point // ITEMS_PER_TURN))
            grown = point // ITEMS_PER_TURN
            for name, session in sessions.items():
                measured = await _measure(session, f"bench-{name}", point, probes)
                results[name].points.append(measured)
    finally:
        for session in sessions.values():
            close = getattr(session, "aclose", None) or getattr(session, "close", None)
            if close is not None:
                outcome = close()
                if asyncio.iscoroutine(outcome):
                    await outcome
        if database is not None:
            database.drop()
    doc = {
        "workload": {
            "items_per_turn": ITEMS_PER_TURN,
            "read_limit": READ_LIMIT,
            "points": list(points),
            "probes": probes,
        },
        "peers": {name: asdict(result) for name, result in results.items()},
    }
    doc["targets"] = targets(doc)
    return doc


async def run_all(
    points: Sequence[int], probes: int, postgres_url: str | None, small: bool
) -> dict[str, Any]:
    """The Agents SDK rows, then the ADK rows, then the Strands and Pydantic AI rows."""
    doc = await run(points, probes, postgres_url)
    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-adk-"))
    doc["adk"] = await run_adk(scratch, probes, postgres_url, small)
    doc["targets"] += doc["adk"]["targets"]
    doc["turns"] = await framework_turns.run_turns(probes, postgres_url, small)
    doc["targets"] += doc["turns"]["targets"]
    return doc


ADK_SESSIONS = (100, 10_000)
ADK_EVENTS = (100, 3_000)
ADK_RECENT = 50
ADK_PAGE = 20


async def _adk_event(number: int) -> Any:
    from google.adk.events.event import Event, EventActions
    from google.genai import types

    text = make_turn(SEED, "adk", number).items[0]["content"][0]["text"]
    return Event(
        invocation_id=f"inv-{number}",
        author="user",
        actions=EventActions(state_delta={"turn": number}),
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


async def _fill_sessions(service: Any, user: str, total: int, have: int) -> None:
    """Create sessions of `user` up to `total`, a batch at a time (concurrent creates)."""
    for start in range(have, total, 100):
        await asyncio.gather(
            *(
                service.create_session(app_name="bench", user_id=user, session_id=f"s{n}")
                for n in range(start, min(total, start + 100))
            )
        )


async def _median_of(probes: int, operation: Callable[[], Awaitable[Any]]) -> float:
    return statistics.median([await _timed(operation) for _ in range(probes)])


async def run_adk(
    scratch: Path, probes: int, postgres_url: str | None, small: bool
) -> dict[str, Any]:
    """The ADK rows: listing pages and recent-event reads, turnstore and ADK's database."""
    from google.adk.sessions import DatabaseSessionService
    from google.adk.sessions.base_session_service import GetSessionConfig

    from turnstore.integrations.adk import TurnstoreSessionService

    counts = (10, 200) if small else ADK_SESSIONS
    lengths = (10, 60) if small else ADK_EVENTS
    recent = GetSessionConfig(num_recent_events=ADK_RECENT)
    ours = TurnstoreSessionService(str(scratch / "adk-turnstore.sqlite3"))
    theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{scratch / 'adk-database.db'}")
    doc: dict[str, Any] = {"sessions": list(counts), "events": list(lengths), "rows": {}}
    try:
        have = 0
        for count in counts:
            await _fill_sessions(ours, "u", count, have)
            await _fill_sessions(theirs, "u", count, have)
            have = count
            page = await _median_of(
                probes,
                lambda: ours.list_sessions_page(app_name="bench", user_id="u", limit=ADK_PAGE),
            )
            doc["rows"][f"turnstore page at {count}"] = page
        full = await _median_of(
            max(3, probes // 10), lambda: theirs.list_sessions(app_name="bench", user_id="u")
        )
        doc["rows"][f"database full list at {counts[-1]}"] = full
        grown = 0
        session = await ours.create_session(app_name="bench", user_id="e", session_id="long")
        for length in lengths:
            for number in range(grown, length):
                await ours.append_event(session, await _adk_event(number))
            grown = length
            read = await _median_of(
                probes,
                lambda: ours.get_session(
                    app_name="bench", user_id="e", session_id="long", config=recent
                ),
            )
            doc["rows"][f"turnstore recent {ADK_RECENT} at {length} events"] = read
    finally:
        await ours.close()
        await theirs.close()
    rows = doc["rows"]
    low, high = counts
    doc["targets"] = [
        _row(
            f"ADK page at {high} / at {low} sessions (turnstore)",
            rows[f"turnstore page at {high}"] / rows[f"turnstore page at {low}"],
            1.3,
        ),
        _row(
            f"ADK page at {high} (turnstore) / full list (DatabaseSessionService)",
            rows[f"turnstore page at {high}"] / rows[f"database full list at {high}"],
            0.05,
        ),
        _row(
            f"ADK recent {ADK_RECENT} at {lengths[1]} / at {lengths[0]} events (turnstore)",
            rows[f"turnstore recent {ADK_RECENT} at {lengths[1]} events"]
            / rows[f"turnstore recent {ADK_RECENT} at {lengths[0]} events"],
            1.3,
        ),
    ]
    return doc


def _row(target: str, measured: float, at_most: float) -> dict[str, Any]:
    return {
        "target": target,
        "measured": measured,
        "required": f"<= {at_most}",
        "passed": measured <= at_most,
    }


def _point(doc: dict[str, Any], peer: str, items: int) -> dict[str, Any] | None:
    result = doc["peers"].get(peer)
    if result is None or result["status"] != "ran":
        return None
    return next((point for point in result["points"] if point["items"] == items), None)


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's ratios, measured in this run."""
    points = doc["workload"]["points"]
    low, high = points[0], points[-1]
    rows = []
    ours, theirs = _point(doc, "turnstore", low), _point(doc, "agents-sqlitesession", low)
    if ours and theirs:
        rows.append(
            {
                "target": f"turn at {low} items: SQLiteSession time / turnstore time",
                "measured": theirs["turn"] / ours["turn"],
                "required": ">= 1",
                "passed": theirs["turn"] / ours["turn"] >= 1,
            }
        )
    for peer in ("turnstore", "turnstore-pg"):
        first, last = _point(doc, peer, low), _point(doc, peer, high)
        if first and last and low != high:
            ratio = last["turn"] / first["turn"]
            rows.append(
                {
                    "target": f"turn at {high} / at {low} items ({peer})",
                    "measured": ratio,
                    "required": "<= 1.3",
                    "passed": ratio <= 1.3,
                }
            )
    return rows


def render(doc: dict[str, Any]) -> str:
    """The results as text tables."""
    lines = [
        "OpenAI Agents SDK sessions: a runner turn is get_items(limit="
        f"{doc['workload']['read_limit']}) + add_items({doc['workload']['items_per_turn']} items)"
        f", medians of {doc['workload']['probes']} probes",
        "",
        f"{'peer':<26} {'items':>6} {'turn ms':>9} {'add ms':>8} {'get(limit) ms':>14}"
        f" {'get() ms':>9} {'pop ms':>8}",
    ]
    for name, result in doc["peers"].items():
        if result["status"] != "ran":
            lines.append(f"{name:<26} {result['status']}")
            continue
        for point in result["points"]:
            lines.append(
                f"{name:<26} {point['items']:>6} {point['turn'] * 1e3:>9.2f}"
                f" {point['add'] * 1e3:>8.2f} {point['get_limited'] * 1e3:>14.2f}"
                f" {point['get_all'] * 1e3:>9.2f} {point['pop'] * 1e3:>8.2f}"
            )
    adk = doc.get("adk")
    if adk is not None:
        lines += ["", "Google ADK sessions (SQLite), medians"]
        lines += [f"{name:<45} {seconds * 1e3:>9.2f} ms" for name, seconds in adk["rows"].items()]
    if "turns" in doc:
        lines += ["", *framework_turns.render(doc["turns"])]
    lines += ["", "Targets", *framework_turns.render_targets(doc["targets"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print it; write --json if asked."""
    parser = argparse.ArgumentParser(prog="python -m bench.frameworks", description=__doc__)
    parser.add_argument("--points", default="50,800", help="history lengths in items")
    parser.add_argument("--probes", type=int, default=40, help="turns timed at each length")
    parser.add_argument("--postgres-url", default=DEFAULT_URL)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    points = sorted({int(part) for part in args.points.split(",") if part.strip()})
    probes = args.probes
    if args.smoke:
        points, probes = [8, 16], 3
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    postgres = None if args.no_postgres else args.postgres_url
    doc = asyncio.run(run_all(points, probes, postgres, args.smoke))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
