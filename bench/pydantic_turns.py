"""The Pydantic AI rows of `bench.framework_turns`: a turn's save and a load of the latest state.

A turn's save is `ConversationStore.save(conversation)` after a turn's four messages (the
prompt, a tool call, its return and the answer, of the agent-loop workload's sizes) were
added to a conversation the app holds: what `await store.save(result)` does after an agent
run (the run itself, the model's work, is left out). Before the saves the conversation is
loaded with `limit=WINDOW`, as an app serving a long chat resumes it. Each peer holds one
conversation per history length, grown before anything is timed, and every peer at every
length is timed in one interleaved round.

A load is `store.load(conversation_id, limit=WINDOW)`: the record and the newest `WINDOW`
messages, the latest state a run needs. `load()` without a limit reads every message of the
history, at any store (the `full` column). Garbage is collected before each timed phase.

Peers: our store on SQLite (disk and tmpfs) and PostgreSQL, beside Pydantic AI's
`InMemoryConversationStore` (no I/O: what is left is the framework's own work).
"""

from __future__ import annotations

import gc
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RequestUsage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from bench.strands_turns import rotated
from bench.workload import SEED, make_turn

WINDOW = 40
"""Messages a load reads: as Strands' default window, ten turns."""
TOOL = "search_docs"


def messages(number: int) -> list[ModelMessage]:
    """Turn `number`'s four messages, as an agent run adds them."""
    turn = make_turn(SEED, "pydantic-ai", number)
    call = turn.call
    usage = RequestUsage(input_tokens=1_000, output_tokens=120)
    return [
        ModelRequest(parts=[UserPromptPart(turn.user_text)]),
        ModelResponse(
            parts=[ToolCallPart(TOOL, call["arguments"], tool_call_id=call["call_id"])],
            usage=usage,
            model_name="bench-model",
        ),
        ModelRequest(parts=[ToolReturnPart(TOOL, turn.tool_output, tool_call_id=call["call_id"])]),
        ModelResponse(parts=[TextPart(turn.assistant_text)], usage=usage, model_name="bench-model"),
    ]


@dataclass
class Side:
    """One peer's conversation grown to `turns` turns: its store, and the conversation the app
    holds between turns."""

    name: str
    turns: int
    store: ConversationStore
    conversation: Conversation

    @property
    def conversation_id(self) -> str:
        """The stored conversation's id."""
        return self.conversation.conversation_id


async def turn(side: Side, number: int) -> float:
    """Add turn `number` to the held conversation and save it; the seconds the save took."""
    side.conversation.messages.extend(messages(number))
    started = time.perf_counter()
    await side.store.save(side.conversation)
    return time.perf_counter() - started


async def load(side: Side, limit: int | None) -> tuple[float, int]:
    """Seconds to load the conversation (its newest `limit` messages), and how many came."""
    started = time.perf_counter()
    loaded = await side.store.load(side.conversation_id, limit=limit)
    seconds = time.perf_counter() - started
    assert loaded is not None
    return seconds, len(loaded.messages)


async def _resume(side: Side) -> None:
    """Hold the conversation as an app resuming it: its newest `WINDOW` messages."""
    loaded = await side.store.load(side.conversation_id, limit=WINDOW)
    assert loaded is not None
    side.conversation = loaded


def _row(side: Side, loads: list[Any], fulls: list[Any], saves: list[float]) -> dict[str, Any]:
    return {
        "turns": side.turns,
        "save": statistics.median(saves),
        "load": statistics.median(seconds for seconds, _ in loads),
        "loaded_messages": loads[-1][1],
        "full_load": statistics.median(seconds for seconds, _ in fulls),
        "full_messages": fulls[-1][1],
    }


