"""Internal: `turnstore memory …`, long-term memory items seen, searched and deleted.

A namespace is written on the command line as its labels joined by `.` (`ada.preferences`),
as the store keeps it: no label may hold a `.`, so the spelling is never ambiguous.
"""

from __future__ import annotations

from typing import Any

import click
import msgspec
from rich.table import Table

from turnstore import BlockingStore
from turnstore.cli import output
from turnstore.cli.common import (
    DRY_RUN_OPTION,
    JSON_OPTION,
    URL_ARGUMENT,
    YES_OPTION,
    StoreCommand,
    again,
    confirm,
    cut,
    display_url,
    echo_json,
    echo_ndjson,
    escape_text,
    open_store,
)
from turnstore.cli.search import SearchCommand, flat, marked
from turnstore.records.memory import (
    SEPARATOR,
    MemoryCall,
    MemoryCatalogRequest,
    MemoryDelete,
    MemoryFindRequest,
    MemoryGet,
    MemoryRow,
    MemorySearch,
    namespace_of,
)

PAGE = 20
"""Rows on one page unless `--limit` says otherwise."""
MOST = 1000
"""The most rows one page may hold (a memory search's own limit)."""


class Namespace(click.ParamType[tuple[str, ...]]):
    """A namespace on the command line: labels joined by `.`, none of them empty."""

    name = "namespace"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        """Split `value` into its labels."""
        if isinstance(value, tuple):
            return value
        labels = tuple(str(value).split(SEPARATOR))
        if not all(labels):
            self.fail(f"{value!r} is not a namespace like ada.preferences (no empty label)")
        return labels


NAMESPACE = Namespace()
"""The type of a NAMESPACE argument or a `--prefix` / `--after` option."""
LIMIT_OPTION = click.option(
    "--limit",
    metavar="N",
    type=click.IntRange(1, MOST),
    default=PAGE,
    show_default=True,
    help="Rows per page.",
)
OFFSET_OPTION = click.option(
    "--offset",
    metavar="N",
    type=click.IntRange(min=0),
    default=0,
    help="Skip this many rows: the next page's offset, which a page prints.",
)


def _dotted(labels: tuple[str, ...]) -> str:
    return SEPARATOR.join(labels)


def _preview(value: Any) -> str:
    """What a table shows of a value: its `text` when it has one (an ADK memory, most notes
    people write), else the whole value as compact JSON; cut to a line."""
    text = value.get("text") if isinstance(value, dict) else None
    shown = text if isinstance(text, str) else msgspec.json.encode(value).decode()
    return cut(flat(shown), 120)


def _row_json(row: MemoryRow) -> dict[str, Any]:
    return {
        "namespace": list(namespace_of(row.namespace)),
        "key": row.key,
        "owner_id": row.owner_id,
        "value": row.decoded_value(),
        "value_json": row.value_json,
        "created_at_ms": row.created_at_ms,
        "updated_at_ms": row.updated_at_ms,
        "expires_at_ms": row.expires_at_ms,
    }


@click.group("memory")
def memory() -> None:
    """List, show, search and delete the long-term memory items of a store."""


