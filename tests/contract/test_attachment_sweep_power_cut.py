"""Attachment sweeps and power cuts: no file a sweep reclaims outlives a cut and the next sweep.

The power-cut model of `test_attachment_power_cut` (only what was fsynced survives) runs a
sweep, and a power cut lands before each call of it that may change the disk, in turn: the
real files then become what the model says survives, the database keeps what committed
(its own crash safety is tested elsewhere), and a new store instance sweeps again with the
real `os`. Afterwards no payload file may be left that no manifest entry names, and every
committed attachment must still hold its bytes. Before the sweep journaled its deletions and
fsynced the folders it deleted from, a cut after an entry was forgotten brought its file back
for good: the next sweep, which finds files through entries, never saw it again.
"""

from __future__ import annotations

import fcntl
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from runtime_helpers import FAR_FUTURE_MS
from test_attachment_power_cut import (
    SESSIONS,
    Killed,
    OsSeenByTheStore,
    PowerCutDisk,
    Put,
    Workload,
)

import turnstore.attachments
from turnstore import BlockingRuntimeStore, BlockingStore, FileAttachmentStore

Sweep = Callable[[Workload, FileAttachmentStore], object]


def _sweep_all(workload: Workload, files: FileAttachmentStore) -> object:
    return files.sweep_all(workload.store, FAR_FUTURE_MS)


def _sweep_one(workload: Workload, files: FileAttachmentStore) -> object:
    return files.sweep(workload.store.runtime(workload.kept_session), FAR_FUTURE_MS)


def _then_put(sweep: Sweep) -> Sweep:
    """The sweep, then a put into a new session, which fsyncs the root: a journal dropped
    but not fsynced is then gone for good, so the sweep's deletions must be durable already."""

    def run(workload: Workload, files: FileAttachmentStore) -> object:
        sweep(workload, files)
        workload.put_and_commit(f"{workload.kept_session}-after", files)
        return None

    return run


class CutWorkload(Workload):
    """Puts that a sweep reclaims, beside committed ones it must keep, in fresh sessions."""

    def prepare(self, run: int) -> list[Put]:
        """Orphans in two sessions, committed puts in both, and a deleted session's puts."""
        kept, other, deleted = (f"{run}-{name}" for name in SESSIONS[:3])
        self.kept_session = kept
        committed = []
        for session_id in (kept, other):
            committed.append(self.put(session_id))
            self.commit(session_id, [committed[-1]])
            self.put(session_id)
            self.put(session_id)
        self.put_and_commit(deleted)
        self.put(deleted)
        assert self.store.delete_sessions([deleted]) is True
        self.disk.forget_session(deleted)
        return committed


