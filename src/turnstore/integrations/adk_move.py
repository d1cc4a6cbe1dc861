"""Google ADK sessions moved between any two session services, with their events and state.

    from turnstore.integrations.adk_move import (
        DatabaseSessions, TurnstoreSessions, copy_sessions, verify_sessions,
    )

    source = DatabaseSessions("sqlite+aiosqlite:///sessions.db", read_only=True)
    with TurnstoreSessions("sqlite:///agent.db") as target:
        report = copy_sessions(source, target)
        assert verify_sessions(source, target).difference is None

A side of a move is a `Sessions`. `DatabaseSessions` (a `DatabaseSessionService` database)
lists every app, user and session from its tables, which ADK's API cannot, and reads them
there, read-only; `TurnstoreSessions` (`TurnstoreSessionService`'s sessions in a store) lists
them from the catalog; any other `BaseSessionService` (`InMemorySessionService`, your own)
comes as `Sessions(service, apps=[...], users=[...])`, listed by `list_sessions` per app (and
user). The source is never written.

Into turnstore a session is copied exact: its events (every field, timestamps included), its
own state, its create and update times, and the app's and the user's state. Into an ADK
service it is written through that service's API, as exact as it allows: `create_session`
stamps the current time (the create time, and the update time of a session without events,
change) and `append_event` applies each event's state delta again (from the source's own
state: the same state when the source's events were appended in time order), and sets the
update time to the newest event's. The app's and the user's state are then set to the
source's values through a session created with them and deleted at once.

One session at a time, its events oldest first (ADK's `get_session` order): memory holds one
session's events, and the apps and users seen. A session already on the target is compared by
its event ids in order: a prefix of the source's gets the rest appended; equal, or the
source's a prefix of the target's (the target went on, after a cut-over), nothing is written;
anything else is a conflict, reported and left as it is. So a run killed at any point, or run
again after the source has grown, copies only what the target lacks. App and user state
follow the source: after the sessions, every value the target lacks or holds otherwise is set
to the source's (values only the target holds are kept).

ADK's services are async: `acopy_sessions`, `averify_sessions` and `asurvey` run on the
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

with requires_extra(__name__, "Google ADK", "adk"):
    from google.adk.sessions.session import Session

    from turnstore.integrations._adk_sides import (
        DatabaseSessions,
        Held,
        Read,
        Sessions,
        TurnstoreSessions,
    )
    from turnstore.integrations._adk_tables import Key, Place, Problem

T = TypeVar("T")
Progress = Callable[[int, int], None]
"""Called after each session: (sessions done, sessions in all; 0 when not known)."""


@dataclass
class MoveReport:
    """What one copy did."""

    session_count: int = 0
    event_count: int = 0
    """Events written to the target."""
    present_count: int = 0
    """Events the target already held, with the source's ids in the source's order."""
    ahead_count: int = 0
    """Sessions the target holds more of: the source's events are a prefix of its (kept)."""
    state_count: int = 0
    """App and user state values set on the target (it lacked them, or held others)."""
    conflicts: list[Problem] = field(default_factory=list)
    """Target sessions whose events differ from the source's: reported, never overwritten."""
    skipped: list[Problem] = field(default_factory=list)
    """Source events that could not be read, skipped because `skip_bad` was set."""
    seconds: float = 0.0


@dataclass
class VerifyReport:
    """What a verify compared, and the first difference it found (None: the same)."""

    session_count: int = 0
    event_count: int = 0
    difference: Problem | None = None
    seconds: float = 0.0


@dataclass
class Survey:
    """What a copy would read: sessions, events and the source's bytes (a dry run)."""

    session_count: int = 0
    event_count: int = 0
    source_bytes: int | None = None


# --- the copy -------------------------------------------------------------------------------


