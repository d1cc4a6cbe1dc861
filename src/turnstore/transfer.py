"""Moving session trees between stores: export files (JSON Lines), imports, copies.

The format is documented in the docs' reference ("Export format"). `export_jsonl` and
`import_jsonl` are the stores' `export_trees` and `import_trees`; `copy_store` runs one into
the other, through a temporary file, so it works between any two backends, and, because an
import skips trees already present, resumes where it was cut off. Memory does not grow with
the number or size of trees, only with the longest single row (three to four times it).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from typing import IO

from turnstore.faces.aio_store import Store
from turnstore.faces.blocking_store import BlockingStore
from turnstore.ops.upkeep import MAX_LINE_BYTES
from turnstore.records.memory import MemoryItemCopy
from turnstore.records.upkeep import OnConflict, Progress, TransferReport
from turnstore.rules.transfer import check_memory_copy
from turnstore.scripts import transfer_memory

SPOOL_BYTES = 64 << 20
"""A copy holds up to this much of the export in memory, the rest in a temporary file."""

__all__ = [
    "MAX_LINE_BYTES",
    "OnConflict",
    "Progress",
    "check_memory_item",
    "copy_store",
    "copy_store_async",
    "export_jsonl",
    "export_jsonl_async",
    "import_jsonl",
    "import_jsonl_async",
    "import_memory_items",
]


def check_memory_item(item: MemoryItemCopy) -> None:
    """Refuse (`InvalidInput`) an item no put could write, as `import_memory_items` would."""
    check_memory_copy(item)


def import_memory_items(
    store: BlockingStore, items: Iterable[MemoryItemCopy], *, on_conflict: OnConflict = "fail"
) -> TransferReport:
    """Write memory items another store held, keeping their times and owners, as an import of
    an export file holding only them: 500 to a transaction, identical items skipped, a
    differing one refused, kept or replaced as `on_conflict` says; an item no put could write
    raises `InvalidInput` before any is written."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        transfer_memory.write_items(spool, iter(items))
        spool.seek(0)
        return store.upkeep.import_trees(spool, on_conflict=on_conflict, max_line_bytes=None)


def export_jsonl(
    store: BlockingStore,
    out: IO[bytes],
    *,
    session_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """Write session trees to a binary stream as an export (all of them unless narrowed)."""
    return store.upkeep.export_trees(
        out, session_ids=session_ids, owner_id=owner_id, progress=progress
    )


def import_jsonl(
    store: BlockingStore,
    source: IO[bytes],
    *,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> TransferReport:
    """Write the trees of an export read from a binary stream into a store.

    Memory peaks at three to four times the longest line; a line over `max_line_bytes`
    (None: no limit) raises `InvalidInput` before it is read whole.
    """
    return store.upkeep.import_trees(
        source, on_conflict=on_conflict, progress=progress, max_line_bytes=max_line_bytes
    )


def copy_store(
    source: BlockingStore,
    target: BlockingStore,
    *,
    session_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
) -> TransferReport:
    """Copy session trees from one store into another; run again to resume after a failure.

    Lines are not limited in length: each is a row the source store holds. The copy holds
    three to four times the longest in memory.
    """
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        exported = source.upkeep.export_trees(spool, session_ids=session_ids, owner_id=owner_id)
        spool.seek(0)
        return target.upkeep.import_trees(
            spool,
            on_conflict=on_conflict,
            progress=_out_of(exported.tree_count, progress),
            max_line_bytes=None,
        )


async def export_jsonl_async(
    store: Store,
    out: IO[bytes],
    *,
    session_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """`export_jsonl` on the async store."""
    return await store.upkeep.export_trees(
        out, session_ids=session_ids, owner_id=owner_id, progress=progress
    )


async def import_jsonl_async(
    store: Store,
    source: IO[bytes],
    *,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> TransferReport:
    """`import_jsonl` on the async store."""
    return await store.upkeep.import_trees(
        source, on_conflict=on_conflict, progress=progress, max_line_bytes=max_line_bytes
    )


async def copy_store_async(
    source: Store,
    target: Store,
    *,
    session_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    on_conflict: OnConflict = "fail",
    progress: Progress | None = None,
) -> TransferReport:
    """`copy_store` between async stores."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        exported = await source.upkeep.export_trees(
            spool, session_ids=session_ids, owner_id=owner_id
        )
        spool.seek(0)
        return await target.upkeep.import_trees(
            spool,
            on_conflict=on_conflict,
            progress=_out_of(exported.tree_count, progress),
            max_line_bytes=None,
        )


def _out_of(total: int, progress: Progress | None) -> Progress | None:
    """`progress` told the total number of trees, which an import alone does not know."""
    if progress is None:
        return None
    report = progress
    return lambda done, _: report(done, total)
