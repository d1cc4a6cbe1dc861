"""Internal: records of the runtime face: session graph, commits, queued work, attachments, blobs.

Each is kept small and typed, as an agent runtime author needs it. Tagged unions use a
`"type"` field with snake_case tags.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

from turnstore.records.base import I64, U32, U64, Record
from turnstore.records.protocol import TokenUsage

RUNTIME_RECORD_SCHEMA_VERSION = 1
"""The `schema_version` of stored runtime records (heads, manifests) this build reads."""

BlobRef = str
"""A content address of a stored blob: `sha256:<hex digest of its bytes>`."""
AttachmentId = str
"""The id of an attachment payload held by an attachment store."""
DurabilityTier = Literal["inline", "deferred", "volatile"]
"""How durable a commit is when it returns: `inline` means on disk before the call returns."""


def blob_ref(data: bytes) -> BlobRef:
    """Return the content address of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ModelSpec(Record, kw_only=True):
    """The model a session runs on."""

    name: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class PersistedSessionConfig(Record, kw_only=True):
    """The session's provider and model, as recorded at commit time."""

    provider_id: str = ""
    model: ModelSpec = msgspec.field(default_factory=ModelSpec)


class AgentFrameRecord(Record, kw_only=True):
    """One agent in the session's agent stack (the main agent or a delegated sub-agent)."""

    frame_id: str
    agent_name: str
    parent_frame_id: str | None = None
    state: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionNodeRecord(Record, kw_only=True):
    """One node of the session graph: a message or other entry, linked to its parent.

    A message payload looks like `{"role": "user", "parts": [{"kind": "text",
    "content": "...", "prune_state": "kept"}]}`; the picker reads user messages from it.
    """

    node_id: str
    parent_node_id: str | None = None
    kind: str = "message"
    payload: Any = None
    timestamp: I64 | None = None


class SessionGraph(Record, kw_only=True):
    """The session's tree of nodes and the leaf that ends the active path."""

    nodes: list[SessionNodeRecord] = msgspec.field(default_factory=list)
    leaf_node_id: str | None = None


class GraphUnchanged(Record, tag_field="type", tag="unchanged", kw_only=True):
    """Keep the stored nodes; only move the leaf."""

    leaf_node_id: str | None = None


class GraphAppend(Record, tag_field="type", tag="append", kw_only=True):
    """Add new nodes and move the leaf."""

    nodes: list[SessionNodeRecord] = msgspec.field(default_factory=list)
    leaf_node_id: str | None = None


class GraphReplaceFull(Record, tag_field="type", tag="replace_full", kw_only=True):
    """Replace the whole graph."""

    graph: SessionGraph


GraphCommitDelta = GraphUnchanged | GraphAppend | GraphReplaceFull
"""How a commit changes the session graph."""


def delta_leaf(delta: GraphCommitDelta) -> str | None:
    """Return the leaf a graph delta leaves the session at."""
    if isinstance(delta, GraphReplaceFull):
        return delta.graph.leaf_node_id
    return delta.leaf_node_id


class PersistedTurnState(Record, kw_only=True):
    """Per-turn counters the runtime resumes from."""

    turn_index: U64 = 0
    token_usage: TokenUsage = msgspec.field(default_factory=TokenUsage)
    last_prompt_usage: TokenUsage | None = None
    protocol_turn_options: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionCheckpoint(Record, kw_only=True, omit_defaults=True):
    """The checkpoint manifest: turn state plus refs of the blobs holding the large parts."""

    schema_version: U32 = RUNTIME_RECORD_SCHEMA_VERSION
    turn_state: PersistedTurnState = msgspec.field(default_factory=PersistedTurnState)
    tool_state_ref: BlobRef | None = None
    plugin_snapshot_ref: BlobRef | None = None
    plugin_snapshot_revision: U64 | None = None
    execution_state_ref: BlobRef | None = None

    def blob_refs(self) -> list[BlobRef]:
        """Return the refs this manifest keeps alive."""
        refs = (self.tool_state_ref, self.plugin_snapshot_ref, self.execution_state_ref)
        return [ref for ref in refs if ref is not None]


