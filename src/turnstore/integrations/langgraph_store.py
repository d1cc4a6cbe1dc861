"""LangGraph's long-term memory (`BaseStore`) in turnstore, beside the threads (SQLite or
PostgreSQL).

    from turnstore.integrations.langgraph_store import TurnstoreStore

    store = TurnstoreStore("sqlite:///agent.db")
    graph = builder.compile(checkpointer=TurnstoreSaver(...), store=store)

An item is a row of the store's memory tables (`store.memory`): its namespace (labels joined
by "."), key, value as JSON text, times and time to live, and, with an `index`, one unit
vector per embedded field. A `batch` is one transaction: its reads see the store as it was
before the batch and its puts (the last per item) commit together. Filters are read as
LangGraph's `InMemoryStore` reads them, in Python over the rows of the namespace prefix, so
both databases agree on every value (NUL, NaN, any key); semantic search is exact: every
vector under the prefix is scored. An item belongs to an owner, the first label of its
namespace unless `owner=` says otherwise, so a person's memories are erased with them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self, TypeVar

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, StoreClosed
from turnstore.integrations import requires_extra
from turnstore.integrations._langgraph_memory import (
    unit_vector,
)
from turnstore.integrations._opening import Closes, Opening
from turnstore.records.memory import (
    MemoryCall,
)
from turnstore.seam import Shared, borrow

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langgraph.store.base import (
        BaseStore,
        IndexConfig,
        Op,
        PutOp,
        Result,
        TTLConfig,
        ensure_embeddings,
        get_text_at_path,
    )
    from langgraph.store.base.batch import AsyncBatchedBaseStore

    from turnstore.integrations._langgraph_batches import Indexing, Plan, index_fields, paths

logger = logging.getLogger(__name__)

Owner = Callable[[tuple[str, ...]], str | None]
"""Who an item belongs to, from its namespace."""


def first_label(namespace: tuple[str, ...]) -> str:
    """The default owner: the namespace's first label (`(user_id, "memories")`)."""
    return namespace[0]


def _owner_of(owner: Owner | str | None) -> Owner:
    if owner is None or isinstance(owner, str):
        return lambda _namespace: owner
    return owner


