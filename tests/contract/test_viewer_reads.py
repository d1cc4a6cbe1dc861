"""Contract: the reads a session viewer needs — catalog search by id prefix, one owner's recent
executions, and the fork tree holding a session.
"""

from __future__ import annotations

from typing import Any

import pytest
from store_dumps import dump_database

import turnstore
from turnstore import ActiveExecution, Checkpoint, SessionContext, SessionPageRequest
from turnstore.records import ForkTree, SessionCursor
from turnstore.scripts import sessions as sql_sessions

# --- helpers ----------------------------------------------------------------------------------


async def save(store: Any, session_id: str, owner_id: str | None = None, sequence: int = 0) -> None:
    """Save an empty session at `sequence`, owned by `owner_id`."""
    checkpoint = Checkpoint(
        session_id=session_id, session_context=SessionContext(owner_id=owner_id), sequence=sequence
    )
    await store.save(checkpoint)


async def listed(
    store: Any,
    id_prefix: str | None,
    owner_id: str | None = None,
    limit: int = 100,
) -> list[str]:
    """Every session id of the catalog's pages for a prefix and owner, following the cursor."""
    ids: list[str] = []
    cursor: SessionCursor | None = None
    while True:
        page = await store.list_sessions_page(
            SessionPageRequest(limit=limit, owner_id=owner_id, cursor=cursor, id_prefix=id_prefix)
        )
        assert len(page.sessions) <= limit
        ids.extend(session.session_id for session in page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            return ids


async def finish_turns(
    store: Any, session_id: str, owner_id: str | None, starts: list[int]
) -> None:
    """Save one finished turn per start time, each in its own save."""
    checkpoint = Checkpoint(
        session_id=session_id, session_context=SessionContext(owner_id=owner_id)
    )
    for index, started_at_ms in enumerate(starts, start=1):
        checkpoint.sequence = index
        checkpoint.active_execution = ActiveExecution(
            submission_id=f"submission-{index}",
            turn_id=f"turn-{index}",
            started_at_ms=started_at_ms,
        )
        record = checkpoint.finish_execution("completed", started_at_ms + 10)
        await store.save(checkpoint, execution=record)


def tree_ids(tree: ForkTree | None) -> list[str]:
    """The session ids of a fork tree, in its order."""
    assert tree is not None
    return [session.session_id for session in tree.sessions]


# --- catalog search by id prefix --------------------------------------------------------------


async def test_an_id_prefix_lists_only_the_sessions_whose_id_starts_with_it(store):
    """The prefix filter keeps the catalog's order and matches ids that start with it."""
    for session_id in ("chat-1", "chat-2", "chat-10", "chatter", "cha", "other", "xchat-1"):
        await save(store, session_id)
    everything = await listed(store, None)
    for prefix in ("chat-", "chat", "cha", "chat-1", "o", "x", "zzz"):
        expected = [session_id for session_id in everything if session_id.startswith(prefix)]
        assert await listed(store, prefix) == expected, prefix
    assert sorted(await listed(store, "chat-")) == ["chat-1", "chat-10", "chat-2"]
    assert await listed(store, "zzz") == []


async def test_an_empty_id_prefix_filters_nothing(store):
    """Every id starts with the empty prefix: the page is the unfiltered catalog's."""
    for session_id in ("a", "b", "c"):
        await save(store, session_id)
    assert await listed(store, "") == await listed(store, None)
    assert len(await listed(store, "")) == 3


async def test_an_id_prefix_is_literal_text_without_wildcards(store):
    """`%`, `_` and a backslash in a prefix match only themselves."""
    for session_id in ("a%b", "a%", "a_b", "axb", "ab", "a\\b", "a\\\\b", "%x", "_x"):
        await save(store, session_id)
    assert sorted(await listed(store, "a%")) == ["a%", "a%b"]
    assert await listed(store, "a_") == ["a_b"]
    assert sorted(await listed(store, "a\\")) == ["a\\\\b", "a\\b"]
    assert await listed(store, "a\\\\") == ["a\\\\b"]
    assert await listed(store, "%") == ["%x"]
    assert await listed(store, "_") == ["_x"]
    assert sorted(await listed(store, "a")) == sorted(
        ["a%b", "a%", "a_b", "axb", "ab", "a\\b", "a\\\\b"]
    )


async def test_an_id_prefix_is_case_sensitive(store):
    """An id prefix matches exactly those characters: case matters, accents too."""
    for session_id in ("Chat-1", "chat-2", "CHAT-3", "é-1", "e-2", "É-3"):
        await save(store, session_id)
    assert await listed(store, "Chat") == ["Chat-1"]
    assert await listed(store, "chat") == ["chat-2"]
    assert await listed(store, "CHAT") == ["CHAT-3"]
    assert await listed(store, "é") == ["é-1"]
    assert await listed(store, "e") == ["e-2"]


async def test_an_id_prefix_ends_anywhere_in_the_code_points(store):
    """Prefixes of non-ASCII ids, up to the greatest code point, match by whole characters."""
    ids = ["\U0010ffff", "\U0010ffff\U0010ffffz", "\U0010fffe-a", "\uffff-b", "\ue000", "\ud7ff"]
    for session_id in ids:
        await save(store, session_id)
    assert sorted(await listed(store, "\U0010ffff")) == ["\U0010ffff", "\U0010ffff\U0010ffffz"]
    assert await listed(store, "\U0010ffff\U0010ffff") == ["\U0010ffff\U0010ffffz"]
    assert await listed(store, "\U0010fffe") == ["\U0010fffe-a"]
    assert await listed(store, "\uffff") == ["\uffff-b"]
    assert await listed(store, "\ud7ff") == ["\ud7ff"]
    assert await listed(store, "\ue000") == ["\ue000"]


async def test_an_id_prefix_combines_with_the_owner_filter(store):
    """With an owner and a prefix, only that owner's sessions with that prefix are listed."""
    for session_id, owner in [
        ("chat-a1", "alice"),
        ("chat-a2", "alice"),
        ("note-a3", "alice"),
        ("chat-b1", "bob"),
        ("chat-n1", None),
    ]:
        await save(store, session_id, owner)
    assert sorted(await listed(store, "chat-", "alice")) == ["chat-a1", "chat-a2"]
    assert await listed(store, "chat-", "bob") == ["chat-b1"]
    assert await listed(store, "note", "bob") == []
    assert await listed(store, "chat-", "carol") == []


@pytest.mark.parametrize("owner_id", [None, "alice"])
@pytest.mark.parametrize("plan", ["narrow", "walked"])
async def test_an_id_prefix_pages_with_the_cursor_in_catalog_order(
    store, database, monkeypatch, owner_id, plan
):
    """Pages of any size, cursor to cursor, give exactly the filtered catalog in its order.

    Both plans: a prefix's ids read whole and sorted, and the catalog's order walked.
    """
    if plan == "walked":  # every prefix holding an id is then too wide to read whole
        monkeypatch.setattr(sql_sessions, "NARROW_PREFIX", 0)
    owners = ["alice", "bob", None]
    for index in range(30):
        prefix = ("run-", "rung-", "walk-")[index % 3]
        await save(store, f"{prefix}{index:02d}", owners[index % 4 % 3], sequence=index % 5)
    # Spread the update times, with ties, so the order uses every key of the cursor.
    for index in range(30):
        for prefix in ("run-", "rung-", "walk-"):
            database.query(
                "UPDATE sessions SET updated_at = ? WHERE session_id = ?",
                (1_000 + (index * 7) % 4, f"{prefix}{index:02d}"),
            )
    everything = await listed(store, None, owner_id)
    for prefix in ("run", "run-", "rung-", "walk-", "r"):
        expected = [session_id for session_id in everything if session_id.startswith(prefix)]
        assert expected, prefix
        for limit in (1, 2, 3, 7, 100):
            assert await listed(store, prefix, owner_id, limit) == expected, (prefix, limit)


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("x\x00", "id_prefix cannot contain NUL"),
        ("\x00", "id_prefix cannot contain NUL"),
        ("x" * 1025, "id_prefix is too long"),
        ("é" * 513, "id_prefix is too long"),
        ("a\ud800", "id_prefix is not UTF-8 text"),
        (5, "id_prefix must be a string"),
        (b"chat", "id_prefix must be a string"),
    ],
)
async def test_a_bad_id_prefix_is_refused_and_changes_nothing(store, database, prefix, message):
    """A prefix no session id could start with the way it is given is refused with a type."""
    await save(store, "chat-1")
    before = dump_database(database)
    with pytest.raises(turnstore.InvalidInput) as caught:
        await store.list_sessions_page(SessionPageRequest(limit=10, id_prefix=prefix))
    assert str(caught.value) == message
    assert dump_database(database) == before


