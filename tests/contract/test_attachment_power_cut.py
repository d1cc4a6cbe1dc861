"""Attachment power cuts: a committed attachment survives a cut at any point after its commit.

`FileAttachmentStore` runs over a model of a file system that keeps, at a power cut, only what
was fsynced (its strict mode):

- a file's content survives as of its last fsync (by inode), and not at all without one;
- a folder's entries (name -> inode) survive as of that folder's last fsync, so a new folder,
  a created file, a rename, an unlink or an rmdir counts only once its folder is fsynced;
- the test's temporary folder (`tmp_path`) and its ancestors are durable and pre-existing.

The store's `os` is replaced by a proxy that makes each real call and mirrors it in a live
model (folder -> {name: inode}, file -> bytes); an fsync copies the live state of its inode
into the durable model, and a call the model does not understand (an unknown descriptor or
path, a flag it does not model, an `os` function it does not know) fails the test. After
every operation that changes the model, each a possible cut point, every attachment whose
commit has returned (`commit_refs` or a runtime commit naming it; an "ack" marker is then
recorded, itself a cut point) and whose session was not deleted since must be reachable in
the DURABLE model, walking from `tmp_path` along its `path_for`, and hold exactly its bytes.
The live model is checked against the real files at every cut point (names and inodes) and
every ack (bytes too). The database is not modelled: its crash safety is tested elsewhere.

The workload is seeded and random: sessions whose ids need escaping (one is hashed), puts
committed by `commit_refs` or a runtime commit, orphans, `sweep` with a threshold in the
future, `delete_sessions` then `sweep_all`, several store instances over one root (one
replaced now and then, as by a restarted process), and puts into a session whose empty folder
`sweep_all` removed. The same workload over stores that leave one fsync out must report a lost
attachment, so the checker cannot pass by doing nothing. Two scenarios the simulation found
losing a committed attachment in `attachments.py` (a folder another writer removed and made
again; folders a killed writer made above the root) are kept as tests of the fix.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import FAR_FUTURE_MS, make_commit, node, replace

import turnstore.attachments
from turnstore import BlockingStore, FileAttachmentStore

Inode = tuple[int, int]
"""A real inode: (st_dev, st_ino)."""

SESSIONS = ("plain", "Org/Team", "..", "café ☕ 1", "s" * 240)
"""Session ids: plain, escaped (`/`, capitals, a leading dot, spaces, UTF-8) and hashed."""
ID_PREFIXES = ("doc-", "Img.", ".dot", "a/b", "é", "%41")
"""Attachment ids start with these, so most of their names need escaping."""
SEEDS = (1, 2)
STEPS = 400
"""Random steps of one workload, before its fixed epilogue."""
LEAST_CUT_POINTS = 800
LEAST_ACKNOWLEDGED = 80
LEAST_CHECKS = 20_000
"""A run checks at least this many cut points, acknowledged attachments, and attachments
at cut points."""


class LostCommittedAttachment(AssertionError):
    """After some cut point, the durable state lacks an attachment whose commit returned."""


class Killed(BaseException):
    """A writer process dying at this point: no handler of the store runs past it."""


@dataclass(frozen=True)
class Put:
    """An attachment the workload put: once a commit naming it returns, it must survive
    every later cut."""

    session_id: str
    attachment_id: str
    path: Path
    payload: bytes
    parts: tuple[str, ...]
    """The names from `tmp_path` down to the file."""


@dataclass
class Descriptor:
    """An open descriptor of the store: its model node, and whether it writes a new file."""

    node: int
    writes: bool


ABOVE_BASE = -1
"""The node of a descriptor opened on a folder above the base (durable, not modelled)."""


class PowerCutDisk:
    """The live and durable models of the files under `base`, and the invariant checker.

    Model nodes stand for inodes; a real inode number is bound to a fresh node whenever the
    file system creates something, so an inode number the kernel reuses after an unlink
    never mixes the durable state of the old file with the new one.
    """

    def __init__(self, base: Path) -> None:
        self.base = base.resolve()
        self.node_of: dict[Inode, int] = {}
        self.inode_of: dict[int, Inode] = {}
        self.is_dir: dict[int, bool] = {}
        self.live_dirs: dict[int, dict[str, int]] = {}
        self.live_files: dict[int, bytearray] = {}
        self.durable_dirs: dict[int, dict[str, int]] = {}
        self.durable_files: dict[int, bytes] = {}
        self.descriptors: dict[int, Descriptor] = {}
        self.required: dict[tuple[str, str], Put] = {}
        self.removed_folders: set[Path] = set()
        self.after_mkdir: dict[Path, Callable[[], None]] = {}
        """One-shot hooks run right after a real mkdir of a path: a writer paused or killed."""
        self.skip_payload_fsync = False
        """A broken store: an fsync of a payload file is left out."""
        self.kill_before: int | None = None
        """Raise `Killed` before the store's call that changes the disk with this number
        (counted by `changing_calls` from 0): a power cut there, and no handler runs."""
        self.changing_calls = 0
        self.cut_points = 0
        self.acknowledged = 0
        self.checks = 0
        self.recreated_folders = 0
        self.losses: list[str] = []
        self.operations: list[str] = []
        # The base is durable and pre-existing; only the entries the store makes in it are
        # modelled (the database's files live there too).
        self.base_node = self._bind(self.base, is_dir=True)
        self.durable_dirs[self.base_node] = {}

    # --- the model --------------------------------------------------------------------------

    def _bind(self, path: Path, *, is_dir: bool) -> int:
        info = os.lstat(path)
        inode = (info.st_dev, info.st_ino)
        assert inode not in self.node_of, f"{path}: inode {inode} is already a live node"
        assert stat.S_ISDIR(info.st_mode) == is_dir, path
        node = len(self.is_dir)
        self.node_of[inode] = node
        self.inode_of[node] = inode
        self.is_dir[node] = is_dir
        if is_dir:
            self.live_dirs[node] = {}
        else:
            self.live_files[node] = bytearray()
        return node

    def _unbind(self, node: int) -> None:
        """The node's inode is freed (no link left): the kernel may reuse its number."""
        del self.node_of[self.inode_of[node]]

    def _existing(self, path: Path) -> int | None:
        """The node at `path`, None when nothing is there; an unknown inode fails the test."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        node = self.node_of.get((info.st_dev, info.st_ino))
        assert node is not None, f"{path} exists but the model never saw it made"
        return node

    def _folder(self, path: Path) -> dict[str, int]:
        """The live entries of the modelled folder at `path`."""
        node = self._existing(path)
        assert node is not None, f"{path} does not exist"
        assert self.is_dir[node], f"{path} is not a folder in the model"
        return self.live_dirs[node]

    @staticmethod
    def _path(value: Any, dir_fd: int | None) -> Path:
        assert dir_fd is None, "dir_fd is not modelled"
        path = Path(value)
        assert path.is_absolute(), f"relative path {path} is not modelled"
        return path

    def _relative(self, path: Path) -> str:
        return str(path.relative_to(self.base)) if path != self.base else "<tmp_path>"

    # --- what the store sees as os ----------------------------------------------------------

    def mkdir(self, value: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        self.changing()
        path = self._path(value, dir_fd)
        os.mkdir(path, mode)  # first: it raises as the store expects (exists, no parent)
        made = self._bind(path, is_dir=True)
        self._folder(path.parent)[path.name] = made
        if path in self.removed_folders:
            self.recreated_folders += 1
        self.cut(f"mkdir {self._relative(path)} (node {made})")
        hook = self.after_mkdir.pop(path, None)
        if hook is not None:
            hook()

    def open(self, value: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        self.changing()
        path = self._path(value, dir_fd)
        if flags & os.O_CREAT:
            # Only a new file, opened for writing, is modelled: no truncation, no appending
            # to an existing file.
            assert flags & os.O_EXCL, f"open {path}: O_CREAT without O_EXCL is not modelled"
            assert flags & os.O_ACCMODE == os.O_WRONLY, f"open {path}: not write-only"
            assert not flags & ~(os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC), flags
            descriptor = os.open(path, flags, mode)  # raises when a sweep removed the folder
            node = self._bind(path, is_dir=False)
            self._folder(path.parent)[path.name] = node
            self.descriptors[descriptor] = Descriptor(node, writes=True)
            self.cut(f"create {self._relative(path)} (node {node})")
            return descriptor
        assert flags & ~os.O_CLOEXEC == os.O_RDONLY, f"open {path}: flags {flags} not modelled"
        if path in self.base.parents:
            # Above the base, durable and pre-existing: opened to be fsynced, not modelled.
            descriptor = os.open(path, flags, mode)
            self.descriptors[descriptor] = Descriptor(ABOVE_BASE, writes=False)
            return descriptor
        node = self._existing(path)
        descriptor = os.open(path, flags, mode)  # raises when nothing is there
        assert node is not None, path
        self.descriptors[descriptor] = Descriptor(node, writes=False)
        return descriptor

    def write(self, descriptor: int, data: Any) -> int:
        self.changing()
        opened = self.descriptors.get(descriptor)
        assert opened is not None, f"write to unknown descriptor {descriptor}"
        assert opened.writes, f"write to descriptor {descriptor}, opened read-only"
        written = os.write(descriptor, data)
        # The file was new and is written front to back: the bytes land at its end.
        self.live_files[opened.node] += memoryview(data).cast("B")[:written]
        self.cut(f"write {written} bytes to node {opened.node}")
        return written

    def fsync(self, descriptor: int) -> None:
        self.changing()
        opened = self.descriptors.get(descriptor)
        assert opened is not None, f"fsync of unknown descriptor {descriptor}"
        if opened.node == ABOVE_BASE:
            os.fsync(descriptor)
            self.operations.append("fsync of a folder above the base")
        elif self.is_dir[opened.node]:
            os.fsync(descriptor)
            self.durable_dirs[opened.node] = dict(self.live_dirs[opened.node])
            self.cut(f"fsync folder node {opened.node}")
        elif self.skip_payload_fsync:
            self.operations.append(f"(left out: fsync of file node {opened.node})")
        else:
            os.fsync(descriptor)
            self.durable_files[opened.node] = bytes(self.live_files[opened.node])
            self.cut(f"fsync file node {opened.node}")

    def close(self, descriptor: int) -> None:
        assert descriptor in self.descriptors, f"close of unknown descriptor {descriptor}"
        os.close(descriptor)
        del self.descriptors[descriptor]

    def fchmod(self, descriptor: int, mode: int) -> None:
        # Modes are not modelled (a cut keeps or loses them with the inode); only the call is.
        assert descriptor in self.descriptors, f"fchmod of unknown descriptor {descriptor}"
        os.fchmod(descriptor, mode)

    def chmod(self, value: Any, mode: int, *, dir_fd: int | None = None) -> None:
        path = self._path(value, dir_fd)
        assert self._existing(path) is not None, f"chmod of {path}, which does not exist"
        os.chmod(path, mode)

    def replace(
        self,
        source_value: Any,
        target_value: Any,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None:
        self.changing()
        source = self._path(source_value, src_dir_fd)
        target = self._path(target_value, dst_dir_fd)
        assert source.parent == target.parent, "a rename across folders is not modelled"
        moved = self._existing(source)
        replaced = self._existing(target)
        os.replace(source, target)
        entries = self._folder(source.parent)
        assert moved is not None, source
        assert entries.pop(source.name) == moved, source
        entries[target.name] = moved
        if replaced is not None:
            assert not self.is_dir[replaced], target
            self._unbind(replaced)
        self.cut(f"rename {self._relative(source)} -> {target.name}")

    rename = replace

    def unlink(self, value: Any, *, dir_fd: int | None = None) -> None:
        self.changing()
        path = self._path(value, dir_fd)
        gone = self._existing(path)
        os.unlink(path)  # raises as the real call does when nothing is there
        entries = self._folder(path.parent)
        assert gone is not None, path
        assert not self.is_dir[gone], path
        assert entries.pop(path.name) == gone, path
        self._unbind(gone)
        self.cut(f"unlink {self._relative(path)}")

    def rmdir(self, value: Any, *, dir_fd: int | None = None) -> None:
        self.changing()
        path = self._path(value, dir_fd)
        gone = self._existing(path)
        os.rmdir(path)  # raises when the folder is not empty; then nothing changed
        assert gone is not None, path
        assert self.is_dir[gone], path
        assert not self.live_dirs[gone], path
        assert self._folder(path.parent).pop(path.name) == gone
        self._unbind(gone)
        self.removed_folders.add(path)
        self.cut(f"rmdir {self._relative(path)}")

    def changing(self) -> None:
        """A call that may change the disk is about to run: the planned power cut lands here."""
        if self.kill_before == self.changing_calls:
            self.operations.append("power cut")
            raise Killed
        self.changing_calls += 1

    def power_cut(self) -> None:
        """Make the real files under the base what survives a power cut now: the durable model.

        The live model is stale afterwards: a test runs the real `os` from here on.
        """
        for name in list(self.live_dirs[self.base_node]):
            target = self.base / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        self._materialize(self.base, self.durable_dirs[self.base_node])

    def _materialize(self, folder: Path, entries: dict[str, int]) -> None:
        for name, child in entries.items():
            if self.is_dir[child]:
                (folder / name).mkdir()
                self._materialize(folder / name, self.durable_dirs.get(child, {}))
            else:
                # An entry whose content was never fsynced survives empty.
                (folder / name).write_bytes(self.durable_files.get(child, b""))

    # --- the markers ------------------------------------------------------------------------

    def acknowledge(self, acked: list[Put]) -> None:
        """A commit naming `acked` returned: from now on they must survive any cut."""
        for attachment in acked:
            self.required[(attachment.session_id, attachment.attachment_id)] = attachment
        self.acknowledged += len(acked)
        self.cut("ack " + ", ".join(repr(attachment.attachment_id) for attachment in acked))
        self.compare_with_the_real_files(contents=True)

    def forget_session(self, session_id: str) -> None:
        """`delete_sessions` returned: the session's attachments need not survive any more."""
        for key in [key for key in self.required if key[0] == session_id]:
            del self.required[key]
        self.cut(f"delete_sessions {session_id!r}")

    # --- the checks -------------------------------------------------------------------------

    def assert_nothing_lost(self) -> None:
        """Fail with every loss found (the first ten), each with its cut point."""
        if self.losses:
            raise LostCommittedAttachment("\n".join(self.losses))

    def cut(self, operation: str) -> None:
        """A power cut could land right after `operation`: check what would survive it."""
        self.cut_points += 1
        self.operations.append(operation)
        self.compare_with_the_real_files(contents=False)
        for attachment in self.required.values():
            self.checks += 1
            problem = self.durable_problem(attachment)
            if problem is not None and len(self.losses) < 10:
                recent = "; ".join(self.operations[-8:])
                self.losses.append(
                    f"cut point {self.cut_points}, after `{operation}`: committed attachment "
                    f"{attachment.attachment_id!r} of session {attachment.session_id!r} is "
                    f"lost: {problem} (last operations: {recent})"
                )

    def durable_problem(self, attachment: Put) -> str | None:
        """Why `attachment` would not survive a cut now, or None when it would."""
        node = self.base_node
        for depth, name in enumerate(attachment.parts):
            if not self.is_dir[node]:
                return f"`{self._walked(attachment, depth)}` is a file in the durable state"
            child = self.durable_dirs.get(node, {}).get(name)
            if child is None:
                return (
                    f"`{self._walked(attachment, depth)}` (node {node}) holds no durable entry "
                    f"{name!r}"
                )
            node = child
        where = self._walked(attachment, len(attachment.parts))
        if self.is_dir[node]:
            return f"`{where}` is a folder in the durable state"
        content = self.durable_files.get(node)
        if content is None:
            return f"the content of `{where}` was never fsynced"
        if content != attachment.payload:
            return (
                f"`{where}` holds {len(content)} durable bytes, not its "
                f"{len(attachment.payload)}-byte payload"
            )
        return None

    @staticmethod
    def _walked(attachment: Put, depth: int) -> str:
        return "/".join(attachment.parts[:depth]) or "<tmp_path>"

    def compare_with_the_real_files(self, *, contents: bool) -> None:
        """The live model is the real tree: names, inodes and (when asked) bytes."""
        stack = [(self.base, self.base_node)]
        while stack:
            folder, folder_node = stack.pop()
            entries = self.live_dirs[folder_node]
            real = {
                item.name: (item.stat(follow_symlinks=False).st_dev, item.inode())
                for item in os.scandir(folder)
            }
            if folder_node == self.base_node:  # the database's files are not modelled
                real = {name: real[name] for name in entries if name in real}
            modelled = {name: self.inode_of[child] for name, child in entries.items()}
            assert real == modelled, f"the model of {folder} drifted from the real folder"
            for name, child in entries.items():
                if self.is_dir[child]:
                    stack.append((folder / name, child))
                elif contents:
                    assert (folder / name).read_bytes() == self.live_files[child], folder / name


