"""Internal: the demo's promise shown: a worker killed mid-turn, reloaded at its last commit."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import click

import turnstore
from turnstore import Checkpoint, EventPageRequest, TranscriptPageRequest
from turnstore.cli.demo import CRASH_ID
from turnstore.events import AgentMessageContentDeltaEvent, AgentReasoningContentDeltaEvent

DELTAS = (AgentMessageContentDeltaEvent, AgentReasoningContentDeltaEvent)

CHILD_TIMEOUT_S = 60.0
"""How long the worker may take to reach the middle of its second turn."""


@dataclass(frozen=True)
class CrashResult:
    """What the killed worker reported, and what the store held once it was gone."""

    pid: int
    finished_sequence: int
    last_sequence: int
    streamed: int
    checkpoint: Checkpoint
    transcript_items: int
    journal_deltas: int

    @property
    def exact(self) -> bool:
        """Whether the reloaded session is exactly at the worker's last commit."""
        return self.checkpoint.sequence == self.last_sequence


def _milestones(child: subprocess.Popen[str]) -> dict[str, int]:
    """Read the worker's reports until it says it is streaming; fail if it stops first."""
    assert child.stdout is not None
    found: dict[str, int] = {}
    while "streaming" not in found:
        line = child.stdout.readline()
        if not line:
            error = child.stderr.read() if child.stderr else ""
            raise click.ClickException(f"the demo worker stopped early: {error.strip()}")
        word, _, number = line.partition(" ")
        found[word] = int(number)
    return found


def kill_mid_turn(path: Path) -> tuple[int, dict[str, int]]:
    """Run the worker on `path`, SIGKILL it mid-stream, return its pid and its reports."""
    command = [sys.executable, "-m", "turnstore.cli._demo_child", str(path)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(CHILD_TIMEOUT_S, child.kill)
    watchdog.start()
    try:
        found = _milestones(child)
    finally:
        watchdog.cancel()
        # SIGKILL on POSIX: no handler, no flush, no rollback by the worker itself.
        child.kill()
        child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    return child.pid, found


def crash_and_reload(path: Path) -> CrashResult:
    """Kill a worker writing `CRASH_ID` mid-turn, then reload the session from `path`."""
    pid, found = kill_mid_turn(path)
    with turnstore.open_blocking(path, read_only=True) as store:
        checkpoint = store.load(CRASH_ID)
        transcript = store.transcript_page(CRASH_ID, TranscriptPageRequest(max_batches=100))
        events = store.event_page(CRASH_ID, EventPageRequest(limit=100))
    if checkpoint is None:
        raise click.ClickException(f"{path}: the killed worker's session {CRASH_ID} is gone")
    deltas = [event for event in events.events if isinstance(event.event.msg, DELTAS)]
    return CrashResult(
        pid=pid,
        finished_sequence=found["committed"],
        last_sequence=found["started"],
        streamed=found["streaming"],
        checkpoint=checkpoint,
        transcript_items=len(transcript.into_positioned_items_chronological()),
        journal_deltas=len(deltas),
    )
