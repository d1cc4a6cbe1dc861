"""Internal: the search indexer, a thread that indexes a store's writes off their save path.

It wakes every `INTERVAL_S`, and when the store committed anything since it last looked, runs
`catch_up`: `search.catch_up_batch` until no session written since is left unindexed, then
`memory.index_pending` until no memory item's words wait. A
search on a writable store runs the same `catch_up` first (`ops.checkpoint.catch_up_search`),
so it finds every write committed before it began; the thread bounds how long a reader
elsewhere (a read-only store, a viewer) waits for a write to become searchable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from turnstore.engine.protocol import Engine
from turnstore.errors import StoreClosed, TurnstoreError
from turnstore.scripts import memory, search

INTERVAL_S = 0.2
"""How often the indexer looks for commits to index."""

logger = logging.getLogger("turnstore.search")


def _always() -> bool:
    return True


def catch_up(engine: Engine, going: Callable[[], bool] = _always, *, wait: bool = False) -> int:
    """Index every session written since the last look, a batch per commit, while `going()`;
    how many sessions it looked at.

    The one catch-up loop: the indexer's thread runs it, and so does a search first (as an
    engine call of `ops.checkpoint.catch_up_search`), which `wait`s for a session whose row
    another transaction holds instead of leaving it for the next pass.
    """
    batch = search.CATCH_UP_SESSIONS
    looked = 0
    while going() and engine.read(search.has_pending):
        done = engine.write_blocking(lambda tx: search.catch_up_batch(tx, batch, wait))
        looked += done
        if done < batch:
            break
    while going() and engine.read(memory.has_pending):
        if engine.write_blocking(memory.index_pending) < memory.INDEX_BATCH:
            break
    return looked


class SearchIndexer:
    """A daemon thread indexing what `engine` commits, until `stop()`."""

    def __init__(self, engine: Engine, interval_s: float = INTERVAL_S) -> None:
        self._engine = engine
        self._interval_s = interval_s
        self._stopping = threading.Event()
        # -1: the first look runs even before a commit, for what a crashed writer left.
        self._seen = -1
        self._thread = threading.Thread(target=self._run, name="turnstore-search", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_s):
            committed = self._engine.writer_stats().transactions
            if committed == self._seen:
                continue
            self._seen = committed
            try:
                self._catch_up()
            except StoreClosed:
                return
            except TurnstoreError as error:
                # The next commit brings the next try; the writes themselves stand.
                logger.warning("search indexing failed; it is tried again: %s", error)

    def _catch_up(self, *, closing: bool = False) -> None:
        catch_up(self._engine, lambda: closing or not self._stopping.is_set())

    def stop(self) -> None:
        """Stop the thread, letting a batch it began commit first; then index what the store
        committed since it last looked, so that a reader finds a closed writer's last saves."""
        self._stopping.set()
        self._thread.join()
        if self._engine.writer_stats().transactions == self._seen:
            return
        try:
            self._catch_up(closing=True)
        except TurnstoreError as error:
            logger.warning("search indexing at close failed; the next writer does it: %s", error)
