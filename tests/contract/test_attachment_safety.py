"""Attachment safety: sessions cannot reach each other's payloads, and a put is durable.

Each test runs on SQLite and on PostgreSQL, with real files under a temporary folder:

- one payload file belongs to one session: `record_intent` refuses a `canonical_uri` another
  session's entry names, and a sweep never deletes a file any entry still names;
- `FileAttachmentStore` places files itself, and its temporary files cannot collide with a
  placed name;
- payload files are 0600 and folders 0700 whatever the umask;
- `sweep_all` reclaims the payloads of deleted sessions without the caller naming them;
- `put` checks its arguments before any I/O and turns a file system failure into
  `StorageError`, leaving no intent behind;
- `put` makes every folder it creates and the renamed payload durable, in order, before it
  returns (so before any commit can name the attachment);
- a database written before the URI index existed is migrated and kept safe.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import FAR_FUTURE_MS, make_commit, node, now_ms, replace, runtime

import turnstore
from conftest import postgres_connection
from turnstore import FileAttachmentStore
from turnstore.attachments import TEMPORARY_PREFIX
from turnstore.backends.postgres import schema as postgres_schema
from turnstore.backends.sqlite import schema as sqlite_schema
from turnstore.records import AttachmentIntent
from turnstore.scripts.attachments import AttachmentSql


def intent(attachment_id: str, session_id: str, uri: str, at_ms: int = 1) -> AttachmentIntent:
    """An intent of `session_id` to write `attachment_id` at `uri`."""
    return AttachmentIntent(
        attachment_id=attachment_id,
        session_id=session_id,
        canonical_uri=uri,
        intent_at_epoch_ms=at_ms,
    )


def files_under(folder: Path) -> list[Path]:
    """Every file under `folder`, temporary (dot) files included, sorted."""
    return sorted(path for path in folder.rglob("*") if path.is_file())


# --- 1. one payload file, one session -------------------------------------------------------


@pytest.mark.parametrize("committed", [False, True], ids=["uncommitted", "committed"])
async def test_an_intent_naming_another_sessions_uri_is_refused(store, database, committed):
    """record_intent refuses a canonical_uri that another session's entry names; the owner's
    own session may record it again, and another URI is accepted."""
    owner = await runtime(store, "owner")
    other = await runtime(store, "other")
    await owner.record_intent(intent("mine", "owner", "/payloads/shared"))
    if committed:
        await owner.commit_refs(["mine"])
    with pytest.raises(turnstore.InvalidInput, match="another session"):
        await other.record_intent(intent("theirs", "other", "/payloads/shared"))
    assert database.query("SELECT attachment_id FROM attachment_manifest") == [("mine",)]
    await owner.record_intent(intent("mine-too", "owner", "/payloads/shared"))
    await other.record_intent(intent("theirs", "other", "/payloads/own"))
    assert database.count("attachment_manifest") == 3


async def test_a_deleted_sessions_uri_stays_refused_until_swept(store):
    """A deleted session's entries are orphans that still own their URI until reclaimed."""
    doomed = await runtime(store, "doomed")
    await doomed.record_intent(intent("old", "doomed", "/payloads/old"))
    await doomed.commit_refs(["old"])
    assert await store.delete_sessions(["doomed"]) is True
    newcomer = await runtime(store, "newcomer")
    with pytest.raises(turnstore.InvalidInput):
        await newcomer.record_intent(intent("new", "newcomer", "/payloads/old"))
    assert await doomed.forget("old") is True
    await newcomer.record_intent(intent("new", "newcomer", "/payloads/old"))


async def test_canonical_uri_in_use_sees_every_entry_of_every_session(store):
    """canonical_uri_in_use is True while any entry, committed or not, of any session names it."""
    a = await runtime(store, "a")
    b = await runtime(store, "b")
    assert await a.canonical_uri_in_use("/payloads/x") is False
    await b.record_intent(intent("x", "b", "/payloads/x"))
    assert await a.canonical_uri_in_use("/payloads/x") is True
    await b.commit_refs(["x"])
    assert await a.canonical_uri_in_use("/payloads/x") is True
    assert await a.canonical_uri_in_use("/payloads/y") is False
    with pytest.raises(turnstore.InvalidInput):
        await a.canonical_uri_in_use(7)


