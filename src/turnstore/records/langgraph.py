"""What the LangGraph saver hands the store (`store.langgraph`): encoded rows, no LangGraph types.

The integration (`turnstore.integrations.langgraph`) serialises with LangGraph's serializer;
the store keeps `(type, bytes)` pairs as they are, so nothing here imports LangGraph.
"""

from __future__ import annotations

from typing import NamedTuple

EMPTY = "empty"
"""The value type of a channel version that holds no value (LangGraph's `EMPTY` blob)."""
LIST = "turnstore-list"
"""The value type of a channel version kept as a prefix of a lineage of items."""


class Typed(NamedTuple):
    """One serialised value: the serializer's type tag and its bytes."""

    value_type: str
    value: bytes


class BlobWrite(NamedTuple):
    """A channel version whose value is stored whole (or is `EMPTY`)."""

    channel: str
    version: str
    value_type: str
    value: bytes | None


class ListWrite(NamedTuple):
    """A channel version whose value is a list: `items` appended after `start` items.

    `lineage` names the stored lineage whose first `start` items begin the list, or None when
    the whole list is in `items` (`start` is then 0). `fresh` is the id a new lineage takes.
    """

    channel: str
    version: str
    lineage: int | None
    start: int
    items: list[Typed]
    fresh: int


class PutRequest(NamedTuple):
    """One checkpoint with the channel versions it introduces, encoded."""

    session_id: str
    owner_id: str | None
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    run_id: str | None
    checkpoint: Typed
    metadata: Typed
    versions_json: str
    """Every channel's version at this checkpoint, as a JSON object of strings."""
    delta_channels_json: str | None
    """The `DeltaChannel` channels whose history a load of this checkpoint replays."""
    blobs: list[BlobWrite]
    lists: list[ListWrite]
    first_user_message: str | None
    """What the catalog shows of the thread, if it shows nothing yet."""
    run_started: bool = False
    """The checkpoint is a run's input (metadata `source` "input"): the thread's runs count it."""


class PutResult(NamedTuple):
    """Where each list channel's version was stored, or which lists need writing whole."""

    stored: dict[str, tuple[int, int]]
    """Channel -> (lineage, length)."""
    missing: list[str]
    """Channels whose lineage is gone: nothing was written; send them again whole."""


class WriteRow(NamedTuple):
    """One pending write of a task, as stored."""

    task_id: str
    idx: int
    task_path: str
    channel: str
    value_type: str
    value: bytes | None


class WritesRequest(NamedTuple):
    """A task's pending writes on one checkpoint; `replace` for the special channels."""

    session_id: str
    owner_id: str | None
    checkpoint_ns: str
    checkpoint_id: str
    rows: list[WriteRow]
    replace: bool


class CheckpointRow(NamedTuple):
    """One stored checkpoint, without its channel values."""

    session_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint_type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    versions_json: str


class ChannelValue(NamedTuple):
    """A channel's stored value at a checkpoint: whole, or a list's items in order."""

    channel: str
    value: Typed | None
    items: list[Typed] | None
    lineage: int | None


class LoadedCheckpoint(NamedTuple):
    """A checkpoint with its channel values and pending writes, still encoded."""

    row: CheckpointRow
    values: list[ChannelValue]
    writes: list[WriteRow]


class SearchQuery(NamedTuple):
    """Which checkpoints a listing reads, newest first, after a keyset cursor."""

    session_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None
    before: str | None
    after: tuple[str, str, str] | None
    """(checkpoint_id, session_id, checkpoint_ns) of the last row already read."""
    limit: int


class ListedPage(NamedTuple):
    """One page of a listing, loaded, and the query of the next page (None at its end)."""

    checkpoints: list[LoadedCheckpoint]
    next: SearchQuery | None


class DeltaHistory(NamedTuple):
    """A channel's writes along a checkpoint's ancestors, oldest first, and its seed."""

    channel: str
    writes: list[WriteRow]
    seed: ChannelValue | None
