"""Internal: moving sessions in and out: export, import, copy between stores, and backup."""

from __future__ import annotations

import io
import os
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO

import click

from turnstore import transfer
from turnstore.cli import output
from turnstore.cli.common import (
    JSON_OPTION,
    URL_ARGUMENT,
    YES_OPTION,
    StoreCommand,
    confirm,
    display_url,
    echo_json,
    open_store,
)
from turnstore.cli.progress import progress_bar
from turnstore.errors import MemoryItemExists, SessionExists
from turnstore.records import TransferReport
from turnstore.transfer import OnConflict

ON_CONFLICT_OPTION = click.option(
    "--on-conflict",
    type=click.Choice(["fail", "skip", "replace"]),
    default="fail",
    show_default=True,
    help="A tree that differs from an existing session: fail, skip it (keep the existing),"
    " or replace the existing one (asks first).",
)
"""How import and copy treat a conflicting existing session."""

VERBOSE_OPTION = click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="List every session id moved, skipped or replaced after the summary line.",
)
"""Bulk commands print one summary line; `--verbose` adds the ids (`--json` has them too)."""


def selection(
    session_ids: tuple[str, ...], every: bool, owner: str | None
) -> tuple[list[str] | None, str | None]:
    """The (session_ids, owner_id) to move: exactly one of ids, --owner or --all."""
    chosen = sum((bool(session_ids), every, owner is not None))
    if chosen != 1:
        raise click.UsageError("name the sessions: SESSION_ID arguments, --owner ID or --all")
    return (list(session_ids) if session_ids else None), owner


def show_transfer(
    report: TransferReport,
    as_json: bool,
    *,
    verb: str,
    seconds: float,
    size: int | None = None,
    verbose: bool = False,
    stderr: bool = False,
) -> None:
    """Print what a transfer moved: JSON, or one summary line (and the ids when `verbose`)."""
    if as_json:
        echo_json(report.to_builtins(), err=stderr)
        return
    console = output.make_console(stderr=stderr)
    console.print(summary_line(report, verb, seconds, size), soft_wrap=True)
    if not verbose:
        return
    if report.session_ids:
        output.render_ids(console, "Sessions:", report.session_ids)
    if report.skipped_session_ids:
        output.render_ids(console, "Skipped (already there):", report.skipped_session_ids)
    if report.replaced_session_ids:
        output.render_ids(console, "Replaced (deleted first):", report.replaced_session_ids)


def summary_line(report: TransferReport, verb: str, seconds: float, size: int | None) -> str:
    """`Exported 3,000 sessions in 4.2 s (1,200 trees, 80 memory items, 45,000 rows, 12.3
    MiB).`, or `Imported 0 of 60 sessions …; 60 skipped (already there).` when some were
    skipped (`0 of 80 memory items` when items were)."""
    moved, skipped = len(report.session_ids), len(report.skipped_session_ids)
    counted = f"{moved:,} of {moved + skipped:,}" if skipped else f"{moved:,}"
    parts = [f"{report.tree_count:,} trees", f"{report.row_count:,} rows"]
    items = report.memory_item_count + report.skipped_memory_item_count
    if items:
        kept = f" of {items:,}" if report.skipped_memory_item_count else ""
        parts.insert(1, f"{report.memory_item_count:,}{kept} memory items")
    if size is not None:
        parts.append(_size(size))
    line = f"{verb} {counted} sessions in {seconds:.1f} s ({', '.join(parts)})"
    if skipped:
        line += f"; {skipped:,} skipped (already there)"
    if report.replaced_session_ids:
        line += f"; {len(report.replaced_session_ids):,} replaced"
    return line + "."


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def file_size(stream: IO[bytes]) -> int | None:
    """The size of the regular file behind `stream`; None for a pipe or a terminal."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


@contextmanager
def conflicts(url: str) -> Iterator[None]:
    """Say how to get past a conflicting session in the command line's words."""
    try:
        yield
    except (SessionExists, MemoryItemExists) as error:
        if isinstance(error, MemoryItemExists):
            what = f"memory item {error.key!r} in {error.namespace!r}"
        else:
            what = "a session" if error.session_id is None else repr(error.session_id)
        raise click.ClickException(
            f"{display_url(url)}: {what} exists with other content."
            " Pass --on-conflict skip to keep it or --on-conflict replace to overwrite it"
        ) from None


