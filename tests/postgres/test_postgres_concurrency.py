"""PostgreSQL across processes: what holds when many clients share one schema.

Every race here is between processes (started with `spawn`, each with its own store and pool),
as between hosts: saves at one sequence, event sequences, forks against an advancing parent,
tree deletion against saves and forks under the tree, and parallel commits of independent
sessions. The workers live in `_pg_worker.py`. One deletion race is with another connection
of the same host: a selected session deleted while `delete_sessions` waits for its lock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import _pg_worker as worker
import pytest
from _pg_worker import SPAWN, Workers, event_message, with_params

import turnstore
from conftest import postgres_connection
from turnstore import (
    Checkpoint,
    Event,
    EventPageRequest,
    TranscriptPageRequest,
)
from turnstore.events import (
    WarningEvent,
)

WAIT_S = 60.0
"""Longest wait for a group of workers; a healthy run takes a few seconds."""


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `pg_schema`, `store_url` and `database` give a fresh schema."""
    return "postgres"


def _open(store_url: str, **params: object) -> turnstore.BlockingStore:
    return turnstore.open_blocking(with_params(store_url, **params))


def _seed_session(store: turnstore.BlockingStore, session_id: str) -> None:
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = 1
    store.save(checkpoint, [{"sequence": 1, "writer": -1}])


# --- 1. racing saves at one sequence ----------------------------------------------------------

RACERS = 5
ROUNDS = 30


def test_racing_saves_at_one_sequence_have_exactly_one_winner(store_url, database):
    """Processes saving one session at the same sequence: one commits, the others conflict."""
    barrier = SPAWN.Barrier(RACERS)
    with Workers() as workers:
        indices = [
            workers.start(
                "racing_saver", url=store_url, session_id="race", rounds=ROUNDS, barrier=barrier
            )
            for _ in range(RACERS)
        ]
        results = workers.wait(indices, WAIT_S)

    winners: dict[int, int] = {}
    for index, outcomes in results.items():
        assert [sequence for sequence, _, _ in outcomes] == list(range(1, ROUNDS + 1))
        for sequence, outcome, message in outcomes:
            if outcome == "won":
                assert sequence not in winners, f"two winners at sequence {sequence}"
                winners[sequence] = index
            else:
                assert (outcome, message) == (
                    "SequenceConflict",
                    "checkpoint sequence did not advance",
                )
    assert sorted(winners) == list(range(1, ROUNDS + 1)), "a sequence had no winner"

    with turnstore.open_blocking(store_url) as store:
        assert store.load("race") == worker.racing_checkpoint("race", winners[ROUNDS], ROUNDS)
        transcript = store.transcript_page("race", TranscriptPageRequest(max_batches=ROUNDS * 2))
        assert [(batch.sequence, batch.items) for batch in reversed(transcript.batches)] == [
            (sequence, [{"writer": winners[sequence], "sequence": sequence}])
            for sequence in range(1, ROUNDS + 1)
        ]
        events = store.event_page("race", EventPageRequest(limit=ROUNDS * 2))
        assert events.latest_sequence == ROUNDS
        assert [
            (event.sequence, event.recorded_at_ms, event_message(event))
            for event in events.into_chronological()
        ] == [
            (sequence, sequence, f"writer {winners[sequence]} sequence {sequence}")
            for sequence in range(1, ROUNDS + 1)
        ]
    # Losers left nothing behind: one session, one context chunk (of the last winner's epoch).
    assert database.count("sessions") == 1
    assert database.query("SELECT session_id, start FROM context_chunks") == [("race", 0)]
    assert database.count("transcript_delta") == ROUNDS
    print(f"wins per racer: {sorted(Counter(winners.values()).items())}")


# --- 2. event sequences ----------------------------------------------------------------------

EVENT_WRITERS = 5
EVENT_SESSIONS = ["events-0", "events-1", "events-2"]
EVENT_OPERATIONS = 40
EVENTS_PER_SAVE = 3


