"""Contract: the operators' calls — prune, tree, stats, doctor, garbage, VACUUM, backup, migrate."""

from __future__ import annotations

import asyncio
import io
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import chain, make_commit, replace, runtime

import turnstore
from conftest import restore_fixture
from turnstore import Checkpoint, ConfigError, InvalidInput
from turnstore.records.memory import MemoryCall, MemoryGet, MemoryPut

DAY = 86_400


async def make(store: Any, session_id: str, owner: str | None = None) -> None:
    """A session with one committed checkpoint."""
    checkpoint = Checkpoint.empty(session_id)
    if owner is not None:
        checkpoint.session_context.owner_id = owner
    checkpoint.context += [{"role": "user", "content": f"hello from {session_id}"}]
    checkpoint.sequence += 1
    await store.save(checkpoint, transcript_delta=list(checkpoint.context))


def age(database: Any, days: int, *session_ids: str) -> None:
    """Set the sessions' last update `days` ago (what waiting would do)."""
    when = int(time.time()) - days * DAY
    for session_id in session_ids:
        database.query(
            "UPDATE sessions SET updated_at = ? WHERE session_id = ?", (when, session_id)
        )


async def test_prune_removes_old_trees_whole_and_keeps_the_rest(store: Any, database: Any) -> None:
    """Trees whose every session is old go, forks with them; a recent fork keeps its tree."""
    for name in ("old-a", "old-b", "old-c", "kept-by-fork", "new"):
        await make(store, name)
    await store.fork("old-a", 1, Checkpoint.empty("old-a-fork"))
    await store.fork("kept-by-fork", 1, Checkpoint.empty("fresh-fork"))
    age(database, 40, "old-a", "old-a-fork", "old-b", "old-c", "kept-by-fork")
    await store.save_state("old-b", "k", 1)
    cutoff = int(time.time()) - 30 * DAY
    dry = await store.upkeep.prune(cutoff, dry_run=True, batch_size=1)
    assert dry.session_ids == ["old-a", "old-a-fork", "old-b", "old-c"]
    assert dry.tree_count == 3
    assert dry.dry_run
    assert database.count("sessions") == 7
    report = await store.upkeep.prune(cutoff, batch_size=2)
    assert report.session_ids == dry.session_ids
    assert not report.dry_run
    left = {row[0] for row in database.query("SELECT session_id FROM sessions")}
    assert left == {"kept-by-fork", "fresh-fork", "new"}
    assert database.count("middleware_state") == 0
    assert database.count("transcript_delta", "session_id = ?", ("old-a",)) == 0
    assert (await store.upkeep.prune(cutoff)).session_ids == []


async def test_prune_by_owner_touches_only_that_owners_trees(store: Any, database: Any) -> None:
    """owner_id narrows the prune to trees whose root the owner holds."""
    await make(store, "alice-1", "alice")
    await make(store, "bob-1", "bob")
    age(database, 40, "alice-1", "bob-1")
    report = await store.upkeep.prune(int(time.time()) - DAY, owner_id="alice")
    assert report.session_ids == ["alice-1"]
    assert await store.session_summary("bob-1") is not None


