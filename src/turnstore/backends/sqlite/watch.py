"""How a SQLite store hears of events: its own commits at once, other processes' by a poll.

SQLite has no notification between connections, so one thread per store (started by the first
wait) reads the high-water marks of the sessions being waited on, and only those, every
`POLL_INTERVAL_S`, waking a waiter whose session moved past its cursor. The store's own
commits wake waiters directly from the committing thread, right after COMMIT.
"""

from __future__ import annotations

import threading

from turnstore.engine.waiters import EventWatch, ReadMarks

POLL_INTERVAL_S = 0.1
"""How often a store reads the marks of the sessions waited on, for other processes' writes.

A tenth of a second is below what a person watching a live session notices, and one indexed
read of a few sessions ten times a second costs nothing next to an agent's turn; a tighter
loop would buy latency only for writers in other processes, which pay an fsync per commit."""


class SqliteWatch(EventWatch):
    """The waiters of one SQLite store, and the poll loop that serves them."""

    def __init__(self) -> None:
        super().__init__()
        self._read_marks: ReadMarks = lambda ids: {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self, read_marks: ReadMarks) -> None:
        self._read_marks = read_marks
        self._thread = threading.Thread(
            target=self._poll, name="turnstore-sqlite-watch", daemon=True
        )
        self._thread.start()

    def _poll(self) -> None:
        while not self._stopping.wait(POLL_INTERVAL_S):
            watched = self.watched()
            if not watched:
                continue
            try:
                marks = self._read_marks(list(watched))
            except Exception:
                # A busy or failing database is tried again on the next tick; a waiter still
                # ends by its own time-out and meets the error on its own read.
                continue
            for session_id, waiters in watched.items():
                latest = marks.get(session_id, 0)
                for waiter in waiters:
                    if latest > waiter.after:
                        waiter.wake()

    def _stop(self) -> None:
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
