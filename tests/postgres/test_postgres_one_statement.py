"""PostgreSQL: a read or a write of one statement waits for the server once, outside any
transaction.

A read marked `single` (`load_state`, a memory call reading one item, one listing or one
search's first page) runs as one autocommitted statement on a direct connection: no BEGIN, no
COMMIT, one round trip instead of two. A read so marked that needs a second statement (a
search whose filter keeps too few rows of its first page) runs again, whole, in a
repeatable-read transaction, and answers as one. A write marked `single` (a lone memory put
without vectors, a lone delete) is one idempotent statement by construction: it runs
autocommitted, a second statement is refused before it is sent, and a connection lost under
it runs it again. Behind a transaction pooler every call keeps its transaction, which carries
the store's schema (`SET LOCAL`). libpq's protocol trace of the store's one connection is the
proof.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _pg_worker import with_params

import turnstore
from conftest import postgres_connection
from turnstore.engine.single import SecondStatement
from turnstore.records.memory import (
    MemoryCall,
    MemoryDelete,
    MemoryGet,
    MemoryPut,
    MemorySearch,
    MemoryVector,
)

NS = ("ada", "notes")


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `store_url` gives a fresh schema."""
    return "postgres"


@pytest.fixture
def store(store_url: str, request: pytest.FixtureRequest) -> Any:
    if "pooler=transaction" in store_url:
        pytest.skip("behind a transaction pooler every read keeps its transaction")
    # One pooled connection (the traced one) and no indexer to share it.
    url = with_params(store_url, pool_min_size=1, pool_max_size=1)
    with turnstore.open_blocking(url, index_in_background=False) as opened:
        yield opened


def _traced(store: Any, call: Callable[[], Any]) -> tuple[Any, list[tuple[str, str, str]]]:
    """What `call` returns, and the messages of the pool's connection while it ran."""
    pool = store._driver.engine.pool
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace"
        with path.open("w") as out:
            with pool.connection() as connection:
                connection.pgconn.trace(out.fileno())
            try:
                answer = call()
            finally:
                with pool.connection() as connection:
                    connection.pgconn.untrace()
        lines = [line.split("\t") for line in path.read_text().splitlines()]
    return answer, [(line[1], line[3], "\t".join(line[4:])) for line in lines if len(line) > 3]


def _waits(messages: list[tuple[str, str, str]]) -> int:
    """Switches from the client's messages, ending in one that asks for answers, to the
    server's: the round trips."""
    return sum(
        1
        for (sender, kind, _), (answerer, _, _) in itertools.pairwise(messages)
        if sender == "F" and answerer == "B" and kind in ("Sync", "Flush", "Query")
    )


def _begun(messages: list[tuple[str, str, str]]) -> bool:
    """Whether a BEGIN was sent as text (a statement psycopg prepared is sent by its name)."""
    return any(sender == "F" and "BEGIN" in text for sender, _, text in messages)


def _put(key: str, value: str) -> MemoryPut:
    return MemoryPut(NS, key, value, None, "ada")


def test_a_state_read_and_a_memory_get_take_one_round_trip_and_no_transaction(store):
    store.save_state("scope", "key", {"v": 1})
    store.memory.run(MemoryCall(writes=(_put("k", '{"n": 1}'),)))
    for _ in range(6):  # past psycopg's threshold for preparing statements
        store.load_state("scope", "key")
    value, messages = _traced(store, lambda: store.load_state("scope", "key"))
    assert value == {"v": 1}
    assert _waits(messages) == 1  # a transaction's COMMIT would be a second
    answer, messages = _traced(
        store, lambda: store.memory.run(MemoryCall(gets=(MemoryGet(NS, "k"),)))
    )
    assert answer.gets[0] is not None
    assert answer.gets[0].value_json == '{"n": 1}'
    assert _waits(messages) == 1


def test_a_single_read_that_needs_a_second_statement_runs_again_in_a_transaction(store):
    store.memory.run(MemoryCall(writes=tuple(_put(f"k{n}", f'{{"n": {n}}}') for n in range(7))))

    def odd(row: Any) -> bool:
        return '"n": 1' in row.value_json or '"n": 3' in row.value_json

    search = MemorySearch(NS, keep=odd, limit=10, page=2)
    answer, messages = _traced(store, lambda: store.memory.run(MemoryCall(searches=(search,))))
    assert [found.row.key for found in answer.searches[0]] == ["k3", "k1"]
    assert _begun(messages)  # the second page asked for a transaction: read again in one
    assert any("REPEATABLE READ" in text for _, _, text in messages)
    # Two reads marked single in one batch are not one statement: one transaction, at once.
    gets = (MemoryGet(NS, "k1"), MemoryGet(NS, "k2"))
    answer, messages = _traced(store, lambda: store.memory.run(MemoryCall(gets=gets)))
    assert [row.key for row in answer.gets] == ["k1", "k2"]
    sent = [text for sender, kind, text in messages if sender == "F" and kind in ("Parse", "Query")]
    assert "BEGIN" in sent[0], sent  # no first try as one statement


