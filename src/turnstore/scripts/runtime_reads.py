"""Reads of the runtime face: a session's head, graph, hydrated checkpoint, ledger, meta."""

from __future__ import annotations

from typing import Any

from turnstore.engine.protocol import Tx
from turnstore.records.base import decode_stored
from turnstore.records.runtime import (
    ActivePath,
    AgentFrameRecord,
    HydratedSessionCheckpoint,
    PersistedSessionConfig,
    PersistedSessionRead,
    RootRelation,
    SessionCheckpoint,
    SessionGraph,
    SessionMeta,
    SessionNodeRecord,
    SessionPickerInfo,
    SessionReadScope,
    TokenLedgerEntry,
)
from turnstore.rules.runtime import ensure_supported_schema_version
from turnstore.rules.validation import identifier, optional_identifier
from turnstore.scripts.runtime_tables import HeadRow, RuntimeSql, blob_bytes


def head(tx: Tx, session_id: str) -> HeadRow | None:
    """A session's runtime head, or None before its first commit.

    A head stored at a `schema_version` this build does not read raises
    `UnsupportedRecordSchemaVersion` here, before any caller uses (or rewrites) it.
    """
    found = tx.row(tx.sql(RuntimeSql).head, (session_id,))
    if found is not None:
        ensure_supported_schema_version("session head", int(found.schema_version), session_id)
    return found


def load_session(tx: Tx, session_id: str, scope: SessionReadScope) -> PersistedSessionRead | None:
    """Read the head, the graph (or one path of it), the hydrated checkpoint and the ledger."""
    sql = tx.sql(RuntimeSql)
    asked = None
    if isinstance(scope, ActivePath):
        asked = optional_identifier(scope.leaf_node_id, "active path leaf ID")
    found = head(tx, session_id)
    if found is None:
        return None
    leaf = found.leaf_node_id
    if isinstance(scope, ActivePath):
        start = asked if asked is not None else leaf
        nodes = [] if start is None else tx.values(sql.path_nodes, (session_id, start, session_id))
    else:
        nodes = tx.values(sql.live_nodes, (session_id,))
    return PersistedSessionRead(
        session_id=session_id,
        head_revision=found.head_revision,
        config=decode_stored(found.config_json, PersistedSessionConfig, "config", session_id),
        agent_frames=decode_stored(
            found.agent_frames_json, list[AgentFrameRecord], "agent frames", session_id
        ),
        current_agent_frame_id=found.current_agent_frame_id,
        graph=SessionGraph(
            nodes=[
                decode_stored(node, SessionNodeRecord, "graph node", session_id) for node in nodes
            ],
            leaf_node_id=leaf,
        ),
        checkpoint_ref=found.checkpoint_ref,
        checkpoint=_hydrate(tx, found.checkpoint_ref, session_id),
        token_ledger=[
            decode_stored(entry, TokenLedgerEntry, "token ledger entry", session_id)
            for entry in tx.values(sql.ledger, (session_id,))
        ],
    )


def _hydrate(tx: Tx, ref: str, session_id: str) -> HydratedSessionCheckpoint | None:
    data = blob_bytes(tx, ref, session_id)
    if data is None:
        return None
    manifest = decode_stored(data, SessionCheckpoint, "checkpoint manifest", session_id)
    ensure_supported_schema_version("session checkpoint", manifest.schema_version, session_id)
    tool_state = blob_bytes(tx, manifest.tool_state_ref, session_id)
    plugin = blob_bytes(tx, manifest.plugin_snapshot_ref, session_id)
    return HydratedSessionCheckpoint(
        turn_state=manifest.turn_state,
        tool_state_ref=manifest.tool_state_ref,
        tool_state=None if tool_state is None else _any(tool_state, "tool state", session_id),
        plugin_snapshot_ref=manifest.plugin_snapshot_ref,
        plugin_snapshot=None if plugin is None else _any(plugin, "plugin snapshot", session_id),
        plugin_snapshot_revision=manifest.plugin_snapshot_revision,
        execution_state_ref=manifest.execution_state_ref,
        execution_state=blob_bytes(tx, manifest.execution_state_ref, session_id),
    )


def _any(data: bytes, what: str, session_id: str) -> Any:
    return decode_stored(data, Any, what, session_id)


def load_node(tx: Tx, session_id: str, node_id: str) -> SessionNodeRecord | None:
    """One live node of a session's graph."""
    node_id = identifier(node_id, "graph node ID")
    record = tx.value(tx.sql(RuntimeSql).live_node, (session_id, node_id))
    return (
        None
        if record is None
        else decode_stored(record, SessionNodeRecord, "graph node", session_id)
    )


def load_meta(tx: Tx, session_id: str) -> SessionMeta | None:
    """A session's metadata."""
    meta = tx.value(tx.sql(RuntimeSql).meta, (session_id,))
    return None if meta is None else decode_stored(meta, SessionMeta, "session meta", session_id)


def picker_info(tx: Tx, session_id: str) -> SessionPickerInfo | None:
    """What a resume picker shows, from the head's message counters and the metadata."""
    found = head(tx, session_id)
    meta = load_meta(tx, session_id)
    if found is None and meta is None:
        return None
    return SessionPickerInfo(
        session_id=session_id,
        cwd=None if meta is None else meta.cwd,
        relation=RootRelation() if meta is None else meta.relation,
        first_user_message=(found.first_user_message if found else None) or "",
        user_message_count=int(found.user_message_count) if found else 0,
    )