class HydratedSessionCheckpoint(Record, kw_only=True):
    """A checkpoint with its blobs loaded: tool state, plugin snapshot, execution state."""

    turn_state: PersistedTurnState = msgspec.field(default_factory=PersistedTurnState)
    tool_state_ref: BlobRef | None = None
    tool_state: Any = None
    plugin_snapshot_ref: BlobRef | None = None
    plugin_snapshot: Any = None
    plugin_snapshot_revision: U64 | None = None
    execution_state_ref: BlobRef | None = None
    execution_state: bytes | None = None


class TokenLedgerEntry(Record, kw_only=True):
    """Usage of one model call or turn, appended to the session's ledger."""

    turn_id: str | None = None
    model: str | None = None
    usage: TokenUsage = msgspec.field(default_factory=TokenUsage)
    recorded_at_ms: I64 = 0


class RuntimeTurnCommitStamp(Record, kw_only=True):
    """Marks a commit as the final commit of one turn, with the turn's content hash."""

    session_id: str
    turn_id: str
    turn_commit_hash: str


class QueuedWorkCompletion(Record, kw_only=True):
    """Queued-work batches a commit completes, under the claim that holds them."""

    claim_id: str
    batch_ids: list[str]


class RuntimeCommit(Record, kw_only=True):
    """One atomic runtime commit: head CAS, graph delta, checkpoint, usage, queue, attachments."""

    session_id: str
    expected_head_revision: U64 | None = None
    config: PersistedSessionConfig = msgspec.field(default_factory=PersistedSessionConfig)
    agent_frames: list[AgentFrameRecord] = msgspec.field(default_factory=list)
    current_agent_frame_id: str = ""
    graph: GraphCommitDelta = msgspec.field(default_factory=GraphUnchanged)
    checkpoint: HydratedSessionCheckpoint = msgspec.field(default_factory=HydratedSessionCheckpoint)
    usage_deltas: list[TokenLedgerEntry] = msgspec.field(default_factory=list)
    turn_commit: RuntimeTurnCommitStamp | None = None
    completed_queue_claims: list[QueuedWorkCompletion] = msgspec.field(default_factory=list)
    committed_attachment_ids: list[AttachmentId] = msgspec.field(default_factory=list)

    def turn_commit_hash(self) -> str:
        """Return the SHA-256 of this commit's meaning, stable across retries of one turn."""
        return turn_commit_hash(self)

    def with_turn_commit(self, turn_id: str) -> RuntimeCommit:
        """Return this commit stamped as the final commit of `turn_id`."""
        stamp = RuntimeTurnCommitStamp(
            session_id=self.session_id, turn_id=turn_id, turn_commit_hash=self.turn_commit_hash()
        )
        return msgspec.structs.replace(self, turn_commit=stamp)

    def completing_queue_claims(self, *completions: QueuedWorkCompletion) -> RuntimeCommit:
        """Return this commit also completing the given queued-work claims."""
        claims = [*self.completed_queue_claims, *completions]
        return self._restamped(msgspec.structs.replace(self, completed_queue_claims=claims))

    def with_committed_attachments(self, attachment_ids: list[AttachmentId]) -> RuntimeCommit:
        """Return this commit also committing the given attachments."""
        changed = msgspec.structs.replace(self, committed_attachment_ids=list(attachment_ids))
        return self._restamped(changed)

    @staticmethod
    def _restamped(commit: RuntimeCommit) -> RuntimeCommit:
        # The stamp's hash covers the whole commit, so a builder that changes the content of a
        # stamped commit stamps it again.
        stamp = commit.turn_commit
        return commit if stamp is None else commit.with_turn_commit(stamp.turn_id)


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


class RuntimeCommitResult(Record, kw_only=True):
    """What a commit produced: the new head revision and the checkpoint manifest."""

    head_revision: U64
    checkpoint_ref: BlobRef
    manifest: SessionCheckpoint


class FullGraph(Record, tag_field="type", tag="full_graph", kw_only=True):
    """Read every live node of the session graph."""


class ActivePath(Record, tag_field="type", tag="active_path", kw_only=True):
    """Read only the nodes from a leaf (default: the head's leaf) up to the root."""

    leaf_node_id: str | None = None


SessionReadScope = FullGraph | ActivePath
"""How much of the graph `load_session` reads."""


