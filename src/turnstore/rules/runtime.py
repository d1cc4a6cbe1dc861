"""Rules of the runtime face: binding, commit validation and encoding, picker text, versions;
what a commit, a tombstone or an attachment refuses of the rows it read."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from turnstore.errors import (
    HeadRevisionConflict,
    InvalidInput,
    RuntimeTurnCommitConflict,
    SessionBindingMismatch,
    UnsupportedRecordSchemaVersion,
)
from turnstore.records.runtime import (
    RUNTIME_RECORD_SCHEMA_VERSION,
    AttachmentIntent,
    BlobRef,
    DurabilityTier,
    GraphAppend,
    GraphReplaceFull,
    HydratedSessionCheckpoint,
    RuntimeCommit,
    SessionCheckpoint,
    SessionNodeRecord,
    blob_ref,
    delta_leaf,
    turn_commit_hash,
)
from turnstore.rules.messages import user_text
from turnstore.rules.validation import (
    display_text,
    identifier,
    identifiers,
    optional_identifier,
    validate_session_id,
)
from turnstore.rules.values import checked, encode, is_blank

DURABILITY_TIER: DurabilityTier = "inline"
"""Every runtime commit is durable (fsynced, or committed on the server) when it returns."""


def check_binding(bound_session_id: str, attempted_session_id: str) -> None:
    """Refuse a record naming another session than the one a runtime handle is bound to."""
    if attempted_session_id != bound_session_id:
        raise SessionBindingMismatch(
            f"store is already bound to session `{bound_session_id}` and cannot be reused "
            f"for `{attempted_session_id}`",
            bound_session_id=bound_session_id,
            attempted_session_id=attempted_session_id,
        )


def ensure_supported_schema_version(
    record_kind: str, actual: int, session_id: str | None = None
) -> None:
    """Refuse a stored record whose `schema_version` this build does not read.

    Every read of a stored head or manifest calls this as soon as the record is read, before
    anything else uses it (a commit would otherwise rewrite a newer head at this version).
    """
    expected = RUNTIME_RECORD_SCHEMA_VERSION
    if actual != expected:
        raise UnsupportedRecordSchemaVersion(
            f"{record_kind} schema_version {actual} is not supported by this binary "
            f"(expected {expected})",
            session_id=session_id,
            record_kind=record_kind,
            actual=actual,
            expected=expected,
        )


@dataclass(frozen=True, slots=True)
class Blob:
    """A blob to store: its content address and bytes."""

    ref: BlobRef
    data: bytes


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A graph node as stored: its ids and its record's JSON."""

    node_id: str
    parent_node_id: str | None
    record_json: str


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    """A validated runtime commit, with its blobs and records encoded before any I/O."""

    commit: RuntimeCommit
    turn_commit_hash: str | None
    blobs: list[Blob]
    manifest: SessionCheckpoint
    manifest_blob: Blob
    node_rows: list[NodeRow]
    user_messages: list[str]
    stored_parents: list[tuple[str, str]]
    """(node, parent) of an append whose parent is not in the commit: it must be stored, live."""


def _blob(data: bytes) -> Blob:
    return Blob(blob_ref(data), data)


def _json_blob(value: Any, what: str) -> Blob | None:
    return None if value is None else _blob(encode(value, what))


def _checkpoint_blobs(
    checkpoint: HydratedSessionCheckpoint,
) -> tuple[list[Blob], SessionCheckpoint]:
    """Blobs for the parts given by value; a part given only by ref keeps its ref."""
    tool = _json_blob(checkpoint.tool_state, "tool state")
    plugin = _json_blob(checkpoint.plugin_snapshot, "plugin snapshot")
    state = checkpoint.execution_state
    execution = None if state is None else _blob(bytes(state))
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


def _nodes(commit: RuntimeCommit) -> list[SessionNodeRecord]:
    graph = commit.graph
    if isinstance(graph, GraphReplaceFull):
        return graph.graph.nodes
    return graph.nodes if isinstance(graph, GraphAppend) else []


