"""Upkeep of the runtime face: session metadata, tombstones and vacuum, blob collection."""

from __future__ import annotations

from turnstore.backends.sql import sessions
from turnstore.backends.sql.engine import Tx
from turnstore.backends.sql.runtime_tables import RuntimeSql
from turnstore.records.base import decode_stored
from turnstore.records.runtime import GcReport, SessionCheckpoint, SessionMeta, VacuumReport


def save_meta(tx: Tx, meta: SessionMeta) -> None:
    """Replace the session's metadata."""
    sessions.ensure(tx, meta.session_id)
    tx.run(tx.sql(RuntimeSql).upsert_meta, (meta.session_id, meta.to_json().decode()))


def tombstone(tx: Tx, session_id: str, node_ids: list[str]) -> None:
    """Mark nodes dead: loads skip them, and `vacuum` removes them."""
    sessions.lock(tx, session_id)
    ids = tx.dialect.id_list(sorted(set(node_ids)))
    tx.run(tx.sql(RuntimeSql).tombstone, (True, session_id, ids))


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
    roots = tx.values(sql.head_refs)
    retained = set(roots)
    for root in roots:
        data = tx.value(sql.blob, (root,))
        if data is not None:
            manifest = decode_stored(bytes(data), SessionCheckpoint, "checkpoint manifest")
            retained.update(manifest.blob_refs())
    stored = set(tx.values(sql.all_blob_refs))
    doomed = sorted(stored - retained)
    if doomed:
        tx.run(sql.delete_blobs, (tx.dialect.id_list(doomed),))
    return GcReport(
        root_count=len(roots),
        retained_blob_count=len(stored & retained),
        deleted_blob_count=len(doomed),
    )
