"""Delta saves: a save writes only the context it appends, and loads back exactly."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

import turnstore
from turnstore import (
    Checkpoint,
    ContextRewriteRequired,
    TranscriptPageRequest,
)

SAVES = 200
ITEMS_PER_SAVE = 4
SESSION = "delta"
PROC_IO = Path("/proc/self/io")


def _item(step: int, index: int) -> dict[str, str]:
    """One context item of about 750 bytes of JSON, unique to its step and position."""
    role = "user" if index % 2 == 0 else "assistant"
    words = " ".join(f"w{step}.{index}.{n}" for n in range(120))
    return {"role": role, "content": f"step {step} item {index}: {words}"[:720]}


def _append(checkpoint: Checkpoint, step: int) -> list[dict[str, str]]:
    items = [_item(step, index) for index in range(ITEMS_PER_SAVE)]
    checkpoint.sequence = step
    checkpoint.context.extend(items)
    return items


def _write_bytes() -> int:
    match = re.search(r"^write_bytes:\s*(\d+)$", PROC_IO.read_text(), re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def test_items_are_about_750_bytes():
    """The workload's context items encode to about 750 bytes each."""
    sizes = [len(json.dumps(_item(step, 3), separators=(",", ":"))) for step in (1, 99, 200)]
    assert all(700 <= size <= 800 for size in sizes)


async def test_every_save_loads_back_exactly_through_appends_and_a_rewrite(store, database):
    """Load returns exactly the last saved checkpoint after every append, rewrite and append."""
    checkpoint = Checkpoint.empty(SESSION)
    appended: list[list[dict[str, str]]] = []
    for step in range(1, SAVES + 1):
        appended.append(_append(checkpoint, step))
        await store.save(checkpoint, [{"step": step}])
        assert await store.load(SESSION) == checkpoint
    assert len(checkpoint.context) == SAVES * ITEMS_PER_SAVE

    # Each save added one chunk row holding exactly the items it appended.
    rows = database.query(
        "SELECT start, items_json FROM context_chunks WHERE session_id = ? ORDER BY start",
        (SESSION,),
    )
    assert [start for start, _ in rows] == [i * ITEMS_PER_SAVE for i in range(SAVES)]
    assert [json.loads(items) for _, items in rows] == appended

    # A rewrite: the context becomes a short summary in a new epoch.
    checkpoint.sequence += 1
    checkpoint.context_epoch += 1
    checkpoint.compaction_count += 1
    checkpoint.context = [{"role": "system", "content": "summary of 200 steps"}]
    await store.save(checkpoint)
    assert await store.load(SESSION) == checkpoint
    assert database.query(
        "SELECT start, items_json FROM context_chunks WHERE session_id = ?", (SESSION,)
    ) == [(0, '[{"role":"system","content":"summary of 200 steps"}]')]

    # Appends continue in the new epoch on top of the summary.
    for step in range(SAVES + 2, SAVES + 32):
        _append(checkpoint, step)
        await store.save(checkpoint, [{"step": step}])
        assert await store.load(SESSION) == checkpoint
    starts = database.query(
        "SELECT start FROM context_chunks WHERE session_id = ? ORDER BY start", (SESSION,)
    )
    assert [start for (start,) in starts] == [0] + [1 + i * ITEMS_PER_SAVE for i in range(30)]
    page = await store.transcript_page(SESSION, TranscriptPageRequest(max_batches=1_000))
    assert [batch.sequence for batch in page.batches] == [
        step for step in range(SAVES + 31, 0, -1) if step != SAVES + 1
    ]


def _sqlite_meter(database) -> tuple[Callable[[], int], Callable[[], None]]:
    if not PROC_IO.exists():
        pytest.skip("/proc/self/io is not available on this platform")

    def settle() -> None:
        # Move the WAL into the database file outside the measured saves, so an automatic
        # checkpoint (a periodic cost of every page ever written) does not land inside one
        # window and not the other.
        assert database.query("PRAGMA wal_checkpoint(TRUNCATE)")[0][0] == 0

    return _write_bytes, settle


