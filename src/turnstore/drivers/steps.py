"""Internal: the step protocol: each operation is written once as a generator of engine steps.

An operation validates and encodes its input before any I/O, then yields the transaction
scripts it needs (`Read` runs one in a read snapshot, `Write` submits one whose future
resolves after COMMIT), receives their results and returns the public value. A driver runs
the generator: `BlockingDriver` waits in the caller's thread, `AsyncDriver` awaits on the
event loop. The two faces of the store differ only in which driver they hold. It is the
shape of psycopg's `generators.py`: the protocol is plain generators, the I/O the driver's.

A driver is also where an operation is observed, through its engine's telemetry (bound once,
when the engine opened): with it on, each `run` is a span named after the operation's
generator function, and its time is recorded; with it off, `run` takes the plain path.
Either way a refusal is one log line (`turnstore.store`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from turnstore import telemetry
from turnstore.drivers.indexer import SearchIndexer
from turnstore.engine.protocol import DEFERRED, Engine, Tx
from turnstore.errors import StoreClosed, TurnstoreError
from turnstore.records.base import WriterStats

T = TypeVar("T")

READ_THREADS = 8
"""Threads the async driver runs blocking reads in."""


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """Run a transaction script in a read snapshot."""

    work: Callable[[Tx], T]
    single: bool = False
    """The script is expected to run one statement: a backend may run it without a
    transaction of its own (`Engine.read`), and again in one if it needs more."""


@dataclass(frozen=True, slots=True)
class Write(Generic[T]):
    """Run a transaction script in a write transaction; its result comes after COMMIT."""

    work: Callable[[Tx], T]
    single: bool = False
    """The script runs one statement, and running it twice leaves what running it once does:
    a backend may run it without a transaction of its own (`Engine.write`)."""


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """Run a blocking call on the engine itself (maintenance), off the event loop."""

    work: Callable[[Engine], T]


@dataclass(frozen=True, slots=True)
class Origin:
    """Ask which engine runs the operation (no thread hop): to mark a context the store holds
    with it, or to count on its telemetry."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait for a wake-up or a time-out: a blocking driver's thread blocks, a task awaits."""

    blocking: Callable[[], object]
    awaiting: Callable[[], Awaitable[object]]


Step = Read[Any] | Write[Any] | Call[Any] | Origin | Pause
"""One engine call an operation asks its driver for."""
Steps = Generator[Step, Any, T]
"""An operation: yields steps, receives their results, returns the public value."""


def read(work: Callable[[Tx], T], *, single: bool = False) -> Steps[T]:
    """A read step, typed: use as `value = yield from read(script)`; `single` for a script
    expected to run one statement (see `Read.single`)."""
    value: T = yield Read(work, single)
    return value


def write(work: Callable[[Tx], T], *, single: bool = False) -> Steps[T]:
    """A write step, typed: use as `value = yield from write(script)`; `single` for a script
    of one idempotent statement (see `Write.single`)."""
    value: T = yield Write(work, single)
    return value


def call(work: Callable[[Engine], T]) -> Steps[T]:
    """An engine call step, typed: use as `value = yield from call(work)`."""
    value: T = yield Call(work)
    return value


def origin() -> Steps[object]:
    """The engine running this operation: use as `engine = yield from origin()`."""
    value: object = yield Origin()
    return value


def pause(blocking: Callable[[], object], awaiting: Callable[[], Awaitable[object]]) -> Steps[None]:
    """A pause step: `yield from pause(wait_in_thread, wait_on_loop)`."""
    yield Pause(blocking, awaiting)


def session_of(record: object) -> object:
    """The session a record (a checkpoint) names, for the operation's span; None if none."""
    return getattr(record, "session_id", None)


def _name(steps: Steps[Any]) -> str:
    """The operation's name: its generator function's."""
    return str(getattr(steps, "__name__", "operation"))


class _Driver:
    """What both drivers share: the engine, and whether the store was closed.

    A `borrowed` driver runs on an engine another owner closes: its `close` ends only the
    driver (and its threads), so parts built on one store can each hold their own driver.
    """

    def __init__(
        self, engine: Engine, *, borrowed: bool = False, index_in_background: bool = True
    ) -> None:
        self.engine = engine
        self.borrowed = borrowed
        self.closed = False
        # The engine's owner indexes its writes for search; a borrowing part's writes are
        # the same engine's, so they are indexed by the owner's indexer.
        self._indexer = (
            SearchIndexer(engine)
            if index_in_background and not borrowed and not engine.read_only
            else None
        )
        self.backend = engine.upkeep().backend
        # The engine's, so every driver of one store (a borrowing part's too) observes alike.
        self._telemetry = engine.telemetry

    def stop_indexer(self) -> None:
        """Stop the background indexer, if this driver runs one."""
        if self._indexer is not None:
            self._indexer.stop()
            self._indexer = None

    def check_open(self) -> None:
        """Raise `StoreClosed` once the store is closed."""
        if self.closed:
            raise StoreClosed("the store is closed")

    def writer_stats(self) -> WriterStats:
        """Counters of the write path: committed transactions and writes."""
        return self.engine.writer_stats()

    @contextmanager
    def deferred_durability(self) -> Iterator[None]:
        """Writes begun in the block may be answered before they reach the disk; all of them
        are durable when it ends (see `Store.deferred_durability`)."""
        token = DEFERRED.set(True)
        try:
            yield
        finally:
            DEFERRED.reset(token)
            # Also after an error: the writes the block was answered for are made durable.
            # A store closed in the block already made them so (its writes were committed).
            if not self.closed:
                self.engine.sync()

    def _observe(self, steps: Steps[Any], session_id: object) -> telemetry.Operation | None:
        """The operation's span and timing, or None: telemetry off, or no SDK listening."""
        found = self._telemetry
        if found is None or not found.instruments.live():
            return None
        return found.operation(_name(steps), session_id)


