"""The runtime commit: turn idempotency, head CAS, graph, blobs, ledger, queue, attachments."""

from __future__ import annotations

from turnstore.engine.protocol import Tx
from turnstore.records.base import decode_stored, encode_json
from turnstore.records.runtime import (
    GraphAppend,
    GraphReplaceFull,
    RuntimeCommitResult,
    delta_leaf,
)
from turnstore.rules.runtime import (
    PreparedCommit,
    check_blobs_stored,
    check_live_leaf,
    check_live_parent,
    check_new_node,
    check_turn_commit,
    ensure_supported_schema_version,
    next_head_revision,
)
from turnstore.scripts import attachments, queue, sessions
from turnstore.scripts.runtime_reads import head
from turnstore.scripts.runtime_tables import (
    BlobInsert,
    HeadRow,
    HeadWrite,
    LedgerInsert,
    NodeInsert,
    RuntimeSql,
    TurnCommitInsert,
)


def commit(tx: Tx, prepared: PreparedCommit) -> RuntimeCommitResult:
    """Apply one runtime commit whole: CAS, graph, blobs, ledger, queue, attachments, head."""
    given = prepared.commit
    session_id = given.session_id
    if tx.dialect.blob_read_lock:
        tx.value(tx.dialect.blob_read_lock)
    sessions.ensure(tx, session_id)
    earlier = _earlier_turn(tx, prepared)
    if earlier is not None:
        return earlier
    current = head(tx, session_id)
    revision = next_head_revision(given, None if current is None else int(current.head_revision))
    first_user_message, user_messages = _apply_graph(tx, prepared, current)
    _store_blobs(tx, prepared)
    _append_ledger(tx, prepared)
    for completion in given.completed_queue_claims:
        queue.complete(tx, session_id, completion.claim_id, completion.batch_ids)
    attachments.commit(tx, session_id, given.committed_attachment_ids)
    sql = tx.sql(RuntimeSql)
    write = HeadWrite(
        session_id=session_id,
        schema_version=prepared.manifest.schema_version,
        head_revision=revision,
        config_json=given.config.to_json().decode(),
        agent_frames_json=encode_json(given.agent_frames).decode(),
        current_agent_frame_id=given.current_agent_frame_id,
        checkpoint_ref=prepared.manifest_blob.ref,
        leaf_node_id=delta_leaf(given.graph),
        first_user_message=first_user_message,
        user_message_count=user_messages,
    )
    tx.run(sql.upsert_head, write)
    tx.run(sql.touch_session, (first_user_message, session_id))
    result = RuntimeCommitResult(
        head_revision=revision,
        checkpoint_ref=prepared.manifest_blob.ref,
        manifest=prepared.manifest,
    )
    stamp = given.turn_commit
    if stamp is not None:
        hash_ = prepared.turn_commit_hash
        row = TurnCommitInsert(session_id, stamp.turn_id, hash_, result.to_json().decode())
        tx.run(sql.insert_turn_commit, row)
    return result


def _earlier_turn(tx: Tx, prepared: PreparedCommit) -> RuntimeCommitResult | None:
    """The result of an earlier commit of the same turn, if its content was the same."""
    stamp = prepared.commit.turn_commit
    if stamp is None:
        return None
    session_id = prepared.commit.session_id
    earlier = tx.row(tx.sql(RuntimeSql).turn_commit, (session_id, stamp.turn_id))
    if earlier is None:
        return None
    check_turn_commit(session_id, stamp.turn_id, earlier.commit_hash, prepared.turn_commit_hash)
    result = decode_stored(earlier.result_json, RuntimeCommitResult, "turn commit", session_id)
    version = result.manifest.schema_version
    ensure_supported_schema_version("session checkpoint", version, session_id)
    return result


def _apply_graph(
    tx: Tx, prepared: PreparedCommit, current: HeadRow | None
) -> tuple[str | None, int]:
    """Apply the graph delta; return the session's first user message and message count."""
    sql = tx.sql(RuntimeSql)
    graph = prepared.commit.graph
    session_id = prepared.commit.session_id
    first, count = (
        (None, 0)
        if current is None
        else (current.first_user_message, int(current.user_message_count))
    )
    if isinstance(graph, GraphReplaceFull):
        tx.run(sql.delete_nodes, (session_id,))
        first, count = None, 0
    for node_id, parent in prepared.stored_parents:
        check_live_parent(node_id, parent, tx.value(sql.live_node_exists, (session_id, parent)))
    if isinstance(graph, GraphAppend | GraphReplaceFull):
        position = int(tx.value(sql.last_node_position, (session_id,)) or 0)
        for node in prepared.node_rows:
            check_new_node(node.node_id, tx.value(sql.node_exists, (session_id, node.node_id)))
            position += 1
            row = NodeInsert(
                session_id, node.node_id, node.parent_node_id, position, node.record_json
            )
            tx.run(sql.insert_node, row)
        if prepared.user_messages:
            first = first if first is not None else prepared.user_messages[0]
            count += len(prepared.user_messages)
    leaf = delta_leaf(graph)
    if leaf is not None:
        check_live_leaf(leaf, tx.value(sql.live_node, (session_id, leaf)))
    return first, count


def _store_blobs(tx: Tx, prepared: PreparedCommit) -> None:
    """Store the commit's blobs; every other blob its manifest names must be stored already."""
    sql = tx.sql(RuntimeSql)
    provided = {blob.ref for blob in prepared.blobs}
    for blob in (*prepared.blobs, prepared.manifest_blob):
        tx.run(sql.insert_blob, BlobInsert(blob.ref, blob.data))
    referenced = sorted(set(prepared.manifest.blob_refs()) - provided)
    if referenced:
        present = set(tx.values(sql.present_blobs, (tx.dialect.id_list(referenced),)))
        check_blobs_stored(referenced, present)


def _append_ledger(tx: Tx, prepared: PreparedCommit) -> None:
    entries = prepared.commit.usage_deltas
    if not entries:
        return
    sql = tx.sql(RuntimeSql)
    session_id = prepared.commit.session_id
    position = int(tx.value(sql.last_ledger_position, (session_id,)) or 0)
    for entry in entries:
        position += 1
        tx.run(sql.insert_ledger, LedgerInsert(session_id, position, entry.to_json().decode()))