async def test_the_longest_id_prefix_is_taken(store):
    """A prefix as long as the longest session id is a valid filter."""
    longest = "x" * 1024
    await save(store, longest)
    assert await listed(store, longest) == [longest]
    assert await listed(store, "x" * 1023 + "y") == []


# --- recent executions of one owner -----------------------------------------------------------


async def test_recent_executions_of_an_owner_leave_out_the_other_owners(store):
    """With an owner, only finished turns of that owner's sessions, newest start first."""
    await finish_turns(store, "alice-1", "alice", [10, 40, 70])
    await finish_turns(store, "alice-2", "alice", [20, 50])
    await finish_turns(store, "bob-1", "bob", [30, 60, 80])
    await finish_turns(store, "nobody-1", None, [90, 5])
    everything = await store.recent_executions(100)
    assert len(everything) == 10
    alice = await store.recent_executions(100, owner_id="alice")
    assert alice == [r for r in everything if r.session_id.startswith("alice")]
    assert [r.started_at_ms for r in alice] == [70, 50, 40, 20, 10]
    bob = await store.recent_executions(100, owner_id="bob")
    assert [(r.session_id, r.started_at_ms) for r in bob] == [
        ("bob-1", 80),
        ("bob-1", 60),
        ("bob-1", 30),
    ]
    assert await store.recent_executions(100, owner_id="carol") == []
    assert await store.recent_executions(100, owner_id=None) == everything