async def test_prune_sweeps_expired_memory_and_a_dry_run_only_counts_it(
    store: Any, database: Any
) -> None:
    """A prune deletes every expired memory item, whatever its cut-off; a dry run counts them,
    and a prune of one owner's trees leaves them."""
    short = [MemoryPut(("olive", "notes"), f"brief-{n}", "{}", 50, "olive") for n in range(3)]
    kept = MemoryPut(("olive", "notes"), "kept", "{}", 3_600_000, "olive")
    forever = MemoryPut(("bob",), "forever", "{}", None, "bob")
    await store.memory.run(MemoryCall(writes=(*short, kept, forever)))
    await make(store, "new")
    await asyncio.sleep(0.2)  # the three brief items expire (by the database's clock)
    long_ago = int(time.time()) - 30 * DAY
    dry = await store.upkeep.prune(long_ago, dry_run=True)
    assert (dry.expired_memory_item_count, dry.session_ids) == (3, [])
    mine = await store.upkeep.prune(long_ago, owner_id="olive")
    assert mine.expired_memory_item_count == 0
    assert database.count("memory_items") == 5
    report = await store.upkeep.prune(long_ago)
    assert (report.expired_memory_item_count, report.session_ids) == (3, [])
    left = database.query("SELECT item_key FROM memory_items ORDER BY item_key")
    assert [row[0] for row in left] == ["forever", "kept"]
    assert database.count("sessions") == 1
    assert (await store.upkeep.prune(long_ago)).expired_memory_item_count == 0
    gets = MemoryCall(gets=(MemoryGet(("olive", "notes"), "kept"),))
    assert (await store.memory.run(gets)).gets[0] is not None


@pytest.mark.parametrize(
    "arguments",
    [
        {"updated_before": "yesterday"},
        {"updated_before": True},
        {"updated_before": 1, "batch_size": 0},
    ],
)
async def test_prune_refuses_bad_input(
    store: Any, database: Any, arguments: dict[str, Any]
) -> None:
    """Bad arguments are InvalidInput and delete nothing."""
    await make(store, "s")
    age(database, 40, "s")
    with pytest.raises(InvalidInput):
        await store.upkeep.prune(**arguments)
    assert database.count("sessions") == 1


async def test_tree_lists_what_delete_removes(store: Any) -> None:
    """tree(id) is the session and every fork below it; [] when absent."""
    await make(store, "root")
    await store.fork("root", 1, Checkpoint.empty("child"))
    await store.fork("child", 0, Checkpoint.empty("grandchild"))
    assert await store.upkeep.tree("root") == ["child", "grandchild", "root"]
    assert await store.upkeep.tree("child") == ["child", "grandchild"]
    assert await store.upkeep.tree("absent") == []


async def test_stats_count_what_the_store_holds(store: Any) -> None:
    """Sessions, forks, checkpoints and transcript batches are counted."""
    empty = await store.upkeep.stats()
    assert empty.session_count == 0
    await make(store, "a")
    await make(store, "b")
    await store.fork("a", 1, Checkpoint.empty("a-fork"))
    found = await store.upkeep.stats()
    assert (found.session_count, found.fork_count) == (3, 1)
    assert found.checkpoint_count == 2
    assert found.transcript_batch_count == 2
    assert found.database_bytes > 0


async def test_gauges_count_every_session_or_one_owners(store: Any) -> None:
    """Sessions, queued batches and uncommitted attachments of the store, or of an owner;
    the sizes are the whole store's either way."""
    from turnstore.records import QueuedWorkBatchDraft

    await make(store, "a1", owner="alice")
    await make(store, "a2", owner="alice")
    await make(store, "b1", owner="bob")
    await make(store, "nobody")
    for session_id, batches in (("a1", 2), ("b1", 1)):
        queue = await runtime(store, session_id)
        for item in range(batches):
            await queue.enqueue_queued_work(QueuedWorkBatchDraft(boundary="turn", items=[item]))
    whole = await store.upkeep.gauges()
    alice = await store.upkeep.gauges("alice")
    bob = await store.upkeep.gauges(owner_id="bob")
    stranger = await store.upkeep.gauges("carol")
    assert (whole.owner_id, alice.owner_id, stranger.owner_id) == (None, "alice", "carol")
    assert [g.session_count for g in (whole, alice, bob, stranger)] == [4, 2, 1, 0]
    assert [g.queued_batch_count for g in (whole, alice, bob, stranger)] == [3, 2, 1, 0]
    assert stranger.oldest_pending_age_ms is None
    assert alice.database_bytes == whole.database_bytes > 0
    with pytest.raises(InvalidInput):
        await store.upkeep.gauges("nul\x00")


