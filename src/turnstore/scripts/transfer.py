"""Transaction scripts of exports and imports: a session tree's rows out, and back in.

An export writes each tree in one read snapshot: a `tree` line naming its sessions, the
number of rows and the SHA-256 of the rows' lines, then the rows. An import writes each tree
in one transaction, so a tree is either wholly present or absent; the digest decides whether
a tree already present is the same one (skipped: importing a file twice changes nothing).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from turnstore.engine.protocol import Statements, Tx, select
from turnstore.errors import CorruptRecord
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ForkTree
from turnstore.records.runtime import SessionCheckpoint
from turnstore.records.upkeep import OnConflict
from turnstore.rules.transfer import (
    check_export_sessions,
    check_export_tree,
    check_import_conflict,
    check_row,
    check_row_owner,
    check_tree_problems,
    check_tree_root,
    check_tree_rows,
    check_tree_session,
    export_line,
    row_params,
)
from turnstore.scripts import checkpoints, search, sessions
from turnstore.scripts.stored_rows import RowCheck
from turnstore.scripts.transfer_rows import (
    BLOBS,
    ENCODER,
    LINE_DECODER,
    SESSION_TABLES,
    SESSIONS,
    Table,
    TreeHeader,
    record_table,
    to_params,
    to_record,
)

BATCH_ROWS = 500
BATCH_BYTES = 4 << 20
"""An import inserts rows in batches of at most this many rows or bytes: memory stays flat."""


class TransferSql(Statements):
    """The statements of exports and imports that are not per table."""

    all_roots = (
        "SELECT session_id FROM sessions WHERE parent_session_id IS NULL ORDER BY session_id"
    )
    owner_roots = (
        "SELECT session_id FROM sessions WHERE parent_session_id IS NULL AND owner_id = ?"
        " ORDER BY session_id"
    )
    roots_of = (
        "WITH RECURSIVE up(session_id, parent) AS ("
        " SELECT session_id, parent_session_id FROM sessions WHERE {ids:session_id}"
        " UNION SELECT s.session_id, s.parent_session_id FROM sessions AS s"
        " JOIN up ON s.session_id = up.parent)"
        " SELECT session_id FROM up WHERE parent IS NULL ORDER BY session_id"
    )
    present = "SELECT session_id FROM sessions WHERE {ids:session_id}"
    tree = (
        "WITH RECURSIVE tree(session_id, depth) AS ("
        " SELECT session_id, 0 FROM sessions WHERE session_id = ?"
        " UNION ALL SELECT child.session_id, tree.depth + 1 FROM {children})"
        " SELECT session_id FROM tree ORDER BY depth, session_id"
    )
    tree_rows = select(sessions.SessionRow, f"FROM sessions WHERE session_id IN ({tree})")
    head_refs = "SELECT checkpoint_ref FROM runtime_heads WHERE {ids:session_id}"
    blob = "SELECT data FROM blobs WHERE blob_ref = ?"


_SELECTS: dict[tuple[int, str], str] = {}
_INSERTS: dict[tuple[int, str], str] = {}


def _select(tx: Tx, table: Table) -> str:
    found = _SELECTS.get((id(tx.dialect), table.name))
    if found is None:
        where = f"{table.session_column} = ?" if table.session_column else "{ids:blob_ref}"
        found = tx.dialect.format(
            f"SELECT {', '.join(table.names)} FROM {table.name} WHERE {where}"
            f" ORDER BY {', '.join(table.key)}"
        )
        _SELECTS[(id(tx.dialect), table.name)] = found
    return found


def _insert(tx: Tx, table: Table) -> str:
    found = _INSERTS.get((id(tx.dialect), table.name))
    if found is None:
        marks = ", ".join("?" * len(table.columns))
        found = tx.dialect.format(
            f"INSERT INTO {table.name} ({', '.join(table.names)}) VALUES ({marks})"
            f" {table.on_conflict}".rstrip()
        )
        _INSERTS[(id(tx.dialect), table.name)] = found
    return found


def roots(tx: Tx, session_ids: list[str] | None, owner_id: str | None) -> list[str]:
    """The roots of the trees an export carries: of the named sessions, an owner, or all."""
    sql = tx.sql(TransferSql)
    if session_ids is not None:
        ids = sorted(set(session_ids))
        check_export_sessions(ids, set(tx.values(sql.present, (tx.dialect.id_list(ids),))))
        return list(tx.values(sql.roots_of, (tx.dialect.id_list(ids),)))
    if owner_id is not None:
        return list(tx.values(sql.owner_roots, (owner_id,)))
    return list(tx.values(sql.all_roots))


def tree(tx: Tx, root: str) -> list[str]:
    """A session and every fork below it, parents before children; [] if absent."""
    return list(tx.values(tx.sql(TransferSql).tree, (root,)))


def fork_tree(tx: Tx, session_id: str, limit: int) -> ForkTree | None:
    """The tree holding a session: its root, then the forks breadth-first; None if absent.

    Siblings come in the order they branched: by parent sequence, creation time and id.
    """
    sql = tx.sql(TransferSql)
    roots = tx.values(sql.roots_of, (tx.dialect.id_list([session_id]),))
    if not roots:
        return None
    root: str = roots[0]
    children: dict[str, list[sessions.SessionRow]] = {}
    top: sessions.SessionRow | None = None
    for row in tx.rows(sql.tree_rows, (root,)):
        if row.session_id == root:
            top = row
        elif row.parent_session_id is not None:
            children.setdefault(row.parent_session_id, []).append(row)
    if top is None:  # the root went between the two reads of a non-snapshot transaction
        return None
    ordered: list[sessions.SessionRow] = []
    queue = deque([top])
    while queue and len(ordered) <= limit:
        row = queue.popleft()
        ordered.append(row)
        below = children.get(row.session_id, [])
        queue.extend(sorted(below, key=lambda c: (c.parent_sequence, c.created_at, c.session_id)))
    return ForkTree(
        root_session_id=root,
        sessions=[sessions.summary_of(row) for row in ordered[:limit]],
        truncated=len(ordered) > limit,
    )


def tree_records(tx: Tx, ids: list[str]) -> Iterator[msgspec.Struct]:
    """Every row of the sessions `ids` (parents first) and the blobs their heads reach."""
    for session_id in ids:
        for row in tx.stream(_select(tx, SESSIONS), (session_id,)):
            yield to_record(SESSIONS, row)
    for table in SESSION_TABLES:
        for session_id in ids:
            for row in tx.stream(_select(tx, table), (session_id,)):
                yield to_record(table, row)
    refs = _reached_blobs(tx, ids)
    if refs:
        for row in tx.stream(_select(tx, BLOBS), (tx.dialect.id_list(refs),)):
            yield to_record(BLOBS, row)


def _reached_blobs(tx: Tx, ids: list[str]) -> list[str]:
    sql = tx.sql(TransferSql)
    heads = set(tx.values(sql.head_refs, (tx.dialect.id_list(ids),)))
    reached = set(heads)
    for ref in heads:
        data = tx.value(sql.blob, (ref,))
        if data is not None:
            manifest = decode_stored(bytes(data), SessionCheckpoint, "checkpoint manifest")
            reached.update(manifest.blob_refs())
    return sorted(reached)


def tree_problems(tx: Tx, root: str) -> list[str]:
    """Why reads would refuse rows of a stored tree: one tree of `doctor(deep=True)`'s scan."""
    check = RowCheck()
    problems: list[str] = []
    try:
        for record in tree_records(tx, tree(tx, root)):
            table = record_table(record)
            found = None if table is None else check.row(table, record)
            if found is not None:
                problems.append(found)
    except (CorruptRecord, ValueError) as error:
        # A head's manifest (read to find the tree's blobs) or a JSON null that no read takes.
        return [*problems, f"tree {root!r}: {error}"]
    return problems + check.finish(tx)


