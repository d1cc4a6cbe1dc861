"""PostgreSQL setup and failure: migrations, refusals, secrets, dropped connections, kills.

Many processes may open one schema at once; a schema newer than the code is refused; a
password never appears in an error; a dropped connection fails one call with a retryable
error and the pool replaces it; a client killed mid-save leaves no partial commit.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import _pg_worker as worker
import pytest
from _pg_worker import SPAWN, Workers, warning, with_params

import turnstore
from conftest import postgres_connection
from turnstore import (
    Checkpoint,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    JournalEvent,
    SchemaError,
    StorageError,
    TranscriptPageRequest,
)
from turnstore.backends.postgres.schema import SCHEMA_VERSION

WAIT_S = 60.0
TABLES = (
    "sessions",
    "context_chunks",
    "transcript_delta",
    "execution_journal",
    "event_journal",
    "middleware_state",
)


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `pg_schema`, `store_url` and `database` give a fresh schema."""
    return "postgres"


# --- 6. opening at once ----------------------------------------------------------------------

OPENERS = 6


@pytest.mark.parametrize("schema_exists", [False, True], ids=["no-schema", "empty-schema"])
def test_processes_opening_an_empty_schema_at_once_all_succeed(
    store_url, pg_schema, database, schema_exists
):
    """Processes opening one empty schema at the same instant all succeed, migrating it once."""
    if schema_exists:
        with postgres_connection() as connection:
            connection.execute(f"CREATE SCHEMA {pg_schema}")
    barrier = SPAWN.Barrier(OPENERS)
    with Workers() as workers:
        indices = [
            workers.start("opener", url=with_params(store_url, pool_max_size=2), barrier=barrier)
            for _ in range(OPENERS)
        ]
        results = workers.wait(indices, WAIT_S)
    assert list(results.values()) == [(1, 0)] * OPENERS
    # Each migration ran once: the schema is at this build's version, each step recorded once.
    assert database.query("SELECT max(version), count(*) FROM turnstore_schema") == [
        (SCHEMA_VERSION, SCHEMA_VERSION)
    ]
    assert database.query("SELECT version FROM turnstore_schema ORDER BY version") == [
        (version,) for version in range(1, SCHEMA_VERSION + 1)
    ]
    for table in TABLES:
        assert database.query("SELECT to_regclass(?) IS NOT NULL", (f"{pg_schema}.{table}",)) == [
            (True,)
        ], table
    assert sorted(database.query("SELECT session_id, latest_sequence FROM sessions")) == [
        (f"opener-{index}", 1) for index in range(OPENERS)
    ]


# --- 7. a newer schema -----------------------------------------------------------------------


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
def test_a_schema_at_a_newer_version_is_refused_naming_both_versions(
    store_url, pg_schema, database, read_only
):
    """Opening a schema at version 99 raises SchemaError naming 99 and this build's version."""
    assert SCHEMA_VERSION < 99
    with turnstore.open_blocking(store_url) as store:
        checkpoint = Checkpoint.empty("kept")
        checkpoint.sequence = 1
        store.save(checkpoint)
    database.query("INSERT INTO turnstore_schema (version) VALUES (99)")

    with pytest.raises(SchemaError) as refused:
        turnstore.open_blocking(store_url, read_only=read_only)
    message = str(refused.value).replace(pg_schema, "<schema>")
    assert re.search(r"\b99\b", message), message
    assert re.search(rf"\b{SCHEMA_VERSION}\b", message), message
    with pytest.raises(SchemaError):
        turnstore.open(store_url, read_only=read_only)

    # Refused without touching anything.
    assert database.query("SELECT version FROM turnstore_schema ORDER BY version") == [
        *[(version,) for version in range(1, SCHEMA_VERSION + 1)],
        (99,),
    ]
    assert database.query("SELECT session_id, latest_sequence FROM sessions") == [("kept", 1)]


# --- 8. passwords ----------------------------------------------------------------------------

PASSWORD = "Sup3rS3cretPw"


