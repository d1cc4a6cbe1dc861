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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from turnstore.backends.sql import checkpoints, sessions
from turnstore.backends.sql.engine import Statements, Tx, select
from turnstore.backends.sql.transfer_rows import (
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
from turnstore.errors import InvalidInput, SessionExists, SessionNotFound
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import ForkTree
from turnstore.records.runtime import SessionCheckpoint
from turnstore.records.upkeep import OnConflict

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
        found = set(tx.values(sql.present, (tx.dialect.id_list(ids),)))
        missing = [i for i in ids if i not in found]
        if missing:
            raise SessionNotFound(f"no session {missing[0]!r} to export", session_id=missing[0])
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


@dataclass
class LineSource:
    """The lines of an export being read, numbered, with one line of look-ahead."""

    stream: IO[bytes]
    number: int = 0
    _held: Any = None
    _held_size: int = 0
    read_bytes: int = field(default=0)

    def next(self) -> tuple[Any, int] | None:
        """The next line decoded, with its size in bytes; None at the end of the file."""
        if self._held is not None:
            held, self._held = self._held, None
            return held, self._held_size
        raw = self.stream.readline()
        if not raw:
            return None
        self.number += 1
        self.read_bytes += len(raw)
        try:
            return LINE_DECODER.decode(raw), len(raw)
        except msgspec.ValidationError as error:
            raise InvalidInput(f"export line {self.number}: {error}") from None
        except msgspec.DecodeError as error:
            raise InvalidInput(f"export line {self.number} is not JSON: {error}") from None

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
    if not ids or ids[0] != header.root:
        raise InvalidInput(f"export line {source.number}: a tree must list its root first")
    present = tx.values(tx.sql(TransferSql).present, (tx.dialect.id_list(ids),))
    if present:
        if _same_tree(tx, header):
            return TreeOutcome(False, _consume(source, header, None))
        if on_conflict == "fail":
            raise SessionExists(
                f"session {present[0]!r} exists with other content; import with "
                "on_conflict='skip' to keep it or 'replace' to overwrite it",
                session_id=present[0],
            )
        if on_conflict == "skip":
            return TreeOutcome(False, _consume(source, header, None))
        replaced = sorted({i for root in present for i in tree(tx, root)})
        checkpoints.delete(tx, present)
    else:
        replaced = []
    count = _consume(source, header, lambda table, rows: tx.many(_insert(tx, table), rows))
    for session_id in ids:
        # The catalog entry decodes as any other: a damaged row fails the import here.
        if sessions.summary(tx, session_id) is None:
            raise InvalidInput(
                f"export tree {header.root!r} has no sessions row for {session_id!r}"
            )
        # An imported session's journal is new to anyone waiting on it.
        tx.wrote_events(session_id)
    return TreeOutcome(True, count, replaced)


def _same_tree(tx: Tx, header: TreeHeader) -> bool:
    if tree(tx, header.root) != header.session_ids:
        return False
    digest, count = digest_of(tree_lines(tx, header.root))
    return digest == header.digest and count == header.row_count


Flush = Callable[[Table, list[tuple[Any, ...]]], None]


def _consume(source: LineSource, header: TreeHeader, flush: Flush | None) -> int:
    """Read a tree's rows up to the next tree or the end, checking them against `header`."""
    digest = hashlib.sha256()
    count = 0
    batch: list[tuple[Any, ...]] = []
    batch_table: Table | None = None
    batch_bytes = 0
    allowed = set(header.session_ids)
    while (read := source.next()) is not None:
        record, size = read
        table = record_table(record)
        if table is None:
            source.push_back(record, size)
            break
        _check_owner(table, record, allowed, source.number)
        line = ENCODER.encode(record) + b"\n"
        digest.update(line)
        count += 1
        if flush is None:
            continue
        if batch and (
            table is not batch_table or len(batch) >= BATCH_ROWS or batch_bytes > BATCH_BYTES
        ):
            flush(batch_table, batch)  # type: ignore[arg-type]
            batch, batch_bytes = [], 0
        batch_table = table
        batch.append(to_params(table, record))
        batch_bytes += size
    if flush is not None and batch:
        flush(batch_table, batch)  # type: ignore[arg-type]
    if count != header.row_count or digest.hexdigest() != header.digest:
        raise InvalidInput(
            f"export tree {header.root!r} is damaged or cut off: its rows do not match the "
            f"count and digest its tree line gives (line {source.number})"
        )
    return count


def _check_owner(table: Table, record: Any, allowed: set[str], number: int) -> None:
    if not table.session_column:
        return
    owner = getattr(record, table.session_column)
    if owner not in allowed:
        raise InvalidInput(
            f"export line {number}: a {table.name} row of session {owner!r}, which its tree "
            "does not list"
        )


SPOOL_BYTES = 8 << 20
"""A tree's lines are held in memory up to this size, then in a temporary file."""


def export_tree(tx: Tx, root: str, out: IO[bytes]) -> tuple[list[str], int]:
    """Write one tree (its `tree` line, then its rows) to `out`; its sessions and row count."""
    ids = tree(tx, root)
    if not ids:
        raise SessionNotFound(f"no session {root!r} to export", session_id=root)
    digest = hashlib.sha256()
    count = 0
    # The tree line gives the rows' digest, so the rows are spooled while it is computed.
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        for record in tree_records(tx, ids):
            line = ENCODER.encode(record) + b"\n"
            digest.update(line)
            spool.write(line)
            count += 1
        header = TreeHeader(root=root, session_ids=ids, row_count=count, digest=digest.hexdigest())
        out.write(ENCODER.encode(header) + b"\n")
        spool.seek(0)
        shutil.copyfileobj(spool, out)
    return ids, count
