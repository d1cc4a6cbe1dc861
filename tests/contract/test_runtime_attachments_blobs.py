"""Contract: the attachment write-ahead manifest, the file attachment store, and blob GC.

The runtime contract's attachment manifest (`record_intent` before the
bytes, `commit_refs`, `list_uncommitted(older_than)`, `forget`), `FileAttachmentStore`'s
`put` and orphan `sweep`, and `gc_unreachable`, which keeps every blob some session head
reaches and deletes the rest. The crash test of the attachment store lives elsewhere.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from runtime_helpers import (
    FAR_FUTURE_MS,
    append,
    make_commit,
    node,
    now_ms,
    replace,
    runtime,
    snapshot,
)

import turnstore
from turnstore import (
    FileAttachmentStore,
    HydratedSessionCheckpoint,
)
from turnstore.attachments import TEMPORARY_PREFIX
from turnstore.records import (
    AttachmentIntent,
    AttachmentManifestEntry,
    FullGraph,
    GcReport,
)


def intent(attachment_id: str, at_ms: int, session_id: str = "s") -> AttachmentIntent:
    """An intent to write `attachment_id` at `at_ms`."""
    return AttachmentIntent(
        attachment_id=attachment_id,
        session_id=session_id,
        canonical_uri=f"/payloads/{session_id}/{attachment_id}",
        intent_at_epoch_ms=at_ms,
    )


def entry_of(value: AttachmentIntent) -> AttachmentManifestEntry:
    """The uncommitted manifest entry an intent becomes."""
    return AttachmentManifestEntry(
        attachment_id=value.attachment_id,
        session_id=value.session_id,
        canonical_uri=value.canonical_uri,
        intent_at_epoch_ms=value.intent_at_epoch_ms,
        committed_at_epoch_ms=None,
    )


# --- the manifest ---------------------------------------------------------------------------


async def test_list_uncommitted_returns_only_older_uncommitted_intents(store):
    """list_uncommitted(t) lists intents recorded before t that no commit referenced."""
    rt = await runtime(store, "s")
    old, older = intent("old", 2_000), intent("older", 1_000)
    recent, done = intent("recent", 5_000), intent("done", 500)
    for value in (old, older, recent, done):
        await rt.record_intent(value)
    await rt.commit_refs(["done"])

    assert await rt.list_uncommitted(3_000) == [entry_of(older), entry_of(old)]
    assert await rt.list_uncommitted(2_000) == [entry_of(older)]
    assert await rt.list_uncommitted(1_000) == []
    assert [e.attachment_id for e in await rt.list_uncommitted(FAR_FUTURE_MS)] == [
        "older",
        "old",
        "recent",
    ]


async def test_list_uncommitted_is_scoped_to_the_bound_session(store):
    """A handle lists only its own session's uncommitted intents."""
    rt = await runtime(store, "s")
    other = await runtime(store, "other")
    await rt.record_intent(intent("mine", 1))
    await other.record_intent(intent("theirs", 1, session_id="other"))
    assert [e.attachment_id for e in await rt.list_uncommitted(FAR_FUTURE_MS)] == ["mine"]
    assert [e.attachment_id for e in await other.list_uncommitted(FAR_FUTURE_MS)] == ["theirs"]


async def test_commit_refs_stamps_attachments_committed(store, database):
    """commit_refs stamps each id committed, so the sweep never lists it."""
    rt = await runtime(store, "s")
    for attachment_id in ("a", "b", "c"):
        await rt.record_intent(intent(attachment_id, 10))
    await rt.commit_refs(["a", "c"])
    assert [e.attachment_id for e in await rt.list_uncommitted(FAR_FUTURE_MS)] == ["b"]
    stamps = dict(database.query("SELECT attachment_id, committed_at_ms FROM attachment_manifest"))
    assert stamps["b"] is None
    assert stamps["a"] is not None
    assert stamps["c"] is not None