def test_sweeping_one_session_never_deletes_another_sessions_payload(blocking_store, tmp_path):
    """A host-supplied URI naming another session's committed payload is refused, and the
    sweep of the would-be intruder leaves that payload alone."""
    files = FileAttachmentStore(tmp_path / "root")
    owner = blocking_store.runtime("owner")
    payload = files.put(owner, "report.pdf", b"owner's bytes")
    owner.commit_refs(["report.pdf"])
    intruder = blocking_store.runtime("intruder")
    with pytest.raises(turnstore.InvalidInput):
        intruder.record_intent(intent("stolen", "intruder", str(payload)))
    files.sweep(intruder, FAR_FUTURE_MS)
    files.sweep_all(blocking_store, FAR_FUTURE_MS)
    assert payload.read_bytes() == b"owner's bytes"
    assert owner.list_uncommitted(FAR_FUTURE_MS) == []


def test_the_sweep_keeps_a_file_that_a_committed_entry_names(blocking_store, database, tmp_path):
    """An orphan whose file another, committed entry names is forgotten; the file stays."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    path = files.put(rt, "draft", b"shared bytes")
    rt.record_intent(intent("final", "s", str(path)))
    rt.commit_refs(["final"])

    assert files.sweep(rt, FAR_FUTURE_MS) == ["draft"]
    assert path.read_bytes() == b"shared bytes"
    assert database.query("SELECT attachment_id FROM attachment_manifest") == [("final",)]


def test_the_sweep_deletes_only_files_the_store_placed(blocking_store, tmp_path):
    """An orphan whose host-supplied URI points inside the root, at a name the store did not
    place for it, is forgotten and its file kept: it is the host's file."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    hosts = files.root / "s" / "kept-by-the-host"
    hosts.parent.mkdir(parents=True)
    hosts.write_bytes(b"host file")
    rt.record_intent(intent("orphan", "s", str(hosts)))
    assert files.sweep(rt, FAR_FUTURE_MS) == ["orphan"]
    assert hosts.read_bytes() == b"host file"


# --- 2. placement and temporary files -------------------------------------------------------


def test_putting_an_id_never_touches_the_attachment_named_like_its_temporary_file(
    blocking_store, tmp_path
):
    """put("doc") and the sweep of its orphan leave a committed "doc.partial" whole."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    neighbour = files.put(rt, "doc.partial", b"committed neighbour")
    rt.commit_refs(["doc.partial"])

    doc = files.put(rt, "doc", b"orphan")
    assert neighbour.read_bytes() == b"committed neighbour"
    assert files.sweep(rt, FAR_FUTURE_MS) == ["doc"]
    assert not doc.exists()
    assert neighbour.read_bytes() == b"committed neighbour"
    assert files_under(files.root) == [neighbour]


def test_ids_differing_only_in_case_or_escaping_get_different_files(blocking_store, tmp_path):
    """Placed names are one per id, even on a case-insensitive file system."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    ids = ["Doc", "doc", "%44oc", "d/oc", "d%2Foc", "é", "\u00e9\u0301"]
    paths = [files.put(rt, attachment_id, attachment_id.encode()) for attachment_id in ids]
    assert len({path.name.lower() for path in paths}) == len(ids)
    for attachment_id, path in zip(ids, paths, strict=True):
        assert path.read_bytes() == attachment_id.encode()


def test_sessions_whose_ids_are_not_file_names_get_their_own_folders(blocking_store, tmp_path):
    """Session ids with slashes, dots or capitals are placed in one folder each."""
    files = FileAttachmentStore(tmp_path / "root")
    paths = []
    for number, session_id in enumerate(("org/team", "org%2Fteam", "..", "Org/Team")):
        rt = blocking_store.runtime(session_id)
        paths.append(files.put(rt, f"a{number}", session_id.encode()))
    assert len({path.parent for path in paths}) == 4
    assert all(path.parent.parent == files.root for path in paths)


