"""The hub of `wait_for_events` callers of one engine, and how a waiter sleeps and wakes.

A waiter registers before it reads its session's high-water mark, so a commit that lands after
the read wakes it, from whichever thread learns of the commit: the writer after a local
COMMIT, or a backend's listener or poll loop for commits of other stores. A backend's subclass
of `EventWatch` adds how it hears of those (`_start`) and how it tells other stores
(`_publish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable

from turnstore.errors import StoreClosed

ReadMarks = Callable[[list[str]], dict[str, int]]
"""Reads the event high-water marks of the present sessions among the ids given."""


class Waiter:
    """One `wait_for_events` call: woken, from any thread, when its session may have moved."""

    __slots__ = ("_lock", "_resolve", "_woken", "after", "closed", "session_id")

    def __init__(self, session_id: str, after: int) -> None:
        self.session_id = session_id
        self.after = after
        self.closed = False
        self._woken = threading.Event()
        self._lock = threading.Lock()
        self._resolve: Callable[[], None] | None = None

    def wake(self) -> None:
        """Wake the waiter; it reads the high-water mark again."""
        with self._lock:
            self._woken.set()
            resolve = self._resolve
        if resolve is not None:
            resolve()

    def clear(self) -> None:
        """Forget earlier wake-ups: called before each read of the mark."""
        self._woken.clear()

    def block(self, seconds: float) -> None:
        """Block the calling thread until woken or `seconds` pass."""
        self._woken.wait(seconds)

    async def pause(self, seconds: float) -> None:
        """Await, on the running loop, a wake-up or `seconds`."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            # Called from the thread that learnt of a commit; the loop may be gone by then.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, woken)

        with self._lock:
            if self._woken.is_set():
                return
            self._resolve = resolve
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken, seconds)
        finally:
            with self._lock:
                self._resolve = None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class EventWatch:
    """An engine's waiters by session, and how they are woken; backends add the listening."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}
        self._started = False
        self._closed = False

    def register(self, session_id: str, after: int, read_marks: ReadMarks) -> Waiter:
        """A new waiter for `session_id`; the first one starts the backend's listening.

        `read_marks` is how the operation above reads high-water marks, for a backend that
        polls for other processes' commits (the engine holds no transaction script)."""
        waiter = Waiter(session_id, after)
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is closed")
            self._waiters.setdefault(session_id, set()).add(waiter)
            start, self._started = not self._started, True
        if start:
            self._start(read_marks)
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        """Forget a waiter whose call ended."""
        with self._lock:
            found = self._waiters.get(waiter.session_id)
            if found is not None:
                found.discard(waiter)
                if not found:
                    del self._waiters[waiter.session_id]

    def committed(self, session_ids: Iterable[str]) -> None:
        """A local COMMIT journaled events of these sessions: wake waiters, tell other stores."""
        ids = list(session_ids)
        self.wake(ids)
        self._publish(ids)

    def wake(self, session_ids: Iterable[str]) -> None:
        """Wake every waiter of these sessions."""
        if not self._waiters:
            return  # the usual case, a save with nobody waiting: no lock taken
        with self._lock:
            found = [w for s in session_ids for w in self._waiters.get(s, ())]
        for waiter in found:
            waiter.wake()

    def wake_all(self) -> None:
        """Wake every waiter (a listener that may have missed notifications reconnected)."""
        for waiter in self._every():
            waiter.wake()

    def watched(self) -> dict[str, list[Waiter]]:
        """The waiters of each session waited on now."""
        with self._lock:
            return {session: list(found) for session, found in self._waiters.items()}

    def close(self) -> None:
        """End every wait (each raises `StoreClosed`), then stop listening."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for waiter in self._every():
            waiter.closed = True
            waiter.wake()
        self._stop()

    def _every(self) -> list[Waiter]:
        with self._lock:
            return [waiter for found in self._waiters.values() for waiter in found]

    def _start(self, read_marks: ReadMarks) -> None:
        """Begin hearing of commits other stores make (a backend's listener or poll loop)."""

    def _publish(self, session_ids: list[str]) -> None:
        """Tell other stores that these sessions have new events."""

    def _stop(self) -> None:
        """Stop what `_start` and `_publish` began."""
