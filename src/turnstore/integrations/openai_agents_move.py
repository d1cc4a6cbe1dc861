"""OpenAI Agents SDK sessions moved between any two session stores, items exact and in order.

    from turnstore.integrations.openai_agents_move import (
        SQLiteSessions, TurnstoreSessions, copy_sessions, verify_sessions,
    )

    source = SQLiteSessions("chat.db")
    with TurnstoreSessions("sqlite:///agent.db", owner_id="support") as target:
        report = copy_sessions(source, target)
        assert verify_sessions(source, target).difference is None

A side of a move is a `Sessions`: where sessions live, which opens the SDK `Session` of an id.
`SQLiteSessions` (a `SQLiteSession` file), `SQLAlchemySessions` (a `SQLAlchemySession`
database) and `TurnstoreSessions` (`TurnstoreSession`s in a store) list their sessions from
their tables and read them a page at a time, read-only; any other `Session` comes as a
callable that opens one by id (`lambda session_id: RedisSession(session_id, ...)`), with the
session ids named by the caller: the `Session` protocol cannot list them. Writes go through
the target's `add_items` only; the source is never written.

One session at a time, its items oldest first: memory holds one session's items at most (a
page, for a new target session). A session already on the target is compared as it is read:
its items a prefix of the source's, only the rest is appended; equal, or the source's a prefix
of the target's (the target went on, after a cut-over), nothing is written; anything else is a
conflict, reported and left as it is. So a run killed at any point, or run again after the
source has grown, copies only what the target lacks.

The SDK's sessions are async: `acopy_sessions`, `averify_sessions` and `asurvey` run on the
caller's event loop; `copy_sessions`, `verify_sessions` and `survey` run them on one of their
own (not from async code), and release the sides' pooled connections before it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from turnstore.integrations import requires_extra

with requires_extra(__name__, "the OpenAI Agents SDK", "openai-agents"):
    from agents.memory import Session  # noqa: F401  (the SDK first: without it, the extra is named)

    from turnstore.integrations._agents_sides import (
        Opener,
        Sessions,
        SQLAlchemySessions,
        SQLiteSessions,
        TurnstoreSessions,
        listed,
        sessions_of,
    )
    from turnstore.integrations._agents_tables import Place, Problem

T = TypeVar("T")
Progress = Callable[[int, int], None]
"""Called after each session: (sessions done, sessions in all; 0 when not known)."""


@dataclass
class MoveReport:
    """What one copy did."""

    session_count: int = 0
    item_count: int = 0
    """Items written to the target."""
    present_count: int = 0
    """Items the target already held, equal to the source's (not written again)."""
    ahead_count: int = 0
    """Sessions the target holds more of: the source's items are a prefix of its (kept)."""
    conflicts: list[Problem] = field(default_factory=list)
    """Target sessions whose items differ from the source's: reported, never overwritten."""
    skipped: list[Problem] = field(default_factory=list)
    """Source rows that could not be decoded, skipped because `skip_bad` was set."""
    seconds: float = 0.0


@dataclass
class VerifyReport:
    """What a verify compared, and the first difference it found (None: the same)."""

    session_count: int = 0
    item_count: int = 0
    difference: Problem | None = None
    seconds: float = 0.0


@dataclass
class Survey:
    """What a copy would read: sessions, items and the source's bytes (a dry run)."""

    session_count: int = 0
    item_count: int = 0
    source_bytes: int | None = None


# --- the copy -------------------------------------------------------------------------------