def test_the_sweep_deletes_old_temporary_files_and_keeps_young_ones(blocking_store, tmp_path):
    """A temporary file left by a cut-short put is deleted once older than the threshold."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    kept = files.put(rt, "kept", b"bytes")
    rt.commit_refs(["kept"])
    old = kept.with_name(f"{TEMPORARY_PREFIX}old")
    young = kept.with_name(f"{TEMPORARY_PREFIX}young")
    for path in (old, young):
        path.write_bytes(b"half")
    os.utime(old, ns=(10**15, 10**15))  # 1970, far older than any threshold
    assert files.sweep(rt, now_ms() - 60_000) == []
    assert files_under(files.root) == sorted([kept, young])


# --- 3. permissions -------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_payloads_are_0600_and_folders_0700_whatever_the_umask(blocking_store, tmp_path, umask):
    """Under any umask, put creates payload files 0600 and every folder 0700."""
    files = FileAttachmentStore(tmp_path / "made" / "root")
    rt = blocking_store.runtime("s")
    previous = os.umask(umask)
    try:
        path = files.put(rt, "secret", b"private")
        second = files.put(rt, "second", b"private too")
    finally:
        os.umask(previous)
    for file in (path, second):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    for folder in (path.parent, files.root, tmp_path / "made"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


# --- 4. the store-wide sweep ----------------------------------------------------------------


def test_sweep_all_reclaims_the_payloads_of_deleted_sessions(blocking_store, database, tmp_path):
    """After delete_sessions, sweep_all deletes the deleted sessions' files, committed ones
    too, without being told their ids; other sessions keep theirs and their young orphans."""
    files = FileAttachmentStore(tmp_path / "root")
    doomed = blocking_store.runtime("doomed")
    gone = [files.put(doomed, "d-committed", b"1"), files.put(doomed, "d-orphan", b"2")]
    doomed.commit_runtime_state(
        make_commit("doomed", None, replace([node("a")])).with_committed_attachments(
            ["d-committed"]
        )
    )
    leftover = gone[0].with_name(f"{TEMPORARY_PREFIX}cut-short")
    leftover.write_bytes(b"half")
    os.utime(leftover, ns=(10**15, 10**15))
    kept = blocking_store.runtime("kept")
    committed = files.put(kept, "k-committed", b"3")
    kept.commit_refs(["k-committed"])
    young = files.put(kept, "k-young", b"4")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not the store's")
    doomed.record_intent(intent("d-outside", "doomed", str(outside)))

    assert blocking_store.delete_sessions(["doomed"]) is True
    reclaimed = files.sweep_all(blocking_store, now_ms() - 60_000)

    assert sorted(reclaimed) == ["d-committed", "d-orphan", "d-outside"]
    assert files_under(files.root) == sorted([committed, young])
    assert not gone[0].parent.exists()  # the deleted session's folder, left empty, is gone
    assert outside.read_bytes() == b"not the store's"
    assert sorted(database.query("SELECT attachment_id FROM attachment_manifest")) == [
        ("k-committed",),
        ("k-young",),
    ]
    assert files.sweep_all(blocking_store, now_ms() - 60_000) == []
    # A put into a session whose empty folder a sweep removed (a folder this instance made
    # and remembers as durable) makes the folder again.
    again = files.put(blocking_store.runtime("doomed"), "d-again", b"5")
    assert again.parent == gone[0].parent
    assert again.read_bytes() == b"5"


def test_sweep_all_reclaims_every_sessions_old_orphans(blocking_store, tmp_path):
    """sweep_all also reclaims old orphans of live sessions, as each session's sweep would."""
    files = FileAttachmentStore(tmp_path / "root")
    paths = {sid: files.put(blocking_store.runtime(sid), f"{sid}-orphan", b"x") for sid in "ab"}
    assert sorted(files.sweep_all(blocking_store, FAR_FUTURE_MS)) == ["a-orphan", "b-orphan"]
    assert not any(path.exists() for path in paths.values())
    assert FileAttachmentStore(tmp_path / "never-made").sweep_all(blocking_store, 1) == []


async def test_list_uncommitted_attachments_lists_every_session(store):
    """The store-wide listing has every session's old orphans, deleted sessions' included."""
    a = await runtime(store, "a")
    b = await runtime(store, "b")
    await a.record_intent(intent("a-old", "a", "/p/a-old", at_ms=10))
    await a.record_intent(intent("a-young", "a", "/p/a-young", at_ms=10_000))
    await b.record_intent(intent("b-done", "b", "/p/b-done", at_ms=10))
    await b.commit_refs(["b-done"])
    listed = await store.upkeep.list_uncommitted_attachments(1_000)
    assert [entry.attachment_id for entry in listed] == ["a-old"]
    assert await store.delete_sessions(["b"]) is True
    listed = await store.upkeep.list_uncommitted_attachments(1_000)
    assert [(entry.attachment_id, entry.session_id) for entry in listed] == [
        ("b-done", "b"),
        ("a-old", "a"),
    ]
    with pytest.raises(turnstore.InvalidInput):
        await store.upkeep.list_uncommitted_attachments(-1)


