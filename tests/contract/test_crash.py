"""Crash durability: a writer killed at any instant loses no ack and exposes no partial save.

One harness for every backend: `_crash_writer.py` saves on a few sessions from a client
process, which is SIGKILLed at random instants while the database (the SQLite file, the
PostgreSQL server) lives on. After each kill the stored rows, and every session read through
a store opened afresh and through one that stayed open across the kills, are checked
against a replay of the writer's schedule. The schedules are a parameter: small saves of
every shape, and (on PostgreSQL) large saves, so that a kill lands while one is on the wire.
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import sizes
import turnstore
from conftest import THROUGH_PGBOUNCER, postgres_connection
from turnstore import (
    Checkpoint,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    TranscriptPageRequest,
)
from turnstore.records import (
    JournalEvent,
)

JOURNAL_TABLES = ("context_chunks", "transcript_delta", "execution_journal", "event_journal")
HIGH_WATER_MARKS = (
    ("transcript_delta", "latest_sequence"),
    ("execution_journal", "latest_sequence"),
    ("event_journal", "latest_event_sequence"),
)
"""Each journal, and the column of `sessions` no row of it may be ahead of."""
FIRST_ACK_TIMEOUT_S = 30.0
COVERAGE_GRACE_S = 90.0
"""How long kills go on past the planned count when the writers have not yet reached a
rewrite (a slow machine saves less between kills): coverage is bound by progress and time,
not by a count."""
WRITER = Path(__file__).with_name("_crash_writer.py")


def _load_writer_module() -> Any:
    spec = importlib.util.spec_from_file_location("_crash_writer", WRITER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


schedules = _load_writer_module()

CASES = [
    pytest.param(
        "sqlite", schedules.MIXED, sizes.CRASH_KILLS_SQLITE_MIXED, (0.05, 0.5), id="sqlite-mixed"
    ),
    # A PostgreSQL writer takes longer to start, so it is killed less often.
    pytest.param(
        "postgres",
        schedules.MIXED,
        sizes.CRASH_KILLS_POSTGRES_MIXED,
        (0.05, 0.5),
        id="postgres-mixed",
    ),
    pytest.param(
        "postgres",
        schedules.LARGE,
        sizes.CRASH_KILLS_POSTGRES_LARGE,
        (0.0, 0.4),
        id="postgres-large",
    ),
]
"""Backend, schedule, SIGKILLs, and the range of the delay between first ack and kill."""


def _writer_url(backend_name: str, store_url: str, schedule: Any, application: str) -> str:
    """The URL the writer opens: on PostgreSQL, a connection for every session, all named."""
    if backend_name != "postgres":
        return store_url
    separator = "&" if "?" in store_url else "?"
    pool = len(schedule.sessions) + 1
    return f"{store_url}{separator}pool_max_size={pool}&application_name={application}"


def _wait_for_server_side_exit(application: str) -> None:
    """Wait until the server has ended every backend of the killed writer.

    A client killed after sending COMMIT may still see that COMMIT complete on the server
    (and one killed mid-transaction is rolled back only when its backend notices): until its
    backends are gone, two reads of the check could see the store before and after.
    Through PgBouncer its server connections outlive it, back in the pooler's pool: there,
    wait until none of them is in a transaction.
    """
    deadline = time.monotonic() + 30
    busy = " AND state IS DISTINCT FROM 'idle'" if THROUGH_PGBOUNCER else ""
    with postgres_connection() as connection:
        while True:
            left = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s" + busy,
                (application,),
            ).fetchone()[0]
            if left == 0:
                return
            assert time.monotonic() < deadline, f"{left} backends of a killed writer linger"
            time.sleep(0.02)


class Replay:
    """What one session must hold at each sequence, replayed from the writer's schedule."""

    def __init__(self, schedule: Any, session_id: str) -> None:
        self.schedule = schedule
        self.session_id = session_id
        self.checkpoint: Checkpoint | None = None
        self.transcript: list[tuple[int, list[Any]]] = []
        self.executions: list[ExecutionRecord] = []
        self.events: list[JournalEvent] = []

    @property
    def sequence(self) -> int:
        return 0 if self.checkpoint is None else self.checkpoint.sequence

    def replay_to(self, sequence: int) -> Checkpoint:
        """Advance the replay to `sequence` and return the checkpoint saved there."""
        assert sequence >= self.sequence, "a loaded sequence went backwards"
        while self.sequence < sequence:
            checkpoint, transcript, execution, events = self.schedule.advance(
                self.checkpoint, self.session_id
            )
            self.checkpoint = checkpoint
            self.transcript.append((checkpoint.sequence, transcript))
            if execution is not None:
                self.executions.append(execution)
            for event in events:
                self.events.append(
                    JournalEvent(
                        sequence=len(self.events) + 1,
                        recorded_at_ms=event.recorded_at_ms,
                        event=event.event,
                    )
                )
        assert self.checkpoint is not None
        return self.checkpoint