class PersistedSessionRead(Record, kw_only=True):
    """A session as loaded: head, graph (or its active path), hydrated checkpoint, ledger."""

    session_id: str
    head_revision: U64
    config: PersistedSessionConfig
    agent_frames: list[AgentFrameRecord]
    current_agent_frame_id: str
    graph: SessionGraph
    checkpoint_ref: BlobRef | None
    checkpoint: HydratedSessionCheckpoint | None
    token_ledger: list[TokenLedgerEntry]


class RootRelation(Record, tag_field="type", tag="root", kw_only=True):
    """A session started on its own."""


class ForkRelation(Record, tag_field="type", tag="fork", kw_only=True):
    """A session branched from another."""

    parent_session_id: str


class SubagentRelation(Record, tag_field="type", tag="subagent", kw_only=True):
    """A session run by an agent delegated from another session."""

    parent_session_id: str


SessionRelation = RootRelation | ForkRelation | SubagentRelation
"""How a session relates to the session it came from."""


def relation_parent(relation: SessionRelation) -> str | None:
    """Return the parent session id of a relation, if any."""
    return None if isinstance(relation, RootRelation) else relation.parent_session_id


class SessionMeta(Record, kw_only=True):
    """Descriptive metadata of a session: name, creation time, model, working folder."""

    session_id: str
    session_name: str = ""
    created_at: str = ""
    model: str = ""
    cwd: str | None = None
    relation: SessionRelation = msgspec.field(default_factory=RootRelation)

    def parent_session_id(self) -> str | None:
        """Return the parent session id, derived from `relation`."""
        return relation_parent(self.relation)


class SessionPickerInfo(Record, kw_only=True):
    """What a resume picker shows of a session."""

    session_id: str
    cwd: str | None
    relation: SessionRelation
    first_user_message: str
    user_message_count: U64

    def parent_session_id(self) -> str | None:
        """Return the parent session id, derived from `relation`."""
        return relation_parent(self.relation)


class GcReport(Record, kw_only=True):
    """What `gc_unreachable` found: heads used as roots, blobs kept and blobs deleted."""

    root_count: U64 = 0
    retained_blob_count: U64 = 0
    deleted_blob_count: U64 = 0


class VacuumReport(Record, kw_only=True):
    """What `vacuum` did: tombstoned node rows physically removed."""

    removed_node_count: U64 = 0


class AttachmentIntent(Record, kw_only=True):
    """An attachment write about to happen, recorded before its bytes land."""

    attachment_id: AttachmentId
    session_id: str
    canonical_uri: str
    intent_at_epoch_ms: U64


class AttachmentManifestEntry(Record, kw_only=True):
    """One row of the attachment write-ahead manifest."""

    attachment_id: AttachmentId
    session_id: str
    canonical_uri: str
    intent_at_epoch_ms: U64
    committed_at_epoch_ms: U64 | None = None


QueuedWorkClaimBoundary = Literal["turn", "steer"]
"""Where a worker takes input: at a turn boundary (idle) or into the running turn (steer)."""


class QueuedWorkBatchDraft(Record, kw_only=True):
    """Input to enqueue on a session's runtime handle: items delivered together at one boundary."""

    batch_id: str | None = None
    boundary: QueuedWorkClaimBoundary = "turn"
    items: list[Any] = msgspec.field(default_factory=list)


class QueuedWorkBatch(Record, kw_only=True):
    """A durable batch of queued input, with its claim if one holds it."""

    session_id: str
    batch_id: str
    position: U64
    boundary: QueuedWorkClaimBoundary
    items: list[Any]
    enqueued_at_ms: I64
    claim_id: str | None = None
    claim_owner_id: str | None = None
    lease_expires_at_ms: I64 | None = None


class QueuedWorkClaim(Record, kw_only=True):
    """A lease on the next ready group of batches; it expires unless renewed."""

    session_id: str
    claim_id: str
    owner_id: str
    boundary: QueuedWorkClaimBoundary
    batches: list[QueuedWorkBatch]
    lease_expires_at_ms: I64

    def completion(self) -> QueuedWorkCompletion:
        """Return the completion that a commit carries to finish this claim."""
        return QueuedWorkCompletion(
            claim_id=self.claim_id, batch_ids=[batch.batch_id for batch in self.batches]
        )