# --- 5. argument checks and failures --------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        pytest.param("data", "text, not bytes", id="str-data"),
        pytest.param("data", 12, id="int-data"),
        pytest.param("data", [1, 2], id="list-data"),
        pytest.param("data", memoryview(b"abcd")[::2], id="strided-data"),
        pytest.param("runtime", "s", id="session-id-as-runtime"),
        pytest.param("runtime", None, id="no-runtime"),
        pytest.param("attachment_id", 3, id="int-id"),
        pytest.param("attachment_id", "\ud800", id="lone-surrogate-id"),
    ],
)
def test_put_checks_its_arguments_before_any_io(blocking_store, tmp_path, change, argument):
    """A bad runtime, id or payload is InvalidInput before anything is recorded or written."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    arguments: dict[str, Any] = {"runtime": rt, "attachment_id": "a", "data": b"bytes"}
    arguments[change] = argument
    with pytest.raises(turnstore.InvalidInput):
        files.put(**arguments)
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []
    assert not files.root.exists()


async def test_the_store_refuses_an_async_handle(tmp_path, store_url):
    """FileAttachmentStore is blocking: an async runtime handle or store is InvalidInput."""
    files = FileAttachmentStore(tmp_path / "root")
    async with turnstore.open(store_url) as store:
        with pytest.raises(turnstore.InvalidInput):
            files.put(store.runtime("s"), "a", b"x")
        with pytest.raises(turnstore.InvalidInput):
            files.sweep(store.runtime("s"), 1)
        with pytest.raises(turnstore.InvalidInput):
            files.sweep_all(store, 1)


def test_put_accepts_bytearray_and_memoryview(blocking_store, tmp_path):
    """Any contiguous buffer of bytes is a payload."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    assert files.put(rt, "a", bytearray(b"array")).read_bytes() == b"array"
    words = memoryview(bytearray(8)).cast("I")
    assert files.put(rt, "b", words).read_bytes() == bytes(8)


def test_a_put_whose_rename_fails_raises_storage_error_and_leaves_no_intent(
    blocking_store, tmp_path
):
    """A folder where the payload goes makes the rename fail (even for root): StorageError,
    no intent, no temporary file, and the folder untouched."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    blocker = files.path_for("s", "a")
    blocker.mkdir(parents=True)
    (blocker / "inside").write_bytes(b"in the way")
    with pytest.raises(turnstore.StorageError, match="attachment `a`"):
        files.put(rt, "a", b"bytes")
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []
    assert files_under(files.root) == [blocker / "inside"]


def test_a_put_whose_folder_is_a_file_raises_storage_error_and_records_nothing(
    blocking_store, tmp_path
):
    """A file where the session's folder goes: StorageError before any intent is recorded."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    files.root.mkdir()
    (files.root / "s").write_bytes(b"a file, not a folder")
    with pytest.raises(turnstore.StorageError):
        files.put(rt, "a", b"bytes")
    assert rt.list_uncommitted(FAR_FUTURE_MS) == []
    assert files_under(files.root) == [files.root / "s"]


