"""How the LangGraph saver encodes checkpoints for the store, and decodes them (private).

Values go through the saver's serializer (`self.serde`, allowlist included) one channel
version at a time; a list that extends a version this saver stored or loaded is sent as its
new items only, found by identity item by item (`CheckpointEncoding._recall`).
"""

from __future__ import annotations

import json
import secrets
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from turnstore.errors import InvalidInput
from turnstore.records.kinds.langgraph import KIND
from turnstore.records.langgraph import (
    EMPTY,
    BlobWrite,
    ChannelValue,
    ListWrite,
    LoadedCheckpoint,
    PutRequest,
    Typed,
    WriteRow,
)
from turnstore.seam import catalog_line

PREFIX = KIND.id_prefix or ""
"""Every LangGraph thread's turnstore session id starts with this."""
KNOWN_CHANNELS = 1024
"""List channels whose recent versions a saver remembers, to store their appends as deltas."""
KNOWN_VERSIONS = 4
"""Recent versions remembered per list channel (a run resumed from an older one finds it)."""
_INLINE = (str, int, float, bool)
PendingWrites = tuple[str, str, Sequence[tuple[str, Any]]]
"""One `put_writes` call's arguments: task id, task path, its (channel, value) writes."""
SHARING: ContextVar[bool] = ContextVar("turnstore_langgraph_sharing", default=False)
"""Whether reads in this context may return list items shared with earlier reads
(`TurnstoreSaver.shared_reads`)."""
COMPRESSED = "z:"
"""Prefix of the type tag of a value stored zlib-compressed (the serializer's tag follows)."""
COMPRESS_FROM = 256
"""Serialised values of at least this many bytes are compressed when it pays."""


def session_id(thread_id: object) -> str:
    """The turnstore session id of one LangGraph thread."""
    return PREFIX + str(thread_id)


def version_key(version: object) -> str:
    """A channel version as the text the store keys it by."""
    return version if isinstance(version, str) else repr(version)


class Known(NamedTuple):
    """A list channel version this saver stored or loaded: its lineage and its items."""

    version: str
    lineage: int
    items: tuple[Any, ...]


class Target(NamedTuple):
    """What a config names: a thread, its session, a namespace, maybe a checkpoint."""

    thread_id: str
    session_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def target_of(config: RunnableConfig) -> Target:
    """The thread, namespace and checkpoint a config names; `InvalidInput` without a thread."""
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable:
        raise InvalidInput("the config names no thread: configurable.thread_id is required")
    thread_id = str(configurable["thread_id"])
    ns = configurable.get("checkpoint_ns") or ""
    return Target(thread_id, session_id(thread_id), ns, get_checkpoint_id(config))


def owner_of(config: RunnableConfig) -> str | None:
    """The catalog owner a config names (`owner_id`, else `user_id`), or None."""
    configurable = config.get("configurable") or {}
    for key in ("owner_id", "user_id"):
        value = configurable.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config of one stored checkpoint."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _first_user_message(values: dict[str, Any], lists: list[ListWrite]) -> str | None:
    """The text of the first human message of a list sent whole (a thread's first put)."""
    for write in lists:
        if write.lineage is not None:
            continue
        for item in values[write.channel]:
            human = getattr(item, "type", None) == "human"
            line = catalog_line(item.content) if human and isinstance(item.content, str) else None
            if line is not None:
                return line
    return None