def test_event_sequences_stay_gap_free_and_unique_across_processes(store_url, database):
    """Interleaved appends and saves with events from many processes journal 1..n, each once."""
    with turnstore.open_blocking(store_url) as store:
        for session_id in EVENT_SESSIONS:
            _seed_session(store, session_id)
    barrier = SPAWN.Barrier(EVENT_WRITERS)
    with Workers() as workers:
        indices = [
            workers.start(
                "event_writer",
                url=store_url,
                session_ids=EVENT_SESSIONS,
                operations=EVENT_OPERATIONS,
                events_per_save=EVENTS_PER_SAVE,
                barrier=barrier,
                seed=index,
            )
            for index in range(EVENT_WRITERS)
        ]
        results = list(workers.wait(indices, WAIT_S).values())

    acked = [event for result in results for event in result["acked"]]
    saves = [save for result in results for save in result["save_batches"]]
    for _, sequences in saves:
        # One save's events take consecutive sequences, in the order given.
        assert sequences == list(range(sequences[0], sequences[0] + EVENTS_PER_SAVE))

    with turnstore.open_blocking(store_url) as store:
        for session_id in EVENT_SESSIONS:
            told = [event for event in acked if event[0] == session_id]
            told_by_sequence = {sequence: (at, message) for _, sequence, at, message in told}
            assert len(told_by_sequence) == len(told), "two callers were told one sequence"

            page = store.event_page(session_id, EventPageRequest(limit=100_000))
            journal = page.into_chronological()
            assert page.next_before_sequence is None
            assert [event.sequence for event in journal] == list(range(1, page.latest_sequence + 1))
            assert page.latest_sequence == len(told)
            assert {
                event.sequence: (event.recorded_at_ms, event_message(event)) for event in journal
            } == told_by_sequence

            session_saves = sum(1 for save_session, _ in saves if save_session == session_id)
            loaded = store.load(session_id)
            assert loaded is not None
            assert loaded.sequence == 1 + session_saves
            transcript = store.transcript_page(
                session_id, TranscriptPageRequest(max_batches=10_000)
            )
            assert len(transcript.batches) == 1 + session_saves
    assert sorted(database.query("SELECT session_id, latest_event_sequence FROM sessions")) == [
        (session_id, sum(1 for event in acked if event[0] == session_id))
        for session_id in EVENT_SESSIONS
    ]
    conflicts = sum(result["conflicts"] for result in results)
    print(f"{len(acked)} events acked, {len(saves)} saves, {conflicts} lost save races")


# --- 3. forks against an advancing parent ----------------------------------------------------

ADVANCERS = 2
FORKERS = 3
FORKS_PER_FORKER = 24


def test_forks_never_name_a_parent_sequence_the_parent_did_not_durably_reach(store_url, database):
    """Forks racing the parent's saves succeed at a durable sequence or fail with a typed error."""
    with turnstore.open_blocking(store_url) as store:
        _seed_session(store, "parent")
    stop = SPAWN.Event()
    barrier = SPAWN.Barrier(ADVANCERS + FORKERS)
    with Workers() as workers:
        advancers = [
            workers.start(
                "parent_advancer",
                url=store_url,
                parent_id="parent",
                stop=stop,
                barrier=barrier,
                max_saves=2_000,
            )
            for _ in range(ADVANCERS)
        ]
        forkers = [
            workers.start(
                "forker",
                url=store_url,
                parent_id="parent",
                forks=FORKS_PER_FORKER,
                barrier=barrier,
            )
            for _ in range(FORKERS)
        ]
        fork_results = workers.wait(forkers, WAIT_S)
        stop.set()
        advance_results = workers.wait(advancers, WAIT_S)

    acked = sorted(sequence for result in advance_results.values() for sequence in result["acked"])
    with turnstore.open_blocking(store_url) as store:
        parent = store.load("parent")
        assert parent is not None
        final = parent.sequence
        # The parent went through every sequence 1..final, each saved once.
        assert acked == list(range(2, final + 1))
        transcript = store.transcript_page("parent", TranscriptPageRequest(max_batches=10_000))
        durable = [batch.sequence for batch in reversed(transcript.batches)]
        assert durable == list(range(1, final + 1))

    records = [record for result in fork_results.values() for record in result]
    forked = {}
    for record in records:
        point = record["point"]
        if record["kind"] == "future":
            # One past the sequence just read: it succeeds only if the parent got there first.
            if "error" in record:
                assert record["error"] == (
                    "InvalidInput",
                    "fork point is newer than the parent checkpoint",
                    None,
                ), record
                continue
        else:
            # At or before a sequence read from the store: durable, so the fork must succeed.
            assert point <= record["read"]
            assert "error" not in record, record
        assert record["summary"] == (record["child"], "parent", point, 0)
        assert point <= record["after"], record
        assert point in durable, record
        forked[record["child"]] = point
    assert database.query(
        "SELECT session_id, parent_session_id, parent_sequence FROM sessions"
        " WHERE session_id <> 'parent' ORDER BY session_id"
    ) == sorted((child, "parent", point) for child, point in forked.items())
    assert max(forked.values()) <= final
    kinds = Counter((record["kind"], "error" not in record) for record in records)
    print(f"parent reached {final}; forks (kind, succeeded): {sorted(kinds.items())}")


# --- 4. deleting trees under concurrent saves and forks --------------------------------------