class OsSeenByTheStore:
    """What `turnstore.attachments` calls `os`: the model's functions, and only the read-only
    calls and constants the model knows pass through unchanged."""

    MODELLED = frozenset(
        {"mkdir", "open", "write", "fsync", "close", "fchmod", "chmod", "replace", "rename"}
        | {"unlink", "rmdir"}
    )
    PASSED = frozenset(
        {"stat", "lstat", "scandir", "strerror", "O_RDONLY", "O_WRONLY", "O_CREAT", "O_EXCL"}
        | {"O_CLOEXEC", "read", "fstat"}
    )

    def __init__(self, disk: PowerCutDisk) -> None:
        self._disk = disk

    def __getattr__(self, name: str) -> Any:
        if name in self.MODELLED:
            return getattr(self._disk, name)
        assert name in self.PASSED, f"attachments.py uses os.{name}, which the model lacks"
        return getattr(os, name)


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PowerCutDisk]:
    """The power-cut model under `tmp_path`, standing in for the attachment store's `os`."""
    model = PowerCutDisk(tmp_path)
    monkeypatch.setattr(turnstore.attachments, "os", OsSeenByTheStore(model))
    yield model
    assert not model.descriptors, f"descriptors left open: {model.descriptors}"


# --- the workload ---------------------------------------------------------------------------


