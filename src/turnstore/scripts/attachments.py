"""The attachment write-ahead manifest: intents before bytes land, commits, orphans."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from turnstore.engine.protocol import Statements, Tx, insert, select
from turnstore.records.runtime import AttachmentIntent, AttachmentManifestEntry
from turnstore.rules.runtime import check_committable, check_intent_recorded, check_uri_free
from turnstore.rules.validation import identifier, identifiers
from turnstore.scripts import sessions


class AttachmentOwner(NamedTuple):
    """Which session recorded an attachment, and where its payload lives."""

    session_id: str
    canonical_uri: str


class ManifestRow(NamedTuple):
    """One row of the attachment manifest."""

    attachment_id: str
    session_id: str
    canonical_uri: str
    intent_at_ms: int
    committed_at_ms: int | None


class IntentInsert(NamedTuple):
    """An attachment's intent as written, before its payload is."""

    attachment_id: str
    session_id: str
    canonical_uri: str
    intent_at_ms: int


class AttachmentSql(Statements):
    """Statements of the attachment manifest."""

    insert_intent = insert(
        IntentInsert, "attachment_manifest", " ON CONFLICT (attachment_id) DO NOTHING"
    )
    owner = select(AttachmentOwner, "FROM attachment_manifest WHERE attachment_id = ?")
    commit = (
        "UPDATE attachment_manifest SET committed_at_ms = {now_ms}"
        " WHERE attachment_id = ? AND session_id = ?"
    )
    uncommitted = select(
        ManifestRow,
        "FROM attachment_manifest WHERE session_id = ? AND committed_at_ms IS NULL"
        " AND intent_at_ms < ? ORDER BY intent_at_ms, attachment_id",
    )
    forget = (
        "DELETE FROM attachment_manifest WHERE attachment_id = ? AND session_id = ?"
        " AND committed_at_ms IS NULL RETURNING attachment_id"
    )
    every_uncommitted = select(
        ManifestRow,
        "FROM attachment_manifest WHERE committed_at_ms IS NULL AND intent_at_ms < ?"
        " ORDER BY intent_at_ms, attachment_id",
    )
    # Both lookups by URI are served by attachment_uri_idx (schema version 3).
    uri_of_another_session = (
        "SELECT 1 FROM attachment_manifest WHERE canonical_uri = ? AND session_id <> ? LIMIT 1"
    )
    uri_named = "SELECT 1 FROM attachment_manifest WHERE canonical_uri = ? LIMIT 1"


def record_intent(tx: Tx, intent: AttachmentIntent) -> None:
    """Record that an attachment's bytes are about to land (idempotent for the same id).

    A URI that another session's entry names is refused: one payload file belongs to one
    session, so sweeping a session's orphans can never reach another session's payload.
    """
    identifier(intent.attachment_id, "attachment ID")
    identifier(intent.canonical_uri, "attachment canonical URI")
    sql = tx.sql(AttachmentSql)
    sessions.ensure(tx, intent.session_id)
    if tx.dialect.uri_lock:
        tx.value(tx.dialect.uri_lock, (intent.canonical_uri,))
    check_uri_free(
        intent, tx.value(sql.uri_of_another_session, (intent.canonical_uri, intent.session_id))
    )
    row = IntentInsert(
        attachment_id=intent.attachment_id,
        session_id=intent.session_id,
        canonical_uri=intent.canonical_uri,
        intent_at_ms=intent.intent_at_epoch_ms,
    )
    tx.run(sql.insert_intent, row)
    check_intent_recorded(intent, tx.row(sql.owner, (intent.attachment_id,)))


def commit(tx: Tx, session_id: str, attachment_ids: Iterable[str]) -> None:
    """Stamp attachments committed; each must have a recorded intent in this session."""
    sql = tx.sql(AttachmentSql)
    attachment_ids = list(attachment_ids)
    identifiers(attachment_ids, "attachment ID")
    for attachment_id in attachment_ids:
        check_committable(attachment_id, session_id, tx.row(sql.owner, (attachment_id,)))
        tx.run(sql.commit, (attachment_id, session_id))


def _entry(row: ManifestRow) -> AttachmentManifestEntry:
    return AttachmentManifestEntry(
        attachment_id=row.attachment_id,
        session_id=row.session_id,
        canonical_uri=row.canonical_uri,
        intent_at_epoch_ms=row.intent_at_ms,
        committed_at_epoch_ms=row.committed_at_ms,
    )


def uncommitted(tx: Tx, session_id: str, older_than_ms: int) -> list[AttachmentManifestEntry]:
    """Intents older than `older_than_ms` that no commit referenced."""
    rows = tx.rows(tx.sql(AttachmentSql).uncommitted, (session_id, older_than_ms))
    return [_entry(row) for row in rows]


def every_uncommitted(tx: Tx, older_than_ms: int) -> list[AttachmentManifestEntry]:
    """Every session's uncommitted intents older than `older_than_ms`, deleted sessions' too."""
    return [
        _entry(row) for row in tx.rows(tx.sql(AttachmentSql).every_uncommitted, (older_than_ms,))
    ]


def uri_named(tx: Tx, canonical_uri: str) -> bool:
    """Whether any manifest entry, of any session, committed or not, names `canonical_uri`."""
    return tx.value(tx.sql(AttachmentSql).uri_named, (canonical_uri,)) is not None


def forget(tx: Tx, session_id: str, attachment_id: str) -> bool:
    """Delete an uncommitted attachment's row; False if absent or committed meanwhile."""
    identifier(attachment_id, "attachment ID")
    return bool(tx.values(tx.sql(AttachmentSql).forget, (attachment_id, session_id)))