def _with_password(url: str) -> tuple[str, str]:
    """`url` carrying a password, and the password (the URL's own one if it has one)."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{parts.username or ''}:{PASSWORD}@{host}"
    return urlunsplit(parts._replace(netloc=netloc)), PASSWORD


def _assert_secret_free(error: BaseException, secret: str) -> None:
    """Neither the error, nor anything it chains to, nor its printed traceback shows `secret`.

    Every chained error is followed, suppressed contexts included: error reporters walk
    `__context__` whatever `raise … from None` says.
    """
    texts = ["".join(traceback.format_exception(error))]
    seen: BaseException | None = error
    while seen is not None:
        texts += [str(seen), repr(seen), repr(seen.args)]
        seen = seen.__cause__ or seen.__context__
    for text in texts:
        assert secret not in text, text


def test_an_unreachable_server_fails_retryably_without_showing_the_password():
    """A refused connection raises a retryable StorageError that does not contain the password."""
    url = f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?schema=x"
    for read_only in (False, True):
        for open_store in (turnstore.open_blocking, turnstore.open):
            with pytest.raises(StorageError) as failed:
                open_store(url, read_only=read_only)
            assert failed.value.retryable is True
            assert "PostgreSQL" in str(failed.value)
            _assert_secret_free(failed.value, PASSWORD)


def test_errors_during_use_do_not_show_the_password(store_url, database):
    """A statement failing on a store whose URL carries a password does not show the password."""
    url, secret = _with_password(store_url)
    with turnstore.open_blocking(url) as store:
        database.fail_inserts_into("transcript_delta", "forced failure")
        checkpoint = Checkpoint.empty("session")
        checkpoint.sequence = 1
        with pytest.raises(StorageError) as failed:
            store.save(checkpoint, [{"text": "hello"}])
        assert "forced failure" in str(failed.value)
        assert failed.value.retryable is False
        _assert_secret_free(failed.value, secret)

        # Even when the server's own message quotes it.
        database.stop_failing_inserts_into("transcript_delta")
        database.fail_inserts_into("event_journal", f"rejected for {secret}")
        with pytest.raises(StorageError) as quoted:
            store.save_with_events(checkpoint, [{"text": "hello"}], None, [warning("hello")])
        assert "rejected for" in str(quoted.value)
        assert quoted.value.retryable is False
        _assert_secret_free(quoted.value, secret)

        # Nothing was written, and the store still works.
        assert store.load("session") is None
        store.save(checkpoint, [{"text": "hello"}])
        assert store.load("session") == checkpoint


# --- 9. a dropped connection -----------------------------------------------------------------


def _terminate(application_name: str) -> list[int]:
    """Terminate the server connections of one application name; return their pids.

    Returns once they are gone, so the next call of the store meets a dead connection.
    """
    with postgres_connection() as connection:
        rows = connection.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
        assert rows, f"no connection of {application_name} to terminate"
        assert all(terminated for _, terminated in rows), rows
        pids = [pid for pid, _ in rows]
        deadline = time.monotonic() + 20
        while connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, f"connections {pids} outlived termination"
            time.sleep(0.02)
    return pids


def _backends(application_name: str) -> list[int]:
    with postgres_connection() as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return [pid for (pid,) in rows]


def test_a_dropped_connection_fails_one_call_retryably_and_the_pool_replaces_it(store_url):
    """A terminated pool connection fails the next call with a retryable error; the next works."""
    application_name = f"ts-dropped-{uuid.uuid4().hex[:12]}"
    url = with_params(
        store_url,
        pool_min_size=1,
        pool_max_size=1,
        pool_timeout=20,
        application_name=application_name,
    )
    with turnstore.open_blocking(url) as store:
        checkpoint = Checkpoint.empty("session")
        checkpoint.sequence = 1
        store.save(checkpoint, [{"sequence": 1}])
        assert store.load("session") == checkpoint

        # A read on the dropped connection.
        dropped = _terminate(application_name)
        with pytest.raises(StorageError) as failed:
            store.load("session")
        assert failed.value.retryable is True
        assert store.load("session") == checkpoint
        replaced = _backends(application_name)
        assert replaced
        assert not set(replaced) & set(dropped)

        # A write on the dropped connection: it fails whole, and the same save then succeeds.
        _terminate(application_name)
        checkpoint.sequence = 2
        with pytest.raises(StorageError) as failed:
            store.save(checkpoint, [{"sequence": 2}])
        assert failed.value.retryable is True
        store.save(checkpoint, [{"sequence": 2}])
        assert store.load("session") == checkpoint
        transcript = store.transcript_page("session", TranscriptPageRequest(max_batches=10))
        assert [batch.sequence for batch in transcript.batches] == [2, 1]


# --- 10. a client killed mid-save ------------------------------------------------------------

KILLS = 10
FIRST_ACK_TIMEOUT_S = 30.0
WORKER = Path(worker.__file__)


class Replay:
    """What one crash session must hold at each sequence, replayed from `crash_step`."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.checkpoint: Checkpoint | None = None
        self.transcript: list[tuple[int, list[Any]]] = []
        self.executions: list[ExecutionRecord] = []
        self.events: list[JournalEvent] = []

    @property
    def sequence(self) -> int:
        return 0 if self.checkpoint is None else self.checkpoint.sequence

    def replay_to(self, sequence: int) -> Checkpoint:
        """Advance to `sequence` and return the checkpoint saved there."""
        assert sequence >= self.sequence, "a loaded sequence went backwards"
        while self.sequence < sequence:
            checkpoint, transcript, execution, events = worker.crash_step(
                self.checkpoint, self.session_id
            )
            self.checkpoint = checkpoint
            self.transcript.append((checkpoint.sequence, transcript))
            self.executions.append(execution)
            first = len(self.events) + 1
            self.events += [
                JournalEvent(
                    sequence=first + offset, recorded_at_ms=event.recorded_at_ms, event=event.event
                )
                for offset, event in enumerate(events)
            ]
        assert self.checkpoint is not None
        return self.checkpoint