def _check_nodes(nodes: Iterable[SessionNodeRecord], replaces: bool) -> list[tuple[str, str]]:
    """Check a delta's nodes; return (node, parent) of those whose parent must be stored.

    A node's parent comes before it: earlier in the commit or, for an append, already stored
    and live. So no node is cut off from its root, and positions order every path root first.
    """
    seen: set[str] = set()
    outside: list[tuple[str, str]] = []
    for node in nodes:
        if is_blank(node.node_id):
            raise InvalidInput("graph node ID cannot be empty")
        identifier(node.node_id, "graph node ID")
        if node.node_id in seen:
            raise InvalidInput(f"graph node `{node.node_id}` appears twice in one commit")
        parent = optional_identifier(node.parent_node_id, "graph node parent ID")
        if parent is not None and parent not in seen:
            if replaces:
                raise InvalidInput(
                    f"graph node `{node.node_id}` names parent `{parent}`, which is not an "
                    "earlier node of the new graph"
                )
            outside.append((node.node_id, parent))
        seen.add(node.node_id)
    return outside


def _check_ids(commit: RuntimeCommit) -> None:
    """Refuse NUL (or non-UTF-8 text) in the identifiers a commit carries besides its nodes."""
    identifier(commit.current_agent_frame_id, "current agent frame ID")
    for frame in commit.agent_frames:
        identifier(frame.frame_id, "agent frame ID")
        optional_identifier(frame.parent_frame_id, "agent frame parent ID")
    optional_identifier(delta_leaf(commit.graph), "graph leaf ID")
    checkpoint = commit.checkpoint
    refs = (
        checkpoint.tool_state_ref,
        checkpoint.plugin_snapshot_ref,
        checkpoint.execution_state_ref,
    )
    identifiers((ref for ref in refs if ref is not None), "checkpoint blob ref")
    identifiers(
        (entry.turn_id for entry in commit.usage_deltas if entry.turn_id is not None),
        "token ledger turn ID",
    )
    for completion in commit.completed_queue_claims:
        identifier(completion.claim_id, "queued work claim ID")
        identifiers(completion.batch_ids, "queued work batch ID")
    identifiers(commit.committed_attachment_ids, "attachment ID")


def _checked_stamp(bound_session_id: str, commit: RuntimeCommit) -> str | None:
    stamp = commit.turn_commit
    if stamp is None:
        return None
    check_binding(bound_session_id, stamp.session_id)
    if is_blank(stamp.turn_id):
        raise InvalidInput("turn commit turn ID cannot be empty")
    identifier(stamp.turn_id, "turn commit turn ID")
    commit_hash = turn_commit_hash(commit)
    if stamp.turn_commit_hash != commit_hash:
        raise InvalidInput("turn commit hash does not match the commit's content")
    return commit_hash


def prepare_commit(bound_session_id: str, commit: object) -> PreparedCommit:
    """Validate a runtime commit and encode everything it writes."""
    given, _ = checked(commit, RuntimeCommit, "commit")
    check_binding(bound_session_id, validate_session_id(given.session_id))
    commit_hash = _checked_stamp(bound_session_id, given)
    nodes = _nodes(given)
    outside = _check_nodes(nodes, isinstance(given.graph, GraphReplaceFull))
    _check_ids(given)
    blobs, manifest = _checkpoint_blobs(given.checkpoint)
    rows = [NodeRow(node.node_id, node.parent_node_id, node.to_json().decode()) for node in nodes]
    texts = [text for text in (user_text(node.payload) for node in nodes) if text is not None]
    return PreparedCommit(
        given,
        commit_hash,
        blobs,
        manifest,
        _blob(manifest.to_json()),
        rows,
        [display_text(text) for text in texts],
        outside,
    )


# --- what a write refuses of the rows it read ---------------------------------------------------


def check_turn_commit(
    session_id: str, turn_id: str, stored_hash: str, commit_hash: str | None
) -> None:
    """Refuse a turn committed before (`stored_hash`) with other content than this commit's."""
    if stored_hash != commit_hash:
        raise RuntimeTurnCommitConflict(
            f"runtime turn `{turn_id}` for session `{session_id}` was already "
            "committed with a different commit hash",
            session_id=session_id,
            turn_id=turn_id,
        )