async def test_doctor_reports_a_healthy_store_and_finds_unreachable_blobs(store: Any) -> None:
    """A fresh store has no problems; a blob orphaned by a newer head is counted, then collected."""
    report = await store.upkeep.doctor()
    assert report.problems == []
    assert report.schema_version == report.supported_schema_version
    rt = await runtime(store, "rt")
    first = await rt.commit_runtime_state(
        make_commit(
            "rt",
            None,
            replace(chain("n1")),
            checkpoint=turnstore.HydratedSessionCheckpoint(tool_state={"v": 1}),
        )
    )
    await rt.commit_runtime_state(
        make_commit(
            "rt",
            first.head_revision,
            checkpoint=turnstore.HydratedSessionCheckpoint(tool_state={"v": 2}),
        )
    )
    assert (await store.upkeep.doctor()).unreachable_blob_count >= 1
    collected = await store.upkeep.gc_unreachable()
    assert collected.deleted_blob_count >= 1
    assert (await store.upkeep.doctor()).unreachable_blob_count == 0


def test_doctor_finds_a_dropped_index(blocking_store: Any, database: Any) -> None:
    """A missing index is a problem naming it."""
    database.query("DROP INDEX sessions_parent_idx")
    report = blocking_store.upkeep.doctor()
    assert report.missing_indexes == ["sessions_parent_idx"]
    assert "missing index sessions_parent_idx" in report.problems


async def test_upkeep_vacuum_removes_tombstoned_nodes(store: Any, database: Any) -> None:
    """upkeep.vacuum removes every session's tombstoned nodes, then VACUUMs."""
    rt = await runtime(store, "rt")
    await rt.commit_runtime_state(
        make_commit("rt", None, replace([*chain("n1", "n2"), chain("x")[0]], leaf="n2"))
    )
    await rt.tombstone_nodes(["x"])
    report = await store.upkeep.vacuum()
    assert report.removed_node_count == 1
    assert database.count("graph_nodes") == 2
    assert report.bytes_after > 0


def test_backup_is_a_consistent_private_copy_while_a_writer_runs(tmp_path: Path) -> None:
    """A backup taken during saves opens as a store with whole commits only, mode 0600."""
    path = tmp_path / "live.sqlite3"
    stop = threading.Event()
    with turnstore.open_blocking(path) as store:
        checkpoint = Checkpoint.empty("busy")

        def write() -> None:
            while not stop.is_set():
                checkpoint.context += [{"role": "user", "content": "x" * 500}]
                checkpoint.sequence += 1
                store.save(checkpoint, transcript_delta=[checkpoint.context[-1]])

        writer = threading.Thread(target=write)
        writer.start()
        try:
            time.sleep(0.2)
            report = store.upkeep.backup(tmp_path / "copy.sqlite3")
        finally:
            stop.set()
            writer.join()
        with pytest.raises(ConfigError, match="exists"):
            store.upkeep.backup(tmp_path / "copy.sqlite3")
    copy = Path(report.path)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert report.bytes == copy.stat().st_size
    connection = sqlite3.connect(copy)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()
    with turnstore.open_blocking(copy) as restored:
        loaded = restored.load("busy")
        assert loaded is not None
        assert len(loaded.context) == loaded.sequence


def test_backup_refusals_name_the_fix(
    blocking_store: Any, backend_name: str, tmp_path: Path
) -> None:
    """PostgreSQL points at pg_dump; on SQLite a missing folder is a ConfigError, no file."""
    target = tmp_path / "missing-folder" / "copy.sqlite3"
    expected = "pg_dump" if backend_name == "postgres" else "cannot create"
    with pytest.raises(ConfigError, match=expected):
        blocking_store.upkeep.backup(target)
    assert not target.parent.exists()
    with pytest.raises(InvalidInput):
        blocking_store.upkeep.backup("")


