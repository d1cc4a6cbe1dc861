"""Transaction scripts of long-term memory's exports and imports: sections of items.

An export writes the live items (of one owner, or all) in key order, `SECTION_ITEMS` to a
section, each section read in one snapshot: a `memory` line giving its item and row counts and
the SHA-256 of its rows' lines, then each item's row followed by its vectors' rows. An import
writes each section in one transaction. An item already present and the same (value, owner,
times, vectors, whether it is searched) is skipped, so importing a file twice changes
nothing; one that differs is refused, kept or replaced as `on_conflict` says (an expired one
is replaced). An item's words are indexed again by the database that imports it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any, NamedTuple

import msgspec

from turnstore.engine.protocol import Query, Statements, Tx, insert, select
from turnstore.records.memory import SEPARATOR, MemoryInsert, MemoryItemCopy
from turnstore.records.upkeep import OnConflict
from turnstore.rules.transfer import (
    check_memory_conflict,
    check_memory_copy,
    check_memory_item,
    check_memory_section,
    check_vector_follows,
)
from turnstore.schema.ddl import MIGRATIONS
from turnstore.scripts.transfer import write_digested
from turnstore.scripts.transfer_rows import (
    ENCODER,
    FORMAT_VERSION,
    MEMORY_ITEMS,
    MEMORY_TABLES,
    MEMORY_VECTORS,
    ExportEnd,
    ExportHeader,
    MemoryHeader,
    record_table,
    to_params,
    to_record,
)

SECTION_ITEMS = 500
"""Items in one section: one read snapshot on export, one transaction on import."""
_TABLES = {table.name: table for table in MEMORY_TABLES}


class ItemLine(NamedTuple):
    """A `memory_items` row as an export carries it (`MEMORY_ITEMS`' columns)."""

    namespace: str
    item_key: str
    owner_id: str | None
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    ttl_ms: int | None
    expires_at_ms: int | None
    searched: bool


class VectorLine(NamedTuple):
    """A `memory_vectors` row (`MEMORY_VECTORS`' columns)."""

    namespace: str
    item_key: str
    field: str
    vector: bytes


def _items(*, owner: bool, after: bool) -> Query[ItemLine]:
    """A section's items in key order: live, of one owner or all, first or after a key."""
    where = ["(expires_at_ms IS NULL OR expires_at_ms > {now_ms})"]
    where += ["owner_id = ?"] if owner else []
    # A row value: both databases read it as one range of the primary key.
    where += ["(namespace, item_key) > (?, ?)"] if after else []
    rest = f"FROM memory_items WHERE {' AND '.join(where)} ORDER BY namespace, item_key LIMIT ?"
    return select(ItemLine, rest, searched="{memory_searched}")


class MemoryTransferSql(Statements):
    """The statements of memory's exports and imports."""

    first = _items(owner=False, after=False)
    after = _items(owner=False, after=True)
    owned_first = _items(owner=True, after=False)
    owned_after = _items(owner=True, after=True)
    # A section's items are one range of the key: their vectors are read as one range too.
    vectors_between = select(
        VectorLine,
        "FROM memory_vectors WHERE (namespace, item_key) >= (?, ?)"
        " AND (namespace, item_key) <= (?, ?) ORDER BY namespace, item_key, field",
    )
    item = select(
        ItemLine,
        "FROM memory_items WHERE namespace = ? AND item_key = ?",
        searched="{memory_searched}",
    )
    item_vectors = select(
        VectorLine, "FROM memory_vectors WHERE namespace = ? AND item_key = ? ORDER BY field"
    )
    now = "SELECT {now_ms}"
    times = (
        "UPDATE memory_items SET created_at_ms = ?, updated_at_ms = ?, expires_at_ms = ?"
        " WHERE namespace = ? AND item_key = ?"
    )
    drop_vectors = "DELETE FROM memory_vectors WHERE namespace = ? AND item_key = ?"
    add_vector = insert(VectorLine, "memory_vectors")


class Section(NamedTuple):
    """What one exported section held: items, rows, and the last item's key (None: none)."""

    item_count: int
    row_count: int
    last: tuple[str, str] | None


def _section_items(tx: Tx, owner_id: str | None, after: tuple[str, str] | None) -> list[ItemLine]:
    """Up to `SECTION_ITEMS` live items after `after` (of `owner_id`, if given), in key order."""
    sql = tx.sql(MemoryTransferSql)
    owned = () if owner_id is None else (owner_id,)
    if after is None:
        query = sql.first if owner_id is None else sql.owned_first
        return tx.rows(query, (*owned, SECTION_ITEMS))
    query = sql.after if owner_id is None else sql.owned_after
    return tx.rows(query, (*owned, *after, SECTION_ITEMS))


def section_records(tx: Tx, items: list[ItemLine]) -> Iterator[msgspec.Struct]:
    """The rows of a section of `items` (a range of the key): each item's, then its vectors'."""
    wanted = {(item.namespace, item.item_key) for item in items}
    vectors: dict[tuple[str, str], list[VectorLine]] = {}
    first, last = items[0], items[-1]
    span = (first.namespace, first.item_key, last.namespace, last.item_key)
    for vector in tx.rows(tx.sql(MemoryTransferSql).vectors_between, span):
        if (vector.namespace, vector.item_key) in wanted:
            vectors.setdefault((vector.namespace, vector.item_key), []).append(vector)
    for item in items:
        yield to_record(MEMORY_ITEMS, item)
        for vector in vectors.get((item.namespace, item.item_key), ()):
            yield to_record(MEMORY_VECTORS, vector)


def export_section(
    tx: Tx, out: IO[bytes], owner_id: str | None, after: tuple[str, str] | None
) -> Section:
    """Write the next section (its `memory` line, then its rows) to `out`, if any item is
    left after `after`; what it held."""
    items = _section_items(tx, owner_id, after)
    if not items:
        return Section(0, 0, None)
    rows = write_digested(
        out,
        section_records(tx, items),
        lambda count, digest: MemoryHeader(item_count=len(items), row_count=count, digest=digest),
    )
    return Section(len(items), rows, (items[-1].namespace, items[-1].item_key))


@dataclass
class MemoryOutcome:
    """What an import did with one section: items written and skipped."""

    written: int = 0
    skipped: int = 0


@dataclass
class _Item:
    line: ItemLine
    vectors: list[VectorLine] = field(default_factory=list)


class ReadSection(NamedTuple):
    """A section read and checked: its items with their vectors, and how many rows it had."""

    items: list[_Item]
    row_count: int


def read_section(header: MemoryHeader, source: Any) -> ReadSection:
    """Read one section's rows from `source` (a `LineSource`) and check them, its counts and
    its digest, before any is written: a damaged section writes nothing, and a transaction
    tried again writes the same items (the lines are not read twice). A section is at most
    `SECTION_ITEMS` items, held while it is written."""
    digest = hashlib.sha256()
    items: list[_Item] = []
    rows = 0
    while (read := source.next()) is not None:
        record, size = read
        table = record_table(record, _TABLES)
        if table is None:
            source.push_back(record, size)
            break
        digest.update(ENCODER.encode(record))
        digest.update(b"\n")
        rows += 1
        if table is MEMORY_ITEMS:
            line = ItemLine(*to_params(table, record))
            check_memory_item(source.number, _copy_of(line))
            items.append(_Item(line))
            continue
        vector = VectorLine(*to_params(table, record))
        last = (items[-1].line.namespace, items[-1].line.item_key) if items else None
        check_vector_follows(source.number, (vector.namespace, vector.item_key), last)
        items[-1].vectors.append(vector)
    check_memory_section(
        source.number,
        (len(items), rows, digest.hexdigest()),
        (header.item_count, header.row_count, header.digest),
    )
    return ReadSection(items, rows)


def write_section(tx: Tx, items: list[_Item], on_conflict: OnConflict) -> MemoryOutcome:
    """Write a read section's items in this transaction: each unless the same item is there
    or `on_conflict` keeps a live one that differs."""
    outcome = MemoryOutcome()
    for item in items:
        _write(tx, item, on_conflict, outcome)
    return outcome


def _write(tx: Tx, item: _Item, on_conflict: OnConflict, outcome: MemoryOutcome) -> None:
    """Write one item and its vectors, unless the same item is there or `on_conflict` keeps
    a live one that differs."""
    sql, line = tx.sql(MemoryTransferSql), item.line
    key = (line.namespace, line.item_key)
    held = tx.row(sql.item, key)
    if held is not None:
        vectors = [v._replace(vector=bytes(v.vector)) for v in tx.rows(sql.item_vectors, key)]
        if (held._replace(searched=bool(held.searched)), vectors) == (line, item.vectors):
            outcome.skipped += 1
            return
        live = held.expires_at_ms is None or held.expires_at_ms > tx.value(sql.now)
        if live:
            check_memory_conflict(on_conflict, *key)
        if live and on_conflict == "skip":
            outcome.skipped += 1
            return
    put = MemoryInsert(*key, line.owner_id, line.value_json, line.ttl_ms, line.ttl_ms)
    tx.dialect.memory_text.put(tx, put, line.searched)
    # The put stamps the database's time; the item keeps the times it was exported with.
    tx.run(sql.times, (line.created_at_ms, line.updated_at_ms, line.expires_at_ms, *key))
    if held is not None:
        tx.run(sql.drop_vectors, key)
    if item.vectors:
        tx.many(sql.add_vector, item.vectors)
    outcome.written += 1


def _copy_of(line: ItemLine) -> MemoryItemCopy:
    """An item row as the item it holds."""
    return MemoryItemCopy(
        tuple(line.namespace.split(SEPARATOR)),
        line.item_key,
        line.value_json,
        line.created_at_ms,
        line.updated_at_ms,
        line.owner_id,
        line.ttl_ms,
        line.expires_at_ms,
        line.searched,
    )


def _line_of(item: MemoryItemCopy) -> ItemLine:
    """An item another store held as its row; `InvalidInput` if no put could write it."""
    check_memory_copy(item)
    namespace = SEPARATOR.join(item.namespace)
    return ItemLine(
        namespace,
        item.key,
        item.owner_id,
        item.value_json,
        item.created_at_ms,
        item.updated_at_ms,
        item.ttl_ms,
        item.expires_at_ms,
        item.searched,
    )


def write_items(out: IO[bytes], items: Iterable[MemoryItemCopy]) -> int:
    """Write `items` to `out` as an export file of memory sections alone (`SECTION_ITEMS` to a
    section, in the order given); how many. An item no put could write raises `InvalidInput`
    before its section is written."""
    header = ExportHeader(format_version=FORMAT_VERSION, schema_version=len(MIGRATIONS))
    out.write(ENCODER.encode(header) + b"\n")
    count = rows = 0
    given = iter(items)
    while lines := [_line_of(item) for item in islice(given, SECTION_ITEMS)]:
        count += len(lines)

        def section(written: int, digest: str) -> MemoryHeader:
            return MemoryHeader(item_count=len(lines), row_count=written, digest=digest)

        rows += write_digested(out, (to_record(MEMORY_ITEMS, line) for line in lines), section)
    end = ExportEnd(tree_count=0, row_count=rows, memory_item_count=count)
    out.write(ENCODER.encode(end) + b"\n")
    return count
