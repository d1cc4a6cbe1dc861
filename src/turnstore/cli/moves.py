"""Internal: `import-from` and `export-to`, with `langgraph`: LangGraph threads in and out.

The groups, and what every framework's move shares (options, the dry run's line, the summary
line, problems and the verify's verdict), are here; `turnstore.cli.moves_agents` adds the
OpenAI Agents SDK's commands to the same groups.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from turnstore.cli import output
from turnstore.cli.common import (
    JSON_OPTION,
    display_url,
    echo_json,
    frozen_heap,
    open_store,
    sqlite_path,
)
from turnstore.cli.progress import progress_bar
from turnstore.errors import CorruptRecord
from turnstore.records.kinds.langgraph import KIND

F = TypeVar("F", bound=Callable[..., Any])

EXTRAS = {
    KIND.name: "pip install 'turnstore[langgraph]'",
    "langgraph.checkpoint.sqlite": "pip install langgraph-checkpoint-sqlite",
    "langgraph.checkpoint.postgres": (
        "pip install 'turnstore[postgres]' langgraph-checkpoint-postgres"
    ),
    "psycopg": "pip install 'turnstore[postgres]'",
}
"""What to install when a module the command needs is missing, by the module's name."""


@dataclass(frozen=True)
class MoveWords:
    """What a framework's move counts in: its report's fields and the words said of them."""

    whole: str
    """What is moved one at a time: `threads`, `sessions`."""
    part: str
    """What those hold: `checkpoints`, `items`."""
    skipped: str
    """Said of source rows skipped with `--skip-bad`."""
    fields: tuple[str, ...]
    """The report's counts, as `--json` gives them."""
    verified: tuple[str, ...]
    """The verify report's counts, as `--json` gives them."""


LANGGRAPH = MoveWords(
    "threads",
    "checkpoints",
    "unreadable, skipped",
    ("thread_count", "checkpoint_count", "present_count", "write_count"),
    ("checkpoint_count",),
)
"""The words of the LangGraph move."""


def move_options(words: MoveWords, skipped: str) -> Callable[[F], F]:
    """The options a framework's `import-from` and `export-to` share: `--threads ID` (or
    `--sessions`, by `words`), `--dry-run`, `--verify`, `--skip-bad` (of `skipped`), `--json`."""
    whole, part = words.whole, words.part

    def add(command: F) -> F:
        for option in reversed(
            [
                click.option(
                    f"--{whole}",
                    f"{whole[:-1]}_ids",
                    metavar="ID",
                    multiple=True,
                    help=f"Move only this {whole[:-1]} (repeatable). Default: every {whole[:-1]}.",
                ),
                click.option(
                    "--dry-run",
                    is_flag=True,
                    help=f"Count the {whole}, {part} and source bytes; move nothing.",
                ),
                click.option(
                    "--verify",
                    is_flag=True,
                    help=f"Then read every {whole[:-1]} back on both sides and compare them.",
                ),
                click.option(
                    "--skip-bad",
                    is_flag=True,
                    help=f"Skip (and report) source {skipped} that cannot be read, instead of"
                    " stopping at the first.",
                ),
                JSON_OPTION,
            ]
        ):
            command = option(command)
        return command

    return add


@contextmanager
def needs_langgraph() -> Iterator[None]:
    """A missing LangGraph module as one `Error:` line saying what to install."""
    try:
        yield
    except ModuleNotFoundError as error:
        name = error.name or ""
        advice = next(
            # The longest module name first: `langgraph.checkpoint.sqlite` before `langgraph`.
            (
                text
                for module, text in sorted(EXTRAS.items(), reverse=True)
                if name.startswith(module)
            ),
            EXTRAS[KIND.name],
        )
        raise click.ClickException(
            f"moving LangGraph threads needs {name or 'LangGraph'}, which is not installed:"
            f" {advice}"
        ) from None