async def test_recent_executions_of_an_owner_keep_the_limit(store):
    """The limit counts the owner's executions only, the newest ones."""
    await finish_turns(store, "alice-1", "alice", [1, 2, 3, 4])
    await finish_turns(store, "bob-1", "bob", [5, 6, 7, 8])
    newest = await store.recent_executions(2, owner_id="alice")
    assert [(r.session_id, r.started_at_ms) for r in newest] == [("alice-1", 4), ("alice-1", 3)]
    assert len(await store.recent_executions(1, owner_id="alice")) == 1


async def test_recent_executions_ties_keep_the_global_order(store):
    """Same start times order as across all sessions: session id, then sequence, descending."""
    await finish_turns(store, "a", "alice", [5, 5])
    await finish_turns(store, "b", "alice", [5])
    await finish_turns(store, "c", "bob", [5])
    everything = await store.recent_executions(10)
    alice = await store.recent_executions(10, owner_id="alice")
    assert alice == [r for r in everything if r.session_id in ("a", "b")]
    assert [(r.session_id, r.turn_id) for r in alice] == [
        ("b", "turn-1"),
        ("a", "turn-2"),
        ("a", "turn-1"),
    ]


@pytest.mark.parametrize("owner_id", ["x\x00", 5, b"alice", "\ud800"])
async def test_recent_executions_refuse_a_bad_owner(store, owner_id):
    """An owner that is not identifier text is refused with a typed error."""
    with pytest.raises(turnstore.InvalidInput):
        await store.recent_executions(10, owner_id=owner_id)


# --- fork trees -------------------------------------------------------------------------------


async def make_tree(store: Any, database: Any) -> None:
    """root (sequence 5) with forks at 3, 1, 1 and 5; a fork of a fork; a fork of that.

    root
    ├── c-late (at 5)     └── f-late-1 (at 0)
    ├── a-mid (at 3)      ├── d-deep (at 2) ── e-deeper (at 0)
    ├── z-early (at 1)
    └── b-early (at 1)
    """
    await save(store, "root", sequence=5)
    await store.fork("root", 5, Checkpoint.empty("c-late"))
    await store.fork("root", 3, Checkpoint.empty("a-mid"))
    await save(store, "a-mid", sequence=2)
    await store.fork("root", 1, Checkpoint.empty("z-early"))
    await store.fork("root", 1, Checkpoint.empty("b-early"))
    await store.fork("c-late", 0, Checkpoint.empty("f-late-1"))
    await store.fork("a-mid", 2, Checkpoint.empty("d-deep"))
    await store.fork("d-deep", 0, Checkpoint.empty("e-deeper"))
    # One creation time for all, so that the fork point and the id decide the order.
    database.query("UPDATE sessions SET created_at = 100")