async def acopy_sessions(
    source: Sessions,
    target: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """Copy every session, event and state value the target lacks (see the module's
    docstring).

    The source is only read. `apps`, `users` and `session_ids` pick sessions (`apps` is
    required for a source that cannot list them); `skip_bad` skips source events that
    cannot be read (reported) instead of stopping at the first.
    """
    started = time.monotonic()
    await target.prepare()
    total = len(session_ids) if session_ids is not None else 0
    report = MoveReport()
    copy = _SessionCopy(source, target, report, skip_bad)
    seen: dict[tuple[str, str], Key] = {}
    # Inside the block, the writes in flight settled: its end makes them all durable.
    with target.deferred():
        try:
            async for key in source.keys(apps, users, session_ids):
                seen.setdefault((key.app_name, key.user_id), key)
                await copy.run(key)
                report.session_count += 1
                if progress is not None:
                    progress(report.session_count, total)
            await copy.settle()
            for key in seen.values():
                report.state_count += await _copy_states(source, target, key)
        finally:
            await copy.settle()
    report.seconds = time.monotonic() - started
    return report


class _SessionCopy:
    """Sessions copied one after another, the write of one beside the reading of the next.

    One write at a time is in flight: the target's commit overlaps the source's reading and
    decoding of the next session.
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

    async def run(self, key: Key) -> None:
        """One session: the target's event ids compared with the source's, the rest written."""
        read = await self.source.read(key, self.skipped)
        if read is None:
            return  # deleted on the source since it was listed
        held = await self.target.held(key)
        start = 0
        if held is not None:
            start = self._compared(read, held)
            if start < 0:
                return
        await self.settle()
        self.pending = asyncio.create_task(self.target.write(read, held, start))
        self.report.event_count += len(read.events) - start

    def _compared(self, read: Read, held: Held) -> int:
        """Where to append from; -1 when nothing is to be written (equal, ahead, conflict)."""
        report, ours = self.report, [event["id"] for event in read.events]
        for index, (mine, theirs) in enumerate(zip(ours, held.ids, strict=False)):
            if mine != theirs:
                reason = f"the target holds event {theirs!r} where the source has {mine!r}"
                report.conflicts.append(Problem(Place(*read.key, index, mine), reason))
                return -1
        report.present_count += min(len(ours), len(held.ids))
        if len(held.ids) > len(ours):
            report.ahead_count += 1
        return len(held.ids) if len(held.ids) < len(ours) else -1


async def _copy_states(source: Sessions, target: Sessions, key: Key) -> int:
    """Set the target's app and user state values that differ from the source's; how many."""
    app, user = await source.states(key)
    held_app, held_user = await target.states(key)
    app = {name: value for name, value in app.items() if _differs(held_app, name, value)}
    user = {name: value for name, value in user.items() if _differs(held_user, name, value)}
    if app or user:
        await target.set_states(key, app, user)
    return len(app) + len(user)


def _differs(held: dict[str, Any], name: str, value: Any) -> bool:
    return name not in held or held[name] != value or type(held[name]) is not type(value)


def _shown(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 1]}…"


# --- the check ------------------------------------------------------------------------------


async def averify_sessions(
    source: Sessions,
    target: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Read each session through ADK's `get_session` on both sides and compare them field by
    field: the events in order (each event's every field), the state (its own, the app's and
    the user's), and the update time when the target keeps the source's times (turnstore);
    stops at the first difference, which names its session and the event's index and id.
    """
    started = time.monotonic()
    total = len(session_ids) if session_ids is not None else 0
    report = VerifyReport()
    async for key in source.keys(apps, users, session_ids):
        mine, theirs = await source.get(key), await target.get(key)
        report.difference = compare(key, mine, theirs, times=target.keeps_times)
        report.session_count += 1
        report.event_count += len(mine.events) if mine is not None else 0
        if progress is not None:
            progress(report.session_count, total)
        if report.difference is not None:
            break
    report.seconds = time.monotonic() - started
    return report


def compare(
    key: Key, mine: Session | None, theirs: Session | None, *, times: bool
) -> Problem | None:
    """The first difference between a source session and a target one, or None."""
    if mine is None or theirs is None:
        side = "target" if mine is None else "source"
        return Problem(Place(*key), f"only the {side} has this session")
    for index, (a, b) in enumerate(zip(mine.events, theirs.events, strict=False)):
        left = a.model_dump(mode="json", exclude_none=True)
        right = b.model_dump(mode="json", exclude_none=True)
        if left != right:
            name = next(n for n in sorted({*left, *right}) if left.get(n) != right.get(n))
            reason = f"{name}: {_shown(left.get(name))} != {_shown(right.get(name))}"
            return Problem(Place(*key, index, a.id), reason)
    if len(mine.events) != len(theirs.events):
        index = min(len(mine.events), len(theirs.events))
        longer = mine if len(mine.events) > len(theirs.events) else theirs
        side = "source" if longer is mine else "target"
        return Problem(
            Place(*key, index, longer.events[index].id), f"only the {side} has this event"
        )
    for name in sorted({*mine.state, *theirs.state}):
        if name not in theirs.state or name not in mine.state:
            side = "source" if name in mine.state else "target"
            return Problem(Place(*key), f"state {name!r}: only the {side} has it")
        if mine.state[name] != theirs.state[name]:
            shown = f"{_shown(mine.state[name])} != {_shown(theirs.state[name])}"
            return Problem(Place(*key), f"state {name!r}: {shown}")
    if times and mine.last_update_time != theirs.last_update_time:
        shown = f"{mine.last_update_time!r} != {theirs.last_update_time!r}"
        return Problem(Place(*key), f"last_update_time: {shown}")
    return None


async def asurvey(
    source: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
) -> Survey:
    """What `acopy_sessions` would read, counted by the source (a dry run)."""
    found = Survey(source_bytes=await source.size())
    async for key in source.keys(apps, users, session_ids):
        found.session_count += 1
        found.event_count += await source.count(key)
    return found


# --- blocking twins -------------------------------------------------------------------------


def _blocking(work: Coroutine[Any, Any, T], *sides: Sessions) -> T:
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
                await side.settle()

    return asyncio.run(run())


def copy_sessions(
    source: Sessions,
    target: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """`acopy_sessions`, blocking."""
    work = acopy_sessions(
        source, target, apps=apps, users=users, session_ids=session_ids, skip_bad=skip_bad,
        progress=progress,
    )  # fmt: skip
    return _blocking(work, source, target)


def verify_sessions(
    source: Sessions,
    target: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """`averify_sessions`, blocking."""
    work = averify_sessions(
        source, target, apps=apps, users=users, session_ids=session_ids, progress=progress
    )
    return _blocking(work, source, target)


def survey(
    source: Sessions,
    *,
    apps: Sequence[str] | None = None,
    users: Sequence[str] | None = None,
    session_ids: Sequence[str] | None = None,
) -> Survey:
    """`asurvey`, blocking."""
    return _blocking(asurvey(source, apps=apps, users=users, session_ids=session_ids), source)


__all__ = [
    "DatabaseSessions",
    "Key",
    "MoveReport",
    "Place",
    "Problem",
    "Progress",
    "Sessions",
    "Survey",
    "TurnstoreSessions",
    "VerifyReport",
    "acopy_sessions",
    "asurvey",
    "averify_sessions",
    "compare",
    "copy_sessions",
    "survey",
    "verify_sessions",
]
