"""The operators' operations: retention, trees, counts, health, VACUUM, backups, transfers."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Sequence
from functools import partial
from typing import IO, get_args

from turnstore.drivers.steps import Steps, call, read, write
from turnstore.engine.protocol import Engine, Tx
from turnstore.errors import InvalidInput
from turnstore.records.checkpoint import SessionPageRequest
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
from turnstore.rules.pages import catalog_query
from turnstore.rules.validation import (
    check_input,
    identifier,
    optional_identifier,
    validate_session_id,
    validate_session_ids,
)
from turnstore.rules.values import text
from turnstore.scripts import checkpoints as checkpoint_scripts
from turnstore.scripts import (
    memory,
    runtime_upkeep,
    search,
    sessions,
    stored_rows,
    transfer,
    transfer_memory,
    upkeep,
)
from turnstore.scripts.transfer import MAX_LINE_BYTES as MAX_LINE_BYTES
from turnstore.scripts.transfer import LineSource
from turnstore.scripts.transfer_rows import (
    ENCODER,
    FORMAT_VERSION,
    READ_VERSIONS,
    ExportEnd,
    ExportHeader,
    MemoryHeader,
    TreeHeader,
)

_CONFLICTS = get_args(OnConflict)

DEEP_LISTED = 100
"""A deep doctor lists at most this many undecodable rows (and counts them all)."""

SINGLE_WRITER_REST_S = 0.05
"""The least a prune rests between batches on a single-writer database: longer than SQLite's
busy-retry steps."""


def _binary(stream: object, method: str) -> bool:
    """Whether `stream` has `method` and is not a text stream (which takes no bytes)."""
    return callable(getattr(stream, method, None)) and not isinstance(stream, io.TextIOBase)


def prune(
    updated_before: int, owner_id: str | None, dry_run: bool, batch_size: int
) -> Steps[PruneReport]:
    """Delete whole trees last updated before a time, a small transaction per batch, then
    every expired memory item (unless the prune is one owner's)."""
    check_input(
        isinstance(updated_before, int)
        and not isinstance(updated_before, bool)
        and -(2**63) <= updated_before < 2**63,
        "updated_before must be a 64-bit int (Unix seconds)",
    )
    if owner_id is not None:
        owner_id = text(owner_id, "owner_id")
    check_input(
        isinstance(batch_size, int) and 1 <= batch_size <= 10_000, "batch_size must be 1..10000"
    )
    removed: list[str] = []
    trees = 0
    single_writer = yield from call(lambda engine: engine.upkeep().single_writer)
    cursor: upkeep.PruneCursor | None = upkeep.start(updated_before)
    while cursor is not None:

        def batch(
            tx: Tx, at: upkeep.PruneCursor = cursor
        ) -> tuple[list[str], int, upkeep.PruneCursor | None]:
            return upkeep.prune_batch(tx, updated_before, owner_id, at, batch_size, not dry_run)

        began = time.monotonic()
        found, count, cursor = yield from (read(batch) if dry_run else write(batch))
        removed.extend(found)
        trees += count
        if single_writer and count and not dry_run and cursor is not None:
            # Writers in other processes wait for SQLite's lock by sleeping and retrying; a
            # prune that took it again at once would starve them. Resting as long as the
            # batch held it (at least SINGLE_WRITER_REST_S) gives each waiting writer its turn.
            rest = max(time.monotonic() - began, SINGLE_WRITER_REST_S)
            yield from call(partial(_rest, seconds=rest))
    swept = 0 if owner_id is not None else (yield from _sweep_memory(dry_run))
    return PruneReport(
        session_ids=sorted(removed),
        tree_count=trees,
        dry_run=dry_run,
        expired_memory_item_count=swept,
    )


def _sweep_memory(dry_run: bool) -> Steps[int]:
    """Delete every expired memory item (a dry run counts them); how many.

    Expiry is the items' own (by the database's clock), not the prune's cut-off. The sweep
    takes every owner's expired items, so a prune narrowed to one owner leaves them alone.
    """
    if dry_run:
        return (yield from read(upkeep.expired_memory))
    return (yield from write(memory.sweep))


ERASE_PAGE = 100
"""Sessions of the owner read a page at a time (each then deleted in its own commit)."""
ERASE_MEMORY_BATCH = 500
"""The owner's memory items one commit deletes."""


def erase_owner(owner_id: str, dry_run: bool) -> Steps[ErasureReport]:
    """Delete every tree holding a session the owner holds, one commit per tree, then every
    memory item the owner holds, `ERASE_MEMORY_BATCH` to a commit; what went (a dry run only
    reads). Words leave the search indexes in the same commits. A run stopped part way (a
    crash) leaves whole trees and items, and running it again goes on."""
    owner = identifier(owner_id, "owner_id")
    check_input(bool(owner.strip()), "owner_id must not be blank")
    removed: set[str] = set()
    trees = 0
    request = SessionPageRequest(owner_id=owner, limit=ERASE_PAGE)
    while True:
        query = catalog_query(request)
        page = yield from read(partial(sessions.catalog_page, query=query))
        todo = [one.session_id for one in page.sessions if one.session_id not in removed]
        for session_id in todo:
            if session_id in removed:  # in the tree of one before it on this page
                continue
            step = partial(_owned_tree, session_id=session_id, owner=owner, delete=not dry_run)
            found = yield from (read(step) if dry_run else write(step))
            removed.update(found)
            trees += bool(found)
        # Deleted sessions leave the catalog, so the first page comes round again until none
        # is left; a dry run deletes nothing and pages on instead.
        if page.next_cursor is None or not (dry_run or todo):
            break
        if dry_run:
            request = SessionPageRequest(owner_id=owner, limit=ERASE_PAGE, cursor=page.next_cursor)
    items = yield from (
        read(lambda tx: memory.owned_count(tx, owner)) if dry_run else _erase_memory(owner)
    )
    return ErasureReport(
        owner_id=owner,
        session_ids=sorted(removed),
        tree_count=trees,
        memory_item_count=items,
        dry_run=dry_run,
    )


def _owned_tree(tx: Tx, session_id: str, owner: str, delete: bool) -> list[str]:
    """The tree below the owner's highest session over `session_id` (a fork of theirs goes
    with their session it forked from), deleted unless a dry run; [] if it was gone."""
    top = upkeep.owned_top(tx, session_id, owner)
    found = transfer.tree(tx, top)
    if delete and found and not checkpoint_scripts.delete(tx, [top]):
        return []
    return found


def _erase_memory(owner: str) -> Steps[int]:
    erased = 0
    while True:
        done = yield from write(lambda tx: memory.erase_owned(tx, owner, ERASE_MEMORY_BATCH))
        erased += done
        if done < ERASE_MEMORY_BATCH:
            return erased


def _rest(engine: Engine, seconds: float) -> None:
    """Sleep off the event loop: a step, so the async face keeps serving meanwhile."""
    time.sleep(seconds)


def tree(session_id: str) -> Steps[list[str]]:
    """The sessions `delete_sessions([session_id])` would remove, sorted."""
    session_id = validate_session_id(session_id)
    return sorted((yield from read(lambda tx: transfer.tree(tx, session_id))))


def stats() -> Steps[StoreStats]:
    """Counts of what the store holds, and its size on disk."""
    found = yield from read(upkeep.stats)
    size = yield from call(lambda engine: engine.upkeep().database_bytes())
    found.database_bytes = size
    return found


def gauges(owner_id: str | None = None) -> Steps[StoreGauges]:
    """The counts and sizes a monitor samples: one read (of one owner's sessions, when
    named), and the engine's own figures."""
    owner = optional_identifier(owner_id, "owner_id")
    found = yield from read(lambda tx: upkeep.gauges(tx, owner))

    def sizes(engine: Engine) -> tuple[str, int, int, int | None]:
        checks = engine.upkeep()
        return checks.backend, checks.schema_version(), checks.database_bytes(), checks.wal_bytes()

    found.backend, found.schema_version, found.database_bytes, found.wal_bytes = yield from call(
        sizes
    )
    return found


def doctor(deep: bool = False) -> Steps[DoctorReport]:
    """The store's health: schema, integrity, WAL, orphans, unreachable blobs, indexes, bloat.

    `deep` also decodes every stored row as the reads do, one tree per read transaction.
    """
    check_input(isinstance(deep, bool), "deep must be a bool")

    def examine(engine: Engine) -> DoctorReport:
        checks = engine.upkeep()
        return DoctorReport(
            backend=checks.backend,
            schema_version=checks.schema_version(),
            supported_schema_version=checks.supported_version,
            integrity=checks.integrity(),
            wal_bytes=checks.wal_bytes(),
            missing_indexes=checks.missing_indexes(),
            bloated_tables=checks.bloated_tables(),
        )

    report = yield from call(examine)

    def count(tx: Tx) -> tuple[int, int]:
        orphans = tx.value(tx.sql(upkeep.UpkeepSql).uncommitted_attachments)
        return int(orphans), len(runtime_upkeep.unreachable_blobs(tx))

    report.orphan_attachment_count, report.unreachable_blob_count = yield from read(count)
    if deep:
        yield from _deep_scan(report)
    return report


def _deep_scan(report: DoctorReport) -> Steps[None]:
    """Decode every stored row as a read would; list the first `DEEP_LISTED` refused."""
    report.deep = True
    roots = yield from read(lambda tx: transfer.roots(tx, None, None))
    found = yield from read(stored_rows.state_problems)
    for root in [None, *roots]:
        if root is not None:
            found = yield from read(partial(transfer.tree_problems, root=root))
        report.undecodable_row_count += len(found)
        report.undecodable_rows += found[: DEEP_LISTED - len(report.undecodable_rows)]


def vacuum_database() -> Steps[VacuumDatabaseReport]:
    """Remove every session's tombstoned nodes, then VACUUM the database."""
    before = yield from call(lambda engine: engine.upkeep().database_bytes())
    sessions = yield from read(lambda tx: tx.values(tx.sql(upkeep.UpkeepSql).tombstoned_sessions))
    removed = 0
    for session_id in sessions:
        report = yield from write(partial(runtime_upkeep.vacuum, session_id=session_id))
        removed += report.removed_node_count
    yield from call(lambda engine: engine.upkeep().vacuum())
    after = yield from call(lambda engine: engine.upkeep().database_bytes())
    return VacuumDatabaseReport(removed_node_count=removed, bytes_before=before, bytes_after=after)


def backup(destination: str | os.PathLike[str]) -> Steps[BackupReport]:
    """Write a consistent copy of a SQLite database to a new file."""
    check_input(isinstance(destination, str | os.PathLike), "destination must be a path")
    target = os.fspath(destination)
    check_input(bool(target), "destination must be a non-empty path")
    size = yield from call(lambda engine: engine.upkeep().backup(target))
    return BackupReport(path=os.path.abspath(os.path.expanduser(target)), bytes=size)


def export_trees(
    out: IO[bytes],
    session_ids: Sequence[str] | None,
    owner_id: str | None,
    progress: Progress | None,
) -> Steps[TransferReport]:
    """Write the trees of the named sessions (an owner's, or all) as an export file; with no
    sessions named, the memory items (the owner's, or all) after them."""
    check_input(_binary(out, "write"), "out must be a binary stream (a file opened 'wb', BytesIO)")
    ids = None if session_ids is None else validate_session_ids(session_ids)
    if owner_id is not None:
        owner_id = text(owner_id, "owner_id")
    check_input(ids is None or owner_id is None, "name sessions or an owner, not both")
    roots = yield from read(lambda tx: transfer.roots(tx, ids, owner_id))
    version = yield from call(lambda engine: engine.upkeep().schema_version())
    out.write(ENCODER.encode(ExportHeader(format_version=FORMAT_VERSION, schema_version=version)))
    out.write(b"\n")
    report = TransferReport()
    for done, root in enumerate(roots, start=1):
        written, rows = yield from read(partial(transfer.export_tree, root=root, out=out))
        report.session_ids.extend(written)
        report.tree_count += 1
        report.row_count += rows
        if progress is not None:
            progress(done, len(roots))
    if ids is None:
        yield from _export_memory(out, owner_id, report)
    end = ExportEnd(
        tree_count=report.tree_count,
        row_count=report.row_count,
        memory_item_count=report.memory_item_count,
    )
    out.write(ENCODER.encode(end))
    out.write(b"\n")
    return report


def _export_memory(out: IO[bytes], owner_id: str | None, report: TransferReport) -> Steps[None]:
    """Write the live memory items (of `owner_id`, or all) in sections, one snapshot each."""
    after: tuple[str, str] | None = None
    while True:
        section = yield from read(
            partial(transfer_memory.export_section, out=out, owner_id=owner_id, after=after)
        )
        if section.last is None:
            return
        report.memory_item_count += section.item_count
        report.row_count += section.row_count
        after = section.last


def import_trees(
    source: IO[bytes],
    on_conflict: OnConflict,
    progress: Progress | None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> Steps[TransferReport]:
    """Write the trees and memory sections of an export file, one transaction each."""
    check_input(
        _binary(source, "readline"), "source must be a binary stream (opened 'rb', BytesIO)"
    )
    check_input(
        isinstance(on_conflict, str) and on_conflict in _CONFLICTS,
        f"on_conflict must be one of {', '.join(_CONFLICTS)}",
    )
    check_input(
        max_line_bytes is None
        or (
            isinstance(max_line_bytes, int)
            and not isinstance(max_line_bytes, bool)
            and max_line_bytes > 0
        ),
        "max_line_bytes must be a positive int (bytes) or None for no limit",
    )
    lines = LineSource(source, max_line_bytes)
    first = lines.next()
    if first is None or not isinstance(first[0], ExportHeader):
        raise InvalidInput("not a turnstore export: the first line is no turnstore_export header")
    if first[0].format_version not in READ_VERSIONS:
        raise InvalidInput(
            f"export format version {first[0].format_version}; this build reads"
            f" {' and '.join(map(str, READ_VERSIONS))}"
        )
    report = TransferReport()
    while (read_line := lines.next()) is not None:
        line, _ = read_line
        if isinstance(line, ExportEnd):
            ended = (line.tree_count, line.row_count, line.memory_item_count)
            items = report.memory_item_count + report.skipped_memory_item_count
            if ended != (report.tree_count, report.row_count, items):
                raise InvalidInput(
                    "export end line does not match the trees, rows and memory items before it"
                )
            return report
        if isinstance(line, MemoryHeader):
            section = transfer_memory.read_section(line, lines)
            done = yield from write(
                partial(transfer_memory.write_section, items=section.items, on_conflict=on_conflict)
            )
            report.memory_item_count += done.written
            report.skipped_memory_item_count += done.skipped
            report.row_count += section.row_count
            continue
        if not isinstance(line, TreeHeader):
            raise InvalidInput(f"export line {lines.number}: expected a tree or memory line")
        outcome = yield from write(
            partial(transfer.import_tree, header=line, source=lines, on_conflict=on_conflict)
        )
        target = report.session_ids if outcome.written else report.skipped_session_ids
        target.extend(line.session_ids)
        report.replaced_session_ids.extend(outcome.replaced)
        report.tree_count += 1
        report.row_count += outcome.row_count
        if progress is not None:
            progress(report.tree_count, 0)
    raise InvalidInput("export file is cut off: it has no end line")


def reindex(
    restart: bool, batch_sessions: int, progress: Progress | None
) -> Steps[ReindexProgress]:
    """Build the search index of sessions written before it, `batch_sessions` a commit.

    Goes on from where an interrupted build stopped; `restart` builds it anew from the start.
    Writes made meanwhile keep their own rows up to date, so the build may run beside them.
    """
    check_input(
        isinstance(batch_sessions, int)
        and not isinstance(batch_sessions, bool)
        and 1 <= batch_sessions <= 10_000,
        "batch_sessions must be 1..10000",
    )
    indexed = 0
    first = True
    while True:
        step = partial(search.reindex_batch, sessions=batch_sessions, restart=restart and first)
        done: ReindexProgress = yield from write(step)
        first = False
        indexed += done.items_indexed
        if progress is not None:
            progress(done.sessions_done, done.sessions_total)
        if done.built:
            return ReindexProgress(
                sessions_done=done.sessions_done,
                sessions_total=done.sessions_total,
                items_indexed=indexed,
                built=True,
            )
