"""The attachment writer process of the attachment crash test.

Run as `python _attachment_worker.py STORE ROOT SESSION PREFIX PAUSE_AT`: for attachment ids
PREFIX-1, PREFIX-2, ... it puts the payload through `FileAttachmentStore(ROOT)` (intent
recorded, then bytes written), prints `payload <id>`, commits the id in a runtime commit and
prints `committed <id>`, each line flushed once the call has returned. When PAUSE_AT is not 0
the worker sleeps after printing `payload <PREFIX-PAUSE_AT>`, so a kill lands exactly between
the payload write and its commit. The test SIGKILLs it and checks the manifest and the files.
"""

from __future__ import annotations

import hashlib
import sys
import time

from turnstore import (
    FileAttachmentStore,
    HeadRevisionConflict,
    RuntimeCommit,
    open_blocking,
)


def payload(attachment_id: str) -> bytes:
    """The bytes of an attachment, derived from its id (1 KiB to about 64 KiB)."""
    digest = hashlib.sha256(attachment_id.encode()).digest()
    size = 1024 + int.from_bytes(digest[:2], "big")
    return (digest * (size // len(digest) + 1))[:size]


def _say(word: str, attachment_id: str) -> None:
    sys.stdout.write(f"{word} {attachment_id}\n")
    sys.stdout.flush()


def main(store_url: str, root: str, session_id: str, prefix: str, pause_at: int) -> None:
    """Put and commit attachments forever (until killed)."""
    runtime = open_blocking(store_url).runtime(session_id)
    files = FileAttachmentStore(root)
    read = runtime.load_session()
    revision = None if read is None else read.head_revision
    number = 0
    while True:
        number += 1
        attachment_id = f"{prefix}-{number}"
        files.put(runtime, attachment_id, payload(attachment_id))
        _say("payload", attachment_id)
        if number == pause_at:
            time.sleep(600)
        while True:
            commit = RuntimeCommit(session_id=session_id, expected_head_revision=revision)
            try:
                result = runtime.commit_runtime_state(
                    commit.with_committed_attachments([attachment_id])
                )
            except HeadRevisionConflict:
                # Only a commit in flight when the previous writer was killed can move the
                # head under this one; read it again.
                read = runtime.load_session()
                revision = None if read is None else read.head_revision
                continue
            break
        revision = result.head_revision
        _say("committed", attachment_id)


if __name__ == "__main__":
    url, root_dir, session, id_prefix, pause = sys.argv[1:]
    main(url, root_dir, session, id_prefix, int(pause))
