"""A file-backed attachment store that follows the write-ahead manifest, and its orphan sweep.

Order of a write: record the intent, write the bytes (fsynced, then renamed into place), and
commit the attachment id inside the turn's runtime commit. A crash anywhere leaves either no
file, or a file whose intent is uncommitted; `sweep` deletes those files once their intent is
older than the caller's threshold, and never touches a committed attachment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from turnstore.errors import InvalidInput
from turnstore.faces.blocking import BlockingRuntimeStore
from turnstore.records.runtime import AttachmentIntent, AttachmentManifestEntry


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FileAttachmentStore:
    """Attachment payloads as files under one root folder, one folder per session."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path_for(self, session_id: str, attachment_id: str) -> Path:
        """Where an attachment's bytes live: `root/<session_id>/<attachment_id>`.

        Both ids must be plain file names, so no id can reach another session's folder or
        leave the root.
        """
        for value in (session_id, attachment_id):
            if value in ("", ".", "..") or any(mark in value for mark in ("/", "\\", "\x00")):
                raise InvalidInput("attachment and session ids must be plain file names")
        return self.root / session_id / attachment_id

    def put(self, runtime: BlockingRuntimeStore, attachment_id: str, data: bytes) -> Path:
        """Record the intent, then write the bytes durably; commit the id with the turn."""
        path = self.path_for(runtime.session_id, attachment_id)
        runtime.record_intent(
            AttachmentIntent(
                attachment_id=attachment_id,
                session_id=runtime.session_id,
                canonical_uri=str(path),
                intent_at_epoch_ms=_now_ms(),
            )
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
        # The rename is durable only once the folder's entry is on disk too.
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        return path

    def sweep(self, runtime: BlockingRuntimeStore, older_than_ms: int) -> list[str]:
        """Delete payloads of intents older than `older_than_ms` that no commit referenced.

        Returns the attachment ids reclaimed. Only files under the root are deleted.
        """
        reclaimed = []
        for entry in runtime.list_uncommitted(older_than_ms):
            # Forget first, and only while still uncommitted: a commit that lands between the
            # listing and here keeps its row and its file. A crash after the forget leaves at
            # worst an unreferenced file, never a committed attachment without its bytes.
            if runtime.forget(entry.attachment_id):
                self._delete_payload(entry)
                reclaimed.append(entry.attachment_id)
        return reclaimed

    def _delete_payload(self, entry: AttachmentManifestEntry) -> None:
        path = Path(entry.canonical_uri).resolve()
        if not path.is_relative_to(self.root):
            return
        for candidate in (path, path.with_name(path.name + ".partial")):
            candidate.unlink(missing_ok=True)
