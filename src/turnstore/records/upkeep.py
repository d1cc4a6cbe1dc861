"""Internal: records of the operators' calls: retention, statistics, health, backups, transfers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from turnstore.records.base import U64, Record

OnConflict = Literal["fail", "skip", "replace"]
"""What an import does with a tree whose sessions exist with other content."""

Progress = Callable[[int, int], None]
"""Called with (trees done, trees in all; 0 when not known) as a transfer goes."""


class PruneReport(Record, kw_only=True):
    """What `prune` removed (or, on a dry run, would remove): whole session trees, and the
    long-term memory items that had expired."""

    session_ids: list[str] = msgspec.field(default_factory=list)
    """Every session removed, roots and forks, sorted."""
    tree_count: U64 = 0
    dry_run: bool = False
    expired_memory_item_count: U64 = 0
    """Expired memory items deleted (every owner's; a prune of one owner's trees sweeps none)."""


class ErasureReport(Record, kw_only=True):
    """What `erase_owner` removed (or, on a dry run, would remove): every session tree
    holding a session the owner held, and every memory item the owner held."""

    owner_id: str
    session_ids: list[str] = msgspec.field(default_factory=list)
    """Every session removed, the owner's and the forks below them, sorted."""
    tree_count: U64 = 0
    memory_item_count: U64 = 0
    dry_run: bool = False


class StoreStats(Record, kw_only=True):
    """How much a store holds: sessions, turns, events, tokens and bytes."""

    session_count: U64 = 0
    fork_count: U64 = 0
    checkpoint_count: U64 = 0
    """Checkpoint sequences committed, summed over sessions."""
    turn_count: U64 = 0
    """Finished turns in the execution journals."""
    event_count: U64 = 0
    transcript_batch_count: U64 = 0
    total_tokens: U64 = 0
    input_tokens: U64 = 0
    output_tokens: U64 = 0
    blob_count: U64 = 0
    blob_bytes: U64 = 0
    attachment_count: U64 = 0
    langgraph_checkpoint_count: U64 = 0
    database_bytes: U64 = 0
    """Bytes the database takes on disk (SQLite: file and WAL; PostgreSQL: the tables)."""


class StoreGauges(Record, kw_only=True):
    """What a monitor samples every scrape (`Upkeep.gauges`): counts and sizes cheap to read."""

    backend: str = ""
    schema_version: U64 = 0
    owner_id: str | None = None
    """The owner the counts are of; None: every session. Sizes are always the whole store's."""
    session_count: U64 = 0
    """Every session (of the owner, when one is named), forks included."""
    queued_batch_count: U64 = 0
    """Queued-work batches not completed or cancelled yet, in every session counted."""
    leased_batch_count: U64 = 0
    """Of those, the batches a live lease holds."""
    expired_lease_batch_count: U64 = 0
    """Of those, the batches whose lease ran out and that no claim has taken again yet."""
    oldest_pending_age_ms: U64 | None = None
    """How long the oldest batch no live lease holds has waited; None when none waits."""
    uncommitted_attachment_count: U64 = 0
    """Attachment intents no commit has referenced yet (in flight, or orphans to sweep)."""
    database_bytes: U64 = 0
    """Bytes the database takes on disk (SQLite: file and WAL; PostgreSQL: the tables)."""
    wal_bytes: U64 | None = None
    """SQLite: the write-ahead log's size; None on PostgreSQL."""


class DoctorReport(Record, kw_only=True):
    """A store's health: schema, integrity, write-ahead log, orphans, indexes and bloat."""

    backend: str
    schema_version: U64
    supported_schema_version: U64
    integrity: list[str] = msgspec.field(default_factory=list)
    """What the integrity check found; empty when the database is sound."""
    wal_bytes: U64 | None = None
    """SQLite: the write-ahead log's size (a long-lived reader keeps it from shrinking)."""
    orphan_attachment_count: U64 = 0
    """Attachment intents that never committed or whose session is gone (`sweep` frees them)."""
    unreachable_blob_count: U64 = 0
    """Blobs no session head reaches (`gc` deletes them)."""
    missing_indexes: list[str] = msgspec.field(default_factory=list)
    bloated_tables: list[str] = msgspec.field(default_factory=list)
    """PostgreSQL: tables whose dead rows exceed a fifth of their live ones."""
    deep: bool = False
    """Whether every stored row was decoded as the reads decode it (`doctor(deep=True)`)."""
    undecodable_row_count: U64 = 0
    """Deep scan: rows a read would refuse with `CorruptRecord`."""
    undecodable_rows: list[str] = msgspec.field(default_factory=list)
    """Deep scan: the first 100 of them, each named by table and key, with the reason."""

    @property
    def problems(self) -> list[str]:
        """Every finding that needs an operator; empty when the store is healthy."""
        found = list(self.integrity)
        if self.schema_version != self.supported_schema_version:
            found.append(
                f"schema version {self.schema_version}, this build uses "
                f"{self.supported_schema_version} (run migrate)"
            )
        found += [f"missing index {name}" for name in self.missing_indexes]
        found += [f"bloated table {name} (run vacuum)" for name in self.bloated_tables]
        found += [f"undecodable {row}" for row in self.undecodable_rows]
        unlisted = self.undecodable_row_count - len(self.undecodable_rows)
        if unlisted > 0:
            found.append(f"{unlisted} more undecodable rows")
        return found


class VacuumDatabaseReport(Record, kw_only=True):
    """What `Upkeep.vacuum` did: tombstoned nodes removed and the database's size around it."""

    removed_node_count: U64 = 0
    bytes_before: U64 = 0
    bytes_after: U64 = 0


class BackupReport(Record, kw_only=True):
    """Where `backup` wrote a consistent copy of the database, and its size."""

    path: str
    bytes: U64


class MigrationStep(Record, kw_only=True):
    """One schema migration: the version it brings a database to, and what it adds."""

    version: U64
    summary: str


class MigrationReport(Record, kw_only=True):
    """What `migrate` did (or would do): the schema versions before and after, step by step."""

    from_version: U64
    to_version: U64
    steps: list[MigrationStep] = msgspec.field(default_factory=list)
    dry_run: bool = False


class TransferReport(Record, kw_only=True):
    """What an export, import or copy carried: sessions, the trees skipped, memory items,
    rows (memory's included)."""

    session_ids: list[str] = msgspec.field(default_factory=list)
    """Every session written (exported, imported or copied), in the order written."""
    skipped_session_ids: list[str] = msgspec.field(default_factory=list)
    """Sessions of trees left alone: already present and identical, or kept on conflict."""
    replaced_session_ids: list[str] = msgspec.field(default_factory=list)
    """Sessions an import with `on_conflict="replace"` deleted before writing the file's."""
    tree_count: U64 = 0
    row_count: U64 = 0
    memory_item_count: U64 = 0
    """Long-term memory items written (exported, imported or copied)."""
    skipped_memory_item_count: U64 = 0
    """Memory items left alone: already present and the same, or kept on conflict."""