@pytest.fixture
def file_size_limit() -> Any:
    """Set RLIMIT_FSIZE (which binds root too) for the test's body, and restore it after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a killed process

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, handler)


def test_a_put_failing_mid_payload_raises_storage_error_and_leaves_no_intent(
    blocking_store, tmp_path, file_size_limit
):
    """A payload the file system refuses half-way (file size limit): StorageError, no intent,
    no temporary file; the store works again once the limit is lifted."""
    files = FileAttachmentStore(tmp_path / "root")
    rt = blocking_store.runtime("s")
    files.put(rt, "warm-up", b"x")  # the database files have grown before the limit
    limit = 8 * 1024 * 1024
    file_size_limit(limit)
    try:
        with pytest.raises(turnstore.StorageError, match="attachment `big`"):
            files.put(rt, "big", bytes(2 * limit))
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    assert [entry.attachment_id for entry in rt.list_uncommitted(FAR_FUTURE_MS)] == ["warm-up"]
    assert files_under(files.root) == [files.path_for("s", "warm-up")]
    assert files.put(rt, "big", b"small now").read_bytes() == b"small now"


# --- 6. durability order --------------------------------------------------------------------


class DiskLog:
    """Records mkdir, fsync and rename calls, in order, then makes the real call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, Any]] = []
        real_mkdir, real_fsync, real_replace = os.mkdir, os.fsync, os.replace

        def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            real_mkdir(path, *args, **kwargs)
            self.events.append(("mkdir", Path(path)))

        def fsync(descriptor: int) -> None:
            real_fsync(descriptor)
            info = os.fstat(descriptor)
            self.events.append(("fsync", (info.st_dev, info.st_ino)))

        def rename(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
            real_replace(source, target, *args, **kwargs)
            self.events.append(("rename", Path(target)))

        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", rename)
        monkeypatch.setattr(os, "rename", rename)

    def index(self, event: tuple[str, Any]) -> int:
        """Position of the first `event`; fails when it never happened."""
        assert event in self.events, f"{event} never happened: {self.events}"
        return self.events.index(event)


def inode(path: Path) -> tuple[int, int]:
    """What an fsync of `path`'s descriptor is recorded as."""
    info = path.stat()
    return (info.st_dev, info.st_ino)


def test_put_makes_folders_and_payload_durable_in_order_before_the_commit(
    blocking_store, tmp_path, monkeypatch
):
    """Each created folder is followed by an fsync of its parent; the payload is fsynced,
    then renamed into place, then its folder fsynced; all before put returns, so before the
    commit naming it."""
    files = FileAttachmentStore(tmp_path / "new" / "root")
    rt = blocking_store.runtime("s")
    disk = DiskLog(monkeypatch)
    path = files.put(rt, "a", b"first")
    disk.events.append(("commit", "a"))
    rt.commit_runtime_state(
        make_commit("s", None, replace([node("n")])).with_committed_attachments(["a"])
    )
    events = disk.events
    folders = [tmp_path / "new", files.root, path.parent]
    renamed = disk.index(("rename", path))
    for folder in folders:
        made = disk.index(("mkdir", folder))
        # ValueError when no fsync of the parent follows the mkdir.
        parent_synced = events.index(("fsync", inode(folder.parent)), made)
        assert parent_synced < renamed, folder
    assert disk.index(("fsync", inode(path))) < renamed  # the payload, before its rename
    assert events.index(("fsync", inode(path.parent)), renamed)  # its folder, after it
    assert events[-1] == ("commit", "a")  # every step of the put came before the commit

    # A second put into the same folder: no folder made; the folder's entry in the root is
    # fsynced again (another writer may have removed and made it again), then the payload.
    del events[:]
    second = files.put(rt, "b", b"second")
    assert events == [
        ("fsync", inode(files.root)),
        ("fsync", inode(second)),
        ("rename", second),
        ("fsync", inode(second.parent)),
    ]


def test_a_new_store_instance_makes_an_existing_folder_durable_once(
    blocking_store, tmp_path, monkeypatch
):
    """A folder found on disk may come from a writer that crashed before fsyncing its parent:
    the first put of a store instance fsyncs every folder above the root, up to `/`, then
    the root (the session folder's parent); a later put fsyncs only the root again."""
    root = tmp_path / "root"
    FileAttachmentStore(root).put(blocking_store.runtime("s"), "a", b"x")
    files = FileAttachmentStore(root)
    disk = DiskLog(monkeypatch)
    path = files.put(blocking_store.runtime("s"), "b", b"y")
    synced = [what for kind, what in disk.events if kind == "fsync"]
    above = [inode(folder) for folder in files.root.parents]
    assert synced[: len(above) + 1] == [*above, inode(files.root)]
    assert disk.index(("fsync", inode(files.root))) < disk.index(("rename", path))
    del disk.events[:]
    files.put(blocking_store.runtime("s"), "c", b"z")
    synced = [what for kind, what in disk.events if kind == "fsync"]
    assert synced[0] == inode(files.root)
    assert not set(above) & set(synced)


# --- a database written before the URI index ------------------------------------------------


def _write_version_2_database(backend_name: str, database: Any, schema: str) -> None:
    """An empty database at schema version 2, as the build before the URI index made it."""
    if backend_name == "sqlite":
        connection = sqlite3.connect(database.path, isolation_level=None)
        for migration in sqlite_schema.MIGRATIONS[:2]:
            connection.executescript(migration)
        connection.execute("PRAGMA user_version = 2")
        connection.close()
        return
    with postgres_connection() as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    database.query("CREATE TABLE turnstore_schema (version INTEGER NOT NULL)")
    for number, migration in enumerate(postgres_schema.MIGRATIONS[:2], start=1):
        database.query(migration)
        database.query("INSERT INTO turnstore_schema (version) VALUES (?)", (number,))


def test_a_version_2_database_is_migrated_and_its_shared_payload_kept(
    backend_name, database, pg_schema, store_url, tmp_path
):
    """A database of the previous schema, holding what that build allowed (an orphan of one
    session and a committed entry of another naming one file), opens at the current version;
    the sweep keeps the shared file, and a third session cannot claim its URI."""
    _write_version_2_database(backend_name, database, pg_schema)
    files = FileAttachmentStore(tmp_path / "root")
    shared = files.path_for("a", "a-orphan")
    shared.parent.mkdir(parents=True)
    shared.write_bytes(b"b's committed bytes")
    database.query(
        "INSERT INTO attachment_manifest (attachment_id, session_id, canonical_uri,"
        " intent_at_ms, committed_at_ms) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)",
        ("a-orphan", "a", str(shared), 1, None, "b-doc", "b", str(shared), 1, 2),
    )
    with turnstore.open_blocking(store_url) as store:
        assert files.sweep(store.runtime("a"), FAR_FUTURE_MS) == ["a-orphan"]
        assert shared.read_bytes() == b"b's committed bytes"
        with pytest.raises(turnstore.InvalidInput):
            store.runtime("c").record_intent(intent("c-doc", "c", str(shared)))
    if backend_name == "sqlite":
        version = database.query("PRAGMA user_version")[0][0]
        indexes = database.query("SELECT name FROM sqlite_master WHERE type = 'index'")
    else:
        version = database.query("SELECT max(version) FROM turnstore_schema")[0][0]
        indexes = database.query(
            "SELECT indexname FROM pg_indexes WHERE schemaname = ?", (pg_schema,)
        )
    assert version == len(sqlite_schema.MIGRATIONS) == len(postgres_schema.MIGRATIONS) == 12
    assert ("attachment_uri_idx",) in indexes


def test_uri_lookups_are_served_by_the_uri_index(backend_name, blocking_store, pg_schema, tmp_path):
    """Both URI lookups read attachment_uri_idx, so their cost does not grow with the table."""
    rt = blocking_store.runtime("s")
    for number in range(50):
        rt.record_intent(intent(f"a{number}", "s", f"/p/{number}"))
    if backend_name == "sqlite":
        from turnstore.backends.sqlite.engine import SQLITE

        sql = SQLITE.statements(AttachmentSql)
        connection = sqlite3.connect(tmp_path / "turnstore.sqlite3")
        try:
            for statement, params in (
                (sql.uri_named, ("/p/1",)),
                (sql.uri_of_another_session, ("/p/1", "s")),
            ):
                plan = " ".join(
                    str(row[-1])
                    for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", params)
                )
                assert plan.startswith("SEARCH"), plan
                assert "INDEX attachment_uri_idx" in plan, plan
        finally:
            connection.close()
        return
    from turnstore.backends.postgres.engine import POSTGRES

    sql = POSTGRES.statements(AttachmentSql)
    with postgres_connection(pg_schema) as connection:
        connection.execute("SET enable_seqscan = off")
        for statement, params in (
            (sql.uri_named, ("/p/1",)),
            (sql.uri_of_another_session, ("/p/1", "s")),
        ):
            plan = str(connection.execute(f"EXPLAIN {statement}", params).fetchall())
            assert "attachment_uri_idx" in plan, plan


def test_a_store_whose_root_was_removed_makes_it_again(blocking_store, tmp_path):
    """The root made once per instance is made again when something removed it since."""
    import shutil

    files = FileAttachmentStore(tmp_path / "files")
    rt = blocking_store.runtime("s1")
    files.put(rt, "a1", b"x")
    shutil.rmtree(files.root)
    assert files.put(rt, "a2", b"y").read_bytes() == b"y"
    assert stat.S_IMODE(files.root.stat().st_mode) == 0o700
