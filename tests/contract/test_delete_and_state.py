"""Contract: atomic deletion of session trees, and middleware state.

Ports the seed-003 test `delete_session_removes_the_complete_session_tree` to seed-002's
`delete_sessions(ids)`: atomic over all ids, `False` without deleting anything when any is
absent (001's prose).
"""

from __future__ import annotations

import pytest

import turnstore
from turnstore import (
    Checkpoint,
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    InvalidInput,
    TranscriptPageRequest,
)
from turnstore.events import (
    TokenCountEvent,
    TokenUsage,
    WarningEvent,
)

TABLES = (
    "sessions",
    "transcript_delta",
    "event_journal",
    "event_batches",
    "execution_journal",
    "context_chunks",
    "middleware_state",
)
TREE = ("parent", "child", "grandchild")
OTHER_TREE = ("other-root", "other-child")
BYSTANDER = "bystander"


def warning(message: str) -> Event:
    """A durable warning event."""
    return Event(msg=WarningEvent(message=message))


def execution(session_id: str, sequence: int) -> ExecutionRecord:
    """A completed turn of `session_id` journaled at `sequence`."""
    return ExecutionRecord(
        session_id=session_id,
        submission_id=f"submission-{sequence}",
        turn_id=f"turn-{sequence}",
        started_at_ms=sequence * 100,
        finished_at_ms=sequence * 100 + 10,
        elapsed_ms=10,
        outcome="completed",
    )


def counts(database) -> dict[str, int]:
    """Row counts of every table a session owns rows in."""
    return {table: database.count(table) for table in TABLES}


async def save_root(store, session_id: str) -> None:
    """A root session with a transcript batch, context, and an execution record."""
    checkpoint = Checkpoint.empty(session_id)
    await store.save(checkpoint)
    record = execution(session_id, 1)
    checkpoint.sequence = 1
    checkpoint.context = [{"role": "user", "content": session_id}]
    assert checkpoint.execution_stats.checked_record(record)
    await store.save(checkpoint, [{"role": "user", "content": session_id}], record)


async def fork_child(store, parent: str, child: str) -> None:
    """Fork `child` from `parent` at sequence 1 or 0, with a context of its own."""
    summary = await store.session_summary(parent)
    checkpoint = Checkpoint.empty(child)
    checkpoint.context = [{"role": "user", "content": child}]
    await store.fork(parent, summary.sequence, checkpoint)
    record = execution(child, 1)
    checkpoint.sequence = 1
    assert checkpoint.execution_stats.checked_record(record)
    await store.save(checkpoint, [{"role": "assistant", "content": child}], record)


async def populate(store) -> None:
    """Two session trees, an unrelated session, and session-scoped and global state."""
    await save_root(store, "parent")
    await fork_child(store, "parent", "child")
    await fork_child(store, "child", "grandchild")
    await save_root(store, "other-root")
    await fork_child(store, "other-root", "other-child")
    await save_root(store, BYSTANDER)
    for session_id in (*TREE, *OTHER_TREE, BYSTANDER):
        await store.append_event(session_id, 1, warning(session_id))
        # A token count is stored as a row of its own (the next one deletes it), a warning
        # in its save's batch: every journal table holds rows of every session.
        usage = TokenCountEvent(total_usage=TokenUsage(total_tokens=7))
        await store.append_event(session_id, 2, Event(msg=usage))
        await store.save_state(session_id, "owned", {"session": session_id})
    await store.save_state("global", "retained", True)
    # A key that merely names a session is not session-scoped state.
    await store.save_state("global", "parent", ["kept"])


async def test_delete_session_removes_the_complete_session_tree(store, database):
    """delete_sessions removes a session, its descendants, their rows and session state."""
    parent = Checkpoint.empty("parent")
    parent.sequence = 1
    await store.save(parent, [{"role": "user", "content": "hello"}])
    await store.fork("parent", 1, Checkpoint.empty("child"))
    await store.fork("child", 0, Checkpoint.empty("grandchild"))
    for session_id in TREE:
        await store.append_event(session_id, 1, warning(session_id))
        await store.save_state(session_id, "owned", session_id)
    await store.save_state("global", "retained", True)

    assert await store.delete_sessions(["parent"]) is True
    assert (
        database.count("sessions"),
        database.count("transcript_delta"),
        database.count("event_journal"),
        database.count("event_batches"),
        database.count("middleware_state", "scope != 'global'"),
    ) == (0, 0, 0, 0, 0)
    assert await store.load_state("global", "retained") is True
    assert await store.delete_sessions(["parent"]) is False


