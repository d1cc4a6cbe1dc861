"""The Strands Agents rows of `bench.framework_turns`: a turn's save and a resumed agent's load.

A turn is a real `strands.Agent` call on a scripted model (no network): the prompt, a tool
call, its result and the answer, four messages of the agent-loop workload's sizes. What the
turn saves is what `RepositorySessionManager`'s hooks write: each message appended
(`create_message`) and the agent synced after it and after the call (`update_agent` when
its state changed: twice a turn here). The save is the time the agent spent in the session
manager's methods during the call (wrapped on the instance, which the hooks look up), so the
model, the tool and Strands' event loop are left out. Garbage is collected before each timed
phase, not before each call: a full collection of this process's heap leaves the next call's
caches cold, a cost that grows with the heap, not with the store's work.

A load is a resumed process's: a new session manager on the stored session (`read_session`)
and a new agent initialised from it (`read_agent`, then `list_messages` from the
conversation manager's `removed_message_count` on). With Strands' default
`SlidingWindowConversationManager` (40 messages) that is the newest window only, at any
length; the `full` column is `list_messages` from the first message, what an agent with
`NullConversationManager` reads.

Each peer holds one session per history length, grown (turn by turn, every session in turn)
before anything is timed; then the loads, the full reads and `probes` turns' saves of every
peer at every length are timed in one interleaved round, so the 800 / 50 ratios compare calls
made side by side, not minutes apart.

Peers: our repository on SQLite (disk and tmpfs) and PostgreSQL; Strands' `FileSessionManager`
as shipped (no fsync), with an fsync of each file it writes and of the file's directory (so
a write is on disk when it returns, as a turnstore commit is), and on tmpfs (where an fsync
costs nothing, and both sides are as durable as the machine's memory); and `floor` (on disk
and tmpfs), the least a repository on turnstore could cost (`bench.strands_floor`), whose
ratio to the file manager is the ceiling of ours. Our repository is opened as a user opens it
(`from_url`: search indexed in the background).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.models import Model
from strands.session.file_session_manager import FileSessionManager
from strands.session.repository_session_manager import RepositorySessionManager

from bench.strands_floor import FloorRepository
from bench.workload import OUTPUT_BYTES, SEED, Turn, make_turn, text

AGENT = "helper"
TOOL = "search_docs"
TIMED = ("append_message", "sync_agent", "redact_latest_message", "initialize")
"""The session manager's methods an agent calls (its hooks, and `Agent` on a context reduction)."""


class ScriptedModel(Model):
    """A Strands model that calls the tool once per turn, then answers with the turn's text."""

    def __init__(self) -> None:
        self.turn: Turn = make_turn(SEED, "strands", 0)

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> Any:
        """No configuration."""
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        """Not used by the benchmark."""
        raise NotImplementedError

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """A tool call after the prompt, the answer after the tool's result."""
        answered = any("toolResult" in block for block in messages[-1]["content"])
        yield {"messageStart": {"role": "assistant"}}
        if answered:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": self.turn.assistant_text}}}
        else:
            call = self.turn.call
            start = {"toolUse": {"name": TOOL, "toolUseId": call["call_id"]}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": call["arguments"]}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn" if answered else "tool_use"}}
        usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


@tool(name=TOOL)
def search_docs(query: str, max_results: int = 5) -> str:
    """Search the docs (a result of the workload's size, the same for the same query)."""
    return text(random.Random(query), OUTPUT_BYTES)


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class DurableFileSessionManager(FileSessionManager):
    """Strands' file manager with each write on disk when it returns: the file it wrote (by
    a rename) and its directory (the rename) are fsynced after the write."""

    def _write_file(self, path: str, data: dict[str, Any]) -> None:
        super()._write_file(path, data)
        _fsync(path)
        _fsync(os.path.dirname(path))


@dataclass
class Side:
    """One peer's session grown to `turns` turns: how to open a session manager on it, and the
    long-lived agent that writes it."""

    name: str
    turns: int
    session: str
    opened: Callable[[], Any]
    reader: Any
    """A `SessionRepository` on the same storage, for the full-history read."""
    model: ScriptedModel = field(default_factory=ScriptedModel)
    agent: Any = None
    spent: list[float] = field(default_factory=lambda: [0.0])
    loads: bool = True
    """Whether its loads mean anything (not for the floor, which reads nothing)."""


