"""Internal: `turnstore search` and `turnstore reindex`, over the store's conversation search."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from rich.table import Table
from rich.text import Text

from turnstore.cli import output
from turnstore.cli.common import (
    JSON_OPTION,
    URL_ARGUMENT,
    StoreCommand,
    again,
    echo_json,
    echo_ndjson,
    escape_text,
    open_store,
)
from turnstore.cli.progress import progress_bar
from turnstore.records import SearchHit, SearchPage, SearchRequest

_WHEN = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"])


def _ms(moment: datetime | None) -> int | None:
    """A time given on the command line (UTC unless it names a zone), in Unix milliseconds."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.argument("query")
@click.option("--owner", metavar="ID", help="Only sessions owned by this owner id.")
@click.option("--kind", metavar="KIND", help="Only sessions of this kind (turnstore, adk, …).")
@click.option("--since", type=_WHEN, help="Only items written at or after this time (UTC).")
@click.option("--until", type=_WHEN, help="Only items written before this time (UTC).")
@click.option("--best", is_flag=True, help="Best matches first, not newest first.")
@click.option(
    "--limit",
    metavar="N",
    type=click.IntRange(1, 100),
    default=20,
    show_default=True,
    help="Hits per page.",
)
@click.option("--after", metavar="CURSOR", help="Start after the page that printed this cursor.")
@JSON_OPTION
def search(
    url: str,
    query: str,
    owner: str | None,
    kind: str | None,
    since: datetime | None,
    until: datetime | None,
    best: bool,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Find the items of any session whose text matches QUERY, newest first.

    URL is the store (a SQLite path, sqlite:///path or postgresql://..., or TURNSTORE_URL).
    QUERY is words and "quoted phrases", all of which must match; end a word with * to
    match it as a prefix (light* finds lighthouse). Case and, on SQLite, accents do not
    matter. Message text, tool names, tool arguments and tool results are searched; ids,
    roles, state and internal records are not. --json prints one hit per line and a last
    line {"next": CURSOR} when more hits exist.
    """
    request = SearchRequest(
        query=query,
        owner_id=owner,
        kind=kind,
        since_ms=_ms(since),
        until_ms=_ms(until),
        order="best" if best else "newest",
        limit=limit,
        cursor=after,
    )
    with open_store(url, read_only=True) as store:
        page = store.search(request)
    if as_json:
        echo_ndjson([*(hit.to_builtins() for hit in page.hits), {"next": page.next_cursor}])
        return
    console = output.make_console()
    console.print(_table(page))
    if page.next_cursor is not None:
        words: list[object] = [query]
        for flag, value in (("--owner", owner), ("--kind", kind)):
            if value is not None:
                words += [flag, value]
        for flag, moment in (("--since", since), ("--until", until)):
            if moment is not None:
                words += [flag, moment.isoformat(timespec="seconds")]
        if best:
            words.append("--best")
        words += ["--limit", limit, "--after", page.next_cursor]
        output.render_more(console, "More hits exist. Next page:", again("search", url, *words))


def place(hit: SearchHit) -> str:
    """Where a hit is in its session: a transcript batch's item, or a context item."""
    if hit.sequence is None:
        return f"item {hit.item}"
    return f"checkpoint {hit.sequence}, item {hit.item}"


def _snippet(hit: SearchHit) -> Text:
    """The snippet with its matches in bold, control characters escaped."""
    shown = Text()
    at = 0
    for start, end in hit.marks:
        shown.append(escape_text(hit.snippet[at:start]))
        shown.append(escape_text(hit.snippet[start:end]), style="bold yellow")
        at = end
    shown.append(escape_text(hit.snippet[at:]))
    return shown


def _table(page: SearchPage) -> Table | Text:
    if not page.hits:
        return Text("No item matches.")
    table = Table(show_lines=False)
    for name in ("written", "session", "kind", "owner", "place", "match"):
        table.add_column(name, overflow="fold")
    for hit in page.hits:
        written = datetime.fromtimestamp(hit.written_at_ms / 1000, UTC)
        table.add_row(
            written.strftime("%Y-%m-%d %H:%M"),
            escape_text(hit.session_id),
            hit.kind or "-",
            escape_text(hit.owner_id or "-"),
            place(hit),
            _snippet(hit),
        )
    return table


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.option("--restart", is_flag=True, help="Build the whole index anew, not from where it was.")
@click.option(
    "--batch",
    metavar="N",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="Sessions indexed per commit.",
)
@JSON_OPTION
def reindex(url: str, restart: bool, batch: int, as_json: bool) -> None:
    """Build the search index of a store written before search existed.

    URL is the store (a SQLite path, sqlite:///path or postgresql://..., or TURNSTORE_URL).
    It runs in commits of --batch sessions beside the store's other writers; stopped, it goes
    on where it was the next time. A new store needs none: its writes are indexed as they
    come.
    """
    with open_store(url, existing=True) as store, progress_bar("Indexing") as advance:
        done = store.upkeep.reindex(restart=restart, batch_sessions=batch, progress=advance)
    if as_json:
        echo_json(done.to_builtins())
        return
    output.make_console().print(
        f"Search index built: {done.sessions_total} sessions,"
        f" {done.items_indexed} items indexed by this run."
    )
