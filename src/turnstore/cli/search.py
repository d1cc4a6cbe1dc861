"""Internal: `turnstore search` and `turnstore reindex`, over the store's conversation search."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Sequence
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
    cut,
    echo_json,
    echo_ndjson,
    escape_text,
    open_store,
)
from turnstore.cli.progress import progress_bar
from turnstore.records import SearchHit, SearchPage, SearchRequest
from turnstore.records.kinds import kinds

_WHEN = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"])
_SPACES = re.compile(r"\s+")


def _ms(moment: datetime | None) -> int | None:
    """A time given on the command line (UTC unless it names a zone), in Unix milliseconds."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


class SearchCommand(StoreCommand):
    """`search`, whose query may start with `-`: `turnstore search DB -1` searches for -1.

    A word that starts with one `-` and is not an option (search has no short option but
    `-h`) is the query, so it is moved behind `--`, where click reads it as an argument. A
    query that starts with `--` still needs `--` before it; an unknown option says so.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Read a query that starts with one `-` as the query, not as an option."""
        try:
            return super().parse_args(ctx, _dashed_query_last(self, ctx, args))
        except click.NoSuchOption as error:
            if error.possibilities:  # a misspelt option, which click names
                raise
            hint = (
                f"{error.message} (a query that starts with -- goes after --:"
                f" {ctx.command_path} URL -- {shlex.quote(error.option_name)})"
            )
            raise click.NoSuchOption(error.option_name, hint, ctx=ctx) from None


def _dashed_query_last(command: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
    """`args` with a positional word that starts with one `-` moved behind a `--`."""
    options = {name for param in command.params for name in param.opts + param.secondary_opts}
    options.update(ctx.help_option_names)
    valued = {
        name
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag
        for name in param.opts
    }
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            break
        if len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and arg not in options:
            return [*args[:index], *args[index + 1 :], "--", arg]
        # `--owner X` spends the next word, which may itself start with `-`.
        index += 2 if arg in valued else 1
    return args


@click.command(cls=SearchCommand)
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
    matter; punctuation separates words. A query may start with one - (-1); one that starts
    with -- goes after --. Message text, tool names, tool arguments and tool results are
    searched; ids, roles, state and internal records are not. --json prints one hit per line,
    then always a last line {"next": CURSOR}, CURSOR null on the last page.
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
    console.print(_table(page, kind))
    if page.next_cursor is not None:
        words: list[object] = []
        for flag, value in (("--owner", owner), ("--kind", kind)):
            if value is not None:
                words += [flag, value]
        for flag, moment in (("--since", since), ("--until", until)):
            if moment is not None:
                words += [flag, moment.isoformat(timespec="seconds")]
        if best:
            words.append("--best")
        words += ["--limit", limit, "--after", page.next_cursor]
        words = [*words, "--", query] if query.startswith("-") else [query, *words]
        output.render_more(console, "More hits exist. Next page:", again("search", url, *words))


def place(hit: SearchHit) -> str:
    """Where a hit is in its session: a transcript batch's item, or a context item."""
    if hit.sequence is None:
        return f"item {hit.item}"
    return f"checkpoint {hit.sequence}, item {hit.item}"


def marked(snippet: str, marks: Sequence[tuple[int, int]]) -> Text:
    """A snippet with its matches (`marks`) in bold, on one line: line breaks and tabs as
    spaces, other control characters escaped."""
    shown = Text()
    at = 0
    for start, end in marks:
        shown.append(flat(snippet[at:start]))
        shown.append(flat(snippet[start:end]), style="bold yellow")
        at = end
    shown.append(flat(snippet[at:]))
    return shown


def flat(text: str) -> str:
    """`text` on one line, escaped: runs of white space as one space."""
    # An item's strings are indexed one per line, and a message has lines of its own: a
    # table cell reads them as one run of text, as a search result page does.
    return escape_text(_SPACES.sub(" ", text))


def _no_hits(kind: str | None) -> Text:
    """What an empty page says; with a kind no module declares, the kinds that are."""
    known = [declared.name for declared in kinds()]
    if kind is None or kind in known:
        return Text("No item matches.")
    # Any name given to append_context is a kind too, so an unknown one is no error; but
    # it is most often a misspelt one, whose empty page would otherwise look like an answer.
    close = difflib.get_close_matches(kind.lower(), known, n=1)
    guess = f" Did you mean {close[0]}?" if close else ""
    return Text(
        f"No item matches. No integration writes sessions of kind {cut(kind, 64)!r}.{guess}"
        f" The kinds are {', '.join(known)}, and any kind given to append_context(kind=...)."
    )


def _table(page: SearchPage, kind: str | None = None) -> Table | Text:
    if not page.hits:
        return _no_hits(kind)
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
            marked(hit.snippet, hit.marks),
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