def test_a_single_read_that_streams_runs_in_a_transaction(store):
    """A cursor declared in SQL (`Tx.stream`) lives in a transaction only: such a read is
    never tried as one autocommitted statement."""
    engine = store._driver.engine
    rows = engine.read(lambda tx: list(tx.stream("SELECT n FROM generate_series(1, 3) AS n")))
    assert [row[0] for row in rows] == [1, 2, 3]
    single = engine.read(
        lambda tx: list(tx.stream("SELECT n FROM generate_series(1, 3) AS n")), single=True
    )
    assert [row[0] for row in single] == [1, 2, 3]


def _write(store: Any, *writes: Any) -> Any:
    return store.memory.run(MemoryCall(writes=writes))


def test_a_lone_memory_put_or_delete_takes_one_round_trip_and_no_transaction(store):
    for n in range(6):  # past psycopg's threshold for preparing statements
        _write(store, _put("k", f'{{"n": {n}}}'))
        _write(store, MemoryDelete(NS, "gone"))
    _, messages = _traced(store, lambda: _write(store, _put("k", '{"n": 9}')))
    assert _waits(messages) == 1  # BEGIN's answer, then COMMIT's, would be two
    assert not _begun(messages)
    (row,) = store.memory.run(MemoryCall(gets=(MemoryGet(NS, "k"),))).gets
    assert row is not None
    assert row.value_json == '{"n": 9}'
    _, messages = _traced(store, lambda: _write(store, MemoryDelete(NS, "k")))
    assert _waits(messages) == 1
    assert not _begun(messages)
    assert store.memory.run(MemoryCall(gets=(MemoryGet(NS, "k"),))).gets == [None]


def test_memory_writes_of_more_than_one_statement_keep_their_transaction(store):
    vectors = (MemoryVector("text", b"\x00\x00\x80\x3f"),)
    with_vectors = MemoryPut(NS, "v", "{}", None, "ada", vectors=vectors)
    for call in (
        lambda: _write(store, with_vectors),  # the put, then its vectors
        lambda: _write(store, _put("a", "{}"), _put("b", "{}")),  # two writes
    ):
        _, messages = _traced(store, call)
        assert _begun(messages)
    found = store.memory.run(MemoryCall(searches=(MemorySearch(NS, vectors=True),)))
    assert {one.row.key: len(one.vectors) for one in found.searches[0]} == {
        "v": 1,
        "a": 0,
        "b": 0,
    }


def test_a_write_marked_single_that_asks_for_a_second_statement_never_sends_it(store):
    """Marking a write of two statements `single` is a bug of the operation: the second is
    refused before it is sent (the first, committed by itself, stands)."""
    engine = store._driver.engine
    engine.write_blocking(lambda tx: tx.run("CREATE TABLE probe_single (n INTEGER)"))

    def two(tx: Any) -> None:
        tx.run("INSERT INTO probe_single VALUES (1)")
        tx.run("INSERT INTO probe_single VALUES (2)")

    with pytest.raises(SecondStatement):
        engine.write_blocking(two, single=True)
    rows = engine.read(lambda tx: tx.values("SELECT n FROM probe_single ORDER BY n"))
    assert list(rows) == [1]
    engine.write_blocking(two)  # unmarked: one transaction, both rows
    rows = engine.read(lambda tx: tx.values("SELECT n FROM probe_single ORDER BY n"))
    assert list(rows) == [1, 1, 2]


def test_a_single_write_whose_connection_was_lost_runs_again_on_a_fresh_one(store):
    """A connection lost under the statement (here before it, as a server restart leaves
    an idle pool) runs it again on a fresh one: whether or not it committed, the statement is
    idempotent (what `single` promises), so the put lands once."""
    engine = store._driver.engine
    pid = engine.read(lambda tx: tx.value("SELECT pg_backend_pid()"))
    with postgres_connection() as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        deadline = time.monotonic() + 20
        while other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    _write(store, _put("after", '{"n": 1}'))
    (row,) = store.memory.run(MemoryCall(gets=(MemoryGet(NS, "after"),))).gets
    assert row is not None
    assert row.value_json == '{"n": 1}'
    assert engine.read(lambda tx: tx.value("SELECT pg_backend_pid()")) != pid