def _run_writer_until_killed(
    schedule_name: str, url: str, delay_s: float, stderr_path: Path
) -> tuple[list[str], int, str]:
    """Start the writer, SIGKILL it `delay_s` after its first ack.

    Return the complete lines it printed, its exit status and its stderr.
    """
    lines: list[str] = []
    first_ack = threading.Event()
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", str(WRITER), schedule_name, url],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )

        def read() -> None:
            assert process.stdout is not None
            for raw in process.stdout:
                line = raw.decode()
                if line.endswith("\n"):  # a line cut by the kill was never acknowledged
                    lines.append(line)
                    first_ack.set()
            first_ack.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            got_ack = first_ack.wait(FIRST_ACK_TIMEOUT_S)
            if got_ack and process.poll() is None:
                time.sleep(delay_s)
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            reader.join(timeout=30)
            assert process.stdout is not None
            process.stdout.close()
    assert got_ack, f"the writer printed no ack: {stderr_path.read_text()[:4000]}"
    return lines, process.returncode, stderr_path.read_text()


def _acks(lines: list[str]) -> dict[str, int]:
    acked: dict[str, int] = {}
    for line in lines:
        word, session_id, sequence = line.split()
        assert word == "ack"
        assert int(sequence) > acked.get(session_id, 0), "acks of a session must increase"
        acked[session_id] = int(sequence)
    return acked


def _check_session(store: turnstore.BlockingStore, replay: Replay, known: int, acked: int) -> int:
    """Check one session after a kill against the replay; return its loaded sequence."""
    schedule = replay.schedule
    session_id = replay.session_id
    loaded = store.load(session_id)
    sequence = 0 if loaded is None else loaded.sequence
    # Every acknowledged save is durable; at most the one save in flight when the writer died
    # may be durable without an ack.
    assert sequence >= acked, f"{session_id}: acked {acked}, loaded {sequence}"
    assert known <= sequence <= max(known, acked) + 1, (session_id, known, acked, sequence)
    if loaded is None:
        assert store.session_summary(session_id) is None
        return 0

    expected = replay.replay_to(sequence)
    assert loaded == expected
    assert len(loaded.context) == schedule.context_length(sequence)
    assert loaded.context_epoch == sequence // schedule.rewrite_every

    summary = store.session_summary(session_id)
    assert summary is not None
    assert (summary.sequence, summary.execution_stats) == (sequence, expected.execution_stats)
    assert expected.execution_stats.run_count == schedule.runs_up_to(sequence)

    transcript = store.transcript_page(session_id, TranscriptPageRequest(max_batches=sequence + 1))
    assert [(batch.sequence, batch.items) for batch in reversed(transcript.batches)] == (
        replay.transcript
    )
    assert transcript.next_before_sequence is None

    executions = store.execution_page(session_id, ExecutionPageRequest(limit=sequence + 1))
    assert list(reversed(executions.executions)) == replay.executions

    events = store.event_page(session_id, EventPageRequest(limit=len(replay.events) + 1))
    assert events.latest_sequence == len(replay.events)
    assert events.latest_sequence == schedule.events_up_to(sequence)
    assert events.into_chronological() == replay.events
    return sequence