async def test_recording_an_intent_twice_is_idempotent(store, database):
    """Recording the same intent again keeps one row; another payload for the id is refused."""
    rt = await runtime(store, "s")
    await rt.record_intent(intent("a", 10))
    await rt.record_intent(intent("a", 10))
    assert database.count("attachment_manifest") == 1
    other_payload = AttachmentIntent(
        attachment_id="a", session_id="s", canonical_uri="/elsewhere", intent_at_epoch_ms=10
    )
    with pytest.raises(turnstore.InvalidInput):
        await rt.record_intent(other_payload)
    assert await rt.list_uncommitted(FAR_FUTURE_MS) == [entry_of(intent("a", 10))]


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(["never-recorded"], id="no-intent"),
        pytest.param(["a", "never-recorded"], id="one-of-two-without-intent"),
        pytest.param(["theirs"], id="intent-of-another-session"),
    ],
)
async def test_committing_an_attachment_without_an_intent_is_refused(store, database, ids):
    """commit_refs of an id with no recorded intent in the session raises InvalidInput."""
    rt = await runtime(store, "s")
    other = await runtime(store, "other")
    await rt.record_intent(intent("a", 10))
    await other.record_intent(intent("theirs", 10, session_id="other"))
    before = [snapshot(database, "s"), snapshot(database, "other")]
    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_refs(ids)
    assert [snapshot(database, "s"), snapshot(database, "other")] == before


async def test_forget_deletes_one_manifest_row(store, database):
    """forget removes an attachment's manifest row; other rows stay."""
    rt = await runtime(store, "s")
    await rt.record_intent(intent("a", 10))
    await rt.record_intent(intent("b", 10))
    await rt.forget("a")
    assert database.query("SELECT attachment_id FROM attachment_manifest") == [("b",)]
    assert [e.attachment_id for e in await rt.list_uncommitted(FAR_FUTURE_MS)] == ["b"]
    await rt.forget("never-recorded")
    assert database.count("attachment_manifest") == 1


async def test_forget_does_not_touch_another_sessions_row(store, database):
    """A handle's forget only deletes rows of its own session."""
    rt = await runtime(store, "s")
    other = await runtime(store, "other")
    await other.record_intent(intent("theirs", 10, session_id="other"))
    await rt.forget("theirs")
    assert database.count("attachment_manifest") == 1


async def test_forget_keeps_an_attachment_committed_after_it_was_listed(store):
    """forget removes only uncommitted rows: a commit between listing and forgetting wins."""
    rt = await runtime(store, "files")
    intent = AttachmentIntent(
        attachment_id="x", session_id="files", canonical_uri="/nowhere/x", intent_at_epoch_ms=1
    )
    await rt.record_intent(intent)
    assert [entry.attachment_id for entry in await rt.list_uncommitted(10)] == ["x"]
    await rt.commit_refs(["x"])
    assert await rt.forget("x") is False
    assert await rt.list_uncommitted(10) == []
    await rt.commit_refs(["x"])  # still recorded, so committing again is accepted


# --- the file attachment store ----------------------------------------------------------------


def test_put_records_the_intent_and_writes_the_bytes(blocking_store, tmp_path):
    """put records an uncommitted intent naming the file, then writes the payload."""
    files = FileAttachmentStore(tmp_path / "attachments")
    rt = blocking_store.runtime("s")
    before = now_ms()
    path = files.put(rt, "image.png", b"\x89PNG bytes")

    assert path == files.path_for("s", "image.png")
    assert path.read_bytes() == b"\x89PNG bytes"
    assert path.is_relative_to((tmp_path / "attachments").resolve())
    [entry] = rt.list_uncommitted(FAR_FUTURE_MS)
    assert (entry.attachment_id, entry.session_id, entry.canonical_uri) == (
        "image.png",
        "s",
        str(path),
    )
    assert before <= entry.intent_at_epoch_ms <= now_ms()
    assert sorted(p.name for p in path.parent.iterdir()) == ["image.png"]


def test_sweep_deletes_orphaned_payloads_and_keeps_committed_ones(
    blocking_store, database, tmp_path
):
    """sweep deletes files of old uncommitted intents and forgets them; committed files stay."""
    files = FileAttachmentStore(tmp_path)
    rt = blocking_store.runtime("s")
    committed = files.put(rt, "committed.bin", b"keep me")
    by_commit = files.put(rt, "by-commit.bin", b"keep me too")
    orphan = files.put(rt, "orphan.bin", b"delete me")
    rt.commit_refs(["committed.bin"])
    rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")])).with_committed_attachments(["by-commit.bin"])
    )

    assert files.sweep(rt, FAR_FUTURE_MS) == ["orphan.bin"]
    assert not orphan.exists()
    assert committed.read_bytes() == b"keep me"
    assert by_commit.read_bytes() == b"keep me too"
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []
    assert database.query(
        "SELECT attachment_id FROM attachment_manifest ORDER BY attachment_id"
    ) == [("by-commit.bin",), ("committed.bin",)]
    assert files.sweep(rt, FAR_FUTURE_MS) == []