def _run_until_killed(url: str, delay_s: float, stderr_path: Path) -> tuple[list[str], int, str]:
    """Start the crash writer and SIGKILL it `delay_s` after its first ack.

    Return the complete lines it printed, its exit status and its stderr.
    """
    lines: list[str] = []
    first_ack = threading.Event()
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", str(WORKER), "crash", url],
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
    session_id = replay.session_id
    loaded = store.load(session_id)
    sequence = 0 if loaded is None else loaded.sequence
    # Every acked save is durable; only the one in flight at the kill may be durable unacked.
    assert sequence >= acked, f"{session_id}: acked {acked}, loaded {sequence}"
    assert known <= sequence <= max(known, acked) + 1, (session_id, known, acked, sequence)
    if loaded is None:
        assert store.session_summary(session_id) is None
        return 0

    expected = replay.replay_to(sequence)
    assert loaded == expected
    assert len(loaded.context) == worker.crash_context_length(sequence)

    summary = store.session_summary(session_id)
    assert summary is not None
    assert (summary.sequence, summary.execution_stats) == (sequence, expected.execution_stats)
    assert expected.execution_stats.run_count == sequence

    transcript = store.transcript_page(session_id, TranscriptPageRequest(max_batches=sequence + 1))
    assert [(batch.sequence, batch.items) for batch in reversed(transcript.batches)] == (
        replay.transcript
    )
    executions = store.execution_page(session_id, ExecutionPageRequest(limit=sequence + 1))
    assert list(reversed(executions.executions)) == replay.executions
    events = store.event_page(session_id, EventPageRequest(limit=len(replay.events) + 1))
    assert events.latest_sequence == worker.CRASH_EVENTS_PER_SAVE * sequence
    assert events.into_chronological() == replay.events
    return sequence


def _check_rows(database: Any) -> None:
    """Row-level consistency that the public reads could hide."""
    # The stored context length is what the chunks hold.
    assert (
        database.query(
            "SELECT session_id FROM sessions AS s WHERE context_length <> (SELECT"
            " COALESCE(SUM(json_array_length(items_json::json)), 0) FROM context_chunks AS c"
            " WHERE c.session_id = s.session_id)"
        )
        == []
    )
    # No journal row is ahead of its session's high-water marks.
    for table, column in (
        ("transcript_delta", "latest_sequence"),
        ("execution_journal", "latest_sequence"),
        ("event_journal", "latest_event_sequence"),
    ):
        assert (
            database.count(
                f"{table} AS j",
                f"j.sequence > (SELECT {column} FROM sessions AS s"
                " WHERE s.session_id = j.session_id)",
            )
            == 0
        ), table


@pytest.mark.slow
def test_a_client_killed_mid_save_leaves_no_partial_commit(store_url, database, tmp_path):
    """After SIGKILLs of a client at random instants every ack is durable and nothing is partial."""
    url = with_params(store_url, pool_max_size=len(worker.CRASH_SESSIONS) + 1)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    replays = {session_id: Replay(session_id) for session_id in worker.CRASH_SESSIONS}
    known = dict.fromkeys(worker.CRASH_SESSIONS, 0)
    total_acks = unacked_commits = 0
    unexpected_exits: list[str] = []
    with turnstore.open_blocking(store_url) as store:
        for kill in range(KILLS):
            delay_s = rng.uniform(0.0, 0.4)
            lines, status, stderr = _run_until_killed(url, delay_s, tmp_path / f"stderr-{kill}.txt")
            acked = _acks(lines)
            total_acks += len(lines)
            context = f"seed {seed}, kill {kill}, delay {delay_s:.3f}s"
            if status != -signal.SIGKILL:
                unexpected_exits.append(f"{context}: exit status {status}\n{stderr[:4000]}")
            try:
                _check_rows(database)
                for session_id, replay in replays.items():
                    before = acked.get(session_id, known[session_id])
                    known[session_id] = _check_session(
                        store, replay, known[session_id], acked.get(session_id, 0)
                    )
                    unacked_commits += known[session_id] > before
            except AssertionError as error:
                raise AssertionError(f"{context}: {error}") from error
    print(
        f"{KILLS} kills, {total_acks} acked saves, {unacked_commits} committed but unacked,"
        f" final sequences {known}"
    )
    assert not unexpected_exits, "\n".join(unexpected_exits[:2])
    assert all(sequence > 0 for sequence in known.values())
    # Context rewrites (new epochs) were exercised across the kills.
    assert max(known.values()) >= worker.CRASH_REWRITE_EVERY