async def test_delete_sessions_with_an_absent_id_deletes_nothing(store, database):
    """delete_sessions returns False and deletes nothing when any selected id is absent."""
    await populate(store)
    before = counts(database)
    loaded = {session_id: await store.load(session_id) for session_id in (*TREE, *OTHER_TREE)}

    assert await store.delete_sessions(["parent", "other-root", "missing"]) is False
    assert counts(database) == before
    for session_id, checkpoint in loaded.items():
        assert await store.load(session_id) == checkpoint
        assert await store.load_state(session_id, "owned") == {"session": session_id}
    assert await store.delete_sessions(["missing"]) is False
    assert counts(database) == before


async def test_delete_sessions_removes_every_selected_tree(store, database):
    """delete_sessions removes all selected trees and their state, and nothing else."""
    await populate(store)
    bystander = await store.load(BYSTANDER)
    bystander_events = await store.event_page(BYSTANDER, EventPageRequest(limit=10))

    assert await store.delete_sessions(["parent", "other-root"]) is True

    for session_id in (*TREE, *OTHER_TREE):
        assert await store.load(session_id) is None
        assert await store.session_summary(session_id) is None
        assert await store.load_state(session_id, "owned") is None
        transcript = await store.transcript_page(session_id, TranscriptPageRequest(max_batches=10))
        assert transcript.batches == []
        executions = await store.execution_page(session_id, ExecutionPageRequest(limit=10))
        assert executions.executions == []
        with pytest.raises(turnstore.SessionNotFound):
            await store.event_page(session_id, EventPageRequest(limit=10))
    for table in TABLES[:-1]:
        assert database.count(table, "session_id != ?", (BYSTANDER,)) == 0, table
        assert database.count(table, "session_id = ?", (BYSTANDER,)) > 0, table
    scopes = sorted(row[0] for row in database.query("SELECT DISTINCT scope FROM middleware_state"))
    assert scopes == [BYSTANDER, "global"]
    assert await store.load_state("global", "retained") is True
    assert await store.load_state("global", "parent") == ["kept"]
    assert await store.load(BYSTANDER) == bystander
    assert await store.event_page(BYSTANDER, EventPageRequest(limit=10)) == bystander_events
    assert [record.session_id for record in await store.recent_executions(10)] == [BYSTANDER]
    assert await store.delete_sessions(["parent"]) is False


async def test_delete_sessions_of_a_subtree_keeps_its_ancestors(store, database):
    """Deleting a child removes it and its descendants but not its parent."""
    await populate(store)
    parent = await store.load("parent")
    assert await store.delete_sessions(["child"]) is True
    assert await store.load("child") is None
    assert await store.load("grandchild") is None
    assert await store.load("parent") == parent
    assert await store.load_state("parent", "owned") == {"session": "parent"}
    assert database.count("sessions") == 4


async def test_delete_sessions_accepts_ids_within_one_tree(store, database):
    """Selecting a session together with its own descendant deletes the tree once."""
    await populate(store)
    assert await store.delete_sessions(["grandchild", "parent", "child"]) is True
    assert database.count("sessions") == 3
    for session_id in TREE:
        assert await store.load(session_id) is None


async def test_deleted_session_id_starts_fresh(store):
    """After deletion a session id can be saved again from sequence 0 with empty journals."""
    await populate(store)
    assert await store.delete_sessions(["other-root"]) is True
    fresh = Checkpoint.empty("other-root")
    await store.save(fresh)
    assert await store.load("other-root") == fresh
    events = await store.event_page("other-root", EventPageRequest(limit=10))
    assert (events.latest_sequence, events.events) == (0, [])
    transcript = await store.transcript_page("other-root", TranscriptPageRequest(max_batches=10))
    assert transcript.batches == []
    assert await store.load_state("other-root", "owned") is None
    appended = await store.append_event("other-root", 1, warning("again"))
    assert appended.sequence == 1


async def test_middleware_state_save_load_and_replace(store):
    """save_state stores opaque JSON by (scope, key) and a later save replaces it."""
    assert await store.load_state("scope", "key") is None
    value = {"nested": {"list": [1, 2.5, "three", None, True]}, "unicode": "héllo"}
    await store.save_state("scope", "key", value)
    assert await store.load_state("scope", "key") == value

    await store.save_state("scope", "key", ["replaced"])
    assert await store.load_state("scope", "key") == ["replaced"]

    await store.save_state("scope", "other", 42)
    await store.save_state("other-scope", "key", "text")
    assert await store.load_state("scope", "key") == ["replaced"]
    assert await store.load_state("scope", "other") == 42
    assert await store.load_state("other-scope", "key") == "text"
    assert await store.load_state("other-scope", "other") is None