def tree_lines(tx: Tx, root: str) -> Iterator[bytes]:
    """The encoded lines of a tree's rows, each ending in a newline."""
    for record in tree_records(tx, tree(tx, root)):
        yield ENCODER.encode(record) + b"\n"


def digest_of(lines: Iterator[bytes]) -> tuple[str, int]:
    """The SHA-256 of a tree's row lines and how many there are."""
    digest = hashlib.sha256()
    count = 0
    for line in lines:
        digest.update(line)
        count += 1
    return digest.hexdigest(), count


MAX_LINE_BYTES = 64 << 20
"""The longest line (newline included) an import reads unless told otherwise: 64 MiB.

msgspec decodes a line whole, and the database driver copies a row's values whole (SQLite
twice: its bound value and the record it builds; psycopg and libpq three times), so an
import peaks at three (SQLite) to four (PostgreSQL) times its longest line: a 200 MB line
took 634 MB and 846 MB. This bounds that at about 200 (270) MB above the process's own
~30 (45) MB, whatever the file."""


@dataclass
class LineSource:
    """The lines of an export being read, numbered, with one line of look-ahead."""

    stream: IO[bytes]
    max_line_bytes: int | None = MAX_LINE_BYTES
    number: int = 0
    _held: Any = None
    _held_size: int = 0
    read_bytes: int = field(default=0)

    def next(self) -> tuple[Any, int] | None:
        """The next line decoded, with its size in bytes; None at the end of the file."""
        if self._held is not None:
            held, self._held = self._held, None
            return held, self._held_size
        limit = self.max_line_bytes
        # Read at most one byte past the limit: a longer line is refused, never held whole.
        raw = self.stream.readline() if limit is None else self.stream.readline(limit + 1)
        if not raw:
            return None
        self.number += 1
        self.read_bytes += len(raw)
        return export_line(raw, self.number, limit, LINE_DECODER.decode), len(raw)

    def push_back(self, line: Any, size: int) -> None:
        """Return a line to be read again by the next `next()`."""
        self._held, self._held_size = line, size


@dataclass(frozen=True, slots=True)
class TreeOutcome:
    """What an import did with one tree: written or skipped, its rows, what it replaced."""

    written: bool
    row_count: int
    replaced: list[str] = field(default_factory=list)