def langgraph_saver(url: str, *, read_only: bool, stack: ExitStack) -> Any:
    """A `SqliteSaver` over a file or a `PostgresSaver` over a postgresql:// URL."""
    if url.startswith(("postgresql://", "postgres://")):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        stack.callback(conn.close)
        if read_only:
            # The source is only read: the server refuses any write in its transactions. Set
            # here, not by `options`, which would replace the URL's own (a search_path).
            conn.execute("SET default_transaction_read_only = on")
        saver = PostgresSaver(conn)
        if not read_only:
            saver.setup()
        return saver
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_path(url) or Path(url)
    if read_only:
        if not path.is_file():
            raise click.ClickException(f"{path}: no SqliteSaver database there; check the path")
        # mode=ro: the file and its log are never written, not even checkpointed on close.
        database = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False)
    else:
        database = sqlite3.connect(path, check_same_thread=False)
    stack.callback(database.close)
    return SqliteSaver(database)


@click.group("import-from")
def import_from() -> None:
    """Move another store's threads or sessions into turnstore."""


@click.group("export-to")
def export_to() -> None:
    """Move turnstore's threads or sessions out to another store."""


@import_from.command(KIND.name)
@click.argument("source", metavar="SOURCE")
@click.argument("url", metavar="STORE")
@click.option(
    "--owner",
    metavar="ID",
    help="The catalog owner of the threads moved in. Default: each thread's metadata"
    " owner_id, else user_id.",
)
@move_options(LANGGRAPH, "checkpoints")
def import_langgraph(
    source: str,
    url: str,
    owner: str | None,
    thread_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy LangGraph threads into a store from SqliteSaver or PostgresSaver.

    SOURCE is read, never written; STORE is the turnstore store (a SQLite file is created
    if missing). Run it again at any time: it copies only the checkpoints and writes the
    store lacks, and reports a checkpoint that differs from the source's as a conflict,
    leaving it as it is. Memory holds one thread's few recent checkpoints.
    """
    with needs_langgraph():
        from turnstore.integrations.langgraph import TurnstoreSaver

        with ExitStack() as stack:
            saver = langgraph_saver(source, read_only=True, stack=stack)
            if dry_run:
                _show_survey(saver, thread_ids, as_json)
                return
            store = stack.enter_context(open_store(url))
            target = stack.enter_context(TurnstoreSaver(store))
            _move(source, saver, target, store, thread_ids, owner, verify, skip_bad, as_json, "in")


@export_to.command(KIND.name)
@click.argument("url", metavar="STORE")
@click.argument("target", metavar="TARGET")
@move_options(LANGGRAPH, "checkpoints")
def export_langgraph(
    url: str,
    target: str,
    thread_ids: tuple[str, ...],
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy a store's LangGraph threads to a SqliteSaver file or a PostgresSaver URL.

    STORE is read, never written; TARGET is created (its tables too) if missing. Run it
    again at any time: it copies only what TARGET lacks, and reports a checkpoint that
    differs as a conflict, leaving it as it is.
    """
    with needs_langgraph():
        from turnstore.integrations.langgraph import TurnstoreSaver

        with ExitStack() as stack:
            store = stack.enter_context(open_store(url, read_only=True, existing=True))
            source = stack.enter_context(TurnstoreSaver(store))
            if dry_run:
                _show_survey(source, thread_ids, as_json)
                return
            saver = langgraph_saver(target, read_only=False, stack=stack)
            _move(url, source, saver, store, thread_ids, None, verify, skip_bad, as_json, "out")


def _show_survey(source: Any, thread_ids: tuple[str, ...], as_json: bool) -> None:
    from turnstore.integrations.langgraph_move import survey

    found = survey(source, list(thread_ids) or None)
    show_survey(found.thread_count, found.checkpoint_count, found.source_bytes, LANGGRAPH, as_json)


def _move(
    shown: str,
    source: Any,
    target: Any,
    store: Any,
    thread_ids: tuple[str, ...],
    owner: str | None,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
    direction: str,
) -> None:
    from turnstore.integrations import langgraph_move as move

    picked = list(thread_ids) or None
    try:
        with frozen_heap(), progress_bar("Copying threads") as advance:
            report = move.copy_threads(
                source, target, thread_ids=picked, owner_id=owner, skip_bad=skip_bad,
                progress=advance,
            )  # fmt: skip
    except CorruptRecord as error:
        # The source's row, not the store's: named by the source, with the option to pass.
        raise click.ClickException(
            f"{display_url(shown)}: {error}; --skip-bad skips such checkpoints and reports them"
        ) from None
    checked = None
    if verify:
        with frozen_heap(), progress_bar("Verifying threads") as advance:
            checked = move.verify_threads(source, target, thread_ids=picked, progress=advance)
    outside = move.tables_of(target if direction == "out" else source).size()
    sizes = {"source_bytes": outside, "turnstore_bytes": store.upkeep.stats().database_bytes}
    if direction == "out":
        sizes = {"source_bytes": sizes["turnstore_bytes"], "target_bytes": outside}
    parts = [f"{report.checkpoint_count:,} checkpoints", f"{report.write_count:,} writes"]
    if report.present_count:
        parts.append(f"{report.present_count:,} already there")
    show_move(report, checked, sizes, as_json, direction, LANGGRAPH, parts)
    if report.conflicts or (checked is not None and checked.difference is not None):
        raise SystemExit(1)


def show_survey(whole: int, part: int, size: int | None, words: MoveWords, as_json: bool) -> None:
    """A dry run's counts: `Would move 3 threads (90 checkpoints, 1.2 MiB); dry run, …`."""
    if as_json:
        body = {f"{words.whole[:-1]}_count": whole, f"{words.part[:-1]}_count": part}
        echo_json({**body, "source_bytes": size, "dry_run": True})
        return
    shown = "" if size is None else f", {size_text(size)}"
    output.make_console().print(
        f"Would move {whole:,} {words.whole} ({part:,} {words.part}{shown}); dry run,"
        " nothing moved.",
        soft_wrap=True,
    )


def show_move(
    report: Any,
    checked: Any,
    sizes: dict[str, int | None],
    as_json: bool,
    direction: str,
    words: MoveWords,
    parts: list[str],
) -> None:
    """A move's summary line (`parts` said first), its problems and the verify's verdict."""
    if as_json:
        body: dict[str, Any] = {name: getattr(report, name) for name in words.fields}
        body.update(sizes, seconds=round(report.seconds, 3))
        body["conflicts"] = [problem_json(p) for p in report.conflicts]
        body["skipped"] = [problem_json(p) for p in report.skipped]
        if checked is not None:
            body["verify"] = {name: getattr(checked, name) for name in words.verified}
            body["verify"]["seconds"] = round(checked.seconds, 3)
            difference = checked.difference
            body["verify"]["difference"] = None if difference is None else problem_json(difference)
        echo_json(body)
        return
    console = output.make_console()
    console.print(
        summary_line(report, sizes, direction, words, parts), soft_wrap=True, markup=False
    )
    problems = [("conflict", p) for p in report.conflicts]
    for kind, problem in problems + [("skipped", p) for p in report.skipped]:
        console.print(f"  {kind}: {problem.place}: {problem.reason}", soft_wrap=True, markup=False)
    if checked is not None:
        difference = checked.difference
        verdict = (
            "no difference"
            if difference is None
            else f"first difference at {difference.place}: {difference.reason}"
        )
        count = getattr(checked, f"{words.part[:-1]}_count")
        console.print(
            f"Verified {count:,} {words.part} in {checked.seconds:.1f} s: {verdict}.",
            soft_wrap=True,
            markup=False,
        )


def summary_line(
    report: Any, sizes: dict[str, int | None], direction: str, words: MoveWords, parts: list[str]
) -> str:
    """`Moved in 12 threads in 3.1 s (4,000 checkpoints, 9,000 writes, 40 already there; …).`"""
    parts = list(parts)
    for name, size in sizes.items():
        if size is not None:
            parts.append(f"{name.removesuffix('_bytes')} {size_text(size)}")
    count = getattr(report, f"{words.whole[:-1]}_count")
    line = f"Moved {direction} {count:,} {words.whole} in {report.seconds:.1f} s"
    line += f" ({', '.join(parts)})"
    if report.conflicts:
        line += f"; {len(report.conflicts):,} conflicts (left as they are)"
    if report.skipped:
        line += f"; {len(report.skipped):,} {words.skipped}"
    return line + "."


def problem_json(problem: Any) -> dict[str, Any]:
    """A problem as `--json` gives it: its place's fields and the reason."""
    return {**problem.place._asdict(), "reason": problem.reason}


def size_text(size: int) -> str:
    """Bytes as a person reads them: `1.2 MiB`."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


COMMANDS = [import_from, export_to]
"""The commands this module adds to `turnstore`."""
