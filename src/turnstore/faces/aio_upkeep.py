"""The operators' async face, `Upkeep`: prune, stats, doctor, VACUUM, backup, transfer.

Reached as `Store.upkeep`; it shares the store's driver, so it closes with the store.
Written by hand; `tools/async_to_sync.py` generates `turnstore.faces.blocking_upkeep`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO

from turnstore.drivers.steps import AsyncDriver
from turnstore.ops import runtime as runtime_ops
from turnstore.ops import upkeep as upkeep_ops
from turnstore.ops.upkeep import MAX_LINE_BYTES
from turnstore.records.runtime import AttachmentManifestEntry, GcReport
from turnstore.records.search import ReindexProgress
from turnstore.records.upkeep import (
    BackupReport,
    DoctorReport,
    ErasureReport,
    OnConflict,
    Progress,
    PruneReport,
    StoreGauges,
    StoreStats,
    TransferReport,
    VacuumDatabaseReport,
)


class Upkeep:
    """The operators' async face of a store: whole-store reports, sweeps and transfers."""

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver

    async def tree(self, session_id: str) -> list[str]:
        """The session and every fork below it (what deleting it removes), sorted; [] if absent."""
        return await self._driver.run(upkeep_ops.tree(session_id), session_id)

    async def prune(
        self,
        updated_before: int,
        *,
        owner_id: str | None = None,
        dry_run: bool = False,
        batch_size: int = 100,
    ) -> PruneReport:
        """Delete every tree whose sessions were all last updated before a Unix time, then
        every expired memory item.

        Trees go `batch_size` to a transaction, so writers wait at most one batch; with
        `owner_id`, only trees whose root that owner holds (and no memory item); `dry_run`
        only reports.
        """
        return await self._driver.run(
            upkeep_ops.prune(updated_before, owner_id, dry_run, batch_size)
        )

    async def erase_owner(self, owner_id: str, *, dry_run: bool = False) -> ErasureReport:
        """Delete everything the owner holds: every tree holding a session of theirs (one
        commit a tree) and every memory item of theirs, their words out of the search
        indexes in the same commits; `dry_run` only reports."""
        return await self._driver.run(upkeep_ops.erase_owner(owner_id, dry_run))

    async def reindex(
        self,
        *,
        restart: bool = False,
        batch_sessions: int = 100,
        progress: Progress | None = None,
    ) -> ReindexProgress:
        """Build the search index of sessions written before it (a store from before schema 7).

        `batch_sessions` sessions a commit; an interrupted build goes on where it stopped,
        and `restart` builds the whole index anew. `progress(done, total)` after each batch.
        """
        return await self._driver.run(upkeep_ops.reindex(restart, batch_sessions, progress))

    async def stats(self) -> StoreStats:
        """Counts of sessions, turns, events, tokens and blobs, and the database's size."""
        return await self._driver.run(upkeep_ops.stats())

    async def gauges(self, owner_id: str | None = None) -> StoreGauges:
        """Counts and sizes cheap enough to read on every scrape: sessions, queued work and its
        leases, the oldest waiting batch's age (of one owner's sessions when `owner_id` is
        given), the database's and its WAL's bytes (always the whole store's)."""
        return await self._driver.run(upkeep_ops.gauges(owner_id))

    async def doctor(self, *, deep: bool = False) -> DoctorReport:
        """Check the store's health: schema, integrity, WAL, orphans, blobs, indexes, bloat.

        `deep=True` also decodes every stored row as the reads do (a read of the whole
        store, one tree per transaction) and names the rows a read would refuse.
        """
        return await self._driver.run(upkeep_ops.doctor(deep))

    async def vacuum(self) -> VacuumDatabaseReport:
        """Remove every session's tombstoned nodes, then VACUUM the database."""
        return await self._driver.run(upkeep_ops.vacuum_database())

    async def backup(self, destination: str | os.PathLike[str]) -> BackupReport:
        """Copy a SQLite database, consistently while writers run, to a new `0600` file.

        On PostgreSQL this raises `ConfigError`: back up the server with pg_dump.
        """
        return await self._driver.run(upkeep_ops.backup(destination))

    async def export_trees(
        self,
        out: IO[bytes],
        *,
        session_ids: Sequence[str] | None = None,
        owner_id: str | None = None,
        progress: Progress | None = None,
    ) -> TransferReport:
        """Write session trees to `out` in the export format (JSON Lines), one tree at a time.

        The trees of `session_ids` (a fork's whole tree, from its root), of an owner, or of
        every session; each tree is read in one snapshot, so memory stays flat. Without
        `session_ids`, the live long-term memory items follow (the owner's, or all), 500 to
        a snapshot.
        """
        return await self._driver.run(upkeep_ops.export_trees(out, session_ids, owner_id, progress))

    async def import_trees(
        self,
        source: IO[bytes],
        *,
        on_conflict: OnConflict = "fail",
        progress: Progress | None = None,
        max_line_bytes: int | None = MAX_LINE_BYTES,
    ) -> TransferReport:
        """Write the trees of an export, one transaction each; identical trees are skipped.

        A tree whose sessions exist with other content raises `SessionExists` under
        `fail` (trees before it stay imported), is kept under `skip`, and replaced under
        `replace`; a live memory item, likewise, `MemoryItemExists` (its section of 500
        items is one transaction; identical items are skipped). A damaged or cut-off file,
        or a row no read could decode, raises `InvalidInput` at the tree or section it
        damages. Memory peaks at three to four times the
        longest line; a line over `max_line_bytes` (64 MiB; None: no limit) raises
        `InvalidInput`.
        """
        return await self._driver.run(
            upkeep_ops.import_trees(source, on_conflict, progress, max_line_bytes)
        )

    async def gc_unreachable(self) -> GcReport:
        """Delete every blob that no session head reaches (the runtime face's same call)."""
        return await self._driver.run(runtime_ops.gc_unreachable())

    async def list_uncommitted_attachments(
        self, older_than_epoch_ms: int
    ) -> list[AttachmentManifestEntry]:
        """Every session's uncommitted attachment intents older than a time, deleted ones too."""
        return await self._driver.run(runtime_ops.list_every_uncommitted(older_than_epoch_ms))
