"""PostgreSQL setup and failure: migrations, refusals, secrets, dropped connections.

Many processes may open one schema at once; a schema newer than the code is refused; a
password never appears in an error; a dropped connection fails one call with a retryable
error and the pool replaces it. That a client killed mid-save leaves no partial commit is
the crash test's (`tests/contract/test_crash.py`, run on every backend).
"""

from __future__ import annotations

import logging
import re
import time
import traceback
import uuid
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from _pg_worker import SPAWN, Workers, warning, with_params

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres
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
    "event_batches",
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
        database.fail_inserts_into("event_batches", f"rejected for {secret}")
        with pytest.raises(StorageError) as quoted:
            store.save_with_events(checkpoint, [{"text": "hello"}], None, [warning("hello")])
        assert "rejected for" in str(quoted.value)
        assert quoted.value.retryable is False
        _assert_secret_free(quoted.value, secret)

        # Nothing was written, and the store still works.
        assert store.load("session") is None
        store.save(checkpoint, [{"text": "hello"}])
        assert store.load("session") == checkpoint


def _with_query_password(url: str) -> tuple[str, str]:
    """`url` carrying a password as a `password=` query parameter, and the password."""
    return f"{url}{'&' if '?' in url else '?'}password=Qu3ryS3cret", "Qu3ryS3cret"


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_no_repr_str_or_log_line_of_an_open_store_shows_the_password(store_url, caplog, form):
    """The options, engine, pool and store print without the password, and nothing logged
    while the store opens, works and closes quotes it."""
    url, secret = (_with_password if form == "userinfo" else _with_query_password)(store_url)
    caplog.set_level("DEBUG")
    with turnstore.open_blocking(url) as store:
        store.save(Checkpoint.empty("session"))
        engine = store._driver.engine
        assert secret in engine.options.conninfo
        shown = [engine.options, engine, engine._pool, store, store._driver]
        for value in shown:
            assert secret not in repr(value), repr(value)
            assert secret not in str(value), str(value)
        assert "***" in repr(engine.options)
    for record in caplog.records:
        assert secret not in record.getMessage()


def _refused_url(case: str) -> str:
    """The test server's URL naming a role or a database that does not exist."""
    parts = urlsplit(POSTGRES_URL)
    host = parts.netloc.rpartition("@")[2]
    if case == "database":
        return urlunsplit(parts._replace(path="/nosuchdb", query=""))
    password = f":{PASSWORD}" if case == "role-with-password" else ""
    return urlunsplit(parts._replace(netloc=f"nosuchrole{password}@{host}", query=""))


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("role", "nosuchrole"),
        ("role-with-password", "nosuchrole"),
        ("database", 'database "nosuchdb" does not exist'),
    ],
)
def test_a_wrong_role_or_database_is_a_config_error_not_a_retryable_one(case, named, caplog):
    """A role or database the server refuses fails every retry alike: ConfigError, which a
    retry loop on retryable StorageErrors does not catch, never a retryable StorageError."""
    require_postgres()
    url = _refused_url(case)
    caplog.set_level("DEBUG")
    for read_only in (False, True):
        for open_store in (turnstore.open_blocking, turnstore.open):
            with pytest.raises(turnstore.ConfigError) as refused:
                open_store(url, read_only=read_only)
            assert not isinstance(refused.value, StorageError)
            assert named in str(refused.value)
            assert "PostgreSQL refused the connection" in str(refused.value)
            _assert_secret_free(refused.value, PASSWORD)
    for record in caplog.records:
        assert PASSWORD not in record.getMessage()


def test_an_unknown_url_parameter_is_a_config_error_listing_the_known_ones():
    """A misspelt parameter (here `sslmod`, `pool_size`) is refused before any connection,
    with turnstore's parameters and libpq's listed."""
    url = f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?schema=x&sslmod=disable&pool_size=3"
    for open_store in (turnstore.open_blocking, turnstore.open):
        with pytest.raises(turnstore.ConfigError) as refused:
            open_store(url)
        message = str(refused.value)
        assert "unknown PostgreSQL URL parameter 'pool_size', 'sslmod'" in message
        for known in ("schema", "pool_min_size", "pool_max_size", "pool_timeout"):
            assert known in message
        for known in ("sslmode", "application_name", "connect_timeout", "options"):
            assert re.search(rf"\b{known}\b", message), known
        _assert_secret_free(refused.value, PASSWORD)


