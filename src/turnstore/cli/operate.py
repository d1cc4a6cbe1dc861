"""Internal: the operator commands: retention, GC, vacuum, sweep, migrate, doctor, stats.

Export, import, copy and backup are in `turnstore.cli.transfers`; `COMMANDS` lists them all
for the `turnstore` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import turnstore
from turnstore import FileAttachmentStore
from turnstore.cli import output, transfers
from turnstore.cli.common import (
    DRY_RUN_OPTION,
    DURATION,
    JSON_OPTION,
    URL_ARGUMENT,
    YES_OPTION,
    StoreCommand,
    confirm,
    echo_json,
    now_ms,
    open_store,
    reported,
    seconds_ago,
)
from turnstore.cli.progress import progress_bar
from turnstore.records import DoctorReport, ErasureReport, PruneReport, StoreStats

OLDER_THAN_HELP = "30d, 12h, 90m, 45s, 2w, or a sum such as 1d12h"


def emit(as_json: bool, value: Any, rows: list[tuple[str, str]]) -> None:
    """Print a report: its JSON with --json, else its rows as a table."""
    if as_json:
        echo_json(value)
    else:
        output.render_key_values(output.make_console(), rows)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.option(
    "--older-than",
    metavar="DURATION",
    type=DURATION,
    required=True,
    help=f"Prune trees not updated for this long: {OLDER_THAN_HELP}.",
)
@click.option("--owner", metavar="ID", help="Only prune trees whose root session has this owner.")
@click.option(
    "--batch-size",
    metavar="N",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Most trees deleted per write transaction.",
)
@DRY_RUN_OPTION
@YES_OPTION
@JSON_OPTION
def prune(
    url: str,
    older_than: int,
    owner: str | None,
    batch_size: int,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete whole session trees that nobody updated for a while, in small batches.

    URL is the store. A tree (a root session and every fork below it) goes when every
    session in it was last updated longer ago than --older-than. Expired long-term memory
    items go too (not with --owner). Without --yes it lists what would go and asks on a
    terminal; it reports every session removed and how many memory items.
    """
    before = seconds_ago(older_than)
    with open_store(url, read_only=dry_run, existing=True) as store:
        if not dry_run and not yes:
            preview = store.upkeep.prune(
                before, owner_id=owner, dry_run=True, batch_size=batch_size
            )
            if preview.session_ids or preview.expired_memory_item_count:
                _show_pruned(output.make_console(stderr=True), preview, before, "will")
                confirm(f"Delete {_pruned_count(preview)}", yes=yes)
        with progress_bar("Pruning"):
            report = store.upkeep.prune(
                before, owner_id=owner, dry_run=dry_run, batch_size=batch_size
            )
    if as_json:
        echo_json(report.to_builtins())
        return
    _show_pruned(output.make_console(), report, before, "would" if dry_run else "did")


_PRUNE_VERBS = {
    "will": ("Will prune", "Will delete"),
    "would": ("Would prune (dry run, nothing deleted)", "Would delete"),
    "did": ("Pruned", "Deleted"),
}
"""A prune's verbs for trees and for memory items: before asking, on a dry run, and done."""


def _show_pruned(console: Any, report: PruneReport, before: int, mood: str) -> None:
    """Print a prune report: its counts, every session id, then the memory items swept."""
    trees, items = _PRUNE_VERBS[mood]
    title = (
        f"{trees} {len(report.session_ids)} session(s) in {report.tree_count} tree(s)"
        f" last updated before {output.utc_seconds(before)}:"
    )
    output.render_ids(console, title, report.session_ids)
    if report.expired_memory_item_count:
        console.print(f"{items} {report.expired_memory_item_count} expired memory item(s).")


def _pruned_count(report: PruneReport) -> str:
    """What a prune deletes, counted: `3 session(s) and 2 expired memory item(s)`."""
    found = [f"{len(report.session_ids)} session(s)"] if report.session_ids else []
    if report.expired_memory_item_count:
        found.append(f"{report.expired_memory_item_count} expired memory item(s)")
    return " and ".join(found)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.argument("owner_id", metavar="OWNER_ID")