async def measure(found: list[Side], probes: int) -> list[dict[str, Any]]:
    """Windowed and full loads, then `probes` turns' saves of every side (every peer at every
    length) interleaved, so a drift of the machine's speed touches them alike; a row each."""
    loads: dict[int, list[tuple[float, int]]] = {id(side): [] for side in found}
    fulls: dict[int, list[tuple[float, int]]] = {id(side): [] for side in found}
    saves: dict[int, list[float]] = {id(side): [] for side in found}
    gc.collect()
    for probe in range(probes):
        for side in rotated(found, probe):
            loads[id(side)].append(await load(side, WINDOW))
    for probe in range(max(3, probes // 10)):
        for side in rotated(found, probe):
            fulls[id(side)].append(await load(side, None))
    for side in found:
        await _resume(side)
    gc.collect()
    for probe in range(probes):
        for side in rotated(found, probe):
            saves[id(side)].append(await turn(side, side.turns + probe))
    return [_row(side, loads[id(side)], fulls[id(side)], saves[id(side)]) for side in found]


def _stores(scratch: Path, shm: Path | None, postgres_url: str | None) -> dict[str, Any]:
    from turnstore.integrations.pydantic_ai import TurnstoreConversationStore

    stores: dict[str, Any] = {
        "turnstore": TurnstoreConversationStore.from_url(str(scratch / "pydantic.sqlite3"))
    }
    if shm is not None:
        stores["turnstore@tmpfs"] = TurnstoreConversationStore.from_url(
            str(shm / "pydantic.sqlite3")
        )
    if postgres_url is not None:
        stores["turnstore-pg"] = TurnstoreConversationStore.from_url(postgres_url)
    stores["inmemory"] = InMemoryConversationStore()
    return stores


async def _grow(found: list[Side]) -> None:
    """Every side's conversation to its length, a turn of each in turn; then held as an app
    resuming it holds it (a window, not the whole history)."""
    for number in range(max(side.turns for side in found)):
        for side in found:
            if number < side.turns:
                await turn(side, number)
    for side in found:
        await _resume(side)


async def run(
    points: Sequence[int], probes: int, postgres_url: str | None, shm: Path | None
) -> dict[str, Any]:
    """Every Pydantic AI peer at every point; the JSON document of this part."""
    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-pydantic-"))
    work = Path(tempfile.mkdtemp(prefix="turnstore-bench-pydantic-", dir=shm)) if shm else None
    stores = _stores(scratch, work, postgres_url)
    found = [
        Side(name, turns, store, Conversation(conversation_id=f"chat-{turns}"))
        for name, store in stores.items()
        for turns in points
    ]
    peers: dict[str, Any] = {side.name: {"status": "ran", "points": []} for side in found}
    if work is None:
        peers["turnstore@tmpfs"] = {"status": "skipped: no /dev/shm", "points": []}
    try:
        await _grow(found)
        for side, row in zip(found, await measure(found, probes), strict=True):
            peers[side.name]["points"].append(row)
    finally:
        for store in stores.values():
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()
        shutil.rmtree(scratch, ignore_errors=True)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return {"points": list(points), "probes": probes, "window": WINDOW, "peers": peers}


def describe(doc: dict[str, Any]) -> list[str]:
    """The Pydantic AI rows as a text table, with our save's overhead over the in-memory one."""
    lines = [
        "Pydantic AI (ConversationStore): a turn's save (4 messages), load(limit="
        f"{doc['window']}), load() of the whole history; medians of {doc['probes']} probes",
        "",
        f"{'peer':<22} {'turns':>6} {'save ms':>8} {'over mem':>9} {'load ms':>8} {'loaded':>7}"
        f" {'full ms':>8} {'msgs':>6}",
    ]
    memory = {row["turns"]: row for row in doc["peers"].get("inmemory", {}).get("points", [])}
    for name, peer in doc["peers"].items():
        if peer["status"] != "ran":
            lines.append(f"{name:<22} {peer['status']}")
        for row in peer["points"]:
            base = memory.get(row["turns"])
            over = "" if base is None else f"{(row['save'] - base['save']) * 1e3:+.2f}"
            lines.append(
                f"{name:<22} {row['turns']:>6} {row['save'] * 1e3:>8.2f} {over:>9}"
                f" {row['load'] * 1e3:>8.2f} {row['loaded_messages']:>7}"
                f" {row['full_load'] * 1e3:>8.2f} {row['full_messages']:>6}"
            )
    return lines