class Workload:
    """Drives store instances over one root and tells the disk what was acknowledged."""

    def __init__(self, store: BlockingStore, disk: PowerCutDisk, root: Path, seed: int) -> None:
        self.store = store
        self.disk = disk
        self.root = root.resolve()  # as the store resolves it: paths compare equal
        self.rng = random.Random(seed)
        self.instances = [FileAttachmentStore(self.root), FileAttachmentStore(self.root)]
        self.heads: dict[str, int | None] = {}
        self.pending: dict[str, list[Put]] = {}
        """Puts whose intent is still uncommitted, by session."""
        self.numbers = itertools.count()
        self.puts_into_a_removed_cached_folder = 0
        self.used_folders: dict[int, set[Path]] = {}

    def instance(self) -> FileAttachmentStore:
        return self.rng.choice(self.instances)

    def put(self, session_id: str, files: FileAttachmentStore | None = None) -> Put:
        """An uncommitted put: an orphan until a commit names it."""
        files = files or self.instance()
        number = next(self.numbers)
        attachment_id = f"{self.rng.choice(ID_PREFIXES)}{number}"
        size = self.rng.choice((0, 1, 13, 700, 4096, 70_001))
        payload = self.rng.randbytes(size)
        folder = files.path_for(session_id, attachment_id).parent
        # A folder this instance put into before, since removed by a sweep: made again.
        if folder in self.used_folders.setdefault(id(files), set()) and not folder.exists():
            self.puts_into_a_removed_cached_folder += 1
        self.used_folders[id(files)].add(folder)
        path = files.put(self.store.runtime(session_id), attachment_id, payload)
        assert path == files.path_for(session_id, attachment_id)
        parts = path.relative_to(self.disk.base).parts
        put = Put(session_id, attachment_id, path, payload, parts)
        self.pending.setdefault(session_id, []).append(put)
        return put

    def commit(self, session_id: str, puts: list[Put]) -> None:
        """Commit `puts` by `commit_refs` or a runtime commit; they are acknowledged then."""
        ids = [put.attachment_id for put in puts]
        runtime = self.store.runtime(session_id)
        head = self.heads.get(session_id)
        if self.rng.random() < 0.5:
            runtime.commit_refs(ids)
        else:
            graph = replace([node(f"n{next(self.numbers)}")]) if head is None else None
            result = runtime.commit_runtime_state(
                make_commit(session_id, head, graph).with_committed_attachments(ids)
            )
            self.heads[session_id] = int(result.head_revision)
        self.disk.acknowledge(puts)
        self.pending[session_id] = [put for put in self.pending[session_id] if put not in puts]

    def put_and_commit(self, session_id: str, files: FileAttachmentStore | None = None) -> None:
        self.commit(session_id, [self.put(session_id, files)])

    def sweep(self, session_id: str) -> None:
        """Every uncommitted put of the session is an orphan older than the threshold."""
        reclaimed = self.instance().sweep(self.store.runtime(session_id), FAR_FUTURE_MS)
        expected = [put.attachment_id for put in self.pending.pop(session_id, [])]
        assert sorted(reclaimed) == sorted(expected)

    def sweep_all(self, files: FileAttachmentStore | None = None, *, deleted: bool = False) -> None:
        """Every uncommitted put is an orphan; a deleted session's committed ones are too."""
        reclaimed = (files or self.instance()).sweep_all(self.store, FAR_FUTURE_MS)
        orphans = [put.attachment_id for puts in self.pending.values() for put in puts]
        self.pending.clear()
        assert set(orphans) <= set(reclaimed)
        assert deleted or sorted(reclaimed) == sorted(orphans)

    def delete(self, session_id: str, sweeper: FileAttachmentStore | None = None) -> None:
        """Delete the session, then reclaim its files (committed ones too) with `sweep_all`."""
        assert self.store.delete_sessions([session_id]) is True
        self.disk.forget_session(session_id)
        self.heads.pop(session_id, None)
        self.sweep_all(sweeper, deleted=True)
        # The folder, left empty, is gone: the next put into the session makes it again.
        assert not self.instances[0].path_for(session_id, "x").parent.exists()

    def random_steps(self, steps: int) -> None:
        for _ in range(steps):
            if self.disk.losses:
                return
            session_id = self.rng.choice(SESSIONS)
            step = self.rng.choices(
                ("put", "commit", "sweep", "sweep_all", "delete", "restart"),
                weights=(40, 45, 3, 3, 2, 3),
            )[0]
            if step == "put":
                self.put(session_id)
            elif step == "commit" and self.pending.get(session_id):
                waiting = self.pending[session_id]
                self.commit(session_id, self.rng.sample(waiting, self.rng.randint(1, len(waiting))))
            elif step == "sweep":
                self.sweep(session_id)
            elif step == "sweep_all":
                self.sweep_all()
            elif step == "delete" and any(key[0] == session_id for key in self.disk.required):
                self.delete(session_id)
            elif step == "restart":
                # A restarted process: a new instance that knows no folder as durable yet.
                self.instances[self.rng.randrange(len(self.instances))] = FileAttachmentStore(
                    self.root
                )

    def epilogue(self) -> None:
        """Steps every run takes: one instance puts into a session folder that another
        instance's `sweep_all` removed as empty, so its cache of durable folders is stale."""
        first, second = self.instances
        session_id = SESSIONS[1]
        self.put_and_commit(session_id, first)
        self.delete(session_id, second)  # the sweep_all of `second` removes the folder
        self.put_and_commit(session_id, first)  # `first` still counts the folder as durable
        self.put_and_commit(session_id, second)
        self.put(session_id, second)
        self.sweep_all()  # the folder keeps its committed files
        self.put_and_commit(session_id, FileAttachmentStore(self.root))

    def run(self, steps: int = STEPS) -> None:
        self.random_steps(steps)
        if not self.disk.losses:
            self.epilogue()


