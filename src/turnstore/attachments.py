"""Internal: a file-backed attachment store that follows the write-ahead manifest, and its sweeps.

Order of a write: record the intent, write the bytes to a temporary file and fsync it, rename
it into place and fsync its folder; only then is the id committed (in the turn's runtime
commit or by `commit_refs`). A folder the store creates is made durable (its parent fsynced)
before any payload lands in it; each put fsyncs its session folder's entry in the root, and a
store instance's first put every folder above the root, since another writer may have made
(or removed and made again) one of them and crashed before fsyncing its parent. A crash
anywhere leaves no file, a temporary file, or a file whose intent is uncommitted; the sweeps
delete those once older than the caller's threshold, and never a file that a manifest entry
still names. A sweep forgets an entry before deleting its file, so it first writes the files
it may delete to a durable journal in the root, fsyncs the folders it deleted from, then
drops the journal; a sweep cut short by a crash or power cut is finished by the next one.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import msgspec

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: importing turnstore must still work
    fcntl = None  # type: ignore[assignment]

from turnstore.errors import InvalidInput, StorageError, TurnstoreError
from turnstore.faces.blocking_runtime import BlockingRuntimeStore
from turnstore.faces.blocking_store import BlockingStore
from turnstore.records.runtime import AttachmentIntent, AttachmentManifestEntry
from turnstore.rules.values import is_blank

FILE_MODE = 0o600
"""Mode of every payload file, whatever the umask: like the database, readable by its owner."""
FOLDER_MODE = 0o700
"""Mode of every folder the store creates, whatever the umask."""
TEMPORARY_PREFIX = ".partial-"
"""Names of payloads being written start with this; no placed name starts with a dot."""
JOURNAL_PREFIX = ".sweep-"
"""Names of sweep journals in the root: the files a sweep is deleting, written first."""
JOURNAL_BATCH = 1000
"""A sweep journals and reclaims this many entries at a time (two fsyncs a batch)."""

Entry = AttachmentIntent | AttachmentManifestEntry
_JOURNAL = msgspec.json.Encoder()
_JOURNAL_DECODER = msgspec.json.Decoder(list[tuple[str, str]])

_KEPT = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_.")
_LONGEST_NAME = 200
"""Longest placed name, in bytes; a longer one is replaced by its hash (file names stop at 255)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def file_name(value: object, what: str) -> str:
    """The file or folder name an id is placed under: one name per id, never two ids per name.

    Lowercase ASCII letters, digits, `-`, `_` and `.` are kept; every other byte of the UTF-8
    text, a leading dot, and capitals (so case-insensitive file systems keep ids apart) become
    `%XX`. A name longer than 200 bytes becomes `~` and the SHA-256 of the id. So a name never
    starts with a dot, is never `.` or `..`, and holds no `/`.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if is_blank(value):
        raise InvalidInput(f"{what} cannot be empty")
    try:
        raw = value.encode()
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not UTF-8 text") from None
    name = "".join(
        chr(byte) if byte in _KEPT and (index or byte != ord(".")) else f"%{byte:02X}"
        for index, byte in enumerate(raw)
    )
    if len(name) > _LONGEST_NAME:
        name = "~" + hashlib.sha256(raw).hexdigest()
    return name


def _payload(data: object) -> memoryview:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput(
            f"data must be bytes, bytearray or memoryview, not {type(data).__name__}"
        )
    view = memoryview(data)
    if not view.c_contiguous:
        raise InvalidInput("data must be a contiguous buffer")
    return view.cast("B")


def _failed(attachment_id: str, doing: str, error: OSError) -> StorageError:
    return StorageError(f"attachment `{attachment_id}`: could not {doing}: {error}")


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class FileAttachmentStore:
    """Attachment payloads as files under one root folder, one folder per session.

    Blocking: it works with the handles of `open_blocking`.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        # Folders whose entries up to the file system's root this instance made durable.
        self._root_durable = False

    def path_for(self, session_id: str, attachment_id: str) -> Path:
        """Where an attachment's bytes live: `root/<session name>/<attachment name>`.

        Each id becomes one plain file name (see `file_name`), so no id can reach another
        session's folder, leave the root, or collide with a temporary file.
        """
        return (
            self.root
            / file_name(session_id, "session ID")
            / file_name(attachment_id, "attachment ID")
        )

    def put(
        self,
        runtime: BlockingRuntimeStore,
        attachment_id: str,
        data: bytes | bytearray | memoryview,
    ) -> Path:
        """Record the intent, then write the bytes durably; commit the id with the turn.

        When this returns, the file and every folder above it up to the root survive a power
        cut. Bad arguments raise `InvalidInput` before anything is written; a failing file
        system raises `StorageError`, after forgetting the intent it recorded (if that fails
        too, the intent is an ordinary orphan the sweep reclaims).
        """
        if not isinstance(runtime, BlockingRuntimeStore):
            raise InvalidInput("runtime must be a blocking runtime handle (open_blocking)")
        payload = _payload(data)
        path = self.path_for(runtime.session_id, attachment_id)
        try:
            self._ensure_folder(path.parent)
        except OSError as error:
            raise _failed(attachment_id, "create its folder", error) from error
        intent = AttachmentIntent(
            attachment_id=attachment_id,
            session_id=runtime.session_id,
            canonical_uri=str(path),
            intent_at_epoch_ms=_now_ms(),
        )
        runtime.record_intent(intent)
        temporary = path.with_name(f"{TEMPORARY_PREFIX}{secrets.token_hex(16)}")
        try:
            self._write(temporary, payload)
            os.replace(temporary, path)
            # The rename is durable only once the folder's entry is on disk too.
            _fsync_folder(path.parent)
        except BaseException as error:
            with suppress(OSError):
                os.unlink(temporary)
            if not isinstance(error, OSError):
                raise  # the intent stays an orphan for the sweep
            with suppress(TurnstoreError, OSError):
                self._reclaim(runtime, intent)
            raise _failed(attachment_id, "write its payload", error) from error
        return path

    def sweep(self, runtime: BlockingRuntimeStore, older_than_ms: int) -> list[str]:
        """Reclaim this session's intents older than `older_than_ms` that no commit referenced.

        Each is forgotten, and its file deleted when the store placed it (the path `put`
        records) and no other entry names it; a temporary file in the session's folder older
        than the threshold is deleted too. Returns the attachment ids forgotten.
        """
        if not isinstance(runtime, BlockingRuntimeStore):
            raise InvalidInput("runtime must be a blocking runtime handle (open_blocking)")
        self._replay_journals(lambda _, uri: runtime.canonical_uri_in_use(uri))
        entries = runtime.list_uncommitted(older_than_ms)
        reclaimed = self._reclaim_all([(runtime, entry) for entry in entries])
        self._sweep_temporaries(
            self.root / file_name(runtime.session_id, "session ID"), older_than_ms
        )
        return reclaimed

    def sweep_all(self, store: BlockingStore, older_than_ms: int) -> list[str]:
        """Reclaim every session's orphans, deleted sessions' included; returns the ids forgotten.

        `delete_sessions` leaves a deleted session's entries uncommitted and older than any
        threshold, so this reclaims their files without the caller remembering the ids. It
        also deletes every temporary file older than the threshold, and removes session
        folders left empty.
        """
        if not isinstance(store, BlockingStore):
            raise InvalidInput("store must be a blocking store (open_blocking)")
        handles: dict[str, BlockingRuntimeStore] = {}

        def handle(session_id: str) -> BlockingRuntimeStore:
            if session_id not in handles:
                handles[session_id] = store.runtime(session_id)
            return handles[session_id]

        self._replay_journals(lambda session_id, uri: handle(session_id).canonical_uri_in_use(uri))
        entries = store.upkeep.list_uncommitted_attachments(older_than_ms)
        reclaimed = self._reclaim_all([(handle(entry.session_id), entry) for entry in entries])
        # A journal a crashed sweep was still writing is a temporary file in the root.
        self._sweep_temporaries(self.root, older_than_ms)
        try:
            folders = [item.path for item in os.scandir(self.root) if _is_session_folder(item)]
        except FileNotFoundError:
            folders = []
        except OSError as error:
            raise StorageError(f"could not list the attachment root: {error}") from error
        for folder in folders:
            self._sweep_temporaries(Path(folder), older_than_ms)
            # Only an empty folder goes; a `put` that finds its folder gone makes it again.
            with suppress(OSError):
                os.rmdir(folder)
        return reclaimed

    # --- the steps ----------------------------------------------------------------------------

    def _ensure_folder(self, folder: Path) -> None:
        """Make `folder` (a session's) exist under the root, every entry above it durable.

        The root, and every folder above it, are made durable once per instance: a folder
        found on disk may come from a writer that crashed before fsyncing its parent. The
        session folder's entry in the root is fsynced on every put, because another writer
        may have removed that folder as empty and made it again without fsyncing the root
        yet (a folder's path says nothing of which folder it is now).
        """
        if not self._root_durable:
            self._make_durable_folder(self.root)
            # Up to the file system's root: any of them may be a crashed writer's new folder.
            for ancestor in self.root.parents:
                # One we cannot open or fsync (permissions, some network mounts) is one this
                # store never wrote into.
                with suppress(OSError):
                    _fsync_folder(ancestor)
            self._root_durable = True
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileNotFoundError:
            # The root itself was removed since: make the whole chain again.
            self._root_durable = False
            self._make_durable_folder(folder)
            self._root_durable = True
        except FileExistsError:
            if not stat.S_ISDIR(os.stat(folder).st_mode):
                raise NotADirectoryError(
                    errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder)
                ) from None
        else:
            os.chmod(folder, FOLDER_MODE)  # the umask may have taken bits away
        _fsync_folder(folder.parent)

    def _make_durable_folder(self, folder: Path) -> None:
        """Make `folder` and its missing ancestors, each followed by an fsync of its parent."""
        missing = []
        current = folder
        while True:
            try:
                mode = os.stat(current).st_mode
            except FileNotFoundError:
                missing.append(current)
                current = current.parent
                continue
            if not stat.S_ISDIR(mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(current))
            break
        for created in reversed(missing):
            try:
                os.mkdir(created, FOLDER_MODE)
            except FileExistsError:
                pass  # made by a concurrent writer; its entry is fsynced below all the same
            else:
                os.chmod(created, FOLDER_MODE)  # the umask may have taken bits away
            _fsync_folder(created.parent)

    def _write(self, temporary: Path, payload: memoryview) -> None:
        """Write the payload to a new temporary file, mode 0600, and fsync it."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            descriptor = os.open(temporary, flags, FILE_MODE)
        except FileNotFoundError:
            # A sweep removed the folder as empty after it was made; make it again.
            self._ensure_folder(temporary.parent)
            descriptor = os.open(temporary, flags, FILE_MODE)
        try:
            os.fchmod(descriptor, FILE_MODE)  # the umask may have taken bits away
            remaining = payload
            while remaining:
                remaining = remaining[os.write(descriptor, remaining) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _reclaim_all(self, reclaims: list[tuple[BlockingRuntimeStore, Entry]]) -> list[str]:
        """Reclaim entries, JOURNAL_BATCH at a time; returns the ids forgotten.

        Before any entry of a batch is forgotten, the files it may delete are written to a
        journal in the root and made durable; after the deletions, their folders are fsynced,
        and only then is the journal removed. A crash or power cut in between leaves the
        journal, and the next sweep deletes each file it lists that no entry names: once its
        entry is forgotten, nothing else would ever find the file again.
        """
        reclaimed = []
        for start in range(0, len(reclaims), JOURNAL_BATCH):
            batch = reclaims[start : start + JOURNAL_BATCH]
            placed = [(e.session_id, e.attachment_id) for _, e in batch if self._placed(e)]
            journal = self._write_journal(placed) if placed else None
            touched: set[Path] = set()
            reclaimed += [e.attachment_id for rt, e in batch if self._reclaim(rt, e, touched)]
            self._settle(touched)
            if journal is not None:
                _drop_journal(*journal)
        return reclaimed

    def _placed(self, entry: Entry) -> bool:
        """Whether the entry names the file this store placed for it."""
        try:
            return entry.canonical_uri == str(self.path_for(entry.session_id, entry.attachment_id))
        except InvalidInput:
            return False

    def _reclaim(
        self, runtime: BlockingRuntimeStore, entry: Entry, touched: set[Path] | None = None
    ) -> bool:
        """Forget an uncommitted entry, then delete its file if nothing names it any more.

        Forget first, and only while still uncommitted: a commit that lands between a listing
        and here keeps its row and its file. A crash after the forget leaves at worst an
        unreferenced file (which the sweep's journal lists), never a committed attachment
        without its bytes. The folder of each file deleted goes into `touched`.
        """
        if not runtime.forget(entry.attachment_id):
            return False
        # A URI the host supplied is the host's file, even inside the root: only files this
        # store placed are deleted, and only when no entry of any session still names them.
        if self._placed(entry) and not runtime.canonical_uri_in_use(entry.canonical_uri):
            try:
                _unlink_file(Path(entry.canonical_uri), touched)
            except OSError as error:
                raise _failed(entry.attachment_id, "delete its payload", error) from error
        return True

    def _settle(self, touched: set[Path]) -> None:
        """Make the deletions in `touched` durable: fsync each folder (the root if one went)."""
        gone = False
        for folder in sorted(touched):
            try:
                _fsync_folder(folder)
            except FileNotFoundError:
                gone = True  # removed as empty since; its removal is the root's entry
            except OSError as error:
                raise StorageError(f"could not fsync {folder}: {error}") from error
        if gone:
            with suppress(FileNotFoundError):  # no root: nothing is left to come back
                _fsync_folder(self.root)

    def _write_journal(self, placed: list[tuple[str, str]]) -> tuple[int, Path] | None:
        """Write the (session, attachment) ids whose files a sweep may delete, durably.

        The journal is written under a temporary name, locked, fsynced, renamed to its
        `.sweep-` name and its root entry fsynced; it stays locked until dropped, so a
        replay skips a journal whose sweep is still running. None when there is no root.
        """
        token = secrets.token_hex(16)
        temporary = self.root / f"{TEMPORARY_PREFIX}{token}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            descriptor = os.open(temporary, flags, FILE_MODE)
        except FileNotFoundError:
            return None  # no root, so no file a sweep could delete
        except OSError as error:
            raise StorageError(f"could not write a sweep journal: {error}") from error
        try:
            _lock(descriptor, wait=True)
            remaining = memoryview(_JOURNAL.encode(placed))
            while remaining:
                remaining = remaining[os.write(descriptor, remaining) :]
            os.fsync(descriptor)
            journal = self.root / f"{JOURNAL_PREFIX}{token}"
            os.replace(temporary, journal)
            _fsync_folder(self.root)
        except BaseException as error:
            os.close(descriptor)
            with suppress(OSError):
                os.unlink(temporary)
            if isinstance(error, OSError):
                raise StorageError(f"could not write a sweep journal: {error}") from error
            raise
        return descriptor, journal

    def _replay_journals(self, named: Callable[[str, str], bool]) -> None:
        """Finish the deletions of sweeps cut short: each journal's files no entry names."""
        try:
            journals = [i.path for i in os.scandir(self.root) if i.name.startswith(JOURNAL_PREFIX)]
        except FileNotFoundError:
            return
        except OSError as error:
            raise StorageError(f"could not list the attachment root: {error}") from error
        for journal in journals:
            try:
                descriptor = os.open(journal, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # its sweep finished meanwhile
            try:
                self._replay(descriptor, Path(journal), named)
            except OSError as error:
                raise StorageError(f"could not replay {journal}: {error}") from error
            finally:
                os.close(descriptor)

    def _replay(self, descriptor: int, journal: Path, named: Callable[[str, str], bool]) -> None:
        if not _lock(descriptor, wait=False):
            return  # a sweep still running holds it
        data = bytearray()
        while chunk := os.read(descriptor, 1 << 16):
            data += chunk
        try:
            placed = _JOURNAL_DECODER.decode(data)
        except msgspec.DecodeError:
            placed = []  # not written by a sweep (one is whole before its rename)
        touched: set[Path] = set()
        for session_id, attachment_id in placed:
            # The path is computed again, never read: a journal can only reach placed files.
            path = self.path_for(session_id, attachment_id)
            if not named(session_id, str(path)):
                _unlink_file(path, touched)
        self._settle(touched)
        with suppress(FileNotFoundError):
            os.unlink(journal)

    def _sweep_temporaries(self, folder: Path, older_than_ms: int) -> None:
        """Delete the temporary files in `folder` last written before `older_than_ms`."""
        try:
            items = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as error:
            raise StorageError(f"could not list {folder}: {error}") from error
        for item in items:
            if not item.name.startswith(TEMPORARY_PREFIX):
                continue
            try:
                if item.stat(follow_symlinks=False).st_mtime_ns // 1_000_000 < older_than_ms:
                    os.unlink(item.path)
            except FileNotFoundError:
                pass
            except OSError as error:
                raise StorageError(f"could not delete {item.path}: {error}") from error


def _unlink_file(path: Path, touched: set[Path] | None) -> None:
    """Delete `path` unless it is a folder or gone; note its folder in `touched`."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            if touched is not None:
                touched.add(path.parent)
    except FileNotFoundError:
        pass


def _lock(descriptor: int, *, wait: bool) -> bool:
    """Lock a journal for this sweep (flock: released when its process dies); False when
    another holds it and `wait` is False."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _drop_journal(descriptor: int, journal: Path) -> None:
    """Remove a journal whose deletions are durable. Not fsynced: one that a power cut
    brings back is replayed by the next sweep and deletes nothing an entry names."""
    try:
        with suppress(FileNotFoundError):
            os.unlink(journal)
    finally:
        os.close(descriptor)


def _is_session_folder(item: os.DirEntry[str]) -> bool:
    return not item.name.startswith(".") and item.is_dir(follow_symlinks=False)
