"""The runtime face's tables (heads, graph nodes, ledger, blobs, turn commits, meta) as data.

A runtime session is a row of `sessions` (so it is in the catalog and `delete_sessions`
removes it) plus rows of these tables. Every runtime write locks the session row first, so
writes to one session are serialised on every backend and writes to different sessions run
in parallel.
"""

from __future__ import annotations

from typing import NamedTuple

from turnstore.engine.protocol import Statements, Tx, insert, select
from turnstore.rules.stored import stored_blob


class HeadRow(NamedTuple):
    """A session's runtime head, still JSON-encoded where it holds records."""

    head_revision: int
    schema_version: int
    leaf_node_id: str | None
    first_user_message: str | None
    user_message_count: int
    config_json: str
    agent_frames_json: str
    current_agent_frame_id: str
    checkpoint_ref: str


class HeadWrite(NamedTuple):
    """The columns a commit writes to its session's head."""

    session_id: str
    schema_version: int
    head_revision: int
    config_json: str
    agent_frames_json: str
    current_agent_frame_id: str
    checkpoint_ref: str
    leaf_node_id: str | None
    first_user_message: str | None
    user_message_count: int


class HeadVersion(NamedTuple):
    """A head's session and the `schema_version` it was stored at."""

    session_id: str
    schema_version: int


class NodeLink(NamedTuple):
    """A graph node and its parent."""

    node_id: str
    parent_node_id: str


class TurnCommitRow(NamedTuple):
    """A committed turn: the hash of its content and the result it returned."""

    commit_hash: str
    result_json: str


class TurnCommitInsert(NamedTuple):
    """A turn's commit as written: what a retry of the same turn is compared with."""

    session_id: str
    turn_id: str
    commit_hash: str | None
    result_json: str


class NodeInsert(NamedTuple):
    """A graph node as written."""

    session_id: str
    node_id: str
    parent_node_id: str | None
    position: int
    record_json: str


class BlobInsert(NamedTuple):
    """A blob as written, once per ref."""

    blob_ref: str
    data: bytes


class LedgerInsert(NamedTuple):
    """A token ledger entry as written."""

    session_id: str
    position: int
    entry_json: str


class MetaWrite(NamedTuple):
    """A session's meta as written."""

    session_id: str
    meta_json: str


class RuntimeSql(Statements):
    """Statements of the runtime tables."""

    now_ms = "SELECT {now_ms}"
    head = select(HeadRow, "FROM runtime_heads WHERE session_id = ?")
    upsert_head = insert(
        HeadWrite, "runtime_heads", " ON CONFLICT (session_id) DO UPDATE SET "
    ) + ", ".join(f"{name} = excluded.{name}" for name in HeadWrite._fields[1:])
    touch_session = (
        "UPDATE sessions SET updated_at = {now},"
        " first_user_message = COALESCE(first_user_message, ?) WHERE session_id = ?"
    )
    turn_commit = select(TurnCommitRow, "FROM turn_commits WHERE session_id = ? AND turn_id = ?")
    insert_turn_commit = insert(TurnCommitInsert, "turn_commits")
    delete_nodes = "DELETE FROM graph_nodes WHERE session_id = ?"
    last_node_position = "SELECT COALESCE(MAX(position), 0) FROM graph_nodes WHERE session_id = ?"
    node_exists = "SELECT 1 FROM graph_nodes WHERE session_id = ? AND node_id = ?"
    insert_node = insert(NodeInsert, "graph_nodes")
    live_node = (
        "SELECT record_json FROM graph_nodes"
        " WHERE session_id = ? AND node_id = ? AND NOT tombstoned"
    )
    live_node_exists = (
        "SELECT 1 FROM graph_nodes WHERE session_id = ? AND node_id = ? AND NOT tombstoned"
    )
    live_nodes = (
        "SELECT record_json FROM graph_nodes WHERE session_id = ? AND NOT tombstoned"
        " ORDER BY position"
    )
    path_nodes = (
        "WITH RECURSIVE path(node_id, parent_node_id, position, record_json) AS ("
        " SELECT node_id, parent_node_id, position, record_json FROM graph_nodes"
        " WHERE session_id = ? AND node_id = ? AND NOT tombstoned"
        " UNION SELECT g.node_id, g.parent_node_id, g.position, g.record_json"
        " FROM graph_nodes AS g JOIN path ON g.node_id = path.parent_node_id"
        " WHERE g.session_id = ? AND NOT g.tombstoned"
        ") SELECT record_json FROM path ORDER BY position"
    )
    tombstone = "UPDATE graph_nodes SET tombstoned = ? WHERE session_id = ? AND {ids:node_id}"
    # A live node outside a set of nodes to tombstone whose parent is in it: tombstoning the
    # set would cut that node off from its root.
    live_child_outside = select(
        NodeLink,
        "FROM graph_nodes WHERE session_id = ? AND NOT tombstoned AND {ids:parent_node_id}"
        " AND NOT ({ids:node_id}) ORDER BY position LIMIT 1",
    )
    vacuum = "DELETE FROM graph_nodes WHERE session_id = ? AND tombstoned RETURNING node_id"
    insert_blob = insert(BlobInsert, "blobs", " ON CONFLICT (blob_ref) DO NOTHING")
    blob = "SELECT data FROM blobs WHERE blob_ref = ?"
    present_blobs = "SELECT blob_ref FROM blobs WHERE {ids:blob_ref}"
    all_blob_refs = "SELECT blob_ref FROM blobs"
    head_refs = "SELECT DISTINCT checkpoint_ref FROM runtime_heads"
    other_version_head = select(
        HeadVersion, "FROM runtime_heads WHERE schema_version <> ? ORDER BY session_id LIMIT 1"
    )
    delete_blobs = "DELETE FROM blobs WHERE {ids:blob_ref}"
    last_ledger_position = (
        "SELECT COALESCE(MAX(position), 0) FROM token_ledger WHERE session_id = ?"
    )
    insert_ledger = insert(LedgerInsert, "token_ledger")
    ledger = "SELECT entry_json FROM token_ledger WHERE session_id = ? ORDER BY position"
    upsert_meta = insert(
        MetaWrite,
        "session_meta",
        " ON CONFLICT (session_id) DO UPDATE SET meta_json = excluded.meta_json",
    )
    meta = "SELECT meta_json FROM session_meta WHERE session_id = ?"


def now_ms(tx: Tx) -> int:
    """The database's clock in Unix milliseconds: one clock for every host's leases."""
    return int(tx.value(tx.sql(RuntimeSql).now_ms))


def blob_bytes(tx: Tx, ref: str | None, session_id: str | None = None) -> bytes | None:
    """The bytes of a stored blob, None for no ref; a ref with no blob is corrupt."""
    if ref is None:
        return None
    return stored_blob(tx.value(tx.sql(RuntimeSql).blob, (ref,)), ref, session_id)