def test_sweep_spares_intents_newer_than_the_threshold(blocking_store, tmp_path):
    """sweep leaves uncommitted intents that are not yet older than its threshold."""
    files = FileAttachmentStore(tmp_path)
    rt = blocking_store.runtime("s")
    young = files.put(rt, "young.bin", b"in flight")
    assert files.sweep(rt, now_ms() - 60_000) == []
    assert young.read_bytes() == b"in flight"
    assert len(rt.list_uncommitted(FAR_FUTURE_MS)) == 1


def test_sweep_reclaims_a_partial_write_and_a_missing_file(blocking_store, tmp_path):
    """sweep reclaims intents whose bytes never fully landed (a temporary file or no file)."""
    files = FileAttachmentStore(tmp_path)
    rt = blocking_store.runtime("s")
    partial_path = files.path_for("s", "partial.bin")
    partial_path.parent.mkdir(parents=True)
    partial_file = partial_path.with_name(f"{TEMPORARY_PREFIX}0123abcd")
    partial_file.write_bytes(b"half")
    os.utime(partial_file, ns=(1_000_000, 1_000_000))  # last written long ago
    for attachment_id in ("partial.bin", "never-written.bin"):
        rt.record_intent(
            AttachmentIntent(
                attachment_id=attachment_id,
                session_id="s",
                canonical_uri=str(files.path_for("s", attachment_id)),
                intent_at_epoch_ms=1,
            )
        )
    assert sorted(files.sweep(rt, FAR_FUTURE_MS)) == ["never-written.bin", "partial.bin"]
    assert not partial_file.exists()
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []


def test_sweep_never_deletes_a_file_outside_its_root(blocking_store, tmp_path):
    """An orphan intent naming a file outside the store's root is forgotten, the file kept."""
    files = FileAttachmentStore(tmp_path / "root")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not ours")
    rt = blocking_store.runtime("s")
    rt.record_intent(
        AttachmentIntent(
            attachment_id="stray", session_id="s", canonical_uri=str(outside), intent_at_epoch_ms=1
        )
    )
    assert files.sweep(rt, FAR_FUTURE_MS) == ["stray"]
    assert outside.read_bytes() == b"not ours"


@pytest.mark.parametrize(
    "attachment_id",
    [
        pytest.param("../escape.bin", id="parent"),
        pytest.param("../../escape.bin", id="grandparent"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param(".", id="dot"),
        pytest.param("..", id="dot-dot"),
        pytest.param(".partial-0123", id="temporary-name"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("x" * 300, id="longer-than-a-file-name"),
    ],
)
def test_attachment_ids_may_not_climb_out_of_the_root(blocking_store, tmp_path, attachment_id):
    """Any id becomes one plain file name in the session's folder: it cannot leave it."""
    root = tmp_path / "root"
    files = FileAttachmentStore(root)
    rt = blocking_store.runtime("s")
    path = files.put(rt, attachment_id, b"x")
    folder = files.root / "s"
    assert path.parent == folder
    assert not path.name.startswith(".")
    assert [p for p in root.rglob("*") if p.is_file()] == [path]
    assert path.read_bytes() == b"x"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "turnstore.sqlite3" not in p.name]
    assert written == [path]


@pytest.mark.parametrize("attachment_id", ["", " \t", 7, None, b"raw"])
def test_a_blank_or_non_text_attachment_id_is_refused(blocking_store, tmp_path, attachment_id):
    """put refuses an id that is blank or not text; nothing is recorded or written."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    with pytest.raises(turnstore.InvalidInput):
        files.put(rt, attachment_id, b"x")
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []
    assert not (tmp_path / "root").exists()


def test_a_session_cannot_overwrite_or_sweep_another_sessions_attachment(blocking_store, tmp_path):
    """An id of one session never reaches another session's committed payload, by put or sweep."""
    files = FileAttachmentStore(tmp_path / "root")
    owner = blocking_store.runtime("t")
    committed = files.put(owner, "img.png", b"t's bytes")
    owner.commit_refs(["img.png"])
    intruder = blocking_store.runtime("s")
    with contextlib.suppress(turnstore.InvalidInput):
        files.put(intruder, "../t/img.png", b"s's bytes")
    files.sweep(intruder, FAR_FUTURE_MS)
    assert committed.read_bytes() == b"t's bytes"


# --- blob garbage collection ------------------------------------------------------------------


def checkpoint(tool: str, execution: bytes | None = None) -> HydratedSessionCheckpoint:
    """A checkpoint with a tool-state blob and optionally an execution-state blob."""
    return HydratedSessionCheckpoint(tool_state={"tool": tool}, execution_state=execution)


async def test_gc_deletes_blobs_of_superseded_manifests(store, database):
    """gc keeps the head's manifest and its blobs and deletes those only older manifests used."""
    rt = await runtime(store, "s")
    first = await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), checkpoint=checkpoint("v1", b"e1"))
    )
    second = await rt.commit_runtime_state(make_commit("s", 1, checkpoint=checkpoint("v2")))
    assert database.count("blobs") == 5

    report = await rt.gc_unreachable()
    assert report == GcReport(root_count=1, retained_blob_count=2, deleted_blob_count=3)
    stored = {row[0] for row in database.query("SELECT blob_ref FROM blobs")}
    assert stored == {second.checkpoint_ref, second.manifest.tool_state_ref}
    assert first.checkpoint_ref not in stored
    hydrated = (await rt.load_session(FullGraph())).checkpoint
    assert hydrated.tool_state == {"tool": "v2"}
    assert await rt.gc_unreachable() == GcReport(
        root_count=1, retained_blob_count=2, deleted_blob_count=0
    )


