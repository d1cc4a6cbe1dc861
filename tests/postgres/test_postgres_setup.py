"""PostgreSQL setup and failure: migrations, refusals, secrets, dropped connections.

Many processes may open one schema at once; a schema newer than the code is refused; a
password never appears in an error; a dropped connection fails one call with a retryable
error and the pool replaces it. That a client killed mid-save leaves no partial commit is
the crash test's (`tests/contract/test_crash.py`, run on every backend).
"""

from __future__ import annotations

import re
import time
import traceback
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
from _pg_worker import SPAWN, Workers, warning, with_params

import turnstore
from conftest import postgres_connection
from turnstore import (
    Checkpoint,
    StorageError,
    TranscriptPageRequest,
)
from turnstore.backends.postgres.schema import SCHEMA_VERSION
from turnstore.errors import (
    SchemaError,
)

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
