"""The steps `bench.move_sessions` measures, each in a child process of its own (`python -m
bench.move_sessions --child ...`): the frameworks' reading ceilings, turnstore's reading of the
copy, the copy in and its verify as `turnstore import-from` runs them, and ADK's reads after a
move, ours beside `DatabaseSessionService`'s. `bench.move_sessions`' docstring says how each
number is taken.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.measure import max_rss_bytes
from turnstore.cli.common import frozen_heap

APP, USERS = "support", 20
"""The ADK source's app, and the users its sessions are spread over."""
LONG, LISTED = ("long", "u-long", "long"), ("listing", "u-listing")
"""The read comparison's long session (app, user, id), and the app and user of the listing."""


def child_main(argv: Sequence[str]) -> int:
    """`--child JSON`: the steps ([name, action, [argument, ...]]) in turn, one JSON line out.

    Each step's `peak_rss` is the process's peak so far: exact for a child's first step.
    """
    found: dict[str, dict[str, Any]] = {}
    for name, action, arguments in json.loads(argv[0]):
        found[name] = ACTIONS[action](*arguments)
        found[name]["peak_rss"] = max_rss_bytes()
    print(json.dumps(found))
    return 0


def open_store(url: str) -> Any:
    """The store as `turnstore import-from` opens it (before its event loop starts)."""
    import turnstore

    return turnstore.open_blocking(url, index_in_background=False)