def attachment_root(tmp_path: Path) -> Path:
    """The store's root, two folders the store creates below the durable `tmp_path`."""
    return tmp_path / "attachments" / "root"


# --- the invariant holds --------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_every_committed_attachment_survives_a_power_cut_at_any_point(
    blocking_store: BlockingStore,
    disk: PowerCutDisk,
    tmp_path: Path,
    seed: int,
) -> None:
    """At every cut point of a random workload, each acknowledged attachment is durable."""
    workload = Workload(blocking_store, disk, attachment_root(tmp_path), seed)
    workload.run()
    disk.assert_nothing_lost()
    # Not vacuous: many states checked, many attachments required, every path taken.
    assert disk.cut_points >= LEAST_CUT_POINTS, disk.cut_points
    assert disk.acknowledged >= LEAST_ACKNOWLEDGED, disk.acknowledged
    assert disk.checks >= LEAST_CHECKS, disk.checks
    assert disk.recreated_folders >= 1
    assert workload.puts_into_a_removed_cached_folder >= 1
    disk.compare_with_the_real_files(contents=True)


# --- the checker catches a store that leaves an fsync out -----------------------------------


def _fsync_folder_except(monkeypatch: pytest.MonkeyPatch, skipped: Callable[[Path], bool]) -> None:
    """Make `_fsync_folder` do nothing for the folders `skipped` picks."""
    real = turnstore.attachments._fsync_folder

    def fsync_folder(folder: Path) -> None:
        if not skipped(folder):
            real(folder)

    monkeypatch.setattr(turnstore.attachments, "_fsync_folder", fsync_folder)