@memory.command("namespaces", cls=StoreCommand)
@URL_ARGUMENT
@click.option("--owner", metavar="ID", help="Only count the items this owner id owns.")
@click.option("--prefix", metavar="NAMESPACE", type=NAMESPACE, help="Only at or below it.")
@LIMIT_OPTION
@click.option("--after", metavar="NAMESPACE", type=NAMESPACE, help="Start after this namespace.")
@JSON_OPTION
def namespaces(
    url: str,
    owner: str | None,
    prefix: tuple[str, ...] | None,
    limit: int,
    after: tuple[str, ...] | None,
    as_json: bool,
) -> None:
    """List the namespaces holding live memory items, with their item counts.

    URL is the store. With --owner, only that owner's items are counted and namespaces
    without any are left out. When more exist, the table ends with the command printing the
    next page, and --json (one namespace per line) with a last line {"next": NAMESPACE}.
    """
    request = MemoryCatalogRequest(owner, prefix, after, limit)
    with open_store(url, read_only=True) as store:
        page = store.memory.catalog(request)
    following = None if page.next_after is None else _dotted(page.next_after)
    if as_json:
        lines: list[Any] = [
            {"namespace": list(n.namespace), "items": n.items, "updated_at_ms": n.updated_at_ms}
            for n in page.namespaces
        ]
        echo_ndjson([*lines, {"next": following}])
        return
    console = output.make_console()
    if not page.namespaces:
        console.print("No memory items." if owner is None else f"No memory items of {owner!r}.")
        return
    table = Table()
    for name in ("namespace", "items", "updated"):
        table.add_column(name, overflow="fold", justify="right" if name == "items" else "left")
    for found in page.namespaces:
        table.add_row(
            escape_text(_dotted(found.namespace)),
            str(found.items),
            output.utc_seconds(found.updated_at_ms // 1000),
        )
    output.show_table(console, table)
    if following is not None:
        words: list[object] = []
        for flag, given in (("--owner", owner), ("--prefix", prefix and _dotted(prefix))):
            if given is not None:
                words += [flag, given]
        command = again("memory namespaces", url, *words, "--limit", limit, "--after", following)
        output.render_more(console, "More namespaces exist. Next page:", command)


@memory.command("list", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("namespace", type=NAMESPACE)
@LIMIT_OPTION
@OFFSET_OPTION
@JSON_OPTION
def list_items(
    url: str, namespace: tuple[str, ...], limit: int, offset: int, as_json: bool
) -> None:
    """List the live items in NAMESPACE and below it, most recently updated first.

    URL is the store, NAMESPACE labels joined by dots (ada.preferences). Each row shows the
    item's `text` when its value has one, else the value as JSON. --json prints one item per
    line, its whole value included, then {"next": OFFSET}, OFFSET null on the last page.
    """
    search = MemorySearch(namespace, offset=offset, limit=limit + 1)
    with open_store(url, read_only=True) as store:
        rows = [found.row for found in store.memory.run(MemoryCall(searches=(search,))).searches[0]]
    following = offset + limit if len(rows) > limit else None
    rows = rows[:limit]
    if as_json:
        echo_ndjson([*(_row_json(row) for row in rows), {"next": following}])
        return
    console = output.make_console()
    if not rows:
        console.print(f"No memory items in {_dotted(namespace)!r}.")
        return
    table = Table()
    for name in ("updated", "namespace", "key", "owner", "value"):
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(
            output.utc_seconds(row.updated_at_ms // 1000),
            escape_text(row.namespace),
            escape_text(row.key),
            escape_text(row.owner_id or "-"),
            _preview(row.decoded_value()),
        )
    output.show_table(console, table)
    if following is not None:
        words = [_dotted(namespace), "--limit", limit, "--offset", following]
        output.render_more(
            console, "More items exist. Next page:", again("memory list", url, *words)
        )


@memory.command("show", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("namespace", type=NAMESPACE)
@click.argument("key")
@JSON_OPTION
def show(url: str, namespace: tuple[str, ...], key: str, as_json: bool) -> None:
    """Show one memory item whole, with when it was written and expires.

    URL is the store, NAMESPACE labels joined by dots and KEY the item's key. Reading it does
    not restart its time to live. An expired item is not shown, as no read returns one.
    """
    with open_store(url, read_only=True) as store:
        row = _get(store, namespace, key)
    if row is None:
        raise click.ClickException(
            f"{display_url(url)}: no memory item {key!r} in {_dotted(namespace)!r}"
        )
    if as_json:
        echo_json(_row_json(row))
        return
    console = output.make_console()
    when = [
        ("namespace", escape_text(row.namespace)),
        ("key", escape_text(row.key)),
        ("owner", escape_text(row.owner_id or "-")),
        ("created", output.utc_seconds(row.created_at_ms // 1000)),
        ("updated", output.utc_seconds(row.updated_at_ms // 1000)),
    ]
    if row.expires_at_ms is not None:
        when.append(("expires", output.utc_seconds(row.expires_at_ms // 1000)))
    output.render_key_values(console, when)
    value = row.decoded_value()
    if isinstance(value, str) and value == row.value_json:
        console.print(escape_text(value), soft_wrap=True)
    else:
        console.print_json(data=value, highlight=False)


def _get(store: BlockingStore, namespace: tuple[str, ...], key: str) -> MemoryRow | None:
    return store.memory.run(MemoryCall(gets=(MemoryGet(namespace, key),))).gets[0]


@memory.command("search", cls=SearchCommand)
@URL_ARGUMENT
@click.argument("query")
@click.option("--owner", metavar="ID", help="Only items this owner id owns.")
@click.option("--prefix", metavar="NAMESPACE", type=NAMESPACE, help="Only at or below it.")
@LIMIT_OPTION
@OFFSET_OPTION
@JSON_OPTION
def search(
    url: str,
    query: str,
    owner: str | None,
    prefix: tuple[str, ...] | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """Find the memory items whose text matches QUERY, best match first.

    URL is the store. QUERY is read as `turnstore search` reads it: words and "quoted
    phrases", all of which must match, word* a prefix; a query may start with one -. The
    strings of an item's value are searched, not its namespace or key. --json prints one
    hit per line, then {"next": OFFSET}, OFFSET null on the last page.
    """
    request = MemoryFindRequest(query, owner, prefix, limit, offset)
    with open_store(url, read_only=True) as store:
        page = store.memory.find(request)
    if as_json:
        lines: list[Any] = [
            {
                "namespace": list(hit.namespace),
                "key": hit.key,
                "updated_at_ms": hit.updated_at_ms,
                "snippet": hit.snippet,
                "marks": [list(mark) for mark in hit.marks],
            }
            for hit in page.hits
        ]
        echo_ndjson([*lines, {"next": page.next_offset}])
        return
    console = output.make_console()
    if not page.hits:
        console.print("No memory item matches.")
        return
    table = Table()
    for name in ("updated", "namespace", "key", "match"):
        table.add_column(name, overflow="fold")
    for hit in page.hits:
        table.add_row(
            output.utc_seconds(hit.updated_at_ms // 1000),
            escape_text(_dotted(hit.namespace)),
            escape_text(hit.key),
            marked(hit.snippet, hit.marks),
        )
    output.show_table(console, table)
    if page.next_offset is not None:
        words: list[object] = []
        for flag, given in (("--owner", owner), ("--prefix", prefix and _dotted(prefix))):
            if given is not None:
                words += [flag, given]
        words += ["--limit", limit, "--offset", page.next_offset]
        words = [*words, "--", query] if query.startswith("-") else [query, *words]
        output.render_more(
            console, "More hits exist. Next page:", again("memory search", url, *words)
        )


@memory.command("delete", cls=StoreCommand)
@URL_ARGUMENT
@click.argument("namespace", type=NAMESPACE)
@click.argument("keys", metavar="KEY...", nargs=-1, required=True)
@YES_OPTION
@DRY_RUN_OPTION
@JSON_OPTION
def delete(
    url: str,
    namespace: tuple[str, ...],
    keys: tuple[str, ...],
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Delete memory items of one namespace and their words from search.

    URL is the store, NAMESPACE labels joined by dots, each KEY an item in it. Asks on a
    terminal (--yes off one). All or nothing: if any KEY is absent (or expired), nothing is
    deleted and the command fails; the rest go in one commit.
    """
    unique = tuple(dict.fromkeys(keys))
    with open_store(url, read_only=dry_run, existing=True) as store:
        gets = tuple(MemoryGet(namespace, key) for key in unique)
        found = store.memory.run(MemoryCall(gets=gets)).gets
        missing = [key for key, row in zip(unique, found, strict=True) if row is None]
        if missing:
            names = ", ".join(repr(key) for key in missing)
            raise click.ClickException(
                f"{display_url(url)}: nothing deleted; no memory item {names}"
                f" in {_dotted(namespace)!r}"
            )
        if not dry_run and not yes:
            _show_deleted(output.make_console(stderr=True), "Will delete", namespace, unique)
            confirm(f"Delete these {len(unique)} memory item(s)", yes=yes)
        if not dry_run:
            writes = tuple(MemoryDelete(namespace, key) for key in unique)
            store.memory.run(MemoryCall(writes=writes))
    if as_json:
        echo_json({"namespace": list(namespace), "keys": list(unique), "dry_run": dry_run})
        return
    verb = "Would delete (dry run, nothing deleted)" if dry_run else "Deleted"
    _show_deleted(output.make_console(), verb, namespace, unique)


def _show_deleted(
    console: Any, verb: str, namespace: tuple[str, ...], keys: tuple[str, ...]
) -> None:
    title = f"{verb} {len(keys)} memory item(s) in {_dotted(namespace)!r}:"
    output.render_ids(console, title, list(keys))