def _check_rows(database: Any) -> None:
    """Check the stored rows themselves after a kill: what the public reads could hide.

    Intact, no orphans, context consistent, no journal row ahead of its session.
    """
    if database.backend == "sqlite":
        assert database.query("PRAGMA integrity_check") == [("ok",)]
        assert database.query("PRAGMA foreign_key_check") == []
        items = "json_array_length(items_json)"
    else:
        items = "json_array_length(CAST(items_json AS json))"
    # Every journal row belongs to a session (SQLite's foreign_key_check says the same).
    for table in JOURNAL_TABLES:
        orphans = database.query(
            f"SELECT session_id FROM {table} AS child WHERE NOT EXISTS"
            " (SELECT 1 FROM sessions AS s WHERE s.session_id = child.session_id)"
        )
        assert orphans == [], f"{table} rows without a session: {orphans[:5]}"
    # The stored context length and the chunks that hold the items agree for every row.
    assert (
        database.query(
            "SELECT session_id FROM sessions AS s WHERE context_length != (SELECT"
            f" COALESCE(SUM({items}), 0) FROM context_chunks AS c"
            " WHERE c.session_id = s.session_id)"
        )
        == []
    )
    # No journal row is ahead of its session's high-water marks.
    for table, column in HIGH_WATER_MARKS:
        assert (
            database.count(
                f"{table} AS j",
                f"j.sequence > (SELECT {column} FROM sessions AS s"
                " WHERE s.session_id = j.session_id)",
            )
            == 0
        ), table


@pytest.mark.slow
# The planned kills, then up to COVERAGE_GRACE_S more of them on a slow machine.
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("backend_name", "schedule", "kills", "delays"), CASES)
def test_a_killed_writer_loses_no_acknowledged_save_and_exposes_no_partial_one(
    backend_name, schedule, kills, delays, store_url, database, tmp_path
):
    """After SIGKILL at random instants every acked save is loadable and nothing partial is seen.

    Each kill is checked through a store opened after it and through one that stays open
    across all kills.
    """
    application = f"crash-{uuid.uuid4().hex[:16]}"
    url = _writer_url(backend_name, store_url, schedule, application)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    replays = {session_id: Replay(schedule, session_id) for session_id in schedule.sessions}
    known = dict.fromkeys(schedule.sessions, 0)
    total_acks = unacked_commits = 0
    unexpected_exits: list[str] = []
    started = time.monotonic()
    with ExitStack() as stack:
        # A store that stays open across every kill, beside the fresh one opened after each:
        # opening the fresh store must not disturb it (on SQLite, must not drop the POSIX
        # locks its connections hold on the file).
        lasting = stack.enter_context(turnstore.open_blocking(store_url))
        kill, grace_ends = 0, float("inf")
        while kill < kills or (
            max(known.values()) < schedule.rewrite_every and time.monotonic() < grace_ends
        ):
            if kill == kills:
                grace_ends = time.monotonic() + COVERAGE_GRACE_S
            delay_s = rng.uniform(*delays)
            lines, status, stderr = _run_writer_until_killed(
                schedule.name, url, delay_s, tmp_path / f"stderr-{kill}.txt"
            )
            if backend_name == "postgres":
                _wait_for_server_side_exit(application)
            acked = _acks(lines)
            total_acks += len(lines)
            context = (
                f"{backend_name}, {schedule.name}, seed {seed}, kill {kill}, delay {delay_s:.3f}s"
            )
            if status != -signal.SIGKILL:
                # The writer died by itself: still a crash at some instant, so the durability
                # checks below apply; the test fails at the end with what the writer printed.
                unexpected_exits.append(f"{context}: exit status {status}\n{stderr[:4000]}")
            try:
                _check_rows(database)
                with turnstore.open_blocking(store_url) as fresh:
                    for session_id, replay in replays.items():
                        before = acked.get(session_id, known[session_id])
                        known[session_id] = _check_session(
                            fresh, replay, known[session_id], acked.get(session_id, 0)
                        )
                        unacked_commits += known[session_id] > before
                        assert (
                            _check_session(
                                lasting, replay, known[session_id], acked.get(session_id, 0)
                            )
                            == known[session_id]
                        )
            except AssertionError as error:
                raise AssertionError(f"{context}: {error}") from error
            kill += 1
    elapsed = time.monotonic() - started
    print(
        f"{backend_name} {schedule.name}: {kill} kills ({kills} planned), {total_acks} acked saves,"
        f" {unacked_commits} committed but unacked, final sequences {known}, {elapsed:.1f}s"
    )
    assert not unexpected_exits, (
        f"{len(unexpected_exits)} of {kill} writers died before SIGKILL:\n"
        + "\n".join(unexpected_exits[:2])
    )
    assert all(sequence > 0 for sequence in known.values())
    # Rewrites (new epochs), executions and events were all exercised across the kills; the
    # kills went on past the planned count until they were, within the grace above.
    assert max(known.values()) >= schedule.rewrite_every, (
        f"no session reached a rewrite in {kill} kills and {elapsed:.0f}s: {known}"
    )