@pytest.mark.parametrize(
    ("broken", "lost"),
    [
        pytest.param(
            "root",
            r"`attachments/root` \(node \d+\) holds no durable entry",
            id="no-fsync-of-a-new-session",
        ),
        pytest.param(
            "above-root",
            r"`attachments` \(node \d+\) holds no durable entry 'root'",
            id="no-fsync-of-new-root",
        ),
        pytest.param(
            "session",
            r"`attachments/root/[^`]+` \(node \d+\) holds no durable entry",
            id="no-fsync-of-rename",
        ),
        pytest.param("payload", r"the content of `[^`]+` was never fsynced", id="no-payload-fsync"),
    ],
)
def test_the_checker_reports_a_store_that_leaves_an_fsync_out(
    blocking_store: BlockingStore,
    disk: PowerCutDisk,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    broken: str,
    lost: str,
) -> None:
    """The same workload over a broken store loses a committed attachment, and the checker
    says so: with a parent left unsynced after a mkdir (of a session folder or of the root),
    the folder unsynced after the rename, or the payload unsynced before it."""
    root = attachment_root(tmp_path).resolve()
    if broken == "root":
        _fsync_folder_except(monkeypatch, lambda folder: folder == root)
    elif broken == "above-root":
        _fsync_folder_except(monkeypatch, lambda folder: folder == root.parent)
    elif broken == "session":
        _fsync_folder_except(monkeypatch, lambda folder: folder.parent == root)
    else:
        disk.skip_payload_fsync = True
    Workload(blocking_store, disk, root, SEEDS[0]).run()
    assert disk.losses, "the checker missed the left-out fsync"
    first = disk.losses[0]
    assert re.search(lost, first), first
    assert "after `ack " in first, first  # found at the first commit it could break