TREES = [f"tree{index}" for index in range(12)]
DELETIONS = [
    [["tree0"], ["tree1", "tree2"], ["tree3"], ["tree4"], ["tree5"]],
    [["tree6"], ["tree7"], ["tree8", "tree9"], ["tree10"], ["tree11"]],
]
DELETE_PAUSE_S = 0.6
"""Longest pause before each deletion: they spread over most of the mutation time."""
MUTATORS = 3
MUTATION_S = 3.5
FK_TABLES = ("context_chunks", "transcript_delta", "execution_journal", "event_journal")


def _latest_end(ops: list[dict[str, Any]], node: str, kind: str) -> int:
    return max(
        (
            op["end"]
            for op in ops
            if op["node"] == node and op["kind"] == kind and "error" not in op
        ),
        default=-1,
    )


def test_deleting_trees_under_concurrent_saves_and_forks_leaves_no_orphan(store_url, database):
    """Tree deletions racing saves and forks under the trees are atomic and leave no orphan row."""
    nodes = {tree: [tree, f"{tree}.init0", f"{tree}.init1"] for tree in TREES}
    with turnstore.open_blocking(store_url) as store:
        for tree in TREES:
            _seed_session(store, tree)
            for child in nodes[tree][1:]:
                store.fork(tree, 1, Checkpoint.empty(child))
            for node in nodes[tree]:
                store.save_state(node, "progress", {"writer": -1})
    barrier = SPAWN.Barrier(MUTATORS + len(DELETIONS))
    with Workers() as workers:
        mutators = [
            workers.start(
                "tree_mutator",
                url=store_url,
                nodes=nodes,
                duration_s=MUTATION_S,
                barrier=barrier,
                seed=index,
            )
            for index in range(MUTATORS)
        ]
        deleters = [
            workers.start(
                "tree_deleter",
                url=store_url,
                deletions=deletions,
                pause_s=DELETE_PAUSE_S,
                barrier=barrier,
                seed=index,
            )
            for index, deletions in enumerate(DELETIONS)
        ]
        results = workers.wait(mutators + deleters, WAIT_S)
    ops = [op for index in mutators for op in results[index]]
    deletes = [op for index in deleters for op in results[index]]

    # Every call returned or raised a TurnstoreError, and none failed underneath the store.
    calls = ops + deletes
    assert [op for op in calls if "unexpected" in op] == []
    assert [op for op in calls if "error" in op and op["error"][0] == "StorageError"] == []
    for op in deletes:
        # A group with an absent id deletes nothing; each tree is deleted once, whole.
        assert op.get("result") is (not any(id.startswith("absent-") for id in op["ids"])), op

    # No row refers to a session that does not exist.
    for table in FK_TABLES:
        assert database.count(table, "session_id NOT IN (SELECT session_id FROM sessions)") == 0, (
            table
        )
    assert (
        database.count(
            "sessions",
            "parent_session_id IS NOT NULL"
            " AND parent_session_id NOT IN (SELECT session_id FROM sessions)",
        )
        == 0
    )

    # A delete that returned True took every node the tree had when it began. A node may only
    # exist again if a save ending after that instant re-created it, as a new root; its
    # session-scoped state only if a save_state ending after that instant wrote it again.
    surviving = dict(database.query("SELECT session_id, parent_session_id FROM sessions"))
    states = {scope for (scope,) in database.query("SELECT scope FROM middleware_state")}
    created = {node: -1 for tree in TREES for node in nodes[tree]}
    for op in ops:
        if op["kind"] == "fork" and "error" not in op:
            created[op["child"]] = op["end"]
    tree_of = {node: node.split(".")[0] for node in created}
    assert set(surviving) <= set(created)
    checked = recreated = 0
    for delete in deletes:
        if delete.get("result") is not True:
            continue
        began = delete["start"]
        for node, created_at in created.items():
            if tree_of[node] not in delete["ids"] or created_at >= began:
                continue
            checked += 1
            if node in surviving:
                assert surviving[node] is None, f"{node} outlived the deletion of its tree"
                assert _latest_end(ops, node, "save") > began, f"{node} outlived its deletion"
                recreated += 1
            if node in states:
                assert _latest_end(ops, node, "state") > began, f"{node}'s state outlived it"
    assert checked >= len(TREES) * 3

    outcomes = Counter((op["kind"], op["error"][0] if "error" in op else "ok") for op in ops)
    assert outcomes[("save", "ok")] > 0
    assert outcomes[("fork", "ok")] > 0
    print(f"{checked} deleted nodes checked, {recreated} saved again after their deletion;")
    print(f"outcomes {sorted(outcomes.items())}")