async def acopy_sessions(
    source: Sessions | Opener,
    target: Sessions | Opener,
    *,
    session_ids: Sequence[str] | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """Copy every item the target lacks, session by session (see the module's docstring).

    The source is only read. `session_ids` picks sessions (required for a source that cannot
    list them); `skip_bad` skips source rows that cannot be decoded (reported) instead of
    stopping at the first. The owner of sessions created in turnstore is `TurnstoreSessions`'.
    """
    started = time.monotonic()
    reading, writing = sessions_of(source), sessions_of(target)
    await writing.prepare()
    total = len(session_ids) if session_ids is not None else 0
    report = MoveReport()
    copy = _SessionCopy(reading, writing, report, skip_bad)
    # Inside the block, the writes in flight settled: its end makes them all durable.
    with writing.deferred():
        try:
            async for session_id in listed(reading, session_ids):
                await copy.run(session_id)
                report.session_count += 1
                if progress is not None:
                    progress(report.session_count, total)
        finally:
            await copy.settle()
    report.seconds = time.monotonic() - started
    return report


class _SessionCopy:
    """Sessions copied one after another, the write of one beside the reading of the next.

    One write at a time is in flight: the target's commit (its fsync, its database work
    outside the GIL) overlaps the source's reading and decoding of the next session.
    """

    def __init__(self, source: Sessions, target: Sessions, report: MoveReport, skip_bad: bool):
        self.source, self.target, self.report = source, target, report
        self.skipped = report.skipped if skip_bad else None
        self.pending: asyncio.Task[None] | None = None

    async def settle(self) -> None:
        """Wait for the write in flight; its error, if it failed."""
        pending, self.pending = self.pending, None
        if pending is not None:
            await pending

    async def run(self, session_id: str) -> None:
        """One session: the target's items compared with the source's as they are read, the
        rest appended a page at a time (a run killed between pages left a prefix: run again)."""
        report = self.report
        existing = [item async for page in self.target.pages(session_id, None) for item in page]
        index = 0
        async for page in self.source.pages(session_id, self.skipped):
            held = existing[index : index + len(page)]
            differs = next((i for i, item in enumerate(held) if item != page[i]), None)
            if differs is not None:
                reason = f"the target holds another item: {_differ(page[differs], held[differs])}"
                report.conflicts.append(Problem(Place(session_id, index + differs), reason))
                return
            report.present_count += len(held)
            if len(held) < len(page):
                await self.settle()
                fresh = page[len(held) :]
                self.pending = asyncio.create_task(self.target.add(session_id, fresh))
                report.item_count += len(fresh)
            index += len(page)
        if index < len(existing):
            report.ahead_count += 1


def _differ(a: Any, b: Any, width: int = 120) -> str:
    """`source != target`, each shortened to `width` characters."""
    shown = [text if len(text) <= width else f"{text[: width - 1]}…" for text in (repr(a), repr(b))]
    return f"{shown[0]} != {shown[1]}"


# --- the check ------------------------------------------------------------------------------


async def averify_sessions(
    source: Sessions | Opener,
    target: Sessions | Opener,
    *,
    session_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Read each session on both sides and compare them item by item.

    The target is read through its sessions' `get_items()`, the SDK API your agents read it
    with; the source as the copy reads it. Stops at the first difference, which names its
    session and the item's index.
    """
    started = time.monotonic()
    reading, writing = sessions_of(source), sessions_of(target)
    total = len(session_ids) if session_ids is not None else 0
    report = VerifyReport()
    async for session_id in listed(reading, session_ids):
        report.difference = await _verify_session(reading, writing, session_id, report)
        report.session_count += 1
        if progress is not None:
            progress(report.session_count, total)
        if report.difference is not None:
            break
    report.seconds = time.monotonic() - started
    return report


async def _verify_session(
    source: Sessions, target: Sessions, session_id: str, report: VerifyReport
) -> Problem | None:
    theirs = await target.items(session_id)
    index = 0
    async for page in source.pages(session_id, []):
        for item in page:
            if index >= len(theirs):
                return Problem(Place(session_id, index), "only the source has this item")
            if item != theirs[index]:
                return Problem(Place(session_id, index), _differ(item, theirs[index]))
            index += 1
    report.item_count += index
    if index < len(theirs):
        return Problem(Place(session_id, index), "only the target has this item")
    return None


async def asurvey(source: Sessions | Opener, session_ids: Sequence[str] | None = None) -> Survey:
    """What `acopy_sessions` would read, counted by the source (a dry run)."""
    reading = sessions_of(source)
    found = Survey(source_bytes=await reading.size())
    async for session_id in listed(reading, session_ids):
        found.session_count += 1
        found.item_count += await reading.count(session_id)
    return found


# --- blocking twins -------------------------------------------------------------------------


def _blocking(work: Coroutine[Any, Any, T], *sides: Sessions | Opener) -> T:
    """Run `work` on an event loop of its own, then release what the sides pooled on it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        work.close()
        raise RuntimeError("this runs its own event loop: in async code, await its a… twin")

    async def run() -> T:
        try:
            return await work
        finally:
            for side in sides:
                if isinstance(side, Sessions):
                    await side.settle()

    return asyncio.run(run())


def copy_sessions(
    source: Sessions | Opener,
    target: Sessions | Opener,
    *,
    session_ids: Sequence[str] | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """`acopy_sessions`, blocking."""
    work = acopy_sessions(
        source, target, session_ids=session_ids, skip_bad=skip_bad, progress=progress
    )
    return _blocking(work, source, target)


def verify_sessions(
    source: Sessions | Opener,
    target: Sessions | Opener,
    *,
    session_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """`averify_sessions`, blocking."""
    work = averify_sessions(source, target, session_ids=session_ids, progress=progress)
    return _blocking(work, source, target)


def survey(source: Sessions | Opener, session_ids: Sequence[str] | None = None) -> Survey:
    """`asurvey`, blocking."""
    return _blocking(asurvey(source, session_ids), source)


__all__ = [
    "MoveReport",
    "Opener",
    "Place",
    "Problem",
    "Progress",
    "SQLAlchemySessions",
    "SQLiteSessions",
    "Sessions",
    "Survey",
    "TurnstoreSessions",
    "VerifyReport",
    "acopy_sessions",
    "asurvey",
    "averify_sessions",
    "copy_sessions",
    "sessions_of",
    "survey",
    "verify_sessions",
]