def _postgres_meter(database) -> tuple[Callable[[], int], Callable[[], None]]:
    """The WAL bytes, less full-page images, of records that touch this test's own relations.

    The server's WAL position alone would count every other test writing to the same server
    (the suite runs in several processes), so the records between two positions are read with
    pg_walinspect and only those naming a relation of this test's schema (or its TOAST) count.
    """
    import psycopg

    database.query("CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public")
    own: set[str] = set()
    position: list[str] = []
    total = [0]

    def wal_bytes() -> int:
        """This schema's WAL bytes since the first call (a running total)."""
        # Read once the store has created its tables: the first call comes after it opened.
        if not own:
            own.update(str(node) for (node,) in database.query(_OWN_RELATIONS))
        start = position[0] if position else None
        position[:] = [database.query(FLUSHED)[0][0]]
        if start is None or start == position[0]:
            return total[0]
        try:
            records = database.query(
                # Full-page images are left out: whether a page gets one depends on when the
                # server last checkpointed, which other tests' WAL volume can trigger mid-window.
                "SELECT record_length - fpi_length, block_ref"
                " FROM public.pg_get_wal_records_info(?, ?)",
                (start, position[0]),
            )
        except psycopg.errors.InternalError:
            # No whole record yet between the two positions (only part of another test's):
            # nothing of this test's is in it, and the next reading starts from here again.
            position[:] = [start]
            return total[0]
        total[0] += sum(
            length
            for length, block_ref in records
            if own.intersection(_RELFILENODE.findall(block_ref or ""))
        )
        return total[0]

    def settle() -> None:
        # Reading resumes from here: no save of this test ran since the last reading. No
        # CHECKPOINT first: full-page images are left out of the count, and under the
        # suite's load a CHECKPOINT waited a minute for every other test's dirty pages.
        position[:] = [database.query(FLUSHED)[0][0]]

    return wal_bytes, settle


_OWN_RELATIONS = """
    SELECT c.relfilenode FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relfilenode <> 0
    UNION ALL
    SELECT t.relfilenode FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
    WHERE c.relnamespace = current_schema()::regnamespace
    UNION ALL
    SELECT i.relfilenode FROM pg_class c JOIN pg_index x ON x.indrelid = c.reltoastrelid
    JOIN pg_class i ON i.oid = x.indexrelid
    WHERE c.relnamespace = current_schema()::regnamespace
"""
"""The files of this test's tables and indexes, and of their TOAST tables and indexes."""
FLUSHED = "SELECT pg_current_wal_flush_lsn()::text"
_RELFILENODE = re.compile(r"rel \d+/\d+/(\d+)")


def test_bytes_written_per_save_stay_flat_while_the_context_grows(
    store_url, database, backend_name
):
    """A save writes what it appends: bytes per save stay flat as the context grows ~5x.

    SQLite is measured by this process's /proc/self/io write_bytes (the writer thread is
    in-process), PostgreSQL by the WAL records that name its own relations (pg_walinspect).
    """
    meter = _postgres_meter if backend_name == "postgres" else _sqlite_meter
    measure, settle = meter(database)
    windows = {"early": range(21, 41), "late": range(181, 201)}
    written: dict[str, list[int]] = {name: [] for name in windows}
    lengths: dict[str, list[int]] = {name: [] for name in windows}
    with turnstore.open_blocking(store_url) as store:
        checkpoint = Checkpoint.empty(SESSION)
        for step in range(1, SAVES + 1):
            _append(checkpoint, step)
            # Only the two windows' saves are metered: each reading is a round of queries.
            window = next((name for name, steps in windows.items() if step in steps), None)
            if window is None:
                store.save(checkpoint, [{"step": step}])
                continue
            if step == windows[window][0]:
                settle()
            before = measure()
            store.save(checkpoint, [{"step": step}])
            written[window].append(measure() - before)
            lengths[window].append(len(checkpoint.context))
        assert store.load(SESSION) == checkpoint

    early = statistics.mean(written["early"])
    late = statistics.mean(written["late"])
    context_growth = statistics.mean(lengths["late"]) / statistics.mean(lengths["early"])
    print(f"bytes per save: saves 21-40 {early:.0f}, saves 181-200 {late:.0f}")
    assert context_growth >= 5
    assert early > 0
    assert late <= 2 * early, (early, late)
    # The stored context itself grows only by the appended items: one flat row per save.
    chunk_lengths = [
        length
        for (length,) in database.query(
            "SELECT length(items_json) FROM context_chunks WHERE session_id = ? ORDER BY start",
            (SESSION,),
        )
    ]
    assert len(chunk_lengths) == SAVES
    assert max(chunk_lengths) <= 1.1 * min(chunk_lengths)
    assert max(chunk_lengths) < 4 * 800


