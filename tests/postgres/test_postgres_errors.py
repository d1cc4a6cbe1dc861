"""PostgreSQL failures a program can branch on: the server's SQLSTATE and DETAIL on
`StorageError`, and `OutcomeUnknown` for a commit whose connection was lost after COMMIT.

Both failures are made by the server itself, in the test's own schema: a trigger that raises
with a chosen code and detail, and a deferred constraint trigger that holds COMMIT while a
second connection ends the writer's backend.
"""

from __future__ import annotations

import threading
import time

import pytest

import turnstore
from conftest import postgres_connection
from turnstore import Checkpoint
from turnstore.errors import OutcomeUnknown, StorageError


def first(session_id: str) -> Checkpoint:
    """A session's first checkpoint."""
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = 1
    return checkpoint


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `pg_schema` and `store_url` give a fresh schema."""
    return "postgres"


def test_a_server_error_keeps_its_sqlstate_and_detail(store_url: str, pg_schema: str) -> None:
    """A refusal raised by the server reaches the caller with its code and DETAIL line."""
    with turnstore.open_blocking(store_url) as store:
        with postgres_connection(pg_schema) as admin:
            admin.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'not today' USING ERRCODE = 'P0042', DETAIL = 'the reason'; "
                "END $$"
            )
            admin.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON sessions "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        with pytest.raises(StorageError) as failed:
            store.save(first("s"))
        assert not isinstance(failed.value, OutcomeUnknown)
        assert failed.value.sqlstate == "P0042"
        assert failed.value.detail == "the reason"
        assert failed.value.retryable is False
        assert "sqlstate='P0042'" in repr(failed.value)
        assert store.load("s") is None


def test_a_commit_whose_connection_is_lost_is_an_unknown_outcome(
    store_url: str, pg_schema: str
) -> None:
    """The writer's backend ends while COMMIT runs: `OutcomeUnknown`, not retried, not plain."""
    with turnstore.open_blocking(store_url) as store:
        with postgres_connection(pg_schema) as admin:
            # A deferred constraint trigger runs inside COMMIT: it holds the commit open.
            admin.execute(
                "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_sleep(30); RETURN NULL; END $$"
            )
            admin.execute(
                "CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON sessions "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold()"
            )
        ended = threading.Event()

        def end_the_committing_backend() -> None:
            with postgres_connection() as killer:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not ended.is_set():
                    killed = killer.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE query LIKE 'COMMIT%' AND wait_event = 'PgSleep'"
                    ).fetchall()
                    if killed:
                        ended.set()
                        return
                    time.sleep(0.05)

        killer = threading.Thread(target=end_the_committing_backend)
        killer.start()
        try:
            with pytest.raises(OutcomeUnknown) as failed:
                store.save(first("s"))
        finally:
            ended.set()
            killer.join()
        assert failed.value.retryable is False
        assert "may or may not have been committed" in str(failed.value)
        # The backend ended before the commit finished, so nothing was written; the store
        # answers the next call on a fresh connection.
        assert store.load("s") is None