def _timed(manager: Any, spent: list[float]) -> Any:
    """`manager`, with the seconds spent in the methods an agent calls added to `spent[0]`.

    Instance attributes shadow the class's methods, and the hooks look them up at each call.
    """
    for name in TIMED:
        method = getattr(manager, name)

        def timed(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        setattr(manager, name, timed)
    return manager


def _agent(side: Side, spent: list[float]) -> tuple[Any, float]:
    """A new agent on the stored session, and the seconds its store work took."""
    started = time.perf_counter()
    manager = side.opened()  # reads (or creates) the session
    spent[0] += time.perf_counter() - started
    agent = Agent(
        agent_id=AGENT,
        model=side.model,
        tools=[search_docs],
        session_manager=_timed(manager, spent),
        callback_handler=None,
    )
    return agent, spent[0]


def turn(side: Side, number: int) -> float:
    """Run turn `number` on the side's agent; the seconds spent saving it."""
    side.model.turn = make_turn(SEED, "strands", number)
    side.spent[0] = 0.0
    side.agent(side.model.turn.user_text)
    return side.spent[0]


def load(side: Side) -> tuple[float, int]:
    """A resumed agent's load of the session: seconds, and the messages it holds after."""
    agent, seconds = _agent(side, [0.0])
    return seconds, len(agent.messages)


def full_read(side: Side) -> float:
    """Seconds to list every message of the agent, from the first."""
    started = time.perf_counter()
    side.reader.list_messages(side.session, AGENT)
    return time.perf_counter() - started


Opened = tuple[list[Side], Callable[[], None]]
"""A peer's sides, one a point, and what closes the storage they share."""


def _on_repository(name: str, repository: Any, points: Sequence[int], loads: bool) -> list[Side]:
    def side(turns: int) -> Side:
        session = f"chat-{turns}"
        return Side(
            name,
            turns,
            session,
            lambda: RepositorySessionManager(session_id=session, session_repository=repository),
            repository,
            loads=loads,
        )

    return [side(turns) for turns in points]


def _ours(name: str, url: str, points: Sequence[int]) -> Opened:
    from turnstore.integrations.strands import TurnstoreSessionRepository

    repository = TurnstoreSessionRepository.from_url(url, owner_id="bench")
    return _on_repository(name, repository, points, loads=True), repository.close


def _floor(name: str, url: str, points: Sequence[int]) -> Opened:
    repository = FloorRepository(url)
    return _on_repository(name, repository, points, loads=False), repository.close


def _files(name: str, directory: Path, durable: bool, points: Sequence[int]) -> Opened:
    kind = DurableFileSessionManager if durable else FileSessionManager

    def side(turns: int) -> Side:
        session = f"chat-{turns}"

        def opened() -> Any:
            return kind(session, str(directory))

        return Side(name, turns, session, opened, opened())

    return [side(turns) for turns in points], lambda: None


def peers(
    scratch: Path, shm: Path | None, postgres_url: str | None, points: Sequence[int]
) -> tuple[list[Opened], dict[str, str]]:
    """Every peer that can run here, and why the others cannot."""
    found = [_ours("turnstore", str(scratch / "strands.sqlite3"), points)]
    skipped: dict[str, str] = {}
    if shm is not None:
        found.append(_ours("turnstore@tmpfs", str(shm / "strands.sqlite3"), points))
    if postgres_url is not None:
        found.append(_ours("turnstore-pg", postgres_url, points))
    found += [
        _files("strands-file", scratch / "strands-file", False, points),
        _files("strands-file+fsync", scratch / "strands-file-fsync", True, points),
        _floor("floor", str(scratch / "floor.sqlite3"), points),
    ]
    if shm is not None:
        found.append(_files("strands-file@tmpfs", shm / "strands-file", False, points))
        found.append(_floor("floor@tmpfs", str(shm / "floor.sqlite3"), points))
    else:
        for name in ("turnstore@tmpfs", "strands-file@tmpfs", "floor@tmpfs"):
            skipped[name] = "skipped: no /dev/shm"
    return found, skipped


def rotated(items: Sequence[Any], probe: int) -> list[Any]:
    """`items` starting at `probe`'s place, so no peer always goes first."""
    shift = probe % len(items)
    return [*items[shift:], *items[:shift]]


def _row(side: Side, loads: list[Any], fulls: list[float], saves: list[float]) -> dict[str, Any]:
    row: dict[str, Any] = {"turns": side.turns, "save": statistics.median(saves)}
    if not side.loads:
        return {**row, "load": None, "loaded_messages": None, "full_read": None}
    return {
        **row,
        "load": statistics.median(seconds for seconds, _ in loads),
        "loaded_messages": loads[-1][1],
        "full_read": statistics.median(fulls),
    }


def measure(found: list[Side], probes: int) -> list[dict[str, Any]]:
    """Loads, full reads, then `probes` turns' saves of every side (every peer at every
    length) interleaved, so a drift of the machine's speed touches them alike; a row each."""
    loads: dict[int, list[tuple[float, int]]] = {id(side): [] for side in found}
    fulls: dict[int, list[float]] = {id(side): [] for side in found}
    saves: dict[int, list[float]] = {id(side): [] for side in found}
    # Each timed phase starts with no garbage left by the one before (growth, loads' agents).
    gc.collect()
    readers = [side for side in found if side.loads]
    for probe in range(probes):
        for side in rotated(readers, probe):
            loads[id(side)].append(load(side))
    for probe in range(max(3, probes // 10)):
        for side in rotated(readers, probe):
            fulls[id(side)].append(full_read(side))
    gc.collect()
    for probe in range(probes):
        for side in rotated(found, probe):
            saves[id(side)].append(turn(side, side.turns + probe))
    return [_row(side, loads[id(side)], fulls[id(side)], saves[id(side)]) for side in found]


def run(
    points: Sequence[int], probes: int, postgres_url: str | None, shm: Path | None
) -> dict[str, Any]:
    """Every Strands peer at every point; the JSON document of this part."""
    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-strands-"))
    work = Path(tempfile.mkdtemp(prefix="turnstore-bench-strands-", dir=shm)) if shm else None
    opened, skipped = peers(scratch, work, postgres_url, points)
    found = [side for sides, _ in opened for side in sides]
    doc: dict[str, Any] = {name: {"status": why, "points": []} for name, why in skipped.items()}
    doc.update({side.name: {"status": "ran", "points": []} for side in found})
    try:
        for side in found:
            side.agent, _ = _agent(side, side.spent)
        for number in range(max(points)):
            for side in found:
                if number < side.turns:
                    turn(side, number)
        for side, row in zip(found, measure(found, probes), strict=True):
            doc[side.name]["points"].append(row)
    finally:
        for _, close in opened:
            close()
        shutil.rmtree(scratch, ignore_errors=True)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return {"points": list(points), "probes": probes, "peers": doc}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


PAIRS = (
    ("strands-file+fsync", "turnstore", "the target's comparison"),
    ("strands-file+fsync", "turnstore-pg", ""),
    ("strands-file+fsync", "floor", "ceiling: one store commit a write, nothing read"),
    ("strands-file@tmpfs", "turnstore@tmpfs", ""),
    ("strands-file@tmpfs", "floor@tmpfs", "ceiling: one store commit a write, nothing read"),
)
"""Save ratios at equal durability: the file manager's against ours (and the floor's)."""


def ratios(doc: dict[str, Any]) -> list[str]:
    """Each pair's save ratio at each point, as lines."""
    rows = {
        name: {row["turns"]: row["save"] for row in peer["points"]}
        for name, peer in doc["peers"].items()
    }
    lines = []
    for turns in doc["points"]:
        lines.append(f"save at {turns} turns, file manager / ours at equal durability:")
        for theirs, ours, note in PAIRS:
            if turns in rows.get(theirs, {}) and turns in rows.get(ours, {}):
                ratio = rows[theirs][turns] / rows[ours][turns]
                lines.append(f"  {theirs + ' / ' + ours:<40} {ratio:>6.3f}  {note}".rstrip())
    return lines


def describe(doc: dict[str, Any]) -> list[str]:
    """The Strands rows as a text table."""
    lines = [
        "Strands Agents (RepositorySessionManager on a real Agent): a turn's save (4 messages,"
        " 2 agent syncs), a resumed agent's load (SlidingWindowConversationManager: the"
        f" newest 40 messages), the full list_messages; medians of {doc['probes']} probes",
        "",
        f"{'peer':<22} {'turns':>6} {'save ms':>8} {'load ms':>8} {'loaded':>7} {'full ms':>8}",
    ]
    for name, peer in doc["peers"].items():
        if peer["status"] != "ran":
            lines.append(f"{name:<22} {peer['status']}")
        for row in peer["points"]:
            loaded = "-" if row["loaded_messages"] is None else row["loaded_messages"]
            lines.append(
                f"{name:<22} {row['turns']:>6} {_ms(row['save']):>8} {_ms(row['load']):>8}"
                f" {loaded:>7} {_ms(row['full_read']):>8}"
            )
    return [*lines, *ratios(doc)]
