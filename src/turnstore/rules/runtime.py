"""Rules of the runtime face: the turn-commit hash, commit validation, picker text, blobs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from turnstore.errors import InvalidInput, SessionBindingMismatch, UnsupportedRecordSchemaVersion
from turnstore.records.base import encode_json
from turnstore.records.runtime import (
    RUNTIME_RECORD_SCHEMA_VERSION,
    BlobRef,
    GraphAppend,
    GraphReplaceFull,
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionCheckpoint,
    SessionNodeRecord,
    blob_ref,
)
from turnstore.rules.validation import revalidated, validate_session_id

_VOLATILE_KEYS = ("node_id", "parent_node_id", "leaf_node_id", "timestamp")


def scrub_turn_commit_value(value: Any) -> Any:
    """Drop what differs between two attempts of one turn: node ids, message ids, timestamps.

    At every depth: an object that is a message (`role` and `parts`) or a message part
    (`kind`, `content` and `prune_state`) loses its `id`; every object loses `node_id`,
    `parent_node_id`, `leaf_node_id` and `timestamp`.
    """
    if isinstance(value, dict):
        is_message = "role" in value and "parts" in value
        is_part = "kind" in value and "content" in value and "prune_state" in value
        return {
            key: scrub_turn_commit_value(item)
            for key, item in value.items()
            if key not in _VOLATILE_KEYS and not (key == "id" and (is_message or is_part))
        }
    if isinstance(value, list):
        return [scrub_turn_commit_value(item) for item in value]
    return value


def turn_commit_hash(commit: RuntimeCommit) -> str:
    """Hex SHA-256 of canonical JSON of the commit without its CAS and stamp, scrubbed."""
    semantic = msgspec.structs.replace(commit, expected_head_revision=None, turn_commit=None)
    value = scrub_turn_commit_value(msgspec.to_builtins(semantic))
    canonical = msgspec.json.encode(value, order="sorted")
    return hashlib.sha256(canonical).hexdigest()


def check_binding(bound_session_id: str, attempted_session_id: str) -> None:
    """Refuse a call for another session than the one a runtime handle is bound to."""
    if attempted_session_id != bound_session_id:
        raise SessionBindingMismatch(
            f"store is already bound to session `{bound_session_id}` and cannot be reused "
            f"for `{attempted_session_id}`",
            bound_session_id=bound_session_id,
            attempted_session_id=attempted_session_id,
        )


def ensure_supported_schema_version(record_kind: str, actual: int) -> None:
    """Refuse a stored record whose `schema_version` this build does not read."""
    expected = RUNTIME_RECORD_SCHEMA_VERSION
    if actual != expected:
        raise UnsupportedRecordSchemaVersion(
            f"{record_kind} schema_version {actual} is not supported by this binary "
            f"(expected {expected})",
            record_kind=record_kind,
            actual=actual,
            expected=expected,
        )


def _nodes(commit: RuntimeCommit) -> list[SessionNodeRecord]:
    graph = commit.graph
    if isinstance(graph, GraphReplaceFull):
        return graph.graph.nodes
    return graph.nodes if isinstance(graph, GraphAppend) else []


@dataclass(frozen=True, slots=True)
class Blob:
    """A blob to store: its content address and bytes."""

    ref: BlobRef
    data: bytes


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    """A validated runtime commit, with its blobs and records encoded before any I/O."""

    commit: RuntimeCommit
    turn_commit_hash: str | None
    blobs: list[Blob]
    manifest: SessionCheckpoint
    manifest_blob: Blob
    node_rows: list[tuple[str, str | None, str]]
    user_messages: list[str]


def _blob(data: bytes) -> Blob:
    return Blob(blob_ref(data), data)


def _json_blob(value: Any, what: str) -> Blob:
    try:
        return _blob(encode_json(value))
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidInput(f"{what} is not encodable as JSON: {error}") from None


def _checkpoint_blobs(
    checkpoint: HydratedSessionCheckpoint,
) -> tuple[list[Blob], SessionCheckpoint]:
    """Blobs for the parts given by value; a part given only by ref keeps its ref."""
    tool = (
        None if checkpoint.tool_state is None else _json_blob(checkpoint.tool_state, "tool state")
    )
    plugin = (
        None
        if checkpoint.plugin_snapshot is None
        else _json_blob(checkpoint.plugin_snapshot, "plugin snapshot")
    )
    execution = (
        None if checkpoint.execution_state is None else _blob(bytes(checkpoint.execution_state))
    )
    manifest = SessionCheckpoint(
        turn_state=checkpoint.turn_state,
        tool_state_ref=checkpoint.tool_state_ref if tool is None else tool.ref,
        plugin_snapshot_ref=checkpoint.plugin_snapshot_ref if plugin is None else plugin.ref,
        plugin_snapshot_revision=checkpoint.plugin_snapshot_revision,
        execution_state_ref=(
            checkpoint.execution_state_ref if execution is None else execution.ref
        ),
    )
    return [blob for blob in (tool, plugin, execution) if blob is not None], manifest


def user_message_text(node: SessionNodeRecord) -> str | None:
    """Return the text of a user message node, or None for any other node."""
    payload = node.payload
    if not isinstance(payload, dict) or payload.get("role") != "user":
        return None
    parts = payload.get("parts")
    if isinstance(parts, list):
        texts = [
            part["content"]
            for part in parts
            if isinstance(part, dict)
            and part.get("kind") == "text"
            and isinstance(part.get("content"), str)
        ]
        return "".join(texts)
    content = payload.get("content")
    return content if isinstance(content, str) else ""


def prepare_commit(bound_session_id: str, commit: RuntimeCommit) -> PreparedCommit:
    """Validate a runtime commit and encode everything it writes."""
    if not isinstance(commit, RuntimeCommit):
        raise InvalidInput("commit must be a RuntimeCommit")
    commit, _ = revalidated(commit)
    check_binding(bound_session_id, validate_session_id(commit.session_id))
    stamp = commit.turn_commit
    commit_hash = None
    if stamp is not None:
        check_binding(bound_session_id, stamp.session_id)
        if not stamp.turn_id.strip():
            raise InvalidInput("turn commit turn ID cannot be empty")
        commit_hash = turn_commit_hash(commit)
        if stamp.turn_commit_hash != commit_hash:
            raise InvalidInput("turn commit hash does not match the commit's content")
    nodes = _nodes(commit)
    _check_nodes(nodes)
    blobs, manifest = _checkpoint_blobs(commit.checkpoint)
    manifest_blob = _blob(manifest.to_json())
    rows = [(node.node_id, node.parent_node_id, node.to_json().decode()) for node in nodes]
    texts = [text for text in map(user_message_text, nodes) if text is not None]
    return PreparedCommit(commit, commit_hash, blobs, manifest, manifest_blob, rows, texts)


def _check_nodes(nodes: Iterable[SessionNodeRecord]) -> None:
    seen: set[str] = set()
    for node in nodes:
        if not node.node_id.strip():
            raise InvalidInput("graph node ID cannot be empty")
        if node.node_id in seen:
            raise InvalidInput(f"graph node `{node.node_id}` appears twice in one commit")
        seen.add(node.node_id)


def prepare_enqueue(bound_session_id: str, draft: QueuedWorkBatchDraft) -> QueuedWorkBatchDraft:
    """Validate a queued-work batch before it is stored."""
    if not isinstance(draft, QueuedWorkBatchDraft):
        raise InvalidInput("batch must be a QueuedWorkBatchDraft")
    draft, _ = revalidated(draft)
    check_binding(bound_session_id, draft.session_id)
    if draft.batch_id is not None and not draft.batch_id.strip():
        raise InvalidInput("queued work batch ID cannot be empty")
    return draft


def check_lease(lease_ttl_ms: object) -> int:
    """Return a lease length in milliseconds, refusing non-positive or absurd values."""
    if not isinstance(lease_ttl_ms, int) or isinstance(lease_ttl_ms, bool) or lease_ttl_ms <= 0:
        raise InvalidInput("lease_ttl_ms must be a positive integer")
    if lease_ttl_ms > 365 * 24 * 3600 * 1000:
        raise InvalidInput("lease_ttl_ms must be at most one year")
    return lease_ttl_ms
