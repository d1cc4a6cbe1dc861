"""Internal: `import-from langgraph-store` and `import-from adk-memory`: long-term memory in.

The commands join `turnstore.cli.moves`' `import-from` group; the sources are read, never
written. The library calls under them are in `turnstore.integrations.memory_move`.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import Any

import click

from turnstore.cli import output
from turnstore.cli.common import JSON_OPTION, display_url, echo_json, open_store
from turnstore.cli.moves import import_from
from turnstore.cli.progress import progress_bar

_VERIFY = click.option(
    "--verify", is_flag=True, help="Then read every item back on both sides and compare them."
)
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Count the items; move nothing.")


def _show(report: Any, checked: Any, as_json: bool, dry_run: bool) -> None:
    """A move's summary line, what it left out, and the verify's verdict (or the JSON)."""
    if as_json:
        body: dict[str, Any] = {
            "item_count": report.item_count,
            "written_count": report.written_count,
            "present_count": report.present_count,
            "skipped": [_problem(p) for p in report.skipped],
            "seconds": round(report.seconds, 3),
            "dry_run": dry_run,
        }
        if checked is not None:
            difference = checked.difference
            body["verify"] = {
                "item_count": checked.item_count,
                "seconds": round(checked.seconds, 3),
                "difference": None if difference is None else _problem(difference),
            }
        echo_json(body)
        return
    console = output.make_console()
    if dry_run:
        console.print(
            f"Would move {report.item_count:,} memory items; dry run, nothing moved.",
            soft_wrap=True,
        )
        return
    line = f"Moved in {report.item_count:,} memory items in {report.seconds:.1f} s"
    line += f" ({report.written_count:,} written, {report.present_count:,} already there)"
    if report.skipped:
        line += f"; {len(report.skipped):,} left out"
    console.print(line + ".", soft_wrap=True, markup=False)
    for problem in report.skipped:
        place = ".".join(problem.namespace)
        console.print(f"  left out: {place} {problem.key}: {problem.reason}", markup=False)
    if checked is not None:
        difference = checked.difference
        verdict = (
            "no difference"
            if difference is None
            else f"first difference at {'.'.join(difference.namespace)} {difference.key}:"
            f" {difference.reason}"
        )
        console.print(
            f"Verified {checked.item_count:,} memory items in {checked.seconds:.1f} s: {verdict}.",
            soft_wrap=True,
            markup=False,
        )


def _problem(problem: Any) -> dict[str, Any]:
    return {"namespace": list(problem.namespace), "key": problem.key, "reason": problem.reason}


@import_from.command("langgraph-store")
@click.argument("source", metavar="SOURCE")
@click.argument("url", metavar="STORE")
@click.option(
    "--owner",
    metavar="ID",
    help="The owner of every item moved in. Default: each item's first namespace label, as"
    " TurnstoreStore owns items.",
)
@click.option(
    "--no-words", is_flag=True, help="Do not search the items by their words (words=False)."
)
@_DRY_RUN
@_VERIFY
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Leave out (and report) items no store could hold, instead of stopping at the first.",
)
@JSON_OPTION
def import_langgraph_store(
    source: str,
    url: str,
    owner: str | None,
    no_words: bool,
    dry_run: bool,
    verify: bool,
    skip_bad: bool,
    as_json: bool,
) -> None:
    """Copy LangGraph memory items into a store from SqliteStore or PostgresStore.

    SOURCE (a SqliteStore file or a PostgresStore postgresql:// URL) is read, never written;
    STORE is the turnstore store (a SQLite file is created if missing). Each live item keeps
    its namespace, key, value, times and time to live; vectors are not moved. Run it again
    at any time: items already there are left as they are, and --verify reports one that
    differs from the source's.
    """
    from turnstore.integrations import memory_move as move

    def owned(namespace: tuple[str, ...]) -> str | None:
        return owner if owner is not None else move.first_label(namespace)

    with ExitStack() as stack:
        try:
            reader = move.LangGraphSource(source)
        except (FileNotFoundError, ImportError) as error:
            raise click.ClickException(f"{display_url(source)}: {error}") from None
        stack.callback(reader.close)
        if dry_run:
            _show(move.count_langgraph_items(reader), None, as_json, dry_run=True)
            return
        store = stack.enter_context(open_store(url))
        try:
            with progress_bar("Copying memory items") as advance:
                report = move.copy_langgraph_items(
                    reader,
                    store,
                    owner=owned,
                    searched=not no_words,
                    skip_bad=skip_bad,
                    progress=advance,
                )
        except ValueError as error:
            raise click.ClickException(
                f"{display_url(source)}: {error}; --skip-bad leaves such items out and reports them"
            ) from None
        checked = move.verify_langgraph_items(reader, store) if verify else None
    _show(report, checked, as_json, dry_run=False)
    if checked is not None and checked.difference is not None:
        raise SystemExit(1)


@import_from.command("adk-memory")
@click.argument("source", metavar="SOURCE")
@click.argument("url", metavar="STORE")
@_DRY_RUN
@_VERIFY
@JSON_OPTION
def import_adk_memory(source: str, url: str, dry_run: bool, verify: bool, as_json: bool) -> None:
    """Copy ADK memories into a store from a SqliteMemoryService database.

    SOURCE (the SqliteMemoryService's SQLite file) is read, never written; STORE is the
    turnstore store (a SQLite file is created if missing). Each memory is added as the
    event it was made from, so TurnstoreMemoryService finds it as it finds what it is given.
    Run it again at any time: memories already there are left as they are.
    """
    try:
        from turnstore.integrations import memory_move as move
        from turnstore.integrations.adk_memory import TurnstoreMemoryService
    except ImportError as error:
        raise click.ClickException(
            f"moving ADK memories needs {error.name or 'Google ADK'}, which is not installed:"
            " pip install 'turnstore[adk]'"
        ) from None
    try:
        move.check_adk_source(source)
    except FileNotFoundError as error:
        raise click.ClickException(str(error)) from None
    if dry_run:
        _show(move.count_adk_memories(source), None, as_json, dry_run=True)
        return
    with open_store(url) as store:
        service = TurnstoreMemoryService(store)

        async def run() -> tuple[Any, Any]:
            with progress_bar("Copying memories") as advance:
                report = await move.copy_adk_memories(source, service, progress=advance)
            checked = await move.verify_adk_memories(source, service) if verify else None
            return report, checked

        report, checked = asyncio.run(run())
    _show(report, checked, as_json, dry_run=False)
    if checked is not None and checked.difference is not None:
        raise SystemExit(1)