# --- losses the simulation found in attachments.py, now fixed -------------------------------


@pytest.mark.parametrize("remaker", ["paused", "killed"])
def test_a_cached_folder_removed_and_made_again_elsewhere_keeps_a_put_durable(
    blocking_store: BlockingStore, disk: PowerCutDisk, tmp_path: Path, remaker: str
) -> None:
    """Instance A caches its session folder as durable; instance B's sweep_all removes it as
    empty; writer C makes it again and is paused (or killed) right after its mkdir, before
    fsyncing the root. A's put lands in C's folder and its commit returns: a cut must keep it.
    """
    workload = Workload(blocking_store, disk, attachment_root(tmp_path), SEEDS[0])
    cached, sweeper = workload.instances
    session_id = SESSIONS[3]
    orphan = workload.put(session_id, cached)  # `cached` now counts the folder as durable
    sweeper.sweep_all(blocking_store, FAR_FUTURE_MS)
    workload.pending.clear()
    assert not orphan.path.parent.exists()

    def cached_put_lands() -> None:
        workload.put_and_commit(session_id, cached)
        if remaker == "killed":
            raise Killed

    disk.after_mkdir[orphan.path.parent] = cached_put_lands
    remaker_store = FileAttachmentStore(workload.root)
    if remaker == "killed":
        with pytest.raises(Killed):
            workload.put(session_id, remaker_store)
    else:
        workload.put_and_commit(session_id, remaker_store)  # C resumes and fsyncs the root
    assert disk.acknowledged >= 1
    disk.assert_nothing_lost()


