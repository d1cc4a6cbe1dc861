"""Upkeep of the runtime face: session metadata, tombstones and vacuum, blob collection."""

from __future__ import annotations

from turnstore.engine.protocol import Tx
from turnstore.records.base import decode_stored
from turnstore.records.runtime import (
    RUNTIME_RECORD_SCHEMA_VERSION,
    GcReport,
    SessionCheckpoint,
    SessionMeta,
    VacuumReport,
    relation_parent,
)
from turnstore.rules.runtime import (
    check_no_live_child,
    check_tombstone_leaf,
    ensure_supported_schema_version,
)
from turnstore.rules.validation import identifiers, optional_identifier
from turnstore.scripts import sessions
from turnstore.scripts.runtime_reads import head
from turnstore.scripts.runtime_tables import MetaWrite, RuntimeSql


def save_meta(tx: Tx, meta: SessionMeta) -> None:
    """Replace the session's metadata."""
    optional_identifier(relation_parent(meta.relation), "parent session ID")
    sessions.ensure(tx, meta.session_id)
    tx.run(tx.sql(RuntimeSql).upsert_meta, MetaWrite(meta.session_id, meta.to_json().decode()))


def tombstone(tx: Tx, session_id: str, node_ids: list[str]) -> None:
    """Mark nodes dead: loads skip them, and `vacuum` removes them.

    Refused when that would leave the head's leaf dead or a live node without its parent.
    """
    wanted = sorted(set(node_ids))
    identifiers(wanted, "graph node ID")
    if not sessions.lock(tx, session_id):
        return
    sql = tx.sql(RuntimeSql)
    found = head(tx, session_id)
    check_tombstone_leaf(None if found is None else found.leaf_node_id, wanted)
    ids = tx.dialect.id_list(wanted)
    check_no_live_child(tx.row(sql.live_child_outside, (session_id, ids, ids)))
    tx.run(sql.tombstone, (True, session_id, ids))


def vacuum(tx: Tx, session_id: str) -> VacuumReport:
    """Physically remove the session's tombstoned nodes."""
    sessions.lock(tx, session_id)
    removed = tx.values(tx.sql(RuntimeSql).vacuum, (session_id,))
    return VacuumReport(removed_node_count=len(removed))


def gc_unreachable(tx: Tx) -> GcReport:
    """Delete every blob that no session head's manifest reaches."""
    sql = tx.sql(RuntimeSql)
    if tx.dialect.blob_write_lock:
        tx.value(tx.dialect.blob_write_lock)
    roots, retained, doomed = _reach(tx)
    if doomed:
        tx.run(sql.delete_blobs, (tx.dialect.id_list(doomed),))
    return GcReport(
        root_count=len(roots),
        retained_blob_count=retained,
        deleted_blob_count=len(doomed),
    )


def unreachable_blobs(tx: Tx) -> list[str]:
    """The blobs `gc_unreachable` would delete now."""
    return _reach(tx)[2]


def _reach(tx: Tx) -> tuple[list[str], int, list[str]]:
    """The heads' roots, how many stored blobs they reach, and the stored blobs they do not."""
    sql = tx.sql(RuntimeSql)
    # A head or manifest of another schema version may reach blobs this build cannot see:
    # collecting around it could delete them, so nothing is collected.
    other = tx.row(sql.other_version_head, (RUNTIME_RECORD_SCHEMA_VERSION,))
    if other is not None:
        ensure_supported_schema_version("session head", other.schema_version, other.session_id)
    roots = tx.values(sql.head_refs)
    retained = set(roots)
    for root in roots:
        data = tx.value(sql.blob, (root,))
        if data is not None:
            manifest = decode_stored(bytes(data), SessionCheckpoint, "checkpoint manifest")
            ensure_supported_schema_version("session checkpoint", manifest.schema_version)
            retained.update(manifest.blob_refs())
    stored = set(tx.values(sql.all_blob_refs))
    return roots, len(stored & retained), sorted(stored - retained)
