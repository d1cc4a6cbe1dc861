"""A LangGraph checkpointer whose threads live in turnstore (SQLite or PostgreSQL).

    from turnstore.integrations.langgraph import TurnstoreSaver

    graph = builder.compile(checkpointer=TurnstoreSaver("sqlite:///agent.db"))

A thread is the turnstore session `langgraph/<thread_id>`: it is in the catalog (owned by
`configurable.owner_id`, else `configurable.user_id`, when the config that first writes it
names one) and `delete_sessions` removes it with everything below. Its checkpoints keep
LangGraph's ids, parents, metadata and namespaces; pending writes keep `task_path` and come
back in LangGraph's replay order. Values go through the saver's LangGraph serializer (its
msgpack allowlist included) and are stored as the serializer's `(type, bytes)`.

A channel version whose value is a list that extends one this saver stored or loaded (the
message list above all) is stored as the new items only: the version names a prefix of a
stored lineage of items. The extension is found by identity, item by item, so it is never
guessed from equal-looking values; a list that does not extend a known one is stored whole,
as a new lineage, once. Reading any checkpoint reads each list's items in at most five
ranges. One saver serves the sync and the async API over the same store: it borrows the store
through `turnstore.seam`, and each operation is written once as a flow of calls on the
LangGraph tables (`store.langgraph`) that either face runs.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, StoreClosed
from turnstore.integrations import requires_extra
from turnstore.integrations._opening import Opening
from turnstore.records.langgraph import (
    CheckpointRow,
    DeltaHistory,
    LoadedCheckpoint,
    PutResult,
    SearchQuery,
    WriteRow,
    WritesRequest,
)
from turnstore.seam import Shared, borrow

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        get_checkpoint_id,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from turnstore.integrations._langgraph_encoding import (
        PREFIX,
        CheckpointEncoding,
        Known,
        config_of,
        owner_of,
        session_id,
        target_of,
    )

T = TypeVar("T")

PAGE = 100
"""Checkpoints a listing reads at a time."""

_Ask = Callable[[Any], Any]
"""One call on the LangGraph tables: given `store.langgraph` of either face, its result
(an awaitable on the async face)."""
_Flow = Generator[_Ask, Any, T]
"""An operation of the saver: yields calls on the tables, receives their results, returns
its value; `_run` runs it on the blocking face and `_arun` on the async one."""


class _Cursor:
    """Where a listing is: the next page's position and how many checkpoints it may still give."""

    def __init__(self, limit: int | None) -> None:
        self.remaining = limit
        self.after: tuple[str, str, str] | None = None
        self.more = limit is None or limit > 0

    def advance(
        self, tuples: list[CheckpointTuple], rows: list[CheckpointRow], page: int
    ) -> list[CheckpointTuple]:
        """Move past one page; return the checkpoints of it the listing gives."""
        given = tuples[: self.remaining]
        if self.remaining is not None:
            self.remaining -= len(given)
        last = rows[-1] if len(rows) == page else None
        self.after = (
            None if last is None else (last.checkpoint_id, last.session_id, last.checkpoint_ns)
        )
        self.more = self.after is not None and (self.remaining is None or self.remaining > 0)
        return given