class BlockingDriver(_Driver):
    """Runs operations in the caller's thread, waiting for each step."""

    def run(self, steps: Steps[T], session_id: object = None) -> T:
        """Drive `steps` to its result; `session_id` names the session it acts on, if one."""
        self.check_open()
        observed = self._observe(steps, session_id)
        if observed is not None:
            with observed:
                return self._drive(steps)
        try:
            return self._drive(steps)
        except TurnstoreError as error:
            telemetry.refused(_name(steps), self.backend, session_id, error)
            raise

    def _drive(self, steps: Steps[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                # A failed step is thrown into the operation, so it can undo what it began.
                step = steps.send(value) if error is None else steps.throw(error)
                error = None
                try:
                    if isinstance(step, Read):
                        value = self.engine.read(step.work, single=step.single)
                    elif isinstance(step, Call):
                        value = step.work(self.engine)
                    elif isinstance(step, Origin):
                        value = self.engine
                    elif isinstance(step, Pause):
                        value = step.blocking()
                    else:
                        value = self.engine.write_blocking(step.work, single=step.single)
                except BaseException as failed:
                    error = failed
        except StopIteration as done:
            result: T = done.value
            return result

    def close(self) -> None:
        """Commit queued writes and release the engine's connections (unless borrowed)."""
        if not self.closed:
            self.closed = True
            self.stop_indexer()
            if not self.borrowed:
                self.engine.close()


class AsyncDriver(_Driver):
    """Runs operations on the event loop: reads in a thread pool, writes awaited as futures."""

    def __init__(
        self, engine: Engine, *, borrowed: bool = False, index_in_background: bool = True
    ) -> None:
        super().__init__(engine, borrowed=borrowed, index_in_background=index_in_background)
        self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="turnstore-read")

    async def run(self, steps: Steps[T], session_id: object = None) -> T:
        """Drive `steps` to its result without blocking the event loop; `session_id` names
        the session it acts on, if one."""
        self.check_open()
        observed = self._observe(steps, session_id)
        if observed is not None:
            with observed:
                return await self._drive(steps)
        try:
            return await self._drive(steps)
        except TurnstoreError as error:
            telemetry.refused(_name(steps), self.backend, session_id, error)
            raise

    async def _drive(self, steps: Steps[T]) -> T:
        loop = asyncio.get_running_loop()
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                step = steps.send(value) if error is None else steps.throw(error)
                error = None
                try:
                    if isinstance(step, Read):
                        value = await self._read(loop, step.work, step.single)
                    elif isinstance(step, Call):
                        value = await asyncio.to_thread(step.work, self.engine)
                    elif isinstance(step, Origin):
                        value = self.engine
                    elif isinstance(step, Pause):
                        value = await step.awaiting()
                    else:
                        # Cancelling the caller cancels a write still queued; one already
                        # running commits or fails whole.
                        written = self.engine.write(step.work, single=step.single)
                        value = await asyncio.wrap_future(written)
                except BaseException as failed:
                    error = failed
        except StopIteration as done:
            result: T = done.value
            return result

    async def _read(
        self, loop: asyncio.AbstractEventLoop, work: Callable[[Tx], T], single: bool = False
    ) -> T:
        read = functools.partial(self.engine.read, work, single=single)
        try:
            future = loop.run_in_executor(self._readers, read)
        except RuntimeError:
            # The read pool shuts down in close(); a call that raced it sees a closed store.
            raise StoreClosed("the store is closed") from None
        return await future

    async def close(self) -> None:
        """Commit queued writes, then release connections (unless borrowed) and threads."""
        if self.closed:
            return
        self.closed = True
        await asyncio.to_thread(self.stop_indexer)
        if self.borrowed:
            # The engine stays open, so reads already running finish without us waiting.
            self._readers.shutdown(wait=False)
        else:
            await asyncio.to_thread(self.engine.close)
            self._readers.shutdown(wait=True)

    def close_blocking(self) -> None:
        """Close from blocking code: as `close`, but wait here for running reads to end."""
        if not self.closed:
            self.closed = True
            self.stop_indexer()
            if not self.borrowed:
                self.engine.close()
            self._readers.shutdown(wait=True)