@DRY_RUN_OPTION
@YES_OPTION
@JSON_OPTION
def erase(url: str, owner_id: str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Delete everything one owner (a person) has: sessions and long-term memory.

    URL is the store. Every session OWNER_ID owns, of every framework's kind, goes with the
    forks below it (one commit a tree), then every memory item OWNER_ID owns; their words
    leave the search index in the same commits, so nothing erased can be found afterwards.
    Without --yes it lists what would go and asks on a terminal. Run it again after an
    interruption: it goes on where it stopped.
    """
    with open_store(url, read_only=dry_run, existing=True) as store:
        if not dry_run and not yes:
            preview = store.upkeep.erase_owner(owner_id, dry_run=True)
            if preview.session_ids or preview.memory_item_count:
                _show_erased(output.make_console(stderr=True), preview, "Will delete")
                confirm(f"Erase everything {owner_id!r} has", yes=yes)
        report = store.upkeep.erase_owner(owner_id, dry_run=dry_run)
    if as_json:
        echo_json(report.to_builtins())
        return
    verb = "Would delete (dry run, nothing deleted)" if dry_run else "Deleted"
    _show_erased(output.make_console(), report, verb)


def _show_erased(console: Any, report: ErasureReport, verb: str) -> None:
    """Print an erasure report: the sessions, then how many memory items."""
    title = (
        f"{verb} {len(report.session_ids)} session(s) in {report.tree_count} tree(s)"
        f" of owner {report.owner_id!r}:"
    )
    output.render_ids(console, title, report.session_ids)
    console.print(f"{verb} {report.memory_item_count} memory item(s) of {report.owner_id!r}.")


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@YES_OPTION
@JSON_OPTION
def gc(url: str, yes: bool, as_json: bool) -> None:
    """Delete the blobs that no session reaches any more.

    URL is the store. Asks on a terminal (--yes off one) and reports how many blobs it
    deleted and how many it kept.
    """
    with open_store(url, existing=True) as store:
        confirm("Delete every blob no session reaches", yes=yes)
        report = store.upkeep.gc_unreachable()
    rows = [
        ("deleted blobs", str(report.deleted_blob_count)),
        ("kept blobs", str(report.retained_blob_count)),
        ("roots scanned", str(report.root_count)),
    ]
    emit(as_json, report.to_builtins(), rows)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@YES_OPTION
@JSON_OPTION
def vacuum(url: str, yes: bool, as_json: bool) -> None:
    """Remove deleted graph nodes, then compact the database (VACUUM).

    URL is the store. Removes every session's tombstoned runtime-graph nodes, then runs
    VACUUM (PostgreSQL: VACUUM ANALYZE). Asks on a terminal (--yes off one).
    """
    with open_store(url, existing=True) as store:
        confirm("Remove tombstoned graph nodes and VACUUM the database", yes=yes)
        report = store.upkeep.vacuum()
    rows = [
        ("removed graph nodes", str(report.removed_node_count)),
        ("size before", output.size(report.bytes_before)),
        ("size after", output.size(report.bytes_after)),
    ]
    emit(as_json, report.to_builtins(), rows)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.option(
    "--attachments",
    "root",
    metavar="DIR",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The attachment folder (the root of the FileAttachmentStore).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    type=DURATION,
    required=True,
    help=f"Only reclaim what was written longer ago than this: {OLDER_THAN_HELP}.",
)
@YES_OPTION
@JSON_OPTION
def sweep(url: str, root: Path, older_than: int, yes: bool, as_json: bool) -> None:
    """Delete attachment files that no commit references, and unfinished writes.

    URL is the store; --attachments names the folder its attachments live in. Reclaims
    intents no commit referenced (deleted sessions' included) and temporary files, older
    than --older-than. Asks on a terminal (--yes off one); reports every id reclaimed.
    """
    threshold = now_ms() - older_than * 1000
    with open_store(url, existing=True) as store:
        confirm(f"Delete unreferenced attachments in {root}", yes=yes)
        reclaimed = FileAttachmentStore(root).sweep_all(store, threshold)
    if as_json:
        echo_json({"attachment_ids": reclaimed})
        return
    title = f"Reclaimed {len(reclaimed)} attachment(s):"
    output.render_ids(output.make_console(), title, reclaimed)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@DRY_RUN_OPTION
@JSON_OPTION
def migrate(url: str, dry_run: bool, as_json: bool) -> None:
    """Bring the database schema up to this version of turnstore.

    URL is the store. --dry-run lists the steps and changes nothing. A step that leaves the
    search index to build again is followed by the build, with progress on a terminal.
    """
    # Migrating creates no file, so a missing one's hint is to check the path.
    with reported(url, read_only=True):
        report = turnstore.migrate(url, dry_run=dry_run)
    indexed = None
    if report.steps and not dry_run:
        # A step may leave the search index to be built again (reindex to fill): it is built
        # now, in commits beside the store's writers, so searches work once this returns.
        with open_store(url, existing=True) as store, progress_bar("Indexing") as advance:
            indexed = store.upkeep.reindex(progress=advance)
    if as_json:
        echo_json(report.to_builtins())
        return
    console = output.make_console()
    verb = "Would migrate (dry run)" if dry_run else "Migrated"
    if not report.steps:
        console.print(f"Schema version {report.to_version}: up to date, nothing to do.")
        return
    console.print(f"{verb} from schema version {report.from_version} to {report.to_version}:")
    output.render_key_values(console, [(f"  {s.version}", s.summary) for s in report.steps])
    if indexed is not None and indexed.items_indexed:
        console.print(
            f"Search index built: {indexed.sessions_total} sessions,"
            f" {indexed.items_indexed} items indexed."
        )


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.option(
    "--deep",
    is_flag=True,
    help="Also decode every stored row as the reads do, and name the rows they would refuse"
    " (reads the whole store).",
)
@JSON_OPTION
@click.pass_context
def doctor(ctx: click.Context, url: str, deep: bool, as_json: bool) -> None:
    """Check a store's health; exit 1 when it finds a problem.

    URL is the store. Checks the schema version, integrity, WAL size, orphan attachments
    and unreachable blobs, and on PostgreSQL missing indexes and table bloat; with --deep,
    every stored row too.
    """
    with open_store(url, read_only=True) as store:
        report = store.upkeep.doctor(deep=deep)
    problems = report.problems
    emit(as_json, {**report.to_builtins(), "problems": problems}, _doctor_rows(report))
    if not as_json:
        title = f"{len(problems)} problem(s):" if problems else "No problems found."
        output.render_ids(output.make_console(), title, problems)
    if problems:
        ctx.exit(1)


def _doctor_rows(report: DoctorReport) -> list[tuple[str, str]]:
    """A doctor report as name/value rows."""
    wal = "-" if report.wal_bytes is None else output.size(report.wal_bytes)
    return [
        ("backend", report.backend),
        (
            "schema version",
            f"{report.schema_version} (this build: {report.supported_schema_version})",
        ),
        ("integrity", "; ".join(report.integrity) or "ok"),
        ("WAL size", wal),
        ("orphan attachments", str(report.orphan_attachment_count)),
        ("unreachable blobs", str(report.unreachable_blob_count)),
        ("missing indexes", ", ".join(report.missing_indexes) or "-"),
        ("bloated tables", ", ".join(report.bloated_tables) or "-"),
        (
            "undecodable rows",
            str(report.undecodable_row_count) if report.deep else "not checked (--deep)",
        ),
    ]


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@JSON_OPTION
def stats(url: str, as_json: bool) -> None:
    """Count what a store holds: sessions, turns, events, tokens and bytes.

    URL is the store.
    """
    with open_store(url, read_only=True) as store:
        found = store.upkeep.stats()
    emit(as_json, found.to_builtins(), _stats_rows(found))


def _stats_rows(found: StoreStats) -> list[tuple[str, str]]:
    """Store stats as name/value rows."""
    return [
        ("sessions", f"{found.session_count} ({found.fork_count} forks)"),
        ("checkpoints", str(found.checkpoint_count)),
        ("turns", str(found.turn_count)),
        ("events", str(found.event_count)),
        ("transcript batches", str(found.transcript_batch_count)),
        (
            "tokens",
            f"{found.total_tokens} total: {found.input_tokens} in, {found.output_tokens} out",
        ),
        ("blobs", f"{found.blob_count} ({output.size(found.blob_bytes)})"),
        ("attachments", str(found.attachment_count)),
        ("LangGraph checkpoints", str(found.langgraph_checkpoint_count)),
        ("database size", output.size(found.database_bytes)),
    ]


COMMANDS: list[click.Command] = [
    prune,
    erase,
    transfers.export,
    transfers.import_,
    transfers.copy,
    transfers.backup,
    gc,
    vacuum,
    sweep,
    migrate,
    doctor,
    stats,
]
"""The operator commands, in the order `turnstore --help` lists them (it sorts them)."""