class CheckpointEncoding:
    """The saver's encoding: requests from LangGraph's records, records from stored rows."""

    serde: SerializerProtocol

    def __init__(self) -> None:
        self._known: OrderedDict[tuple[str, str, str], list[Known]] = OrderedDict()
        self._known_lock = threading.Lock()

    # --- the remembered list versions -------------------------------------------------------

    def _recall(self, key: tuple[str, str, str], items: tuple[Any, ...]) -> Known | None:
        """The longest remembered version of a list channel that `items` begins with."""
        with self._known_lock:
            known = list(self._known.get(key, ()))
        best = None
        for entry in known:
            size = len(entry.items)
            if size > len(items) or (best is not None and size <= len(best.items)):
                continue
            if all(a is b for a, b in zip(entry.items, items, strict=False)):
                best = entry
        return best

    def _remember(self, key: tuple[str, str, str], entry: Known) -> None:
        # A version is stored once, in one lineage: the same (version, lineage) holds the same
        # items, so the newer entry replaces the older without comparing their items (each
        # `==` of two messages is pydantic's, a seventh of a long thread's load).
        place = entry[:2]
        with self._known_lock:
            versions = [known for known in self._known.pop(key, []) if known[:2] != place]
            self._known[key] = [entry, *versions][:KNOWN_VERSIONS]
            while len(self._known) > KNOWN_CHANNELS:
                self._known.popitem(last=False)

    def _forget(self, session_ids: Sequence[str] | None) -> None:
        with self._known_lock:
            if session_ids is None:
                self._known.clear()
                return
            doomed = set(session_ids)
            for key in [key for key in self._known if key[0] in doomed]:
                del self._known[key]

    # --- encoding ---------------------------------------------------------------------------

    def _typed(self, value: Any) -> Typed:
        """A value serialised, and compressed when that saves a tenth or more of it."""
        value_type, data = self.serde.dumps_typed(value)
        if len(data) >= COMPRESS_FROM:
            packed = zlib.compress(data, 1)
            if len(packed) * 10 <= len(data) * 9:
                return Typed(COMPRESSED + value_type, packed)
        return Typed(value_type, data)

    def _loads(self, value_type: str, data: bytes) -> Any:
        """A stored value deserialised by the saver's serializer (and its allowlist)."""
        if value_type.startswith(COMPRESSED):
            value_type, data = value_type[len(COMPRESSED) :], zlib.decompress(data)
        return self.serde.loads_typed((value_type, data))

    def _decode(self, value: ChannelValue, key: tuple[str, str, str] | None = None) -> Any:
        if value.items is not None:
            if key is not None and value.lineage is not None and SHARING.get():
                return self._shared_list(key, value.lineage, value.items)
            return [self._loads(*item) for item in value.items]
        assert value.value is not None
        return self._loads(*value.value)

    def _shared_list(self, key: tuple[str, str, str], lineage: int, items: list[Typed]) -> Any:
        """A list read in a `SHARING` block: the decoded items of a remembered version of the
        same lineage stand for its first ones (a lineage's items never change), the rest are
        decoded."""
        with self._known_lock:
            known = [entry for entry in self._known.get(key, ()) if entry.lineage == lineage]
        held: tuple[Any, ...] = max((entry.items for entry in known), key=len, default=())
        if len(held) >= len(items):
            return list(held[: len(items)])
        return [*held, *(self._loads(*item) for item in items[len(held) :])]

    def _list_write(
        self, target: Target, channel: str, version: str, value: list[Any], whole: bool
    ) -> ListWrite:
        items = tuple(value)
        known = (
            None
            if whole
            else self._recall((target.session_id, target.checkpoint_ns, channel), items)
        )
        start = 0 if known is None else len(known.items)
        return ListWrite(
            channel=channel,
            version=version,
            lineage=None if known is None else known.lineage,
            start=start,
            items=[self._typed(item) for item in items[start:]],
            fresh=secrets.randbits(62),
        )

    def _put_request(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        whole: set[str],
    ) -> PutRequest:
        target = target_of(config)
        values = checkpoint["channel_values"]
        inline = {
            channel: value
            for channel, value in values.items()
            if value is None or type(value) in _INLINE
        }
        skeleton = {**checkpoint, "channel_values": inline}
        blobs: list[BlobWrite] = []
        lists: list[ListWrite] = []
        for channel, raw_version in new_versions.items():
            version = version_key(raw_version)
            if channel in inline:
                continue
            if channel not in values:
                blobs.append(BlobWrite(channel, version, EMPTY, None))
            elif type(values[channel]) is list and values[channel]:
                lists.append(
                    self._list_write(target, channel, version, values[channel], channel in whole)
                )
            else:
                blobs.append(BlobWrite(channel, version, *self._typed(values[channel])))
        stored_metadata = get_serializable_checkpoint_metadata(config, metadata)
        counters = stored_metadata.get("counters_since_delta_snapshot")
        run_id = stored_metadata.get("run_id")
        versions = {ch: version_key(v) for ch, v in checkpoint["channel_versions"].items()}
        return PutRequest(
            session_id=target.session_id,
            owner_id=owner_of(config),
            checkpoint_ns=target.checkpoint_ns,
            checkpoint_id=checkpoint["id"],
            parent_checkpoint_id=target.checkpoint_id,
            run_id=run_id if isinstance(run_id, str) else None,
            checkpoint=self._typed(skeleton),
            metadata=self._typed(stored_metadata),
            versions_json=json.dumps(versions, sort_keys=True),
            delta_channels_json=json.dumps(sorted(counters)) if counters else None,
            blobs=blobs,
            lists=lists,
            first_user_message=_first_user_message(values, lists),
            run_started=stored_metadata.get("source") == "input" and not target.checkpoint_ns,
        )

    def _tuple(self, thread_id: str, loaded: LoadedCheckpoint) -> CheckpointTuple:
        row = loaded.row
        checkpoint: Checkpoint = self._loads(row.checkpoint_type, row.checkpoint)
        values = dict(checkpoint.get("channel_values") or {})
        for value in loaded.values:
            key = (row.session_id, row.checkpoint_ns, value.channel)
            decoded = self._decode(value, key)
            values[value.channel] = decoded
            if value.lineage is not None:
                version = version_key(checkpoint["channel_versions"][value.channel])
                self._remember(key, Known(version, value.lineage, tuple(decoded)))
        checkpoint["channel_values"] = values
        parent = None
        if row.parent_checkpoint_id is not None:
            parent = config_of(thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
        return CheckpointTuple(
            config=config_of(thread_id, row.checkpoint_ns, row.checkpoint_id),
            checkpoint=checkpoint,
            metadata=self._loads(row.metadata_type, row.metadata),
            parent_config=parent,
            pending_writes=[self._pending(write) for write in loaded.writes],
        )

    def _pending(self, write: WriteRow) -> tuple[str, str, Any]:
        value = None if write.value is None else self._loads(write.value_type, write.value)
        return (write.task_id, write.channel, value)
