"""Attachment crash safety: a killed writer leaves only orphans that the sweep reclaims."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import turnstore
from turnstore import (
    FileAttachmentStore,
)

WORKER = Path(__file__).with_name("_attachment_worker.py")
SESSION = "attach-crash"
KILLS = 12
"""SIGKILLs per backend; every other one lands while the writer waits between put and commit."""
LINE_TIMEOUT_S = 30.0


def _load_worker_module() -> Any:
    spec = importlib.util.spec_from_file_location("_attachment_worker", WORKER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load_worker_module()


def _run_until_killed(
    store_url: str, root: Path, prefix: str, pause_at: int, delay_s: float, stderr_path: Path
) -> tuple[list[str], int]:
    """Start a writer and SIGKILL it: after `payload <prefix>-<pause_at>` when `pause_at` is
    set (the writer is then asleep before its commit), else `delay_s` after its first line.

    Return the complete lines it printed and its exit status.
    """
    lines: list[str] = []
    seen = threading.Condition()
    target = f"payload {prefix}-{pause_at}\n"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), store_url, str(root), SESSION, prefix, str(pause_at)],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )

        def read() -> None:
            assert process.stdout is not None
            for raw in process.stdout:
                line = raw.decode()
                with seen:
                    if line.endswith("\n"):  # a line cut by the kill was never acknowledged
                        lines.append(line)
                    seen.notify_all()
            with seen:
                lines.append("")  # end of output
                seen.notify_all()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            with seen:
                if pause_at:
                    seen.wait_for(lambda: target in lines or "" in lines, LINE_TIMEOUT_S)
                else:
                    seen.wait_for(lambda: bool(lines), LINE_TIMEOUT_S)
            if not pause_at and process.poll() is None:
                time.sleep(delay_s)
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            reader.join(timeout=30)
            assert process.stdout is not None
            process.stdout.close()
    printed = [line for line in lines if line]
    assert printed, f"the writer printed nothing: {stderr_path.read_text()[-3000:]}"
    if pause_at:
        assert target in printed, f"the writer never reached {target!r}"
        assert printed[-1] == target, "the writer went past its pause"
    return printed, process.returncode


def _manifest(database: Any) -> dict[str, tuple[str, int | None]]:
    """attachment id -> (canonical uri, committed_at_ms) of the session's manifest rows."""
    rows = database.query(
        "SELECT attachment_id, canonical_uri, committed_at_ms FROM attachment_manifest"
        " WHERE session_id = ?",
        (SESSION,),
    )
    return {row[0]: (row[1], row[2]) for row in rows}


def test_killed_attachment_writer_leaves_only_orphans_the_sweep_reclaims(
    backend_name, store_url, database, tmp_path
):
    """After SIGKILLs, sweep reclaims every uncommitted payload and keeps every acked commit."""
    seed = random.randrange(2**31)
    rng = random.Random(seed)
    root = tmp_path / "attachments"
    started = time.monotonic()
    payloads: set[str] = set()
    committed: set[str] = set()
    paused: set[str] = set()
    unexpected: list[str] = []
    for kill in range(KILLS):
        prefix = f"a{kill}"
        pause_at = rng.randint(1, 5) if kill % 2 == 0 else 0
        delay_s = rng.uniform(0.0, 0.25)
        lines, status = _run_until_killed(
            store_url, root, prefix, pause_at, delay_s, tmp_path / f"stderr-{kill}.txt"
        )
        if status != -signal.SIGKILL:
            unexpected.append(f"kill {kill}: exit {status}")
        for line in lines:
            word, attachment_id = line.split()
            assert word in ("payload", "committed"), line
            if word == "payload":
                payloads.add(attachment_id)
            else:
                assert attachment_id in payloads, f"{attachment_id} committed before its payload"
                committed.add(attachment_id)
        if pause_at:
            paused.add(f"{prefix}-{pause_at}")
    context = f"{backend_name}, seed {seed}"
    assert not unexpected, f"{context}: writers died before SIGKILL: {unexpected}"

    files = FileAttachmentStore(root)
    with turnstore.open_blocking(store_url) as store:
        runtime = store.runtime(SESSION)
        before = _manifest(database)
        committed_rows = {aid for aid, (_, at) in before.items() if at is not None}
        # An acknowledged put has its intent recorded; an acknowledged commit is durable.
        assert payloads <= set(before), f"{context}: intents lost: {payloads - set(before)}"
        assert committed <= committed_rows, f"{context}: commits lost: {committed - committed_rows}"
        # Only a commit in flight at a kill may be durable without its ack, and a commit
        # only starts after its payload was acknowledged.
        unacked = committed_rows - committed
        assert unacked <= payloads, f"{context}: committed without a payload: {unacked}"
        assert len(unacked) <= KILLS - len(paused), context
        # A writer killed while waiting between put and commit committed nothing.
        assert not paused & committed_rows, f"{context}: {paused & committed_rows}"
        # Every runtime commit committed exactly one attachment, atomically with the head.
        read = runtime.load_session()
        assert read is not None
        assert read.head_revision == len(committed_rows), context

        now_ms = time.time_ns() // 1_000_000
        uncommitted = {entry.attachment_id for entry in runtime.list_uncommitted(now_ms + 1)}
        assert uncommitted == set(before) - committed_rows, context
        assert paused <= uncommitted, context

        reclaimed = files.sweep(runtime, older_than_ms=now_ms + 1)

        assert sorted(reclaimed) == sorted(uncommitted), context
        assert runtime.list_uncommitted(time.time_ns() // 1_000_000 + 1) == [], context
        after = _manifest(database)
        assert set(after) == committed_rows, f"{context}: rows left {set(after) - committed_rows}"
        for attachment_id in reclaimed:
            path = files.path_for(SESSION, attachment_id)
            assert not path.exists(), f"{context}: orphan {attachment_id} kept its file"
        # Every committed attachment kept its bytes, at the URI its manifest row names.
        expected_files = set()
        for attachment_id in committed_rows:
            path = files.path_for(SESSION, attachment_id)
            assert after[attachment_id][0] == str(path), context
            assert path.read_bytes() == worker.payload(attachment_id), (
                f"{context}: committed {attachment_id} lost its bytes"
            )
            expected_files.add(path)
        # No file under the root is left without a committed manifest row (the glob sees the
        # temporary files of writes a kill cut short too: their names start with a dot).
        stray = {path for path in root.rglob("*") if path.is_file()} - expected_files
        assert not stray, f"{context}: files without a committed row: {sorted(stray)[:10]}"

    orphans = payloads - committed_rows
    assert len(paused) == (KILLS + 1) // 2
    assert paused <= orphans <= set(reclaimed), context
    assert committed, f"{context}: no commit was acknowledged"
    elapsed = time.monotonic() - started
    print(
        f"{context}: {KILLS} kills, {len(payloads)} payloads, {len(committed)} acked commits "
        f"({len(unacked)} unacked durable), {len(reclaimed)} reclaimed "
        f"({len(orphans)} acked orphans), {elapsed:.1f}s"
    )