def test_migrate_lists_then_runs_the_steps_of_an_older_database(
    backend_name: str, database: Any, pg_schema: str, store_url: str
) -> None:
    """A schema-3 database: dry run lists steps 4 to 12, changes nothing; migrate applies them."""
    restore_fixture(backend_name, database, pg_schema, 3)
    dry = turnstore.migrate(store_url, dry_run=True)
    assert (dry.from_version, dry.to_version) == (3, 12)
    assert [step.version for step in dry.steps] == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert "LangGraph" in dry.steps[0].summary
    assert "model-step index" in dry.steps[1].summary
    assert "event batches" in dry.steps[2].summary
    assert "conversation search" in dry.steps[3].summary
    assert "figures" in dry.steps[4].summary
    assert "second copy" in dry.steps[5].summary
    assert "long-term memory" in dry.steps[6].summary
    assert "searched by its words" in dry.steps[7].summary
    assert "indexed after the put" in dry.steps[8].summary
    assert turnstore.migrate(store_url, dry_run=True).from_version == 3
    done = turnstore.migrate(store_url)
    assert done.from_version == 3
    assert turnstore.migrate(store_url).steps == []
    with turnstore.open_blocking(store_url, read_only=True) as store:
        assert store.upkeep.doctor().problems == []


def test_every_schema_version_has_a_step_summary() -> None:
    """Each migration of both backends is a step of the one list, with a one-line summary."""
    from turnstore.backends.postgres.schema import MIGRATIONS as POSTGRES
    from turnstore.backends.sqlite.schema import MIGRATIONS as SQLITE
    from turnstore.schema.ddl import MIGRATIONS

    assert len(MIGRATIONS) == len(SQLITE) == len(POSTGRES)
    for migration in MIGRATIONS:
        assert migration.summary.strip()
        assert "\n" not in migration.summary


def test_read_only_stores_refuse_the_destructive_calls(store_url: str) -> None:
    """prune, vacuum and gc on a read-only store raise ReadOnlyStore and change nothing."""
    with turnstore.open_blocking(store_url) as store:
        checkpoint = Checkpoint.empty("s")
        checkpoint.sequence += 1
        store.save(checkpoint)
    with turnstore.open_blocking(store_url, read_only=True) as store:
        for call in (
            lambda: store.upkeep.prune(int(time.time()) + DAY),
            store.upkeep.vacuum,
            store.upkeep.gc_unreachable,
            lambda: store.upkeep.import_trees(io.BytesIO(b"")),
        ):
            with pytest.raises((turnstore.errors.ReadOnlyStore, InvalidInput)):
                call()
        assert store.upkeep.prune(int(time.time()) + DAY, dry_run=True).session_ids == ["s"]
    assert os.path.exists(store_url) or store_url.startswith("postgresql")


def test_the_operators_face_is_one_object_that_closes_with_its_store(store_url: str) -> None:
    """`store.upkeep` runs on the store's connections: it works open and refuses once closed."""
    store = turnstore.open_blocking(store_url)
    upkeep = store.upkeep
    assert upkeep is store.upkeep
    assert isinstance(upkeep, turnstore.BlockingUpkeep)
    assert upkeep.stats().session_count == 0
    store.close()
    with pytest.raises(turnstore.StoreClosed):
        upkeep.stats()


async def test_both_faces_collect_garbage_with_one_operation(store: Any) -> None:
    """upkeep.gc_unreachable and the runtime face's gc_unreachable delete the same blobs."""
    rt = await runtime(store, "rt")
    first = await rt.commit_runtime_state(
        make_commit(
            "rt",
            None,
            replace(chain("n1")),
            checkpoint=turnstore.HydratedSessionCheckpoint(tool_state={"v": 1}),
        )
    )
    await rt.commit_runtime_state(
        make_commit(
            "rt",
            first.head_revision,
            checkpoint=turnstore.HydratedSessionCheckpoint(tool_state={"v": 2}),
        )
    )
    assert (await store.upkeep.gc_unreachable()).deleted_blob_count >= 1
    assert (await rt.gc_unreachable()).deleted_blob_count == 0
    assert (await store.upkeep.doctor()).unreachable_blob_count == 0
