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
ranges. One saver serves the sync and the async API over the same store.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

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

from turnstore.backends.sql.engine import Engine
from turnstore.backends.urls import open_engine
from turnstore.errors import InvalidInput
from turnstore.faces.aio import Store
from turnstore.faces.blocking import BlockingStore
from turnstore.integrations.langgraph_encoding import (
    PREFIX,
    CheckpointEncoding,
    Known,
    config_of,
    owner_of,
    session_id,
    target_of,
)
from turnstore.ops import langgraph as ops
from turnstore.records.langgraph import (
    CheckpointRow,
    SearchQuery,
    WriteRow,
    WritesRequest,
)
from turnstore.steps import AsyncDriver, BlockingDriver, Steps

PAGE = 100
"""Checkpoints a listing reads at a time."""


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
        self._owns_engine = not isinstance(store, Store | BlockingStore)
        engine: Engine = (
            open_engine(store)
            if not isinstance(store, Store | BlockingStore)
            else store._driver.engine  # the saver runs its own operations on the store's engine
        )
        self._blocking = BlockingDriver(engine)
        self._async = AsyncDriver(engine)

    @classmethod
    def from_url(cls, url: str | os.PathLike[str], **options: Any) -> TurnstoreSaver:
        """A saver over the store at `url` (a SQLite path or URL, or `postgresql://…`)."""
        return cls(url, **options)

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the saver's threads, and the store's connections if it opened them."""
        if self._blocking.closed:
            return
        self._blocking.closed = self._async.closed = True
        self._async._readers.shutdown(wait=True)
        if self._owns_engine:
            self._blocking.engine.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        if self._blocking.closed:
            return
        self._blocking.closed = True
        if self._owns_engine:
            await self._async.close()
        else:
            self._async.closed = True
            self._async._readers.shutdown(wait=False)

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

    # --- operations, each written once as steps ---------------------------------------------

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Steps[RunnableConfig]:
        request = self._put_request(config, checkpoint, metadata, new_versions, set())
        result = yield from ops.put(request)
        if result.missing:
            whole = set(result.missing)
            request = self._put_request(config, checkpoint, metadata, new_versions, whole)
            result = yield from ops.put(request)
        values = checkpoint["channel_values"]
        for write in request.lists:
            lineage, _ = result.stored[write.channel]
            key = (request.session_id, request.checkpoint_ns, write.channel)
            self._remember(key, Known(write.version, lineage, tuple(values[write.channel])))
        target = target_of(config)
        return config_of(target.thread_id, target.checkpoint_ns, checkpoint["id"])

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Steps[None]:
        target = target_of(config)
        if target.checkpoint_id is None:
            raise InvalidInput("pending writes need the config of a checkpoint (checkpoint_id)")
        rows = [
            WriteRow(
                task_id, WRITES_IDX_MAP.get(channel, idx), task_path, channel, *self._typed(value)
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        request = WritesRequest(
            session_id=target.session_id,
            owner_id=owner_of(config),
            checkpoint_ns=target.checkpoint_ns,
            checkpoint_id=target.checkpoint_id,
            rows=rows,
            replace=all(channel in WRITES_IDX_MAP for channel, _ in writes),
        )
        yield from ops.put_writes(request)

    def _get_tuple(self, config: RunnableConfig) -> Steps[CheckpointTuple | None]:
        target = target_of(config)
        loaded = yield from ops.get(target.session_id, target.checkpoint_ns, target.checkpoint_id)
        return None if loaded is None else self._tuple(target.thread_id, loaded)

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
        self,
        query: SearchQuery,
        filter: dict[str, Any] | None,
    ) -> Steps[tuple[list[CheckpointTuple], tuple[str, str, str] | None]]:
        rows = yield from ops.search(query)
        matching: list[CheckpointRow] = []
        for row in rows:
            if not row.session_id.startswith(PREFIX):
                continue
            if filter:
                metadata = self._loads(row.metadata_type, row.metadata)
                if not all(metadata.get(key) == value for key, value in filter.items()):
                    continue
            matching.append(row)
        loaded = (yield from ops.load_rows(matching)) if matching else []
        tuples = [self._tuple(item.row.session_id[len(PREFIX) :], item) for item in loaded]
        after = None
        if len(rows) == query.limit:
            last = rows[-1]
            after = (last.checkpoint_id, last.session_id, last.checkpoint_ns)
        return tuples, after

    def _history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Steps[Mapping[str, DeltaChannelHistory]]:
        target = target_of(config)
        found = yield from ops.delta_history(
            target.session_id, target.checkpoint_ns, target.checkpoint_id, list(channels)
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

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> Steps[None]:
        ids = [session_id(thread_id) for thread_id in thread_ids]
        self._forget(ids)
        if strategy == "delete":
            yield from ops.delete_threads(ids)
        elif strategy == "keep_latest":
            yield from ops.keep_latest(ids)
        else:
            raise InvalidInput(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )

    # --- the sync API -----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its id, else its namespace's newest), or None."""
        return self._blocking.run(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of a thread (and namespace), or of every thread."""
        remaining = limit
        after = None
        while remaining is None or remaining > 0:
            query = self._search(config, before, after)
            tuples, after = self._blocking.run(self._page(query, filter))
            yield from tuples[:remaining]
            if remaining is not None:
                remaining -= min(len(tuples), remaining)
            if after is None:
                return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel versions it introduces, in one commit."""
        return self._blocking.run(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes on the config's checkpoint."""
        self._blocking.run(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread: its turnstore session and everything stored for it."""
        self._forget([session_id(thread_id)])
        self._blocking.run(ops.delete_threads([session_id(thread_id)]))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes the given runs made."""
        self._forget(None)
        self._blocking.run(ops.delete_runs(list(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to another thread."""
        self._blocking.run(ops.copy(session_id(source_thread_id), session_id(target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: keep each namespace's newest checkpoint (and the ancestors its
        delta channels replay); `delete`: delete the threads."""
        self._blocking.run(self._prune(thread_ids, strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Each channel's writes along the checkpoint's ancestors and its seed, in one read."""
        return self._blocking.run(self._history(config, channels))

    # --- the async API ----------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async `get_tuple`."""
        return await self._async.run(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async `list`."""
        remaining = limit
        after = None
        while remaining is None or remaining > 0:
            query = self._search(config, before, after)
            tuples, after = await self._async.run(self._page(query, filter))
            for item in tuples[:remaining]:
                yield item
            if remaining is not None:
                remaining -= min(len(tuples), remaining)
            if after is None:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async `put`."""
        return await self._async.run(self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async `put_writes`."""
        await self._async.run(self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async `delete_thread`."""
        self._forget([session_id(thread_id)])
        await self._async.run(ops.delete_threads([session_id(thread_id)]))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async `delete_for_runs`."""
        self._forget(None)
        await self._async.run(ops.delete_runs(list(run_ids)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async `copy_thread`."""
        await self._async.run(ops.copy(session_id(source_thread_id), session_id(target_thread_id)))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async `prune`."""
        await self._async.run(self._prune(thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async `get_delta_channel_history`."""
        return await self._async.run(self._history(config, channels))

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