class TurnstoreStore(Closes, BaseStore):
    """A LangGraph `BaseStore` on turnstore: `batch` and `abatch`, one transaction each.

    `store` is a store URL (or path) that this opens and `close()` closes, or an open
    `turnstore.Store` / `BlockingStore` whose connections it shares (and leaves open).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        owner: Owner | str | None = first_label,
        words: bool = False,
    ) -> None:
        self._shared: Shared = borrow(store)
        # True: each item's words are indexed (after its put, on SQLite: a query indexes what
        # is pending first), and a `query` without an embedding index searches them, as does
        # `store.memory.find`. False (LangGraph's behaviour): such a query is ignored, and the
        # store holds no index of words.
        self._words = words
        self.index_config = index
        self.ttl_config = ttl
        self._owner = _owner_of(owner)
        # As LangGraph's SqliteStore (and its own tests) read it: only a store whose TTLConfig
        # says `refresh_on_read` restarts times to live on reads.
        self._refreshing = bool((ttl or {}).get("refresh_on_read", False))
        self._dims = None if index is None else index.get("dims")
        self.embeddings = None if index is None else ensure_embeddings(index.get("embed"))
        self._fields = paths(index_fields(index))
        self._indexing = None if index is None else Indexing(self._texts, self._dims)
        self._sweeper: threading.Thread | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._stop = threading.Event()

    @classmethod
    def from_url(cls, url: str | os.PathLike[str], **options: Any) -> Self:
        """A store over the turnstore store at `url` (a SQLite path or URL, or
        `postgresql://…`)."""
        return cls(url, **options)

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        words: bool = False,
    ) -> Opening[Self]:
        """A store for one block, as LangGraph's stores open theirs: `with` or `async with`
        `TurnstoreStore.from_conn_string(url) as store:` opens it and closes it on leaving."""
        return Opening(lambda: cls(conn_string, index=index, ttl=ttl, words=words))

    # --- lifetime ---------------------------------------------------------------------------

    def setup(self) -> None:
        """Nothing to do: the store's schema is migrated when it is opened."""
        self._open()

    def close(self) -> None:
        """Stop the sweeper; release the store's connections if this opened them."""
        self._stop_sweeping(None)
        self._shared.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        await asyncio.to_thread(self._stop_sweeping, None)
        await self._shared.aclose()

    def _open(self) -> Shared:
        if self._shared.closed:
            raise StoreClosed("the store is closed")
        return self._shared

    # --- batches ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in one transaction; their results in order."""
        plan = Plan(list(ops), self._owner, self._indexing, self._refreshing, self._words)
        vectors = self._embed([text for _, _, text in plan.texts])
        queries = {at: self._query(text) for at, text in plan.queries.items()}
        memory = self._open().blocking.memory
        results = plan.results(memory.run(plan.call(vectors)), queries)
        if touched := plan.touched(results):
            memory.run(MemoryCall(gets=tuple(touched)))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in one transaction, without blocking the event loop."""
        plan = Plan(list(ops), self._owner, self._indexing, self._refreshing, self._words)
        vectors = await self._aembed([text for _, _, text in plan.texts])
        queries = {at: await self._aquery(text) for at, text in plan.queries.items()}
        memory = self._open().store.memory
        results = plan.results(await memory.run(plan.call(vectors)), queries)
        if touched := plan.touched(results):
            await memory.run(MemoryCall(gets=tuple(touched)))
        return results

    def _texts(self, op: PutOp) -> list[tuple[str, str]]:
        """The (field, text) pairs of a put to embed: its `index` fields, else the store's."""
        chosen = op.index if isinstance(op.index, list) else None
        fields = self._fields if chosen is None else paths(chosen)
        found: list[tuple[str, str]] = []
        for field, path in fields:
            texts = get_text_at_path(op.value, path)
            found += [(f"{field}.{i}" if len(texts) > 1 else field, t) for i, t in enumerate(texts)]
        return found

    def _embed(self, texts: list[str]) -> Sequence[Sequence[float]]:
        if not texts or self.embeddings is None:
            return []
        return self.embeddings.embed_documents(texts)

    async def _aembed(self, texts: list[str]) -> Sequence[Sequence[float]]:
        if not texts or self.embeddings is None:
            return []
        return await self.embeddings.aembed_documents(texts)

    def _query(self, text: str) -> bytes:
        assert self.embeddings is not None  # a semantic search is planned only with an index
        return unit_vector(self.embeddings.embed_query(text), self._dims)

    async def _aquery(self, text: str) -> bytes:
        assert self.embeddings is not None
        return unit_vector(await self.embeddings.aembed_query(text), self._dims)

    # --- time to live -----------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every expired item now; how many there were."""
        return self._open().blocking.memory.sweep()

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every `sweep_interval_minutes` (else the TTL config's, else 5)
        in a thread, until `stop_ttl_sweeper()` or `close()`; the future ends with it."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        interval = self._interval(sweep_interval_minutes) * 60
        if self._sweeper is not None and self._sweeper.is_alive() and not self._stop.is_set():
            done.set_result(None)
            return done
        if self._sweeper is not None:
            self._sweeper.join()  # one stopped but still finishing its sweep
        self._stop.clear()
        thread = threading.Thread(
            target=self._sweep_loop, args=(interval, done), daemon=True, name="ttl-sweeper"
        )
        self._sweeper = thread
        thread.start()
        return done

    def _interval(self, minutes: float | None) -> float:
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        interval = minutes or configured or 5
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
            raise InvalidInput(f"a sweep interval must be a positive number, not {interval!r}")
        return float(interval)

    def _sweep_loop(self, interval: float, done: concurrent.futures.Future[None]) -> None:
        try:
            while not self._stop.wait(interval):
                try:
                    swept = self.sweep_ttl()
                except StoreClosed:
                    break
                except Exception:  # a failed sweep is retried next interval, not fatal
                    logger.exception("sweeping expired memory items failed")
                    continue
                if swept:
                    logger.info("swept %d expired memory items", swept)
        finally:
            done.set_result(None)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within `timeout` seconds."""
        return self._stop_sweeping(timeout)

    def _stop_sweeping(self, timeout: float | None) -> bool:
        if self._sweep_task is not None and not self._sweep_task.done():
            self._stop.set()  # the task ends at its next wake; `aclose` cancels it at once
        thread = self._sweeper
        if thread is None or not thread.is_alive():
            return True
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join(timeout)
        stopped = not thread.is_alive()
        if stopped:
            self._sweeper = None
        return stopped


class AsyncTurnstoreStore(AsyncBatchedBaseStore, TurnstoreStore):
    """`TurnstoreStore` as LangGraph's async stores are: the async calls made in one turn of
    the event loop run as one batch (one transaction), the sync calls are refused on the loop's
    own thread, and the sweeper calls are coroutines (`await store.sweep_ttl()`)."""

    def __init__(
        self,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        owner: Owner | str | None = first_label,
        words: bool = False,
    ) -> None:
        TurnstoreStore.__init__(self, store, index=index, ttl=ttl, owner=owner, words=words)
        # `AsyncBatchedBaseStore`'s queue, bound to the loop of the first async call: an
        # `async with from_conn_string(...)` opens the store in a worker thread.
        self._aqueue: asyncio.Queue[tuple[asyncio.Future[Any], Op]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # type: ignore[assignment]

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        words: bool = False,
    ) -> Opening[Self]:
        """A store for one block; `async with` binds it to that block's event loop."""
        return _LoopOpening(lambda: cls(conn_string, index=index, ttl=ttl, words=words))

    def _bind_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    def _ensure_task(self) -> None:
        self._bind_loop()
        super()._ensure_task()

    # Until an event loop is bound (a store made outside one, used from sync code), the sync
    # calls run on the calling thread, as `TurnstoreStore`'s do.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops on the store's event loop as one batch; refused on that loop's thread."""
        return TurnstoreStore.batch(self, ops) if self._loop is None else super().batch(ops)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """`BaseStore.get`, on the store's event loop once it has one."""
        return (
            BaseStore.get(self, *args, **kwargs)
            if self._loop is None
            else super().get(*args, **kwargs)
        )

    def search(self, *args: Any, **kwargs: Any) -> Any:
        """`BaseStore.search`, on the store's event loop once it has one."""
        return (
            BaseStore.search(self, *args, **kwargs)
            if self._loop is None
            else super().search(*args, **kwargs)
        )

    def put(self, *args: Any, **kwargs: Any) -> None:
        """`BaseStore.put`, on the store's event loop once it has one."""
        if self._loop is None:
            BaseStore.put(self, *args, **kwargs)
        else:
            super().put(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> None:
        """`BaseStore.delete`, on the store's event loop once it has one."""
        if self._loop is None:
            BaseStore.delete(self, *args, **kwargs)
        else:
            super().delete(*args, **kwargs)

    def list_namespaces(self, *args: Any, **kwargs: Any) -> Any:
        """`BaseStore.list_namespaces`, on the store's event loop once it has one."""
        if self._loop is None:
            return BaseStore.list_namespaces(self, *args, **kwargs)
        return super().list_namespaces(*args, **kwargs)

    def _stop_batching(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do: the store's schema is migrated when it is opened."""
        self._open()

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        """Delete every expired item now; how many there were."""
        return await self._open().store.memory.sweep()

    async def start_ttl_sweeper(  # type: ignore[override]
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every interval in a task of this event loop, until
        `stop_ttl_sweeper()` or `close()`."""
        interval = self._interval(sweep_interval_minutes) * 60
        if self._sweep_task is not None and not self._sweep_task.done():
            return self._sweep_task
        self._stop.clear()
        task = asyncio.get_running_loop().create_task(self._asweep_loop(interval))
        self._sweep_task = task
        return task

    async def _asweep_loop(self, interval: float) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            if self._stop.is_set():
                return
            try:
                await self.sweep_ttl()
            except StoreClosed:
                return
            except Exception:  # a failed sweep is retried next interval, not fatal
                logger.exception("sweeping expired memory items failed")

    async def stop_ttl_sweeper(  # type: ignore[override]
        self,
        timeout: float | None = None,  # noqa: ASYNC109 (LangGraph's async stores take it)
    ) -> bool:
        """Stop the sweeper task; whether it ended within `timeout` seconds."""
        task = self._sweep_task
        if task is None or task.done():
            return True
        self._stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), timeout)
        return task.done()

    async def aclose(self) -> None:
        """Stop the sweeper and the batching task, and close, without blocking the loop."""
        await self.stop_ttl_sweeper()
        self._stop_batching()
        await TurnstoreStore.aclose(self)

    def close(self) -> None:
        """Stop the sweeper and the batching task, and close."""
        self._stop_batching()
        TurnstoreStore.close(self)


_A = TypeVar("_A", bound=AsyncTurnstoreStore)


class _LoopOpening(Opening[_A]):
    """An opening whose `async with` binds the store to the block's event loop (the store is
    opened in a worker thread, which has none)."""

    async def __aenter__(self) -> _A:
        opened = await super().__aenter__()
        opened._bind_loop()
        return opened


__all__ = ["AsyncTurnstoreStore", "TurnstoreStore", "first_label"]
