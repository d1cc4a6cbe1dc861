"""Contract: every live node of a session graph keeps its path to the root.

A node's parent comes before it: an earlier node of the same commit or, for an append, a
live node already stored. A node naming any other parent is refused with `InvalidInput`,
so an active path never silently ends at a missing node. `tombstone_nodes` keeps the same
invariant: it refuses the head's leaf and any node with a live child not tombstoned with it.
"""

from __future__ import annotations

import pytest
from runtime_helpers import (
    append,
    make_commit,
    node,
    replace,
    runtime,
    seed_session,
    snapshot,
)

from turnstore import ActivePath, InvalidInput
from turnstore.records import GraphUnchanged

# --- parents in commits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        pytest.param(
            append([node("n", "nowhere")]),
            "graph node `n` names parent `nowhere`, which is not a live node of the session"
            " or an earlier node of this commit",
            id="append-missing-parent",
        ),
        pytest.param(
            append([node("n", "m"), node("m", "b")]),
            "graph node `n` names parent `m`, which is not a live node of the session"
            " or an earlier node of this commit",
            id="append-parent-later-in-commit",
        ),
        pytest.param(
            append([node("n", "n")]),
            "graph node `n` names parent `n`, which is not a live node of the session"
            " or an earlier node of this commit",
            id="append-own-parent",
        ),
        pytest.param(
            replace([node("x"), node("y", "a")]),
            "graph node `y` names parent `a`, which is not an earlier node of the new graph",
            id="replace-parent-only-in-old-graph",
        ),
        pytest.param(
            replace([node("y", "x"), node("x")]),
            "graph node `y` names parent `x`, which is not an earlier node of the new graph",
            id="replace-parent-later",
        ),
    ],
)
async def test_a_node_whose_parent_does_not_come_before_it_is_refused(
    store, database, delta, message
):
    """A parent missing, later in the commit or only in a replaced graph is refused; no write."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a", "b")
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput) as caught:
        await rt.commit_runtime_state(make_commit("s", 1, delta))
    assert str(caught.value) == message
    assert snapshot(database, "s") == before


async def test_a_node_under_a_tombstoned_parent_is_refused(store, database):
    """A tombstoned node is no parent: appending under it would hide the new node's path."""
    rt = await runtime(store, "s")
    await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a"), node("b", "a"), node("c", "a")], leaf="b"))
    )
    await rt.tombstone_nodes(["c"])
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput, match="names parent `c`"):
        await rt.commit_runtime_state(make_commit("s", 1, append([node("d", "c")])))
    assert snapshot(database, "s") == before


async def test_parents_stored_or_earlier_in_the_commit_are_accepted(store):
    """An append may hang nodes under stored live nodes and under its own earlier nodes."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a", "b")
    nodes = [node("c", "b"), node("d", "c"), node("e", "a"), node("root2")]
    await rt.commit_runtime_state(make_commit("s", 1, append(nodes, leaf="d")))
    read = await rt.load_session(ActivePath())
    assert [n.node_id for n in read.graph.nodes] == ["a", "b", "c", "d"]
    path = await rt.load_session(ActivePath(leaf_node_id="e"))
    assert [n.node_id for n in path.graph.nodes] == ["a", "e"]


# --- tombstones -------------------------------------------------------------------------------


async def branched(rt) -> None:
    """Root `a`, the active branch `a`→`b`→`c` (leaf `c`), the side branch `a`→`x`→`y`."""
    nodes = [node("a"), node("b", "a"), node("c", "b"), node("x", "a"), node("y", "x")]
    await rt.commit_runtime_state(make_commit(rt.session_id, None, replace(nodes, leaf="c")))


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        pytest.param(
            ["c"],
            "graph node `c` is the session's leaf and cannot be tombstoned;"
            " commit another leaf first",
            id="leaf",
        ),
        pytest.param(
            ["y", "b", "c"],
            "graph node `c` is the session's leaf and cannot be tombstoned;"
            " commit another leaf first",
            id="leaf-with-others",
        ),
        pytest.param(
            ["b"],
            "graph node `b` has the live child `c`; tombstone a node only with all of its"
            " descendants",
            id="ancestor-of-the-leaf",
        ),
        pytest.param(
            ["x"],
            "graph node `x` has the live child `y`; tombstone a node only with all of its"
            " descendants",
            id="side-branch-without-its-child",
        ),
    ],
)
async def test_tombstoning_a_node_a_live_path_needs_is_refused(store, database, ids, message):
    """The head's leaf, and a node with a live child left out, cannot be tombstoned."""
    rt = await runtime(store, "s")
    await branched(rt)
    before = snapshot(database, "s")
    with pytest.raises(InvalidInput) as caught:
        await rt.tombstone_nodes(ids)
    assert str(caught.value) == message
    assert snapshot(database, "s") == before
    read = await rt.load_session(ActivePath())
    assert ([n.node_id for n in read.graph.nodes], read.graph.leaf_node_id) == (
        ["a", "b", "c"],
        "c",
    )


async def test_a_whole_branch_can_be_tombstoned(store):
    """A side branch with all its descendants is tombstoned; the active path is untouched."""
    rt = await runtime(store, "s")
    await branched(rt)
    await rt.tombstone_nodes(["x", "y"])
    full = await rt.load_session()
    assert [n.node_id for n in full.graph.nodes] == ["a", "b", "c"]


async def test_a_former_leaf_can_be_tombstoned_once_the_leaf_moved(store):
    """Moving the leaf first (a commit) lets the old active branch be tombstoned."""
    rt = await runtime(store, "s")
    await branched(rt)
    await rt.commit_runtime_state(make_commit("s", 1, GraphUnchanged(leaf_node_id="y")))
    await rt.tombstone_nodes(["b", "c"])
    read = await rt.load_session(ActivePath())
    assert [n.node_id for n in read.graph.nodes] == ["a", "x", "y"]
    assert await rt.load_node("c") is None
