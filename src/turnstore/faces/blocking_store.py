"""The agent loop's blocking face: `open_blocking` and `BlockingStore`, the checkpoint contract.

Generated from `turnstore.faces.aio_store` by `tools/async_to_sync.py`; do not edit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self

from turnstore.backends.urls import open_engine
from turnstore.drivers.steps import BlockingDriver, session_of
from turnstore.faces.blocking_langgraph import BlockingLangGraphTables
from turnstore.faces.blocking_memory import BlockingMemoryTables
from turnstore.faces.blocking_runtime import BlockingRuntimeStore
from turnstore.faces.blocking_upkeep import BlockingUpkeep
from turnstore.ops import checkpoint as checkpoint_ops
from turnstore.ops import watch as watch_ops
from turnstore.records.base import WriterStats
from turnstore.records.checkpoint import (
    Checkpoint,
    ContextWindow,
    EventPage,
    EventPageRequest,
    ExecutionPage,
    ExecutionPageRequest,
    ExecutionRecord,
    ForkTree,
    JournalEvent,
    SessionPage,
    SessionPageRequest,
    SessionStates,
    SessionSummary,
    TimestampedEvent,
    TranscriptPage,
    TranscriptPageRequest,
)
from turnstore.records.conversation import ConversationPage, ConversationRequest
from turnstore.records.kinds.items import KIND as ITEMS
from turnstore.records.protocol import Event
from turnstore.records.search import SearchPage, SearchRequest
from turnstore.rules.validation import validate_session_id


def open_blocking(
    url: str | os.PathLike[str],
    *,
    read_only: bool = False,
    create_dirs: bool = False,
    index_in_background: bool = True,
) -> BlockingStore:
    """Open the blocking store at `url`: `sqlite:///relative.db`, `postgresql://…` or a path.

    A SQLite path may start with `~`; its folder must exist, unless `create_dirs` asks to
    create it (PostgreSQL ignores `create_dirs`). A mistyped URL, a missing folder or a file
    this process cannot write is a `ConfigError` naming the fix.

    `read_only` opens an existing database without creating, migrating or writing it, and
    creates no file beside it: it reads a read-only folder, a file this process cannot write,
    and a database a live writer is using.

    `index_in_background` (the default) runs a thread that makes each write searchable within
    a fraction of a second, for readers in other processes too; a search through this store
    finds every write committed before it either way (docs/how-to/search.md).
    """
    engine = open_engine(url, read_only=read_only, create_dirs=create_dirs)
    return BlockingStore._on_driver(BlockingDriver(engine, index_in_background=index_in_background))


class BlockingStore:
    """The blocking store: the agent loop's operations of the checkpoint contract.

    Open one with `turnstore.open_blocking` (or borrow one through `turnstore.seam`).
    """

    def __init__(self) -> None:
        """Refused: a store is opened with `turnstore.open_blocking`."""
        raise TypeError(
            "a store is opened with turnstore.open(url) or turnstore.open_blocking(url)"
        )

    @classmethod
    def _on_driver(cls, driver: BlockingDriver) -> Self:
        """A store whose calls run on `driver` (how `open_blocking` and the seam build one)."""
        store = cls.__new__(cls)
        store._bind(driver)
        return store

    def _bind(self, driver: BlockingDriver) -> None:
        self._driver = driver
        self._upkeep = BlockingUpkeep(driver)
        self._langgraph = BlockingLangGraphTables(driver)
        self._memory = BlockingMemoryTables(driver)

    @property
    def upkeep(self) -> BlockingUpkeep:
        """The operators' face on this store's connections: prune, stats, doctor, backup, …"""
        return self._upkeep

    @property
    def langgraph(self) -> BlockingLangGraphTables:
        """The LangGraph saver's tables on this store's connections (see `TurnstoreSaver`)."""
        return self._langgraph

    @property
    def memory(self) -> BlockingMemoryTables:
        """Long-term memory on this store's connections (see `TurnstoreStore`)."""
        return self._memory

    def writer_stats(self) -> WriterStats:
        """Counters of the write path: committed transactions and writes."""
        return self._driver.writer_stats()

    def deferred_durability(self) -> AbstractContextManager[None]:
        """A block whose writes are answered before they reach the disk, all durable at its end.

        For loads that can be run again (a move, an import): a commit begun in the block (in
        this thread or task) does not wait for its fsync (SQLite) or WAL flush (PostgreSQL's
        `synchronous_commit` off), so a power cut or a server crash may lose the block's
        newest commits, never part of one; a crash of this process loses nothing. Leaving
        the block waits once for everything to be on disk.
        """
        return self._driver.deferred_durability()

    def runtime(self, session_id: str) -> BlockingRuntimeStore:
        """The blocking runtime face bound to one session (graph, turn commits, queue, blobs)."""
        self._driver.check_open()
        return BlockingRuntimeStore(self._driver, validate_session_id(session_id))

    def load(self, session_id: str) -> Checkpoint | None:
        """Load the latest checkpoint of a session, or None."""
        return self._driver.run(checkpoint_ops.load(session_id), session_id)

    def save(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
    ) -> None:
        """Atomically replace the checkpoint, append transcript items, record a finished turn."""
        self._driver.run(
            checkpoint_ops.save_with_events(checkpoint, transcript_delta, execution, ()),
            session_of(checkpoint),
        )

    def save_with_events(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
        events: Iterable[TimestampedEvent] = (),
    ) -> list[JournalEvent]:
        """Save as `save` and journal events in the same commit; return them after commit."""
        return self._driver.run(
            checkpoint_ops.save_with_events(checkpoint, transcript_delta, execution, events),
            session_of(checkpoint),
        )

    def append_event(self, session_id: str, recorded_at_ms: int, event: Event) -> JournalEvent:
        """Assign the next session-local sequence to one event and journal it."""
        return self._driver.run(
            checkpoint_ops.append_event(session_id, recorded_at_ms, event), session_id
        )

    def event_page(self, session_id: str, request: EventPageRequest) -> EventPage:
        """Load one newest-first page of a session's journal events."""
        return self._driver.run(checkpoint_ops.event_page(session_id, request), session_id)

    def event_turn_page(self, session_id: str, before_sequence: int | None = None) -> EventPage:
        """Load the newest whole turn of events before `before_sequence`."""
        return self._driver.run(
            checkpoint_ops.event_turn_page(session_id, before_sequence), session_id
        )

    def session_summary(self, session_id: str) -> SessionSummary | None:
        """Load one session's catalog entry without decoding its checkpoint."""
        return self._driver.run(checkpoint_ops.session_summary(session_id), session_id)

    def list_sessions_page(self, request: SessionPageRequest) -> SessionPage:
        """List one newest-first page of the session catalog (by owner or id prefix, if asked)."""
        return self._driver.run(checkpoint_ops.list_sessions_page(request))

    def transcript_page(self, session_id: str, request: TranscriptPageRequest) -> TranscriptPage:
        """Load one newest-first page of transcript batches."""
        return self._driver.run(checkpoint_ops.transcript_page(session_id, request), session_id)

    def conversation(
        self, session_id: str, request: ConversationRequest | None = None
    ) -> ConversationPage | None:
        """Load one newest-first page of a session of any kind as messages; None if absent.

        A `turnstore` session reads its transcript, a session of items its context, a
        LangGraph thread the `messages` list of its newest checkpoint (docs/how-to/search.md).
        """
        return self._driver.run(
            checkpoint_ops.conversation(session_id, request or ConversationRequest()), session_id
        )

    def execution_page(self, session_id: str, request: ExecutionPageRequest) -> ExecutionPage:
        """Load one newest-first page of a session's finished turns."""
        return self._driver.run(checkpoint_ops.execution_page(session_id, request), session_id)

    def recent_executions(
        self, limit: int, *, owner_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Load the most recently started finished turns of all sessions, or of one owner's."""
        return self._driver.run(checkpoint_ops.recent_executions(limit, owner_id))

    def search(self, request: SearchRequest) -> SearchPage:
        """One page of the items, across every session, whose text matches `request.query`."""
        return self._driver.run(checkpoint_ops.search_sessions(request))

    def fork_tree(self, session_id: str, *, limit: int = 1000) -> ForkTree | None:
        """Load the fork tree holding a session: root first, then breadth-first; None if absent."""
        return self._driver.run(checkpoint_ops.fork_tree(session_id, limit), session_id)

    def fork(
        self, parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
    ) -> SessionSummary:
        """Create a child session at an exact durable parent sequence."""
        return self._driver.run(
            checkpoint_ops.fork(parent_session_id, parent_sequence, checkpoint),
            session_of(checkpoint),
        )

    def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        """Delete session trees and their state atomically; False if any id is absent."""
        return self._driver.run(checkpoint_ops.delete_sessions(session_ids))

    def append_context(
        self,
        session_id: str,
        items: Iterable[Any],
        owner_id: str | None = None,
        expected_sequence: int | None = None,
        state: Iterable[tuple[str, str, Any]] = (),
        *,
        kind: str = ITEMS.name,
        expected_state: Iterable[tuple[str, str, Any]] = (),
    ) -> int:
        """Append items to a session's context and transcript in one commit; the new sequence.

        A missing session is created at sequence 1, owned by `owner_id`, of `kind` (what
        the catalog and search name it); an existing one keeps its owner and kind. With
        `expected_sequence`, the session must be at that sequence (0: it must not exist
        yet), else `SequenceConflict` (`SessionNotFound` when it is gone). `state` holds
        (scope, key, value) middleware state writes of the same commit. `expected_state`
        holds (scope, key, value) values that must be stored, equal as JSON, under the
        session's lock, else `StateConflict` and nothing is written.
        """
        return self._driver.run(
            checkpoint_ops.append_context(
                session_id, items, owner_id, expected_sequence, state, kind, expected_state
            ),
            session_id,
        )

    def pop_context(self, session_id: str, count: int = 1) -> list[Any]:
        """Remove a session's newest `count` context items; return them, oldest first."""
        return self._driver.run(checkpoint_ops.pop_context(session_id, count), session_id)

    def clear_context(self, session_id: str) -> bool:
        """Remove every context item of a session; False if there is no such session."""
        return self._driver.run(checkpoint_ops.clear_context(session_id), session_id)

    def context_tail(self, session_id: str, limit: int | None = None) -> list[Any]:
        """Load a session's newest `limit` context items (all when None), oldest first."""
        return self._driver.run(checkpoint_ops.context_tail(session_id, limit), session_id)

    def context_window(
        self, session_id: str, before: int | None = None, limit: int | None = None
    ) -> ContextWindow:
        """Load the newest `limit` context items before index `before`, with the sequence."""
        return self._driver.run(
            checkpoint_ops.context_window(session_id, before, limit), session_id
        )

    def replace_context(
        self, session_id: str, sequence: int, start: int, items: Iterable[Any], drop_prefix: int = 0
    ) -> bool:
        """Replace the context from `start` on with `items`, if still at `sequence`.

        Also drops the context's first `drop_prefix` items. False, writing nothing, when any
        write moved the session past `sequence` (compare-and-set, as for a compaction).
        """
        return self._driver.run(
            checkpoint_ops.replace_context(session_id, sequence, start, items, drop_prefix),
            session_id,
        )

    def load_state(self, scope: str, key: str) -> Any:
        """Load one middleware state value, or None."""
        return self._driver.run(checkpoint_ops.load_state(scope, key))

    def load_states(self, scopes: Sequence[str], key: str) -> dict[str, Any]:
        """Load one middleware state key's value in each scope that has one, by scope."""
        return self._driver.run(checkpoint_ops.load_states(scopes, key))

    def load_session_states(
        self, id_prefix: str, key: str, *, after: str | None = None, limit: int = 1000
    ) -> SessionStates:
        """One page of the sessions whose id starts with `id_prefix` (after `after`, at most
        `limit`), each with its own value of middleware state `key`, in id order."""
        return self._driver.run(checkpoint_ops.load_session_states(id_prefix, key, after, limit))

    def load_state_scope(self, scope: str) -> dict[str, Any]:
        """Load every middleware state value of one scope, by key."""
        return self._driver.run(checkpoint_ops.load_state_scope(scope))

    def save_state(
        self,
        scope: str,
        key: str,
        value: Any,
        *,
        expected_state: Iterable[tuple[str, str, Any]] = (),
    ) -> None:
        """Durably replace one middleware state value.

        `expected_state` holds (scope, key, value) values that must be stored, equal as JSON,
        until the commit, else `StateConflict` and nothing is written.
        """
        self._driver.run(checkpoint_ops.save_state(scope, key, value, expected_state))

    def events_after(self, session_id: str, after_sequence: int, limit: int) -> EventPage:
        """Load the stored events after a sequence, oldest first (compacted deltas are absent)."""
        return self._driver.run(
            watch_ops.events_after(session_id, after_sequence, limit), session_id
        )

    def wait_for_events(self, session_id: str, after_sequence: int, timeout: float) -> int:
        """Wait up to `timeout` s for events past `after_sequence`; return the latest sequence."""
        return self._driver.run(
            watch_ops.wait_for_events(session_id, after_sequence, timeout), session_id
        )

    def close(self) -> None:
        """Commit queued writes and release connections and threads."""
        self._driver.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
