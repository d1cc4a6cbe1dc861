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
through `turnstore.seam`, and each method is one call of the LangGraph tables
(`store.langgraph`, a listing one call a page) of the blocking face, or of the async one for
the async API; the saver only encodes before the call and decodes after it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Self

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, StoreClosed
from turnstore.integrations import requires_extra
from turnstore.integrations._opening import Closes, Opening
from turnstore.records import SessionCursor, SessionPageRequest
from turnstore.records.langgraph import (
    CheckpointRow,
    DeltaHistory,
    LoadedCheckpoint,
    PutRequest,
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
        SHARING,
        CheckpointEncoding,
        Known,
        PendingWrites,
        config_of,
        owner_of,
        session_id,
        target_of,
    )

PAGE = 100
"""Checkpoints a listing reads at a time."""


class TurnstoreSaver(Closes, CheckpointEncoding, BaseCheckpointSaver[str]):
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
        # The writes of the checkpoint `get_tuple` loaded last, by its place: `task_paths`
        # of that checkpoint reads them from there instead of loading it whole again.
        self._last_writes: tuple[tuple[str, str, str], list[Any]] | None = None

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

    @contextmanager
    def shared_reads(self) -> Iterator[None]:
        """A block whose reads (this thread's or task's) decode only the list items an earlier
        read of the same lineage did not, sharing those objects: for a copy reading a thread's
        checkpoints in turn. Do not change what it returns; outside it, reads decode anew."""
        token = SHARING.set(True)
        try:
            yield
        finally:
            SHARING.reset(token)

    def deferred_durability(self) -> AbstractContextManager[None]:
        """A block whose puts are durable at its end (`BlockingStore.deferred_durability`)."""
        return self._open().blocking.deferred_durability()

    # --- what a call needs before and after the store ---------------------------------------

    def _open(self) -> Shared:
        # Encoding comes before the call: a closed saver refuses before that work.
        if self._shared.closed:
            raise StoreClosed("the store is closed")
        return self._shared

    def _whole(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Callable[[list[str]], PutRequest]:
        """The put request again, with the lists of the channels named sent whole."""
        return lambda missing: self._put_request(
            config, checkpoint, metadata, new_versions, set(missing)
        )

    def _stored(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        request: PutRequest,
        result: PutResult,
    ) -> RunnableConfig:
        """Remember where the put's lists were stored; the config of the stored checkpoint."""
        values = checkpoint["channel_values"]
        # A request sent again whole has the same list channels and versions as the first.
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
        self._last_writes = None  # this saver's own writes are never missed
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

    def _search(self, config: RunnableConfig | None, before: RunnableConfig | None) -> SearchQuery:
        """The query of a listing's first page."""
        target = None if config is None else target_of(config)
        configurable = {} if config is None else config.get("configurable") or {}
        return SearchQuery(
            session_id=None if target is None else target.session_id,
            checkpoint_ns=configurable.get("checkpoint_ns"),
            checkpoint_id=None if target is None else target.checkpoint_id,
            before=None if before is None else get_checkpoint_id(before),
            after=None,
            limit=PAGE,
        )

    def _keep(self, filter: dict[str, Any] | None) -> Callable[[CheckpointRow], bool]:
        """Whether a listing gives a row: a LangGraph thread's, its metadata matching."""

        def keep(row: CheckpointRow) -> bool:
            if not row.session_id.startswith(PREFIX):
                return False
            if not filter:
                return True
            metadata = self._loads(row.metadata_type, row.metadata)
            return all(metadata.get(key) == value for key, value in filter.items())

        return keep

    def _listed(self, loaded: LoadedCheckpoint) -> CheckpointTuple:
        return self._tuple(loaded.row.session_id[len(PREFIX) :], loaded)

    def _history(self, found: list[DeltaHistory]) -> dict[str, DeltaChannelHistory]:
        result: dict[str, DeltaChannelHistory] = {}
        for history in found:
            entry: DeltaChannelHistory = {
                "writes": [self._pending(write) for write in history.writes]
            }
            if history.seed is not None:
                entry["seed"] = self._decode(history.seed)
            result[history.channel] = entry
        return result

    def _forget(self, session_ids: Sequence[str] | None) -> None:
        self._last_writes = None
        super()._forget(session_ids)

    def _forgotten(self, thread_ids: Sequence[str]) -> list[str]:
        """The threads' session ids, once their remembered list versions are dropped (a put
        must not extend a lineage that a delete or prune is about to remove)."""
        ids = [session_id(thread_id) for thread_id in thread_ids]
        self._forget(ids)
        return ids

    # --- the sync API: each method one call of the blocking face ---------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its id, else its namespace's newest), or None."""
        tables = self._open().blocking.langgraph
        target = target_of(config)
        loaded = tables.get(target.session_id, target.checkpoint_ns, target.checkpoint_id)
        if loaded is None:
            return None
        row = loaded.row
        self._last_writes = ((row.session_id, row.checkpoint_ns, row.checkpoint_id), loaded.writes)
        return self._tuple(target.thread_id, loaded)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of a thread (and namespace), or of every thread."""
        # As LangGraph's own savers: a limit of 0 or less lists nothing, and reads nothing.
        query = None if limit is not None and limit <= 0 else self._search(config, before)
        keep, remaining = self._keep(filter), limit
        while query is not None:
            page, query = self._open().blocking.langgraph.list_page(query, keep, remaining)
            remaining = None if remaining is None else remaining - len(page)
            for loaded in page:
                yield self._listed(loaded)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channel versions it introduces, in one commit."""
        tables = self._open().blocking.langgraph
        request = self._put_request(config, checkpoint, metadata, new_versions, set())
        whole = self._whole(config, checkpoint, metadata, new_versions)
        return self._stored(config, checkpoint, request, tables.put(request, whole))

    def put_with_writes(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        writes: Sequence[PendingWrites],
    ) -> RunnableConfig:
        """`put`, then each (task id, task path, writes) call of `put_writes` on the checkpoint
        stored, in one commit: for a copy holding a checkpoint and its writes at once."""
        tables = self._open().blocking.langgraph
        request = self._put_request(config, checkpoint, metadata, new_versions, set())
        whole = self._whole(config, checkpoint, metadata, new_versions)
        stored = config_of(target_of(config).thread_id, request.checkpoint_ns, checkpoint["id"])
        pending = [self._writes(stored, items, task, path) for task, path, items in writes]
        return self._stored(config, checkpoint, request, tables.put(request, whole, pending))

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
        self._open().blocking.langgraph.delete_threads(self._forgotten([thread_id]))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes the given runs made."""
        self._forget(None)
        self._open().blocking.langgraph.delete_runs(list(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to another thread."""
        self._last_writes = None
        tables = self._open().blocking.langgraph
        tables.copy(session_id(source_thread_id), session_id(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: keep each namespace's newest checkpoint (and the ancestors its
        delta channels replay); `delete`: delete the threads."""
        self._open().blocking.langgraph.prune(self._forgotten(thread_ids), strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Each channel's writes along the checkpoint's ancestors and its seed, in one read."""
        tables = self._open().blocking.langgraph
        target = target_of(config)
        return self._history(
            tables.delta_history(
                target.session_id, target.checkpoint_ns, target.checkpoint_id, channels
            )
        )

    # --- what a move between savers reads (turnstore.integrations.langgraph_move) ---------

    def thread_ids(self) -> Iterator[str]:
        """Every LangGraph thread of the store, read from the catalog a page at a time."""
        cursor: SessionCursor | None = None
        while True:
            request = SessionPageRequest(cursor=cursor, limit=PAGE, id_prefix=PREFIX)
            page = self._open().blocking.list_sessions_page(request)
            for summary in page.sessions:
                yield summary.session_id[len(PREFIX) :]
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def checkpoint_ids(self, thread_id: str) -> Sequence[tuple[str, str]]:
        """A thread's (namespace, checkpoint id) pairs, oldest first, read from its listing's
        rows without decoding a checkpoint (what a copy of the thread needs first)."""
        found: list[tuple[str, str]] = []

        def collect(row: CheckpointRow) -> bool:
            # Kept by nothing: a listing decodes only the rows it keeps.
            found.append((row.checkpoint_ns, row.checkpoint_id))
            return False

        tables = self._open().blocking.langgraph
        first = self._search({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, None)
        query: SearchQuery | None = first._replace(checkpoint_ns=None)
        while query is not None:
            _, query = tables.list_page(query, collect)
        return sorted(found, key=lambda pair: (pair[1], pair[0]))

    def task_paths(self, config: RunnableConfig) -> dict[str, str]:
        """The `task_path` of each task with pending writes on the config's checkpoint
        (`get_tuple` gives the writes without it): right after `get_tuple` read that
        checkpoint, of the writes that read gave (unless this saver wrote since)."""
        target = target_of(config)
        last = self._last_writes
        if last is not None and target.checkpoint_id is not None:
            place, writes = last
            if place == (target.session_id, target.checkpoint_ns, target.checkpoint_id):
                # The same snapshot as the writes that read gave, without a second load.
                return {w.task_id: w.task_path for w in writes}
        tables = self._open().blocking.langgraph
        loaded = tables.get(target.session_id, target.checkpoint_ns, target.checkpoint_id)
        return {} if loaded is None else {w.task_id: w.task_path for w in loaded.writes}

    # --- the async API: each method one call of the async face -----------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async `get_tuple`."""
        tables = self._open().store.langgraph
        target = target_of(config)
        loaded = await tables.get(target.session_id, target.checkpoint_ns, target.checkpoint_id)
        return None if loaded is None else self._tuple(target.thread_id, loaded)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async `list`."""
        # As LangGraph's own savers: a limit of 0 or less lists nothing, and reads nothing.
        query = None if limit is not None and limit <= 0 else self._search(config, before)
        keep, remaining = self._keep(filter), limit
        while query is not None:
            page, query = await self._open().store.langgraph.list_page(query, keep, remaining)
            remaining = None if remaining is None else remaining - len(page)
            for loaded in page:
                yield self._listed(loaded)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async `put`."""
        tables = self._open().store.langgraph
        request = self._put_request(config, checkpoint, metadata, new_versions, set())
        whole = self._whole(config, checkpoint, metadata, new_versions)
        return self._stored(config, checkpoint, request, await tables.put(request, whole))

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
        await self._open().store.langgraph.delete_threads(self._forgotten([thread_id]))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async `delete_for_runs`."""
        self._forget(None)
        await self._open().store.langgraph.delete_runs(list(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async `copy_thread`."""
        self._last_writes = None
        tables = self._open().store.langgraph
        await tables.copy(session_id(source_thread_id), session_id(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async `prune`."""
        await self._open().store.langgraph.prune(self._forgotten(thread_ids), strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async `get_delta_channel_history`."""
        tables = self._open().store.langgraph
        target = target_of(config)
        return self._history(
            await tables.delta_history(
                target.session_id, target.checkpoint_ns, target.checkpoint_id, channels
            )
        )

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
