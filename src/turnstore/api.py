"""`turnstore.open()`: the async store and its blocking twin, both driving `turnstore.core`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from turnstore.backends.base import Backend, WriterStats
from turnstore.core import Core, Read, Steps
from turnstore.core_runtime import RuntimeCore
from turnstore.errors import ConfigError, StoreClosed
from turnstore.records.checkpoint import (
    Checkpoint,
    EventPage,
    EventPageRequest,
    ExecutionPage,
    ExecutionPageRequest,
    ExecutionRecord,
    JournalEvent,
    SessionPage,
    SessionPageRequest,
    SessionSummary,
    TimestampedEvent,
    TranscriptPage,
    TranscriptPageRequest,
)
from turnstore.records.protocol import Event
from turnstore.runtime_api import BlockingRuntimeStore, RuntimeStore

T = TypeVar("T")

READ_THREADS = 8
"""Threads the async face uses for blocking reads."""


def open_backend(url: str | os.PathLike[str], *, read_only: bool = False) -> Backend:
    """Open the backend a URL names: `sqlite:///relative.db`, `postgresql://…`, or a path."""
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str) or not url:
        raise ConfigError("store URL must be a non-empty string or path")
    scheme, separator, rest = url.partition("://")
    if not separator:
        return _sqlite(Path(url), read_only)
    if scheme == "sqlite":
        # As SQLAlchemy: three slashes start a relative path, four an absolute one.
        path = rest[1:] if rest.startswith("/") else rest
        path = path.split("?", 1)[0]
        if not path or path == ":memory:":
            raise ConfigError("a sqlite URL needs a database file path (in-memory is unsupported)")
        return _sqlite(Path(path), read_only)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url, read_only)
    raise ConfigError(f"unsupported store URL scheme {scheme!r}; expected sqlite or postgresql")


def _sqlite(path: Path, read_only: bool) -> Backend:
    from turnstore.backends.sqlite.backend import SqliteBackend

    return SqliteBackend(path, read_only=read_only)


def _postgres(url: str, read_only: bool) -> Backend:
    try:
        from turnstore.backends.postgres.backend import PostgresBackend
    except ImportError:
        raise ConfigError(
            "PostgreSQL URLs need the driver: pip install 'turnstore[postgres]'"
        ) from None
    return PostgresBackend(url, read_only=read_only)


def _drive(steps: Steps[T]) -> T:
    value: Any = None
    try:
        while True:
            step = steps.send(value)
            value = step.call() if isinstance(step, Read) else step.submit().result()
    except StopIteration as done:
        result: T = done.value
        return result


class _Face:
    def __init__(self, backend: Backend) -> None:
        self._core = Core(backend)
        self._closed = False

    @property
    def backend(self) -> Backend:
        """The backend this store runs on."""
        return self._core.backend

    def writer_stats(self) -> WriterStats:
        """Counters of the write path: committed transactions and writes."""
        return self._core.backend.writer_stats()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")


class Store(_Face):
    """The async store: every method of the checkpoint contract, awaitable."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="turnstore-read")

    async def _run(self, steps: Steps[T]) -> T:
        self._check_open()
        loop = asyncio.get_running_loop()
        value: Any = None
        try:
            while True:
                step = steps.send(value)
                if isinstance(step, Read):
                    value = await self._read(loop, step.call)
                else:
                    # Cancelling the caller cancels a write still queued; one already running
                    # commits or fails whole.
                    value = await asyncio.wrap_future(step.submit())
        except StopIteration as done:
            result: T = done.value
            return result

    def runtime(self, session_id: str) -> RuntimeStore:
        """The runtime face bound to one session (graph, turn commits, queue, blobs)."""
        self._check_open()
        return RuntimeStore(RuntimeCore(self._core.backend.runtime, session_id), self)

    async def _read(self, loop: asyncio.AbstractEventLoop, call: Callable[[], T]) -> T:
        try:
            future = loop.run_in_executor(self._readers, call)
        except RuntimeError:
            # The read pool shuts down in close(); a call that raced it sees a closed store.
            raise StoreClosed("the store is closed") from None
        return await future

    async def load(self, session_id: str) -> Checkpoint | None:
        """Load the latest checkpoint of a session, or None."""
        return await self._run(self._core.load(session_id))

    async def save(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
    ) -> None:
        """Atomically replace the checkpoint, append transcript items, record a finished turn."""
        await self._run(self._core.save_with_events(checkpoint, transcript_delta, execution, ()))

    async def save_with_events(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
        events: Iterable[TimestampedEvent] = (),
    ) -> list[JournalEvent]:
        """Save as `save` and journal events in the same commit; return them after commit."""
        return await self._run(
            self._core.save_with_events(checkpoint, transcript_delta, execution, events)
        )

    async def append_event(
        self, session_id: str, recorded_at_ms: int, event: Event
    ) -> JournalEvent:
        """Assign the next session-local sequence to one event and journal it."""
        return await self._run(self._core.append_event(session_id, recorded_at_ms, event))

    async def event_page(self, session_id: str, request: EventPageRequest) -> EventPage:
        """Load one newest-first page of a session's journal events."""
        return await self._run(self._core.event_page(session_id, request))

    async def event_turn_page(
        self, session_id: str, before_sequence: int | None = None
    ) -> EventPage:
        """Load the newest whole turn of events before `before_sequence`."""
        return await self._run(self._core.event_turn_page(session_id, before_sequence))

    async def session_summary(self, session_id: str) -> SessionSummary | None:
        """Load one session's catalog entry without decoding its checkpoint."""
        return await self._run(self._core.session_summary(session_id))

    async def list_sessions_page(self, request: SessionPageRequest) -> SessionPage:
        """List one newest-first page of the session catalog."""
        return await self._run(self._core.list_sessions_page(request))

    async def transcript_page(
        self, session_id: str, request: TranscriptPageRequest
    ) -> TranscriptPage:
        """Load one newest-first page of transcript batches."""
        return await self._run(self._core.transcript_page(session_id, request))

    async def execution_page(self, session_id: str, request: ExecutionPageRequest) -> ExecutionPage:
        """Load one newest-first page of a session's finished turns."""
        return await self._run(self._core.execution_page(session_id, request))

    async def recent_executions(self, limit: int) -> list[ExecutionRecord]:
        """Load the most recently started finished turns across all sessions."""
        return await self._run(self._core.recent_executions(limit))

    async def fork(
        self, parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
    ) -> SessionSummary:
        """Create a child session at an exact durable parent sequence."""
        return await self._run(self._core.fork(parent_session_id, parent_sequence, checkpoint))

    async def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        """Delete session trees and their state atomically; False if any id is absent."""
        return await self._run(self._core.delete_sessions(session_ids))

    async def load_state(self, scope: str, key: str) -> Any:
        """Load one middleware state value, or None."""
        return await self._run(self._core.load_state(scope, key))

    async def save_state(self, scope: str, key: str, value: Any) -> None:
        """Durably replace one middleware state value."""
        await self._run(self._core.save_state(scope, key, value))

    async def close(self) -> None:
        """Commit queued writes and release connections and threads."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._core.backend.close)
        self._readers.shutdown(wait=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class BlockingStore(_Face):
    """The blocking twin of `Store`: the same operations, for scripts, threads and the CLI."""

    def _run(self, steps: Steps[T]) -> T:
        self._check_open()
        return _drive(steps)

    def runtime(self, session_id: str) -> BlockingRuntimeStore:
        """The runtime face bound to one session (graph, turn commits, queue, blobs)."""
        self._check_open()
        return BlockingRuntimeStore(RuntimeCore(self._core.backend.runtime, session_id), self)

    def load(self, session_id: str) -> Checkpoint | None:
        """Load the latest checkpoint of a session, or None."""
        return self._run(self._core.load(session_id))

    def save(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
    ) -> None:
        """Atomically replace the checkpoint, append transcript items, record a finished turn."""
        self._run(self._core.save_with_events(checkpoint, transcript_delta, execution, ()))

    def save_with_events(
        self,
        checkpoint: Checkpoint,
        transcript_delta: Iterable[Any] = (),
        execution: ExecutionRecord | None = None,
        events: Iterable[TimestampedEvent] = (),
    ) -> list[JournalEvent]:
        """Save as `save` and journal events in the same commit; return them after commit."""
        return self._run(
            self._core.save_with_events(checkpoint, transcript_delta, execution, events)
        )

    def append_event(self, session_id: str, recorded_at_ms: int, event: Event) -> JournalEvent:
        """Assign the next session-local sequence to one event and journal it."""
        return self._run(self._core.append_event(session_id, recorded_at_ms, event))

    def event_page(self, session_id: str, request: EventPageRequest) -> EventPage:
        """Load one newest-first page of a session's journal events."""
        return self._run(self._core.event_page(session_id, request))

    def event_turn_page(self, session_id: str, before_sequence: int | None = None) -> EventPage:
        """Load the newest whole turn of events before `before_sequence`."""
        return self._run(self._core.event_turn_page(session_id, before_sequence))

    def session_summary(self, session_id: str) -> SessionSummary | None:
        """Load one session's catalog entry without decoding its checkpoint."""
        return self._run(self._core.session_summary(session_id))

    def list_sessions_page(self, request: SessionPageRequest) -> SessionPage:
        """List one newest-first page of the session catalog."""
        return self._run(self._core.list_sessions_page(request))

    def transcript_page(self, session_id: str, request: TranscriptPageRequest) -> TranscriptPage:
        """Load one newest-first page of transcript batches."""
        return self._run(self._core.transcript_page(session_id, request))

    def execution_page(self, session_id: str, request: ExecutionPageRequest) -> ExecutionPage:
        """Load one newest-first page of a session's finished turns."""
        return self._run(self._core.execution_page(session_id, request))

    def recent_executions(self, limit: int) -> list[ExecutionRecord]:
        """Load the most recently started finished turns across all sessions."""
        return self._run(self._core.recent_executions(limit))

    def fork(
        self, parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
    ) -> SessionSummary:
        """Create a child session at an exact durable parent sequence."""
        return self._run(self._core.fork(parent_session_id, parent_sequence, checkpoint))

    def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        """Delete session trees and their state atomically; False if any id is absent."""
        return self._run(self._core.delete_sessions(session_ids))

    def load_state(self, scope: str, key: str) -> Any:
        """Load one middleware state value, or None."""
        return self._run(self._core.load_state(scope, key))

    def save_state(self, scope: str, key: str, value: Any) -> None:
        """Durably replace one middleware state value."""
        self._run(self._core.save_state(scope, key, value))

    def close(self) -> None:
        """Commit queued writes and release connections and threads."""
        if self._closed:
            return
        self._closed = True
        self._core.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def open(url: str | os.PathLike[str], *, read_only: bool = False) -> Store:
    """Open the async store at `url` (`sqlite:///relative.db`, `sqlite:////abs.db` or a path)."""
    return Store(open_backend(url, read_only=read_only))


def open_blocking(url: str | os.PathLike[str], *, read_only: bool = False) -> BlockingStore:
    """Open the blocking store at `url`; `read_only` never creates, migrates or writes."""
    return BlockingStore(open_backend(url, read_only=read_only))