def on_store(work: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """`work(store, *rest)` on an event loop of its own, the store at `url` opened before it
    as the commands open it, and closed after."""

    def run(url: str, *rest: Any) -> dict[str, Any]:
        with open_store(url) as store:
            found: dict[str, Any] = asyncio.run(work(store, *rest))
        return found

    return run


def agents_read(path: str) -> dict[str, Any]:
    return asyncio.run(_agents_read(path))


async def _agents_read(path: str) -> dict[str, Any]:
    """`SQLiteSession.get_items()` of every session, timed around the calls alone."""
    from agents import SQLiteSession

    from turnstore.cli.moves_agents import agents_sessions

    listing = agents_sessions(path, read_only=True)
    ids = [session_id async for session_id in listing.session_ids()]
    await listing.aclose()
    count, seconds = 0, 0.0
    for session_id in ids:
        session = SQLiteSession(session_id, path)
        began = time.perf_counter()
        count += len(await session.get_items())
        seconds += time.perf_counter() - began
        session.close()
    return {"count": count, "seconds": seconds}


@on_store
async def agents_read_turnstore(store: Any) -> dict[str, Any]:
    """`TurnstoreSession.get_items()` of every session of the copy, timed around the calls."""
    from turnstore.integrations.openai_agents import TurnstoreSession
    from turnstore.integrations.openai_agents_move import TurnstoreSessions

    ids = [session_id async for session_id in TurnstoreSessions(store).session_ids()]
    count, seconds = 0, 0.0
    for session_id in ids:
        session = TurnstoreSession(session_id, store)
        began = time.perf_counter()
        count += len(await session.get_items())
        seconds += time.perf_counter() - began
        await session.aclose()
    return {"count": count, "seconds": seconds}


def agents_move(path: str, url: str, verify: bool) -> dict[str, Any]:
    """`import-from openai-agents PATH URL`'s copy, or its `--verify`."""
    from turnstore.cli.moves_agents import agents_sessions
    from turnstore.integrations import openai_agents_move as move

    with open_store(url) as store:
        source, target = agents_sessions(path, read_only=True), move.TurnstoreSessions(store)

        async def run() -> dict[str, Any]:
            try:
                if verify:
                    checked = await move.averify_sessions(source, target)
                    return _verified(checked, checked.item_count)
                report = await move.acopy_sessions(source, target)
                return _copied(report, report.item_count)
            finally:
                await source.aclose()
                await target.aclose()

        with frozen_heap():  # as the command runs its move
            return asyncio.run(run())


def adk_read(url: str) -> dict[str, Any]:
    """`DatabaseSessionService.get_session` of every session (the ids listed first)."""
    from google.adk.sessions import DatabaseSessionService

    async def run() -> dict[str, Any]:
        async with DatabaseSessionService(url) as service:
            return await _get_every_session(service)

    return asyncio.run(run())


@on_store
async def adk_read_turnstore(store: Any) -> dict[str, Any]:
    """`TurnstoreSessionService.get_session` of every session of the copy."""
    from turnstore.integrations.adk import TurnstoreSessionService

    service = TurnstoreSessionService(store)
    try:
        return await _get_every_session(service)
    finally:
        await service.close()


async def _get_every_session(service: Any) -> dict[str, Any]:
    listed = (await service.list_sessions(app_name=APP)).sessions
    keys = sorted((session.user_id, session.id) for session in listed)
    count = 0
    began = time.perf_counter()
    for user_id, session_id in keys:
        session = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
        count += len(session.events)
    return {"count": count, "seconds": time.perf_counter() - began}


def adk_move(source: str, url: str, verify: bool) -> dict[str, Any]:
    """`import-from adk SOURCE URL`'s copy, or its `--verify`."""
    from turnstore.cli.moves_adk import adk_database
    from turnstore.integrations import adk_move as move

    with open_store(url) as store:
        reading, writing = adk_database(source, read_only=True), move.TurnstoreSessions(store)

        async def run() -> dict[str, Any]:
            try:
                if verify:
                    checked = await move.averify_sessions(reading, writing)
                    return _verified(checked, checked.event_count)
                report = await move.acopy_sessions(reading, writing)
                return _copied(report, report.event_count)
            finally:
                await reading.aclose()
                await writing.aclose()

        with frozen_heap():  # as the command runs its move
            return asyncio.run(run())


def _copied(report: Any, count: int) -> dict[str, Any]:
    if report.conflicts or report.skipped:
        raise RuntimeError(f"the copy found problems: {report.conflicts + report.skipped}")
    return {"count": count, "seconds": report.seconds}


def _verified(report: Any, count: int) -> dict[str, Any]:
    if report.difference is not None:
        raise RuntimeError(f"verify found a difference: {report.difference}")
    return {"count": count, "seconds": report.seconds}


def adk_reads(source: str, url: str, calls: int) -> dict[str, Any]:
    return asyncio.run(_adk_reads(source, url, calls))


async def _adk_reads(source: str, url: str, calls: int) -> dict[str, Any]:
    """Ours beside ADK's, interleaved: each call's median seconds over `calls` calls.

    With `get_session`, a third column: the long session's `Event` objects built alone from
    their stored JSON (as any service returning ADK's events must build them), which bounds
    how much faster than ADK's any such `get_session` can be.
    """
    import statistics

    from google.adk.events import Event
    from google.adk.sessions import DatabaseSessionService

    from turnstore.integrations import _adk_storage as storage
    from turnstore.integrations.adk import TurnstoreSessionService, turnstore_id

    app, user, session_id = LONG
    operations = {
        "get_session": lambda s: s.get_session(app_name=app, user_id=user, session_id=session_id),
        "list_user": lambda s: s.list_sessions(app_name=LISTED[0], user_id=LISTED[1]),
        "list_app": lambda s: s.list_sessions(app_name=LISTED[0]),
    }
    found: dict[str, Any] = {}
    async with DatabaseSessionService(source) as theirs:
        ours = TurnstoreSessionService(url)
        stored = (await ours.store.context_window(turnstore_id(*LONG), None, None)).items

        async def build(_: Any) -> Any:
            return [Event.model_validate(storage.loaded(item)) for item in stored]

        try:
            for name, operation in operations.items():
                sides = [("theirs", theirs, operation), ("ours", ours, operation)]
                if name == "get_session":
                    sides.append(("built", None, build))
                times: dict[str, list[float]] = {side: [] for side, _, _ in sides}
                sizes = set()
                for _ in range(calls):
                    for side, service, call in sides:
                        began = time.perf_counter()
                        answer = await call(service)
                        times[side].append(time.perf_counter() - began)
                        if side != "built":
                            sizes.add(len(getattr(answer, "events", None) or answer.sessions))
                        elif len(answer) not in sizes:
                            raise RuntimeError(f"built {len(answer)} events, not {sizes}")
                if len(sizes) != 1:
                    raise RuntimeError(f"{name}: ours and ADK's differ in size: {sizes}")
                found[name] = {side: statistics.median(t) for side, t in times.items()}
                found[name]["size"] = sizes.pop()
        finally:
            await ours.close()
    return found


ACTIONS: dict[str, Callable[..., Any]] = {
    "agents_read": agents_read,
    "agents_read_turnstore": agents_read_turnstore,
    "agents_move": agents_move,
    "adk_read": adk_read,
    "adk_read_turnstore": adk_read_turnstore,
    "adk_move": adk_move,
    "adk_reads": adk_reads,
}