def import_tree(
    tx: Tx, header: TreeHeader, source: LineSource, on_conflict: OnConflict
) -> TreeOutcome:
    """Write one tree's rows from `source`, or skip them when the tree is already present."""
    ids = header.session_ids
    check_tree_root(ids, header.root, source.number)
    present = tx.values(tx.sql(TransferSql).present, (tx.dialect.id_list(ids),))
    if present:
        if _same_tree(tx, header):
            return TreeOutcome(False, _consume(source, header, None))
        check_import_conflict(on_conflict, present)
        if on_conflict == "skip":
            return TreeOutcome(False, _consume(source, header, None))
        replaced = sorted({i for root in present for i in tree(tx, root)})
        checkpoints.delete(tx, present)
    else:
        replaced = []
    sink = _Sink(tx, header.root)
    count = _consume(source, header, sink)
    check_tree_problems(header.root, sink.check.finish(tx))
    for session_id in ids:
        check_tree_session(header.root, session_id, sessions.summary(tx, session_id))
        # An imported session's journal is new to anyone waiting on it.
        tx.wrote_events(session_id)
        # The search index is derived: an imported session is indexed from what it holds.
        search.rebuild_session(tx, session_id)
    return TreeOutcome(True, count, replaced)


def _same_tree(tx: Tx, header: TreeHeader) -> bool:
    if tree(tx, header.root) != header.session_ids:
        return False
    digest, count = digest_of(tree_lines(tx, header.root))
    return digest == header.digest and count == header.row_count


class _Sink:
    """Where a written tree's rows go: checked as the reads decode them, inserted in batches.

    A batch is written when the next row does not fit it, by which time the caller has let
    go of the line it came from, so a long row's line is not held beside the driver's copies.
    """

    def __init__(self, tx: Tx, root: str) -> None:
        self.tx = tx
        self.root = root
        self.check = RowCheck()
        self.batch: list[tuple[Any, ...]] = []
        self.table: Table | None = None
        self.size = 0

    def add(self, table: Table, record: Any, size: int, number: int) -> None:
        """Check one row and queue it for insertion."""
        check_row(number, self.check.row(table, record), self.root)
        params = row_params(number, lambda: to_params(table, record))
        if self.batch and (
            table is not self.table or len(self.batch) >= BATCH_ROWS or self.size > BATCH_BYTES
        ):
            self.flush()
        self.table = table
        self.batch.append(params)
        self.size += size

    def flush(self) -> None:
        """Insert the queued rows."""
        if self.batch and self.table is not None:
            self.tx.many(_insert(self.tx, self.table), self.batch)
        self.batch, self.size = [], 0


def _consume(source: LineSource, header: TreeHeader, sink: _Sink | None) -> int:
    """Read a tree's rows up to the next tree or the end, checking them against `header`."""
    digest = hashlib.sha256()
    count = 0
    allowed = set(header.session_ids)
    while (read := source.next()) is not None:
        record, size = read
        table = record_table(record)
        if table is None:
            source.push_back(record, size)
            break
        _check_owner(table, record, allowed, source.number)
        encoded = ENCODER.encode(record)
        digest.update(encoded)
        digest.update(b"\n")
        del encoded
        count += 1
        if sink is not None:
            sink.add(table, record, size, source.number)
        # Let go of the line before the batch holding its row is written (see _Sink).
        del read, record
    if sink is not None:
        sink.flush()
    check_tree_rows(
        header.root, count, digest.hexdigest(), header.row_count, header.digest, source.number
    )
    return count


def _check_owner(table: Table, record: Any, allowed: set[str], number: int) -> None:
    if not table.session_column:
        return
    check_row_owner(table.name, getattr(record, table.session_column), allowed, number)


SPOOL_BYTES = 8 << 20
"""A tree's or a memory section's lines are held in memory up to this size, then in a
temporary file."""


def write_digested(
    out: IO[bytes], records: Iterable[msgspec.Struct], header: Callable[[int, str], msgspec.Struct]
) -> int:
    """Write `header(count, digest)` and then `records`, one line each, to `out`: the header
    gives the rows' count and SHA-256, so the rows are spooled while they are computed; the
    count."""
    digest = hashlib.sha256()
    count = 0
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        for record in records:
            line = ENCODER.encode(record)
            digest.update(line)
            digest.update(b"\n")
            spool.write(line)
            spool.write(b"\n")
            count += 1
        out.write(ENCODER.encode(header(count, digest.hexdigest())) + b"\n")
        spool.seek(0)
        shutil.copyfileobj(spool, out)
    return count


def export_tree(tx: Tx, root: str, out: IO[bytes]) -> tuple[list[str], int]:
    """Write one tree (its `tree` line, then its rows) to `out`; its sessions and row count."""
    ids = tree(tx, root)
    check_export_tree(ids, root)
    count = write_digested(
        out,
        tree_records(tx, ids),
        lambda rows, digest: TreeHeader(root=root, session_ids=ids, row_count=rows, digest=digest),
    )
    return ids, count