async def test_middleware_state_needs_no_session(store, database):
    """State may be saved under any scope, whether or not a session of that name exists."""
    await store.save_state("no-such-session", "key", {"a": 1})
    assert await store.load_state("no-such-session", "key") == {"a": 1}
    assert database.count("sessions") == 0


async def test_load_states_reads_one_key_of_many_scopes_at_once(store):
    """load_states gives each scope's value of the key, by scope, leaving out scopes without
    one; a list of scope names beyond its cap, or not a list, is refused."""
    await store.save_state("a", "record", {"n": 1})
    await store.save_state("b", "record", None)
    await store.save_state("b", "other", 2)
    await store.save_state("c", "other", 3)
    found = await store.load_states(["a", "b", "c", "missing"], "record")
    assert found == {"a": {"n": 1}, "b": None}
    assert await store.load_states([], "record") == {}
    assert await store.load_states(("c",), "other") == {"c": 3}
    with pytest.raises(InvalidInput):
        await store.load_states("abc", "record")
    with pytest.raises(InvalidInput):
        await store.load_states([f"s{n}" for n in range(1001)], "record")


async def _all_session_states(store, prefix, key, limit):
    """Every page of load_session_states, the pages' sizes and the states in order."""
    states, sizes, after = [], [], None
    while True:
        page = await store.load_session_states(prefix, key, after=after, limit=limit)
        states += page.states
        sizes.append(len(page.states))
        if page.next_after is None:
            return states, sizes
        assert page.next_after > (after or "")
        after = page.next_after


async def test_load_session_states_pages_the_sessions_of_an_id_prefix_with_one_key(store):
    """Sessions whose id starts with the prefix, in id (code point) order, each with its own
    value of the key; sessions without it, state scopes that are no session, and ids beside
    the prefix are left out; pages of `limit` sessions end with next_after None."""
    ids = ["app/u/1", "app/u/2", "app/u/3", "app/u/\u00e9", "app/u/\U0001f600", "app/v/1", "app/u"]
    for session_id in ids:
        await store.append_context(session_id, [{"role": "user", "content": session_id}])
        if session_id != "app/u/2":
            await store.save_state(session_id, "record", {"id": session_id})
    await store.save_state("app/u/9", "record", {"id": "no session"})
    await store.save_state("app/u/1", "other", 1)
    want = [
        (session_id, {"id": session_id})
        for session_id in ("app/u/1", "app/u/3", "app/u/\u00e9", "app/u/\U0001f600")
    ]
    for limit in (1, 2, 5, 1000):
        states, sizes = await _all_session_states(store, "app/u/", "record", limit)
        assert states == want, limit
        assert all(size <= limit for size in sizes)
    page = await store.load_session_states("app/u/", "record", after="app/u/3", limit=10)
    assert page.states == want[2:]
    assert page.next_after is None
    whole, _ = await _all_session_states(store, "app/", "record", 3)
    assert [session_id for session_id, _ in whole] == sorted(
        [*(session_id for session_id, _ in want), "app/v/1", "app/u"]
    )
    assert (await store.load_session_states("app/u/", "missing-key")).states == []
    assert (await store.load_session_states("zzz", "record")).states == []
    # A deleted session's state goes with it.
    await store.delete_sessions(["app/u/3"])
    states, _ = await _all_session_states(store, "app/u/", "record", 2)
    assert [session_id for session_id, _ in states] == [
        "app/u/1",
        "app/u/\u00e9",
        "app/u/\U0001f600",
    ]


@pytest.mark.parametrize(
    "arguments",
    [
        ("", "record", {}),
        ("a\x00", "record", {}),
        (None, "record", {}),
        ("app/", "rec\x00ord", {}),
        ("app/", 7, {}),
        ("app/", "record", {"after": 3}),
        ("app/", "record", {"after": "x\x00"}),
        ("app/", "record", {"limit": 0}),
        ("app/", "record", {"limit": True}),
        ("app/", "record", {"limit": 10_001}),
        ("app/", "record", {"limit": 1.5}),
    ],
)
async def test_load_session_states_refuses_what_it_cannot_page(store, arguments):
    """An empty or non-text prefix, a key or cursor that is no identifier, and a limit that is
    not an integer from 1 to 10,000 are InvalidInput."""
    prefix, key, options = arguments
    with pytest.raises(InvalidInput):
        await store.load_session_states(prefix, key, **options)