def test_libpq_options_with_spaces_reach_the_server(store_url):
    """`options=-c%20name%3Dvalue` keeps its space: the server gets the setting, not `+name`."""
    url = with_params(store_url, options="-c%20statement_timeout%3D4321")
    with turnstore.open_blocking(url) as store:
        engine = store._driver.engine
        with engine.pool.connection() as connection:
            (setting,) = connection.execute("SHOW statement_timeout").fetchone()
    assert setting == "4321ms"


@pytest.mark.parametrize(("options", "expected"), [(None, "off"), ("-c%20jit%3Don", "on")])
def test_connections_compile_no_jit_unless_the_url_asks(store_url, options, expected):
    """The store's connections set `jit=off`; a URL's own `-c jit=on` comes after and wins."""
    url = store_url if options is None else with_params(store_url, options=options)
    with (
        turnstore.open_blocking(url) as store,
        store._driver.engine.pool.connection() as connection,
    ):
        (setting,) = connection.execute("SHOW jit").fetchone()
        (path,) = connection.execute("SHOW search_path").fetchone()
        schema = store._driver.engine.options.schema
    assert setting == expected
    assert path == schema


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://someone:{PASSWORD}@[::1/test",
        f"postgresql://someone:{PASSWORD}@127.0.0.1:port/test",
        f"postgresql://someone:{PASSWORD}@127.0.0.1:99999/test",
        f"postgresql://someone:{PASSWORD}%zz@127.0.0.1:1/test",
        f"postgresql://someone@127.0.0.1:1/test?password={PASSWORD}%zz",
        f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?schema=a&schema=b",
        f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?schema=",
        f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?pooler=statement",
        "postgresql://someone@127.0.0.1:1/test?pooler=transaction&listen_url="
        + quote(f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test?schema=x", safe=""),
        "postgresql://someone@127.0.0.1:1/test?listen_url="
        + quote(f"http://someone:{PASSWORD}@127.0.0.1:1/test", safe=""),
        "postgresql://someone@127.0.0.1:1/test?listen_url="
        + quote(f"postgresql://someone:{PASSWORD}@127.0.0.1:port/test", safe=""),
    ],
    ids=[
        "ipv6",
        "port-name",
        "port-range",
        "percent",
        "query-percent",
        "twice",
        "blank",
        "pooler",
        "listen-schema",
        "listen-scheme",
        "listen-port",
    ],
)
def test_a_malformed_url_is_a_config_error_without_the_password(url):
    """A URL libpq or turnstore cannot parse is a ConfigError, never a bare ValueError or a
    retryable StorageError, and neither it nor anything chained to it shows the password.

    The port, where well-formed, is one no server listens on: only a refusal before any
    connection attempt passes."""
    for read_only in (False, True):
        for open_store in (turnstore.open_blocking, turnstore.open):
            with pytest.raises(turnstore.ConfigError) as refused:
                open_store(url, read_only=read_only)
            _assert_secret_free(refused.value, PASSWORD)


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


def test_a_dropped_connection_is_replaced_and_the_call_runs_once_on_a_fresh_one(store_url, caplog):
    """A pool connection the server ended is found dead by the next call, before its COMMIT:
    the call runs again on a new connection (one log line), and a save is applied once."""
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
        with caplog.at_level(logging.WARNING, logger="turnstore.postgres"):
            assert store.load("session") == checkpoint
        retries = [r for r in caplog.records if r.name == "turnstore.postgres"]
        assert [r.getMessage() for r in retries] == [
            "connection lost before commit (OperationalError); retrying, attempt 2 of 5"
        ]
        replaced = _backends(application_name)
        assert replaced
        assert not set(replaced) & set(dropped)

        # A write on the dropped connection: it runs again, and is applied once.
        _terminate(application_name)
        checkpoint.sequence = 2
        store.save(checkpoint, [{"sequence": 2}])
        assert store.load("session") == checkpoint
        transcript = store.transcript_page("session", TranscriptPageRequest(max_batches=10))
        assert [batch.sequence for batch in transcript.batches] == [2, 1]