def _prepare(
    store: BlockingStore, base: Path, run: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[PowerCutDisk, CutWorkload, list[Put]]:
    base.mkdir()
    disk = PowerCutDisk(base)
    monkeypatch.setattr(turnstore.attachments, "os", OsSeenByTheStore(disk))
    workload = CutWorkload(store, disk, base / "attachments" / "root", seed=run)
    workload.numbers = itertools.count(run * 1000)  # attachment ids unique across runs
    return disk, workload, workload.prepare(run)


def _orphans(store: BlockingStore, root: Path) -> list[str]:
    """Payload files under `root` that no manifest entry names (temporaries included)."""
    named = store.runtime("any").canonical_uri_in_use
    found = []
    for folder, _, names in os.walk(root):
        found += [
            os.path.join(folder, name)
            for name in names
            if name.startswith(".") or not named(os.path.join(folder, name))
        ]
    return sorted(found)


@pytest.mark.parametrize("sweep", [_sweep_all, _sweep_one], ids=["sweep_all", "sweep"])
def test_no_swept_file_outlives_a_power_cut_and_the_next_sweep(
    blocking_store: BlockingStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sweep: Sweep,
) -> None:
    """A power cut before each disk-changing call of a sweep (and of a put after it), then a
    sweep after restart: nothing is left that no entry names, and every committed attachment
    keeps its bytes."""
    disk, workload, _ = _prepare(blocking_store, tmp_path / "count", 0, monkeypatch)
    cut_short = _then_put(sweep)
    before = disk.changing_calls
    cut_short(workload, FileAttachmentStore(workload.root))
    calls = disk.changing_calls - before
    assert calls >= 6, calls
    left: dict[int, list[str]] = {}
    for cut in range(calls):
        disk, workload, committed = _prepare(
            blocking_store, tmp_path / f"cut-{cut}", cut + 1, monkeypatch
        )
        disk.kill_before = disk.changing_calls + cut
        with pytest.raises(Killed):
            cut_short(workload, FileAttachmentStore(workload.root))
        disk.assert_nothing_lost()
        disk.power_cut()
        monkeypatch.setattr(turnstore.attachments, "os", os)  # the machine restarted
        sweep(workload, FileAttachmentStore(workload.root))
        orphans = _orphans(blocking_store, workload.root)
        if orphans:
            left[cut] = orphans
        for put in committed:
            assert put.path.read_bytes() == put.payload, (cut, put.path)
        # What this run's sweep left for the next run is reclaimed now.
        FileAttachmentStore(workload.root).sweep_all(blocking_store, FAR_FUTURE_MS)
    assert not left, f"{len(left)} of {calls} cuts left files no entry names: {left}"


# --- the journal a sweep leaves when it is cut short ----------------------------------------


def _journal(root: Path, name: str, content: bytes) -> Path:
    path = root / f"{turnstore.attachments.JOURNAL_PREFIX}{name}"
    path.write_bytes(content)
    return path


def test_a_leftover_journal_deletes_only_the_files_no_entry_names(
    blocking_store: BlockingStore, tmp_path: Path
) -> None:
    """A journal of a sweep cut short, as the next sweep finds it: of the files it lists, the
    one whose entry was forgotten goes; a committed one and an uncommitted one stay; a listed
    id that would escape the root reaches only its own escaped name; the journal goes."""
    files = FileAttachmentStore(tmp_path / "root")
    runtime = blocking_store.runtime("s")
    committed = files.put(runtime, "committed", b"c")
    runtime.commit_refs(["committed"])
    forgotten = files.put(runtime, "forgotten", b"f")
    assert runtime.forget("forgotten")  # the sweep was cut before deleting the file
    pending = files.put(runtime, "pending", b"p")
    victim = tmp_path / "victim"
    victim.write_bytes(b"v")
    ids = ["committed", "forgotten", "pending", "../../victim", "missing"]
    journal = _journal(files.root, "cut", msgspec.json.encode([["s", i] for i in ids]))
    assert files.sweep_all(blocking_store, 0) == []
    assert not forgotten.exists()
    assert committed.read_bytes() == b"c"
    assert pending.read_bytes() == b"p"
    assert victim.read_bytes() == b"v"
    assert not journal.exists()


def test_a_journal_its_sweep_still_holds_is_left_alone(
    blocking_store: BlockingStore, tmp_path: Path
) -> None:
    """A journal locked by a running sweep is not replayed; once released, it is. A journal
    that is not one (not JSON) deletes nothing and goes."""
    files = FileAttachmentStore(tmp_path / "root")
    runtime = blocking_store.runtime("s")
    forgotten = files.put(runtime, "forgotten", b"f")
    assert runtime.forget("forgotten")
    journal = _journal(files.root, "running", b'[["s","forgotten"]]')
    garbage = _journal(files.root, "garbage", b'[["s","forgot')
    with open(journal, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        files.sweep(runtime, 0)
        assert forgotten.exists()
        assert journal.exists()
        assert not garbage.exists()
    files.sweep(runtime, 0)
    assert not forgotten.exists()
    assert not journal.exists()


def test_a_sweep_journals_before_it_forgets_and_drops_the_journal_after(
    blocking_store: BlockingStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the first entry is forgotten, a durable journal lists every file the batch may
    delete; when the sweep returns, no journal is left."""
    files = FileAttachmentStore(tmp_path / "root")
    runtime = blocking_store.runtime("s")
    for name in ("a", "b"):
        files.put(runtime, name, name.encode())
    seen: list[list[str]] = []
    forget = BlockingRuntimeStore.forget

    def spying(self: BlockingRuntimeStore, attachment_id: str) -> bool:
        seen.append(sorted(p.name for p in files.root.glob(".sweep-*")))
        return forget(self, attachment_id)

    monkeypatch.setattr(BlockingRuntimeStore, "forget", spying)
    assert sorted(files.sweep(runtime, FAR_FUTURE_MS)) == ["a", "b"]
    assert [len(names) for names in seen] == [1, 1]
    assert list(files.root.glob(".sweep-*")) == []