async def _saved_session(store) -> Checkpoint:
    checkpoint = Checkpoint.empty(SESSION)
    for step in (1, 2, 3):
        _append(checkpoint, step)
        await store.save(checkpoint, [{"step": step}])
    return checkpoint


def _stored_rows(database) -> tuple[list[tuple[object, ...]], ...]:
    return tuple(
        database.query(f"SELECT * FROM {table} WHERE session_id = ? ORDER BY 2", (SESSION,))
        for table in ("sessions", "context_chunks", "transcript_delta")
    )


async def test_a_shorter_context_in_the_same_epoch_is_refused(store, database):
    """Within one context_epoch a save whose context shrank raises ContextRewriteRequired."""
    saved = await _saved_session(store)
    rows = _stored_rows(database)
    shorter = Checkpoint.empty(SESSION)
    shorter.sequence = 4
    shorter.context = saved.context[:-1]
    with pytest.raises(ContextRewriteRequired):
        await store.save(shorter, [{"step": 4}])
    assert await store.load(SESSION) == saved
    assert _stored_rows(database) == rows


async def test_a_modified_last_item_in_the_same_epoch_is_refused(store, database):
    """Within one context_epoch a save that changed the stored last item is refused."""
    saved = await _saved_session(store)
    rows = _stored_rows(database)
    changed = Checkpoint.empty(SESSION)
    changed.sequence = 4
    changed.context = [*saved.context[:-1], {"role": "assistant", "content": "edited"}]
    changed.context.append(_item(4, 0))
    with pytest.raises(ContextRewriteRequired):
        await store.save(changed, [{"step": 4}])
    assert await store.load(SESSION) == saved
    assert _stored_rows(database) == rows


async def test_the_refused_changes_are_accepted_after_an_epoch_bump(store, database):
    """A shrunk or edited context is accepted once context_epoch changes, and loads exactly."""
    saved = await _saved_session(store)
    shorter = Checkpoint.empty(SESSION)
    shorter.sequence = 4
    shorter.context_epoch = 1
    shorter.context = saved.context[:-1]
    await store.save(shorter, [{"step": 4}])
    assert await store.load(SESSION) == shorter

    changed = Checkpoint.empty(SESSION)
    changed.sequence = 5
    changed.context_epoch = 2
    changed.context = [*shorter.context[:-1], {"role": "assistant", "content": "edited"}]
    changed.context.append(_item(5, 0))
    await store.save(changed, [{"step": 5}])
    assert await store.load(SESSION) == changed
    assert database.count("context_chunks", "session_id = ?", (SESSION,)) == 1


async def test_a_transcript_equal_to_the_appended_context_is_stored_once(store, database):
    """A transcript batch equal to the items its save appended names that context chunk."""
    checkpoint = Checkpoint.empty(SESSION)
    batches = []
    for step in (1, 2, 3):
        checkpoint.sequence = step
        items = _append(checkpoint, step)
        batches.append(items)
        await store.save(checkpoint, items)
    shared = database.count("transcript_delta", "items_json IS NULL AND session_id = ?", (SESSION,))
    assert shared == 3
    # A rewrite drops the chunks; the transcript keeps its items.
    checkpoint.sequence = 4
    checkpoint.context_epoch += 1
    checkpoint.context = [{"summary": "short"}]
    await store.save(checkpoint, [{"note": "rewritten"}])
    shared = database.count("transcript_delta", "items_json IS NULL AND session_id = ?", (SESSION,))
    assert shared == 0
    page = await store.transcript_page(SESSION, TranscriptPageRequest(max_batches=10))
    assert [batch.items for batch in reversed(page.batches)] == [*batches, [{"note": "rewritten"}]]
    assert await store.load(SESSION) == checkpoint