def test_delete_returns_false_when_a_selected_session_vanishes_while_it_waits(store_url, pg_schema):
    """A session deleted by another caller while delete_sessions waits makes it delete nothing.

    PostgreSQL only: on SQLite the one writer never lets another delete interleave.
    """
    with turnstore.open_blocking(store_url) as store:
        store.save(Checkpoint.empty("a"))
        store.save(Checkpoint.empty("b"))
        blocker = postgres_connection(pg_schema)
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM sessions WHERE session_id = 'b' FOR UPDATE")
        outcome: list[bool] = []
        deleter = threading.Thread(target=lambda: outcome.append(store.delete_sessions(["a", "b"])))
        deleter.start()
        deleter.join(timeout=1.0)
        assert deleter.is_alive()  # waiting on b's row lock
        blocker.execute("DELETE FROM sessions WHERE session_id = 'b'")
        blocker.execute("COMMIT")
        blocker.close()
        deleter.join(timeout=30)
        assert outcome == [False]
        assert store.load("a") == Checkpoint.empty("a")


# --- 5. no global lock -----------------------------------------------------------------------

OTHERS = ["b", "c", "d", "e"]


def _blocked_by(pid: int, tag: str) -> set[str]:
    """Application names (containing `tag`) of connections waiting, directly or behind
    other waiters, for a lock that `pid` holds."""
    with postgres_connection() as connection:
        rows = connection.execute(
            "SELECT pid, application_name, pg_blocking_pids(pid) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND position(%s in application_name) > 0",
            (tag,),
        ).fetchall()
    blockers = {waiter: set(by) for waiter, _, by in rows}
    blocked: set[int] = set()
    while grown := {w for w, by in blockers.items() if w not in blocked and by & (blocked | {pid})}:
        blocked |= grown
    return {name for waiter, name, _ in rows if waiter in blocked}


def _wait_until_blocked(pid: int, tag: str, expected: set[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while (blocked := _blocked_by(pid, tag)) != expected:
        assert time.monotonic() < deadline, f"blocked by the lock: {blocked}, not {expected}"
        time.sleep(0.05)


def test_independent_sessions_commit_while_one_session_is_locked(store_url, pg_schema):
    """A row lock on one session blocks only its writers: other sessions commit meanwhile."""
    tag = uuid.uuid4().hex[:12]
    apps = {session_id: f"ts-{tag}-{session_id}" for session_id in ["a", *OTHERS, "local"]}
    with _open(store_url, pool_max_size=4, application_name=apps["local"]) as local:
        for session_id in ["a", *OTHERS, "f"]:
            _seed_session(local, session_id)

        holder = postgres_connection(pg_schema)
        try:
            holder.execute("BEGIN")
            assert holder.execute(
                "SELECT session_id FROM sessions WHERE session_id = 'a' FOR UPDATE"
            ).fetchall() == [("a",)]
            with Workers() as workers:
                locked = workers.start(
                    "one_save",
                    url=with_params(store_url, application_name=apps["a"]),
                    session_id="a",
                    sequence=2,
                )
                # The same process's store too: an event for A waits on A's row ...
                appended: list[Any] = []
                appender = threading.Thread(
                    target=lambda: appended.append(
                        local.append_event("a", 1, Event(msg=WarningEvent(message="after lock")))
                    ),
                    daemon=True,
                )
                appender.start()
                others = [
                    workers.start(
                        "one_save",
                        url=with_params(store_url, application_name=apps[session_id]),
                        session_id=session_id,
                        sequence=2,
                    )
                    for session_id in OTHERS
                ]
                _wait_until_blocked(holder.info.backend_pid, tag, {apps["a"], apps["local"]})
                # ... while four other processes save their own sessions and return,
                workers.wait(others, WAIT_S)
                # ... and this process saves another session (in a thread, so that a store
                # serialising its writes fails this test instead of hanging it).
                checkpoint = local.load("f")
                assert checkpoint is not None
                checkpoint.sequence = 2
                saver = threading.Thread(target=local.save, args=(checkpoint,), daemon=True)
                saver.start()
                saver.join(WAIT_S)
                assert not saver.is_alive(), "a save of F waited for the lock on A"

                # A's save and append are still waiting for the lock, not finished.
                assert not workers.reported(locked, timeout_s=1.0)
                assert appender.is_alive()
                assert _blocked_by(holder.info.backend_pid, tag) == {apps["a"], apps["local"]}

                holder.execute("COMMIT")
                workers.wait([locked], WAIT_S)
                appender.join(WAIT_S)
                assert not appender.is_alive()
        finally:
            holder.close()

        for session_id in ["a", *OTHERS, "f"]:
            loaded = local.load(session_id)
            assert loaded is not None
            assert loaded.sequence == 2, session_id
        assert [event.sequence for event in appended] == [1]
        assert local.event_page("a", EventPageRequest(limit=10)).latest_sequence == 1