def _rust_option(value: int | None) -> str:
    return "None" if value is None else f"Some({value})"


def next_head_revision(commit: RuntimeCommit, stored: int | None) -> int:
    """The revision a commit creates, refused unless it expects the `stored` one (None: none)."""
    if commit.expected_head_revision != stored:
        actual = stored or 0
        raise HeadRevisionConflict(
            "store head revision conflict: expected "
            f"{_rust_option(commit.expected_head_revision)}, actual {actual}",
            session_id=commit.session_id,
            expected=commit.expected_head_revision,
            actual=actual,
        )
    return (stored or 0) + 1


def check_live_parent(node_id: str, parent: str, found: object | None) -> None:
    """Refuse an appended node whose stored parent is not a live node (`found` None)."""
    if found is None:
        raise InvalidInput(
            f"graph node `{node_id}` names parent `{parent}`, which is not a live node of"
            " the session or an earlier node of this commit"
        )


def check_new_node(node_id: str, found: object | None) -> None:
    """Refuse a node whose id the session's graph holds (`found` not None)."""
    if found is not None:
        raise InvalidInput(f"graph node `{node_id}` already exists")


def check_live_leaf(leaf: str, found: object | None) -> None:
    """Refuse a leaf that is not a live node of the session (`found` None)."""
    if found is None:
        raise InvalidInput(f"graph leaf `{leaf}` is not a live node of the session")


def check_blobs_stored(referenced: Iterable[str], present: Collection[str]) -> None:
    """Refuse a manifest naming blobs, besides the commit's own, not among the `present`."""
    missing = [ref for ref in referenced if ref not in present]
    if missing:
        raise InvalidInput(f"checkpoint references blob `{missing[0]}`, which is not stored")


class LiveChild(Protocol):
    """A live node of the session whose parent is among those tombstoned, as read."""

    @property
    def node_id(self) -> str:
        """The node."""

    @property
    def parent_node_id(self) -> str:
        """Its parent."""


def check_tombstone_leaf(leaf: str | None, node_ids: Collection[str]) -> None:
    """Refuse to tombstone the head's `leaf` (None: no head, or none)."""
    if leaf is not None and leaf in node_ids:
        raise InvalidInput(
            f"graph node `{leaf}` is the session's leaf and cannot be tombstoned;"
            " commit another leaf first"
        )


def check_no_live_child(child: LiveChild | None) -> None:
    """Refuse a tombstone that would leave a live `child` of a tombstoned node (None: none)."""
    if child is not None:
        raise InvalidInput(
            f"graph node `{child.parent_node_id}` has the live child `{child.node_id}`;"
            " tombstone a node only with all of its descendants"
        )


class RecordedAttachment(Protocol):
    """Which session recorded an attachment, and its payload's URI, as read."""

    @property
    def session_id(self) -> str:
        """The session."""

    @property
    def canonical_uri(self) -> str:
        """Where its payload lives."""


def check_uri_free(intent: AttachmentIntent, taken: object) -> None:
    """Refuse an intent whose URI another session's attachment names (`taken`: a row read)."""
    if taken:
        raise InvalidInput(
            f"attachment `{intent.attachment_id}`: its canonical_uri is already used by"
            " another session's attachment"
        )


def check_intent_recorded(intent: AttachmentIntent, owner: RecordedAttachment | None) -> None:
    """Refuse an intent whose id is recorded for another session or payload than its own."""
    if owner is None or (owner.session_id, owner.canonical_uri) != (
        intent.session_id,
        intent.canonical_uri,
    ):
        raise InvalidInput(
            f"attachment `{intent.attachment_id}` is already recorded for another payload"
        )


def check_committable(
    attachment_id: str, session_id: str, owner: RecordedAttachment | None
) -> None:
    """Refuse to commit an attachment with no recorded intent in `session_id`."""
    if owner is None or owner.session_id != session_id:
        raise InvalidInput(
            f"attachment `{attachment_id}` has no recorded intent in session `{session_id}`"
        )