BREADTH_FIRST = [
    "root",
    "b-early",
    "z-early",
    "a-mid",
    "c-late",
    "d-deep",
    "f-late-1",
    "e-deeper",
]
"""`make_tree`'s sessions root first, then level by level; siblings by their fork point."""


async def test_a_fork_tree_lists_the_root_then_its_forks_breadth_first(store, database):
    """Root first, then breadth-first; siblings by parent sequence, then creation, then id."""
    await make_tree(store, database)
    await save(store, "unrelated")
    tree = await store.fork_tree("root")
    assert tree is not None
    assert (tree.root_session_id, tree.truncated) == ("root", False)
    assert tree_ids(tree) == BREADTH_FIRST
    assert tree.sessions[0].parent_session_id is None
    for session in tree.sessions:
        assert session == await store.session_summary(session.session_id)


async def test_a_fork_tree_is_found_from_any_of_its_sessions(store, database):
    """From a leaf or an inner fork, the tree is the same: the one its root heads."""
    await make_tree(store, database)
    expected = await store.fork_tree("root")
    for session_id in ("e-deeper", "d-deep", "f-late-1", "b-early"):
        assert await store.fork_tree(session_id) == expected


async def test_siblings_forked_at_one_sequence_are_ordered_by_creation_then_id(store, database):
    """Creation time breaks ties of the fork point, and the id ties of creation time."""
    await save(store, "root", sequence=1)
    for session_id in ("s-b", "s-a", "s-c"):
        await store.fork("root", 1, Checkpoint.empty(session_id))
    database.query("UPDATE sessions SET created_at = 5 WHERE session_id = ?", ("s-c",))
    database.query("UPDATE sessions SET created_at = 9 WHERE session_id IN (?, ?)", ("s-a", "s-b"))
    assert tree_ids(await store.fork_tree("s-a")) == ["root", "s-c", "s-a", "s-b"]


async def test_a_session_without_forks_is_a_tree_of_one(store):
    """A session with no parent and no forks is its own one-session tree."""
    await save(store, "alone", sequence=2)
    tree = await store.fork_tree("alone")
    assert tree == ForkTree(
        root_session_id="alone",
        sessions=[await store.session_summary("alone")],
        truncated=False,
    )


async def test_a_fork_tree_is_cut_at_the_limit(store, database):
    """At most `limit` sessions, the first ones of the order; `truncated` says more exist."""
    await make_tree(store, database)
    for limit in range(1, len(BREADTH_FIRST) + 2):
        tree = await store.fork_tree("e-deeper", limit=limit)
        assert tree is not None
        assert tree_ids(tree) == BREADTH_FIRST[:limit]
        assert tree.truncated == (limit < len(BREADTH_FIRST))
        assert tree.root_session_id == "root"


async def test_an_unknown_session_has_no_fork_tree(store, database):
    """A session that does not exist has no tree: None, not an empty one."""
    await make_tree(store, database)
    assert await store.fork_tree("absent") is None


async def test_a_deleted_fork_leaves_the_tree(store, database):
    """Deleting a fork removes it and its own forks from the tree; the rest stays in order."""
    await make_tree(store, database)
    assert await store.delete_sessions(["a-mid"])
    assert tree_ids(await store.fork_tree("root")) == [
        "root",
        "b-early",
        "z-early",
        "c-late",
        "f-late-1",
    ]
    assert await store.fork_tree("d-deep") is None
    assert await store.delete_sessions(["root"])
    assert await store.fork_tree("c-late") is None


@pytest.mark.parametrize(
    ("session_id", "limit"),
    [
        ("", 10),
        (" ", 10),
        ("x\x00", 10),
        ("x" * 1025, 10),
        (5, 10),
        ("root", 0),
        ("root", -1),
        ("root", 10_001),
        ("root", True),
        ("root", 1.5),
        ("root", "10"),
    ],
)
async def test_a_fork_tree_read_refuses_bad_input(store, session_id, limit):
    """A bad session id or a limit outside 1..10000 is refused with a typed error."""
    await save(store, "root")
    with pytest.raises(turnstore.InvalidInput):
        await store.fork_tree(session_id, limit=limit)


async def test_the_largest_fork_tree_limit_is_taken(store):
    """The cap itself is a valid limit."""
    await save(store, "root")
    assert tree_ids(await store.fork_tree("root", limit=10_000)) == ["root"]
