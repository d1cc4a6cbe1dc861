"""A session of any kind read for its conversation: its transcript, context or LangGraph list.

Where a session's conversation is stored is its kind's (`turnstore.records.kinds`): a session
of checkpoint saves reads its transcript batches; a session of items its context; a LangGraph
thread the list channel of its newest root checkpoint, a window of the list's lineage ranges
by position, so a page costs the same at 50 turns and at 800. What is read is handed back as
stored: `rules.conversation` reads it as messages.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from turnstore.engine.protocol import Tx
from turnstore.records.conversation import (
    ConversationRequest,
    LangGraphPoint,
)
from turnstore.records.kinds import Storage, kind_of
from turnstore.records.langgraph import EMPTY, LIST, CheckpointRow, Typed
from turnstore.rules.conversation import StoredConversation
from turnstore.rules.langgraph_values import MAX_INFLATED, decode_value
from turnstore.rules.pages import JournalQuery
from turnstore.scripts import context_reads, journals, sessions
from turnstore.scripts.langgraph import BlobRow, LangGraphSql, segments, versions_of

ROOT_NS = ""
_TRIGGER = "branch:to:"


def stored(tx: Tx, session_id: str, request: ConversationRequest) -> StoredConversation | None:
    """One newest-first page of what a session's conversation stores; None without one."""
    summary = sessions.summary(tx, session_id)
    if summary is None:
        return None
    found = StoredConversation(session_id=session_id, kind=summary.kind)
    kind = kind_of(summary.kind)
    if kind.storage is Storage.TRANSCRIPT:
        query = JournalQuery(session_id, request.before, request.limit)
        found.transcript = journals.transcript_page(tx, query)
    elif kind.storage is Storage.CHANNEL:
        assert kind.channel is not None  # a kind stored in a channel names it
        _thread(tx, found, request, request.channel or kind.channel)
    else:
        window = context_reads.window(tx, session_id, request.before, request.limit)
        found.items, found.start, found.total = window.items, window.start, window.length
    return found


def _point(tx: Tx, row: CheckpointRow, channel: str, most: int) -> LangGraphPoint:
    """The checkpoint's step and source, and the nodes it triggers next."""
    metadata = decode_value(row.metadata_type, row.metadata, most)
    checkpoint = decode_value(row.checkpoint_type, row.checkpoint, most)
    point = LangGraphPoint(checkpoint_id=row.checkpoint_id, channel=channel)
    if isinstance(metadata, dict):
        step, source = metadata.get("step"), metadata.get("source")
        point.step = step if isinstance(step, int) else None
        point.source = source if isinstance(source, str) else None
    if isinstance(checkpoint, dict):
        point.next = _next_nodes(tx, row, checkpoint)
    return point


def next_nodes(tx: Tx, row: CheckpointRow, most: int = MAX_INFLATED) -> list[str]:
    """The nodes a checkpoint runs next (see `_next_nodes`); [] for one it cannot read."""
    checkpoint = decode_value(row.checkpoint_type, row.checkpoint, most)
    return _next_nodes(tx, row, checkpoint) if isinstance(checkpoint, dict) else []


def _next_nodes(tx: Tx, row: CheckpointRow, checkpoint: dict[str, Any]) -> list[str]:
    """Nodes whose `branch:to:` channel holds a value newer than the node last saw.

    LangGraph's own rule for the next tasks of a checkpoint, for its trigger channels: a
    channel cleared at the end of a step has a newer version but no value.
    """
    versions = checkpoint.get("channel_versions")
    seen = checkpoint.get("versions_seen")
    inline = checkpoint.get("channel_values")
    if not isinstance(versions, dict) or not isinstance(seen, dict):
        return []
    moved: dict[str, str] = {}
    for channel, version in versions.items():
        if not isinstance(channel, str) or not channel.startswith(_TRIGGER):
            continue
        node = channel[len(_TRIGGER) :]
        node_seen = seen.get(node)
        last = node_seen.get(channel) if isinstance(node_seen, dict) else None
        if last is None or (type(last) is type(version) and version > last):
            moved[channel] = node
    held = set(inline) if isinstance(inline, dict) else set()
    keys = versions_of(row)
    for channel in moved:
        if channel not in held and channel in keys:
            blob = _blob(tx, row, channel, keys[channel])
            if blob is not None and blob.value_type != EMPTY:
                held.add(channel)
    return sorted(node for channel, node in moved.items() if channel in held)


def _blob(tx: Tx, row: CheckpointRow, channel: str, version: str) -> BlobRow | None:
    params = (row.session_id, row.checkpoint_ns, channel, version)
    return tx.row(tx.sql(LangGraphSql).blob, params)


class ListWindow(NamedTuple):
    """A run of a LangGraph list's items, decoded, with where it starts and the list's length."""

    items: list[Any]
    start: int
    length: int


def newest_root(tx: Tx, session_id: str) -> CheckpointRow | None:
    """A thread's newest checkpoint in the root namespace, without its values."""
    return tx.row(tx.sql(LangGraphSql).latest, (session_id, ROOT_NS))


def list_window(
    tx: Tx,
    row: CheckpointRow,
    channel: str,
    before: int | None,
    limit: int | None,
    since: int = 0,
    most: int = MAX_INFLATED,
) -> ListWindow:
    """The newest `limit` items (all when None) before index `before` and from `since` of a
    list channel at a checkpoint, read from its lineage ranges only; a compressed value is
    inflated to at most `most` bytes."""
    version = versions_of(row).get(channel)
    blob = None if version is None else _blob(tx, row, channel, version)
    if blob is None or blob.value_type == EMPTY:
        return ListWindow([], 0, 0)

    def bounds(length: int) -> tuple[int, int]:
        end = length if before is None else min(before, length)
        return max(since, 0 if limit is None else end - limit), end

    if blob.value_type != LIST:
        value = None if blob.value is None else decode_value(blob.value_type, blob.value, most)
        whole = value if isinstance(value, list) else [] if value is None else [value]
        first, end = bounds(len(whole))
        return ListWindow(whole[first:end], first, len(whole))
    assert blob.lineage is not None
    assert blob.length is not None
    first, end = bounds(blob.length)
    typed: list[Typed] = []
    for lineage, low, high in segments(tx, row.session_id, blob.lineage, end):
        low, high = max(low, first), min(high, end)
        if low < high:
            typed += tx.rows(tx.sql(LangGraphSql).items, (row.session_id, lineage, low, high))
    return ListWindow([decode_value(*item, most) for item in typed], first, blob.length)


def _thread(tx: Tx, found: StoredConversation, request: ConversationRequest, channel: str) -> None:
    row = newest_root(tx, found.session_id)
    if row is None:
        return
    most = request.max_value_bytes
    found.langgraph = _point(tx, row, channel, most)
    window = list_window(tx, row, channel, request.before, request.limit, most=most)
    found.items, found.start, found.total = window.items, window.start, window.length
