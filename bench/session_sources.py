"""The sources `bench.move_sessions` moves, filled by the frameworks' own code.

* OpenAI Agents SDK: a `SQLiteSession` file, each session filled by one
  `SQLiteSession.add_items` of its whole history: turns of a user message, a function call,
  its output and the assistant's answer, a few hundred bytes each.
* Google ADK: a `DatabaseSessionService` database. `append_event` commits one event at a
  time (about 100 a second), so the events go in through ADK's own storage classes instead:
  each session is made by the service's `create_session`, then its events, built as `Event`
  objects, become the rows `append_event` would add (the schema's `StorageEvent.from_event`),
  with the session's state deltas and update time applied as `append_event` applies them,
  added with SQLAlchemy a group of sessions per transaction. `check_adk` then reads sessions
  back through `get_session` beside one session written event by event through
  `append_event` on a fresh service: the same events, own state and update time.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.workload import compact, text

SEED = 20_250_045
"""The fill's seed: every run writes the same text (ADK's event ids and times aside)."""
POOL = text(random.Random(SEED), 65_536)
"""Prose the items' text is cut from: a slice at a random offset costs nothing per item."""
GROUP_EVENTS = 4_000
"""ADK events added per transaction of the bulk fill (whole sessions)."""
CREATES = {"sqlite": 1, "postgresql": 16}
"""`create_session` calls of the ADK fill in flight at once (SQLite's writers would wait for
each other's lock, one fsync each, slower than one after another)."""


def prose(rng: random.Random, size: int) -> str:
    """`size` characters of the pool, from a random offset."""
    start = rng.randrange(len(POOL) - size)
    return POOL[start : start + size]


# --- OpenAI Agents SDK ------------------------------------------------------------------------