class TurnstoreSaver(CheckpointEncoding, BaseCheckpointSaver[str]):
    """A LangGraph `BaseCheckpointSaver` on turnstore, sync and async.

    `store` is a store URL (or path) that the saver opens and `close()` closes, or an open
    `turnstore.Store` / `BlockingStore` whose connections it shares (and leaves open).
    """

    def __init__(
        self,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        BaseCheckpointSaver.__init__(self, serde=serde)
        CheckpointEncoding.__init__(self)
        self._shared: Shared = borrow(store)

    @classmethod
    def from_url(cls, url: str | os.PathLike[str], **options: Any) -> TurnstoreSaver:
        """A saver over the store at `url` (a SQLite path or URL, or `postgresql://…`)."""
        return cls(url, **options)

    @classmethod
    def from_conn_string(
        cls, conn_string: str | os.PathLike[str], *, serde: SerializerProtocol | None = None
    ) -> Opening[Self]:
        """A saver for one block, as LangGraph's savers open theirs: `with` or `async with`
        `TurnstoreSaver.from_conn_string(url) as saver:` opens it and closes it on leaving.
        """
        return Opening(lambda: cls(conn_string, serde=serde))

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the saver's threads, and the store's connections if it opened them."""
        self._shared.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        await self._shared.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- running a flow on either face ------------------------------------------------------

    def _open(self) -> Shared:
        # A flow encodes before its first call: a closed saver refuses before that work.
        if self._shared.closed:
            raise StoreClosed("the store is closed")
        return self._shared

    def _run(self, flow: _Flow[T]) -> T:
        tables = self._open().blocking.langgraph
        try:
            ask = next(flow)
            while True:
                ask = flow.send(ask(tables))
        except StopIteration as done:
            result: T = done.value
            return result

    async def _arun(self, flow: _Flow[T]) -> T:
        tables = self._open().store.langgraph
        try:
            ask = next(flow)
            while True:
                ask = flow.send(await ask(tables))
        except StopIteration as done:
            result: T = done.value
            return result

    # --- operations, each written once as a flow --------------------------------------------

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> _Flow[RunnableConfig]:
        request = self._put_request(config, checkpoint, metadata, new_versions, set())
        result: PutResult = yield lambda tables: tables.put(request)
        if result.missing:
            whole = set(result.missing)
            request = self._put_request(config, checkpoint, metadata, new_versions, whole)
            result = yield lambda tables: tables.put(request)
        values = checkpoint["channel_values"]
        for write in request.lists:
            lineage, _ = result.stored[write.channel]
            key = (request.session_id, request.checkpoint_ns, write.channel)
            self._remember(key, Known(write.version, lineage, tuple(values[write.channel])))
        target = target_of(config)
        return config_of(target.thread_id, target.checkpoint_ns, checkpoint["id"])

    def _writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> WritesRequest:
        target = target_of(config)
        if target.checkpoint_id is None:
            raise InvalidInput("pending writes need the config of a checkpoint (checkpoint_id)")
        rows = [
            WriteRow(
                task_id, WRITES_IDX_MAP.get(channel, idx), task_path, channel, *self._typed(value)
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        return WritesRequest(
            session_id=target.session_id,
            owner_id=owner_of(config),
            checkpoint_ns=target.checkpoint_ns,
            checkpoint_id=target.checkpoint_id,
            rows=rows,
            replace=all(channel in WRITES_IDX_MAP for channel, _ in writes),
        )

    def _get_tuple(self, config: RunnableConfig) -> _Flow[CheckpointTuple | None]:
        target = target_of(config)
        ns, checkpoint_id = target.checkpoint_ns, target.checkpoint_id
        loaded: LoadedCheckpoint | None = yield lambda tables: tables.get(
            target.session_id, ns, checkpoint_id
        )
        return None if loaded is None else self._tuple(target.thread_id, loaded)

    def _listing(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[_Flow[list[CheckpointTuple]]]:
        """The flows that read a listing page by page; each returns the checkpoints to give."""
        cursor = _Cursor(limit)
        while cursor.more:
            yield self._page(self._search(config, before, cursor.after), filter, cursor)

    def _search(
        self,
        config: RunnableConfig | None,
        before: RunnableConfig | None,
        after: tuple[str, str, str] | None,
    ) -> SearchQuery:
        target = None if config is None else target_of(config)
        configurable = {} if config is None else config.get("configurable") or {}
        return SearchQuery(
            session_id=None if target is None else target.session_id,
            checkpoint_ns=configurable.get("checkpoint_ns"),
            checkpoint_id=None if target is None else target.checkpoint_id,
            before=None if before is None else get_checkpoint_id(before),
            after=after,
            limit=PAGE,
        )

    def _page(
        self, query: SearchQuery, filter: dict[str, Any] | None, cursor: _Cursor
    ) -> _Flow[list[CheckpointTuple]]:
        rows: list[CheckpointRow] = yield lambda tables: tables.search(query)
        matching = [row for row in rows if self._matches(row, filter)]
        loaded: list[LoadedCheckpoint] = (
            (yield lambda tables: tables.load_rows(matching)) if matching else []
        )
        tuples = [self._tuple(item.row.session_id[len(PREFIX) :], item) for item in loaded]
        return cursor.advance(tuples, rows, query.limit)

    def _matches(self, row: CheckpointRow, filter: dict[str, Any] | None) -> bool:
        if not row.session_id.startswith(PREFIX):
            return False
        if not filter:
            return True
        metadata = self._loads(row.metadata_type, row.metadata)
        return all(metadata.get(key) == value for key, value in filter.items())

    def _history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> _Flow[Mapping[str, DeltaChannelHistory]]:
        target = target_of(config)
        ns, checkpoint_id, names = target.checkpoint_ns, target.checkpoint_id, list(channels)
        found: list[DeltaHistory] = yield lambda tables: tables.delta_history(
            target.session_id, ns, checkpoint_id, names
        )
        result: dict[str, DeltaChannelHistory] = {}
        for history in found:
            entry: DeltaChannelHistory = {
                "writes": [self._pending(write) for write in history.writes]
            }
            if history.seed is not None:
                entry["seed"] = self._decode(history.seed)
            result[history.channel] = entry
        return result

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> _Flow[None]:
        ids = [session_id(thread_id) for thread_id in thread_ids]
        self._forget(ids)
        if strategy == "delete":
            yield lambda tables: tables.delete_threads(ids)
        elif strategy == "keep_latest":
            yield lambda tables: tables.keep_latest(ids)
        else:
            raise InvalidInput(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )

    # --- the sync API -----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its id, else its namespace's newest), or None."""
        return self._run(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of a thread (and namespace), or of every thread."""
        for page in self._listing(config, filter, before, limit):
            yield from self._run(page)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel versions it introduces, in one commit."""
        return self._run(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the config's checkpoint."""
        tables = self._open().blocking.langgraph
        tables.put_writes(self._writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread: its turnstore session and everything stored for it."""
        self._forget([session_id(thread_id)])
        self._open().blocking.langgraph.delete_threads([session_id(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes the given runs made."""
        self._forget(None)
        self._open().blocking.langgraph.delete_runs(list(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to another thread."""
        tables = self._open().blocking.langgraph
        tables.copy(session_id(source_thread_id), session_id(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: keep each namespace's newest checkpoint (and the ancestors its
        delta channels replay); `delete`: delete the threads."""
        self._run(self._prune(thread_ids, strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Each channel's writes along the checkpoint's ancestors and its seed, in one read."""
        return self._run(self._history(config, channels))

    # --- the async API ----------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async `get_tuple`."""
        return await self._arun(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async `list`."""
        for page in self._listing(config, filter, before, limit):
            for item in await self._arun(page):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async `put`."""
        return await self._arun(self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async `put_writes`."""
        tables = self._open().store.langgraph
        await tables.put_writes(self._writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async `delete_thread`."""
        self._forget([session_id(thread_id)])
        await self._open().store.langgraph.delete_threads([session_id(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async `delete_for_runs`."""
        self._forget(None)
        await self._open().store.langgraph.delete_runs(list(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async `copy_thread`."""
        tables = self._open().store.langgraph
        await tables.copy(session_id(source_thread_id), session_id(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async `prune`."""
        await self._arun(self._prune(thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async `get_delta_channel_history`."""
        return await self._arun(self._history(config, channels))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next version of a channel: its counter, then a random tiebreak, as text.

        Two runs from one checkpoint give one channel different versions (48 random bits),
        so a version names one value even when a thread branches; the counter is padded so
        that versions compare as LangGraph compares them, as strings.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:010}.{secrets.token_hex(6)}"