def test_folders_a_killed_writer_made_above_the_root_are_made_durable(
    blocking_store: BlockingStore, disk: PowerCutDisk, tmp_path: Path
) -> None:
    """Writer C makes `attachments/` and is killed before fsyncing `tmp_path`; a new instance
    makes the root and a session folder below it and commits a put: a cut must keep it."""
    workload = Workload(blocking_store, disk, attachment_root(tmp_path), SEEDS[0])

    def killed() -> None:
        raise Killed

    disk.after_mkdir[workload.root.parent] = killed
    with pytest.raises(Killed):
        workload.put(SESSIONS[0], FileAttachmentStore(workload.root))
    workload.put_and_commit(SESSIONS[0], FileAttachmentStore(workload.root))
    assert disk.acknowledged >= 1
    disk.assert_nothing_lost()


def test_the_model_refuses_calls_it_does_not_model(disk: PowerCutDisk, tmp_path: Path) -> None:
    """An os function, a descriptor, a flag or a path the model does not know fails the test
    instead of going unchecked."""
    seen: Any = turnstore.attachments.os
    with pytest.raises(AssertionError, match=r"os\.link"):
        _ = seen.link
    with pytest.raises(AssertionError, match="unknown descriptor"):
        seen.fsync(10**6)
    with pytest.raises(AssertionError, match="O_CREAT without O_EXCL"):
        seen.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT, 0o600)
    (tmp_path / "made-behind-its-back").mkdir()
    with pytest.raises(AssertionError, match="never saw it made"):
        seen.rmdir(tmp_path / "made-behind-its-back")
    with pytest.raises(AssertionError, match="relative path"):
        seen.mkdir("relative")