def agents_items(session_id: str, count: int) -> list[dict[str, Any]]:
    """`count` items of a session, four a turn: what the SDK's runner stores."""
    rng = random.Random(f"{SEED}:{session_id}")
    items: list[dict[str, Any]] = []
    for turn in range(count // 4 + 1):
        call_id = f"call_{session_id}_{turn}"
        query = compact({"query": prose(rng, 80), "max_results": 5})
        items += [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": prose(rng, 300)}]},
            {"type": "function_call", "call_id": call_id, "name": "search_docs",
             "arguments": query, "status": "completed"},
            {"type": "function_call_output", "call_id": call_id, "output": prose(rng, 500)},
            {"type": "message", "id": f"msg_{session_id}_{turn}", "role": "assistant",
             "status": "completed",
             "content": [{"type": "output_text", "text": prose(rng, 400), "annotations": []}]},
        ]  # fmt: skip
    return items[:count]


def agents_session_id(number: int) -> str:
    return f"chat-{number:05d}"


def fill_agents(path: Path, sessions: int, items: int, progress: Callable[[str], None]) -> float:
    """A `SQLiteSession` file of `sessions` sessions of `items` items; seconds."""
    from agents import SQLiteSession

    async def run() -> None:
        for number in range(sessions):
            session = SQLiteSession(agents_session_id(number), path)
            try:
                await session.add_items(agents_items(agents_session_id(number), items))
            finally:
                session.close()
            if (number + 1) % 100 == 0:
                progress(f"  filled {number + 1} of {sessions} SQLiteSession sessions")

    began = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - began


# --- Google ADK -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One ADK session to fill: its key and how many events."""

    app_name: str
    user_id: str
    session_id: str
    events: int


def adk_events(key: Planned, count: int, start: float) -> list[Any]:
    """`count` events of an agent loop, four a turn from `start` on, 10 ms apart: the user's
    message, the model's function call, the tool's response, the model's answer (with a state
    delta of the session's and the user's scope)."""
    from google.adk.events.event import Event, EventActions
    from google.genai import types

    rng = random.Random(f"{SEED}:{key.app_name}:{key.user_id}:{key.session_id}")
    events: list[Any] = []
    for number in range(count):
        turn, step = divmod(number, 4)
        call_id = f"adk-{key.session_id}-{turn}"
        author, delta = "support_agent", {}
        if step == 0:
            author = "user"
            content = types.Content(role="user", parts=[types.Part(text=prose(rng, 300))])
        elif step == 1:
            call = types.FunctionCall(
                id=call_id, name="search_docs", args={"query": prose(rng, 80), "max_results": 5}
            )
            content = types.Content(role="model", parts=[types.Part(function_call=call)])
        elif step == 2:
            answer = types.FunctionResponse(
                id=call_id, name="search_docs", response={"result": prose(rng, 400)}
            )
            content = types.Content(role="user", parts=[types.Part(function_response=answer)])
        else:
            content = types.Content(role="model", parts=[types.Part(text=prose(rng, 400))])
            delta = {"turn": turn, "last_topic": prose(rng, 40), "user:turns": turn + 1}
        events.append(
            Event(
                id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                invocation_id=f"e-{key.session_id}-{turn}",
                author=author,
                content=content,
                actions=EventActions(state_delta=delta),
                timestamp=round(start + number * 0.01, 6),
            )
        )
    return events


def adk_state(key: Planned) -> dict[str, Any]:
    """The state a session is created with: its own, its user's and its app's."""
    return {"topic": "billing", "user:name": key.user_id.title(), "app:tier": "pro"}


async def fill_adk(
    url: str, plan: Sequence[Planned], progress: Callable[[str], None]
) -> dict[str, list[Any]]:
    """The planned sessions in a `DatabaseSessionService` database (see the module's
    docstring); the events of the first and the last session, for `check_adk`."""
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(url)
    kept: dict[str, list[Any]] = {}
    try:
        await service.prepare_tables()
        group: list[tuple[Any, list[Any]]] = []
        seen: set[tuple[str, str]] = set()
        step = CREATES.get(service.db_engine.dialect.name, 1)
        for first in range(0, len(plan), step):
            batch = plan[first : first + step]
            created = await _created(service, batch, seen)
            for index, (key, session) in enumerate(zip(batch, created, strict=True)):
                events = adk_events(key, key.events, session.last_update_time + 0.01)
                if first + index in (0, len(plan) - 1):
                    kept[key.session_id] = events
                group.append((session, events))
                if sum(len(events) for _, events in group) >= GROUP_EVENTS:
                    await _add_events(service, group)
                    group = []
            if (first + len(batch)) // 500 > first // 500:
                progress(f"  filled {first + len(batch)} of {len(plan)} ADK sessions")
        await _add_events(service, group)
    finally:
        await service.close()
    return kept


async def _created(service: Any, batch: Sequence[Planned], seen: set[tuple[str, str]]) -> list[Any]:
    """The sessions made by the service's `create_session`, concurrently; a user's first
    alone, before the others (it makes the user's state row, which they would race for)."""

    async def create(key: Planned) -> Any:
        return await service.create_session(
            app_name=key.app_name,
            user_id=key.user_id,
            state=adk_state(key),
            session_id=key.session_id,
        )

    made: dict[Planned, Any] = {}
    for key in batch:
        if (key.app_name, key.user_id) not in seen:
            seen.add((key.app_name, key.user_id))
            made[key] = await create(key)
    rest = [key for key in batch if key not in made]
    made.update(zip(rest, await asyncio.gather(*map(create, rest)), strict=True))
    return [made[key] for key in batch]


async def _add_events(service: Any, group: list[tuple[Any, list[Any]]]) -> None:
    """Sessions' events as `append_event` stores them, in one transaction: the rows of
    `StorageEvent.from_event`, each delta merged into its scope's state, the session's update
    time its newest event's (naive UTC, as ADK stores it on SQLite and PostgreSQL). The rows
    go in by one multi-row INSERT of their columns (the ORM's unit of work, row by row, would
    take most of the fill's time)."""
    from google.adk.sessions import _session_util
    from sqlalchemy import insert

    if not group:
        return
    schema = service._get_schema_classes()
    rows: list[Any] = []
    async with service.database_session_factory() as sql:
        for session, events in group:
            stored = await sql.get(
                schema.StorageSession, (session.app_name, session.user_id, session.id)
            )
            user = await sql.get(schema.StorageUserState, (session.app_name, session.user_id))
            app = await sql.get(schema.StorageAppState, session.app_name)
            for event in events:
                deltas = _session_util.extract_json_safe_state_delta(
                    event.actions.state_delta or {}
                )
                stored.state.update(deltas["session"])
                user.state.update(deltas["user"])
                app.state.update(deltas["app"])
            rows.extend(schema.StorageEvent.from_event(session, event) for event in events)
            if events:
                newest = datetime.fromtimestamp(events[-1].timestamp, UTC)
                stored.update_time = newest.replace(tzinfo=None)
        if rows:
            columns = [column.key for column in schema.StorageEvent.__table__.columns]
            values = [{name: getattr(row, name) for name in columns} for row in rows]
            await sql.execute(insert(schema.StorageEvent), values)
        await sql.commit()


async def check_adk(url: str, plan: Sequence[Planned], kept: dict[str, list[Any]]) -> None:
    """The bulk fill is what ADK writes: each kept session read back through `get_session`
    equals the same events appended one by one through `append_event` on a fresh in-memory
    service (events, own state, update time); raises on a difference."""
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(url)
    try:
        for key in (plan[0], plan[-1]):
            events = kept[key.session_id]
            ours = await service.get_session(
                app_name=key.app_name, user_id=key.user_id, session_id=key.session_id
            )
            reference = await _appended(key, events)
            for name, left, right in _compared(ours, reference):
                if left != right:
                    raise RuntimeError(f"the bulk fill differs from append_event in {name}")
    finally:
        await service.close()


async def _appended(key: Planned, events: list[Any]) -> Any:
    """The session as `append_event` leaves it, event by event, on an in-memory service."""
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService("sqlite+aiosqlite:///:memory:")
    try:
        session = await service.create_session(
            app_name=key.app_name,
            user_id=key.user_id,
            state=adk_state(key),
            session_id=key.session_id,
        )
        for event in events:
            await service.append_event(session, event.model_copy(deep=True))
        return await service.get_session(
            app_name=key.app_name, user_id=key.user_id, session_id=key.session_id
        )
    finally:
        await service.close()


def _compared(ours: Any, reference: Any) -> list[tuple[str, Any, Any]]:
    own = {k: v for k, v in ours.state.items() if ":" not in k}
    expected = {k: v for k, v in reference.state.items() if ":" not in k}
    return [
        ("the events", [e.model_dump(mode="json") for e in ours.events],
         [e.model_dump(mode="json") for e in reference.events]),
        ("the session's own state", own, expected),
        ("the update time", ours.last_update_time, reference.last_update_time),
    ]  # fmt: skip