@contextmanager
def export_target(target: Path | None) -> Iterator[BinaryIO]:
    """Where the export goes: a new file, or standard output when that is not a terminal."""
    if target is None:
        if sys.stdout.isatty():
            raise click.UsageError("export writes JSON Lines: redirect it or pass -o FILE")
        yield sys.stdout.buffer
        return
    try:
        # Sessions are private: an export of them is too, like the database (mode 0600).
        file = os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")
    except FileExistsError:
        raise click.ClickException(f"{target} exists; pass another -o FILE") from None
    except OSError as error:
        raise click.ClickException(f"{target}: {error.strerror}") from None
    try:
        with file:
            yield file
    except BaseException:
        # A partial export is not an export; leave nothing a later import could trust.
        target.unlink(missing_ok=True)
        raise


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.argument("session_ids", metavar="[SESSION_ID]...", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Export every session tree.")
@click.option("--owner", metavar="ID", help="Export the trees whose root has this owner.")
@click.option(
    "-o",
    "--output",
    "target",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (a new file) instead of standard output.",
)
@VERBOSE_OPTION
@JSON_OPTION
def export(
    url: str,
    session_ids: tuple[str, ...],
    every: bool,
    owner: str | None,
    target: Path | None,
    verbose: bool,
    as_json: bool,
) -> None:
    """Export session trees as versioned JSON Lines, one tree at a time.

    URL is the store; choose the trees with [SESSION_ID]... (each with its forks), --owner
    or --all; the last two carry the owner's (or every) long-term memory item too. Writes
    to standard output, refused on a terminal, or to -o FILE. The report goes to standard
    error when the export goes to standard output. Memory does not grow with the store or
    its trees, only with its largest row: about three times it.
    """
    ids, owner_id = selection(session_ids, every, owner)
    started = time.monotonic()
    with (
        open_store(url, read_only=True) as store,
        export_target(target) as out,
        progress_bar("Exporting") as advance,
    ):
        report = transfer.export_jsonl(
            store, out, session_ids=ids, owner_id=owner_id, progress=advance
        )
        out.flush()
        size = file_size(out)
    seconds = time.monotonic() - started
    show_transfer(
        report,
        as_json,
        verb="Exported",
        seconds=seconds,
        size=size,
        verbose=verbose,
        stderr=target is None,
    )


@click.command("import", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("source", metavar="FILE", type=click.File("rb"))
@ON_CONFLICT_OPTION
@click.option(
    "--max-line-mib",
    metavar="N",
    type=click.IntRange(min=1),
    default=transfer.MAX_LINE_BYTES >> 20,
    show_default=True,
    help="Refuse a line longer than N MiB; the import holds three to four times its longest"
    " line in memory.",
)
@YES_OPTION
@VERBOSE_OPTION
@JSON_OPTION
def import_(
    url: str,
    source: BinaryIO,
    on_conflict: OnConflict,
    max_line_mib: int,
    yes: bool,
    verbose: bool,
    as_json: bool,
) -> None:
    """Import session trees from a JSON Lines export, one tree at a time.

    URL is the store (a SQLite file is created if missing) and FILE an export, - for
    standard input. Importing the same file twice changes nothing; a tree that differs
    from an existing session (or a memory item that differs from one there) fails the
    import unless --on-conflict says otherwise. Every
    row is decoded as the store's reads decode it; a tree with a row they would refuse is
    not imported. Memory does not grow with the file or its trees, only with its longest
    line: three to four times it, so lines over --max-line-mib are refused.
    """
    if on_conflict == "replace":
        confirm("Replace every existing session tree the import conflicts with", yes=yes)
    started = time.monotonic()
    with open_store(url) as store, progress_bar("Importing") as advance, conflicts(url):
        report = transfer.import_jsonl(
            store,
            source,
            on_conflict=on_conflict,
            progress=advance,
            max_line_bytes=max_line_mib << 20,
        )
    seconds = time.monotonic() - started
    show_transfer(
        report,
        as_json,
        verb="Imported",
        seconds=seconds,
        size=file_size(source),
        verbose=verbose,
    )


@click.command(cls=StoreCommand)
@click.argument("source_url", metavar="SRC_URL")
@click.argument("target_url", metavar="DST_URL")
@click.argument("session_ids", metavar="[SESSION_ID]...", nargs=-1)
@click.option("--owner", metavar="ID", help="Copy only the trees whose root has this owner.")
@ON_CONFLICT_OPTION
@YES_OPTION
@VERBOSE_OPTION
@JSON_OPTION
def copy(
    source_url: str,
    target_url: str,
    session_ids: tuple[str, ...],
    owner: str | None,
    on_conflict: OnConflict,
    yes: bool,
    verbose: bool,
    as_json: bool,
) -> None:
    """Copy session trees from one store to another, e.g. SQLite to PostgreSQL.

    SRC_URL is read, DST_URL written (a SQLite file is created if missing); [SESSION_ID]...
    or --owner choose the trees, all of them by default; unless sessions are named, the
    memory items go too (the owner's, or all). Resumable: run it again after an
    interruption and it skips the trees already copied. Memory grows only with the largest
    row: three to four times it.
    """
    if on_conflict == "replace":
        confirm(f"Replace conflicting sessions in {display_url(target_url)}", yes=yes)
    ids = list(session_ids) if session_ids else None
    started = time.monotonic()
    with (
        open_store(source_url, read_only=True) as source,
        open_store(target_url) as target,
        progress_bar("Copying") as advance,
        conflicts(target_url),
    ):
        report = transfer.copy_store(
            source,
            target,
            session_ids=ids,
            owner_id=owner,
            on_conflict=on_conflict,
            progress=advance,
        )
    seconds = time.monotonic() - started
    show_transfer(report, as_json, verb="Copied", seconds=seconds, verbose=verbose)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.argument("destination", metavar="DEST", type=click.Path(dir_okay=False, path_type=Path))
@JSON_OPTION
def backup(url: str, destination: Path, as_json: bool) -> None:
    """Back up a SQLite store to a new file, consistent while writers run.

    URL is the store and DEST the new file (refused if it exists). PostgreSQL stores are
    backed up with pg_dump instead.
    """
    with open_store(url, read_only=True) as store:
        report = store.upkeep.backup(destination)
    if as_json:
        echo_json(report.to_builtins())
        return
    console = output.make_console()
    output.render_key_values(
        console, [("backup", report.path), ("size", output.size(report.bytes))]
    )