async def test_gc_keeps_blobs_reached_from_the_head_of_any_session(store, database):
    """gc run through one session's handle keeps every other session's head blobs."""
    s1 = await runtime(store, "s1")
    s2 = await runtime(store, "s2")
    await s1.commit_runtime_state(
        make_commit("s1", None, replace([node("a")]), checkpoint=checkpoint("one", b"x1"))
    )
    await s2.commit_runtime_state(
        make_commit("s2", None, replace([node("a")]), checkpoint=checkpoint("two", b"x2"))
    )
    await s1.commit_runtime_state(make_commit("s1", 1, checkpoint=checkpoint("one-b")))

    report = await s1.gc_unreachable()
    assert report == GcReport(root_count=2, retained_blob_count=5, deleted_blob_count=3)
    hydrated = (await s2.load_session()).checkpoint
    assert (hydrated.tool_state, hydrated.execution_state) == ({"tool": "two"}, b"x2")


async def test_gc_keeps_shared_content_while_any_head_reaches_it(store, database):
    """A blob shared by two sessions survives gc while one head still reaches it."""
    s1 = await runtime(store, "s1")
    s2 = await runtime(store, "s2")
    shared = checkpoint("shared", b"shared-exec")
    r1 = await s1.commit_runtime_state(
        make_commit("s1", None, replace([node("a")]), checkpoint=shared)
    )
    r2 = await s2.commit_runtime_state(
        make_commit("s2", None, replace([node("b")]), checkpoint=shared)
    )
    assert r1.checkpoint_ref == r2.checkpoint_ref
    assert database.count("blobs") == 3

    await s1.commit_runtime_state(make_commit("s1", 1, checkpoint=checkpoint("own")))
    report = await s1.gc_unreachable()
    assert report == GcReport(root_count=2, retained_blob_count=5, deleted_blob_count=0)
    assert (await s2.load_session()).checkpoint.execution_state == b"shared-exec"

    assert await store.delete_sessions(["s2"]) is True
    report = await s1.gc_unreachable()
    assert report == GcReport(root_count=1, retained_blob_count=2, deleted_blob_count=3)
    assert (await s1.load_session()).checkpoint.tool_state == {"tool": "own"}


async def test_gc_with_a_head_reusing_an_older_blob_by_ref_keeps_it(store, database):
    """A blob the head's manifest names by ref is retained even though an older commit wrote it."""
    rt = await runtime(store, "s")
    first = await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), checkpoint=checkpoint("kept"))
    )
    ref = first.manifest.tool_state_ref
    await rt.commit_runtime_state(
        make_commit(
            "s",
            1,
            append([node("b", "a")]),
            checkpoint=HydratedSessionCheckpoint(tool_state_ref=ref, execution_state=b"new"),
        )
    )
    report = await rt.gc_unreachable()
    assert (report.retained_blob_count, report.deleted_blob_count) == (3, 1)
    assert (await rt.load_session()).checkpoint.tool_state == {"tool": "kept"}


async def test_gc_of_an_empty_store_reports_nothing(store):
    """gc with no heads and no blobs reports zero roots, retained and deleted."""
    rt = await runtime(store, "s")
    assert await rt.gc_unreachable() == GcReport()
    await rt.save_session_meta(turnstore.records.SessionMeta(session_id="s"))
    assert await rt.gc_unreachable() == GcReport()
