"""Contract: the runtime face's session graph, reads, catalog, metadata and graph maintenance.

The `lash_core` store contract (seed 004): `load_session(FullGraph | ActivePath)`,
`load_node`, `GraphUnchanged` / `GraphAppend` / `GraphReplaceFull`, `SessionMeta` with its
`SessionRelation`, the resume picker, `tombstone_nodes` + `vacuum`, and the
`UnsupportedRecordSchemaVersion` check of stored heads and manifests. A runtime session is a
catalog session: it is listed, summarised and deleted with the rest.
"""

from __future__ import annotations

import msgspec
import pytest
from runtime_helpers import (
    RUNTIME_TABLES,
    append,
    chain,
    entry,
    make_commit,
    message,
    node,
    part,
    replace,
    runtime,
    seed_session,
    sha256_ref,
    snapshot,
    user,
)

import turnstore
from turnstore import (
    ActivePath,
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    SessionNodeRecord,
    SessionPageRequest,
)
from turnstore.events import (
    TokenUsage,
)
from turnstore.records import (
    AgentFrameRecord,
    AttachmentIntent,
    ForkRelation,
    FullGraph,
    GraphReplaceFull,
    GraphUnchanged,
    ModelSpec,
    PersistedSessionConfig,
    PersistedTurnState,
    RootRelation,
    SessionGraph,
    SessionMeta,
    SessionPickerInfo,
    SubagentRelation,
    VacuumReport,
)

# --- load_session and load_node -------------------------------------------------------------


async def test_full_graph_load_returns_head_config_frames_nodes_checkpoint_and_ledger(store):
    """load_session(FullGraph()) returns everything the commits stored, nodes in insertion order."""
    rt = await runtime(store, "s")
    config = PersistedSessionConfig(
        provider_id="provider-x", model=ModelSpec(name="model-x", parameters={"effort": "high"})
    )
    frames = [
        AgentFrameRecord(frame_id="main", agent_name="main", state={"depth": 0}),
        AgentFrameRecord(frame_id="sub", agent_name="helper", parent_frame_id="main"),
    ]
    # Ids out of alphabetical order: insertion order, not id order, is the graph's order.
    nodes = [node("n3"), node("n1", "n3"), user("n2", "n1", "hello")]
    turn_state = PersistedTurnState(
        turn_index=3,
        token_usage=TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15),
        last_prompt_usage=TokenUsage(input_tokens=4, total_tokens=4),
        protocol_turn_options={"stream": True},
    )
    checkpoint = HydratedSessionCheckpoint(
        turn_state=turn_state,
        tool_state={"files": ["a.py", "b.py"], "generation": 2},
        plugin_snapshot={"plugin": {"enabled": True}},
        plugin_snapshot_revision=4,
        execution_state=b"\x00\x01execution\xff",
    )
    first = await rt.commit_runtime_state(
        make_commit(
            "s",
            None,
            replace(nodes, leaf="n2"),
            config=config,
            agent_frames=frames,
            current_agent_frame_id="sub",
            checkpoint=checkpoint,
            usage_deltas=[entry("t1", 10), entry("t1", 20)],
        )
    )
    second = await rt.commit_runtime_state(
        make_commit(
            "s",
            1,
            append([node("n0", "n2")]),
            config=config,
            agent_frames=frames,
            current_agent_frame_id="sub",
            checkpoint=checkpoint,
            usage_deltas=[entry("t2", 30)],
        )
    )

    read = await rt.load_session(FullGraph())
    assert (first.head_revision, second.head_revision, read.head_revision) == (1, 2, 2)
    assert (read.session_id, read.config, read.agent_frames, read.current_agent_frame_id) == (
        "s",
        config,
        frames,
        "sub",
    )
    assert [n.node_id for n in read.graph.nodes] == ["n3", "n1", "n2", "n0"]
    assert read.graph.nodes == [*nodes, node("n0", "n2")]
    assert read.graph.leaf_node_id == "n0"
    assert read.checkpoint_ref == second.checkpoint_ref
    hydrated = read.checkpoint
    assert hydrated.turn_state == turn_state
    assert hydrated.tool_state == {"files": ["a.py", "b.py"], "generation": 2}
    assert hydrated.plugin_snapshot == {"plugin": {"enabled": True}}
    assert hydrated.plugin_snapshot_revision == 4
    assert hydrated.execution_state == b"\x00\x01execution\xff"
    assert hydrated.execution_state_ref == sha256_ref(b"\x00\x01execution\xff")
    assert (hydrated.tool_state_ref, hydrated.plugin_snapshot_ref) == (
        second.manifest.tool_state_ref,
        second.manifest.plugin_snapshot_ref,
    )
    assert None not in (hydrated.tool_state_ref, hydrated.plugin_snapshot_ref)
    assert read.token_ledger == [entry("t1", 10), entry("t1", 20), entry("t2", 30)]
    assert await rt.load_session() == read


async def test_active_path_reads_one_branch_from_a_leaf_to_the_root(store):
    """ActivePath(leaf) returns only the nodes from that leaf up to the root, root first."""
    rt = await runtime(store, "s")
    nodes = [
        node("root"),
        node("a1", "root"),
        node("b1", "root"),
        node("a2", "a1"),
        node("b2", "b1"),
        node("b3", "b2"),
    ]
    await rt.commit_runtime_state(make_commit("s", None, replace(nodes, leaf="a2")))

    b_path = await rt.load_session(ActivePath(leaf_node_id="b3"))
    a_path = await rt.load_session(ActivePath(leaf_node_id="a2"))
    mid_path = await rt.load_session(ActivePath(leaf_node_id="b1"))
    full = await rt.load_session(FullGraph())
    assert [n.node_id for n in b_path.graph.nodes] == ["root", "b1", "b2", "b3"]
    assert [n.node_id for n in a_path.graph.nodes] == ["root", "a1", "a2"]
    assert [n.node_id for n in mid_path.graph.nodes] == ["root", "b1"]
    assert [n.node_id for n in full.graph.nodes] == ["root", "a1", "b1", "a2", "b2", "b3"]
    assert b_path.graph.nodes[-1] == nodes[-1]


async def test_active_path_without_a_leaf_follows_the_heads_leaf(store):
    """ActivePath() starts at the head's leaf, which moves with every commit."""
    rt = await runtime(store, "s")
    nodes = [node("root"), node("a1", "root"), node("b1", "root"), node("b2", "b1")]
    await rt.commit_runtime_state(make_commit("s", None, replace(nodes, leaf="a1")))
    assert [n.node_id for n in (await rt.load_session(ActivePath())).graph.nodes] == [
        "root",
        "a1",
    ]

    await rt.commit_runtime_state(make_commit("s", 1, GraphUnchanged(leaf_node_id="b2")))
    read = await rt.load_session(ActivePath())
    assert [n.node_id for n in read.graph.nodes] == ["root", "b1", "b2"]
    assert read.graph.leaf_node_id == "b2"


async def test_active_path_of_a_session_without_a_leaf_is_empty(store):
    """ActivePath() of a head with no leaf reads no nodes; FullGraph still reads them all."""
    rt = await runtime(store, "s")
    graph = GraphReplaceFull(graph=SessionGraph(nodes=chain("a", "b"), leaf_node_id=None))
    await rt.commit_runtime_state(make_commit("s", None, graph))
    assert (await rt.load_session(ActivePath())).graph.nodes == []
    assert len((await rt.load_session(FullGraph())).graph.nodes) == 2


async def test_loading_an_unknown_session_returns_none(store):
    """load_session of a session the runtime never committed returns None on every scope."""
    rt = await runtime(store, "missing")
    assert await rt.load_session(FullGraph()) is None
    assert await rt.load_session(ActivePath()) is None
    assert await rt.load_session(ActivePath(leaf_node_id="x")) is None
    assert await rt.load_node("x") is None


async def test_load_node_returns_one_node_of_the_bound_session_or_none(store):
    """load_node returns the stored node, None for an unknown id or another session's node."""
    rt = await runtime(store, "s")
    other = await runtime(store, "other")
    await seed_session(rt, "a", "b")
    await other.commit_runtime_state(make_commit("other", None, replace([node("only-other")])))

    assert await rt.load_node("b") == node("b", "a")
    assert await rt.load_node("a") == node("a")
    assert await rt.load_node("missing") is None
    assert await rt.load_node("only-other") is None
    assert await other.load_node("only-other") == node("only-other")


async def test_a_scope_that_is_not_a_read_scope_is_refused(store):
    """load_session refuses a scope that is neither FullGraph nor ActivePath."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    with pytest.raises(turnstore.InvalidInput):
        await rt.load_session("full")


# --- graph deltas ---------------------------------------------------------------------------


async def test_graph_unchanged_keeps_nodes_and_moves_the_leaf(store):
    """GraphUnchanged keeps every stored node and only moves the leaf (or clears it)."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a", "b", "c")
    await rt.commit_runtime_state(make_commit("s", 1, GraphUnchanged(leaf_node_id="a")))
    read = await rt.load_session(FullGraph())
    assert ([n.node_id for n in read.graph.nodes], read.graph.leaf_node_id) == (
        ["a", "b", "c"],
        "a",
    )

    await rt.commit_runtime_state(make_commit("s", 2, GraphUnchanged(leaf_node_id=None)))
    read = await rt.load_session(FullGraph())
    assert ([n.node_id for n in read.graph.nodes], read.graph.leaf_node_id) == (
        ["a", "b", "c"],
        None,
    )


async def test_graph_append_adds_nodes_after_the_stored_ones(store):
    """GraphAppend adds its nodes after the stored ones, in order, and moves the leaf."""
    rt = await runtime(store, "s")
    await seed_session(rt, "z", "y")
    await rt.commit_runtime_state(make_commit("s", 1, append([node("b", "y"), node("a", "b")])))
    await rt.commit_runtime_state(make_commit("s", 2, append([node("m", "y")], leaf="m")))

    read = await rt.load_session(FullGraph())
    assert [n.node_id for n in read.graph.nodes] == ["z", "y", "b", "a", "m"]
    assert read.graph.leaf_node_id == "m"
    assert await rt.load_node("a") == node("a", "b")


async def test_graph_replace_full_replaces_every_node(store):
    """GraphReplaceFull drops the stored nodes and stores the new graph (ids may be reused)."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a", "b", "c")
    new_nodes = [node("x"), node("b", "x", text="new b")]
    await rt.commit_runtime_state(make_commit("s", 1, replace(new_nodes)))

    read = await rt.load_session(FullGraph())
    assert read.graph.nodes == new_nodes
    assert read.graph.leaf_node_id == "b"
    assert await rt.load_node("a") is None
    assert await rt.load_node("c") is None
    assert (await rt.load_node("b")).payload == message("assistant", part("new b"))


@pytest.mark.parametrize(
    "delta",
    [
        pytest.param(append([node("b", "a")]), id="append-existing-id"),
        pytest.param(append([node("n1", "b"), node("n1", "b")]), id="append-id-twice"),
        pytest.param(append([node("n1", "b")], leaf="nowhere"), id="append-leaf-not-a-node"),
        pytest.param(GraphUnchanged(leaf_node_id="nowhere"), id="unchanged-leaf-not-a-node"),
        pytest.param(replace([node("x")], leaf="a"), id="replace-leaf-not-in-new-graph"),
        pytest.param(append([node(" ", "b")]), id="append-blank-id"),
    ],
)
async def test_an_invalid_graph_delta_is_refused_and_writes_nothing(store, database, delta):
    """A delta that repeats a node id or ends at a leaf that is no node raises InvalidInput."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a", "b")
    before = snapshot(database, "s")
    commit = make_commit("s", 1, delta, usage_deltas=[entry("t", 5)])

    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_runtime_state(commit)
    assert snapshot(database, "s") == before
    read = await rt.load_session(FullGraph())
    assert (read.head_revision, [n.node_id for n in read.graph.nodes]) == (1, ["a", "b"])
    assert read.token_ledger == []


# --- the catalog ----------------------------------------------------------------------------


async def test_runtime_sessions_appear_in_the_catalog(store):
    """A session created through the runtime face is listed and summarised by the catalog."""
    rt = await runtime(store, "runtime-session")
    nodes = [
        node("sys", role="system", text="be brief"),
        user("u1", "sys", "first question"),
        node("a1", "u1"),
        user("u2", "a1", "second question"),
    ]
    await rt.commit_runtime_state(make_commit("runtime-session", None, replace(nodes)))

    page = await store.list_sessions_page(SessionPageRequest(limit=10))
    assert [s.session_id for s in page.sessions] == ["runtime-session"]
    summary = await store.session_summary("runtime-session")
    assert summary == page.sessions[0]
    assert summary.first_user_message == "first question"


async def test_catalog_first_user_message_comes_from_the_first_user_message_committed(store):
    """The catalog's first user message is the first user node ever committed, not a later one."""
    rt = await runtime(store, "s")
    await seed_session(rt, "sys")
    assert (await store.session_summary("s")).first_user_message is None

    await rt.commit_runtime_state(make_commit("s", 1, append([user("u1", "sys", "hi there")])))
    await rt.commit_runtime_state(make_commit("s", 2, append([user("u2", "u1", "later")])))
    assert (await store.session_summary("s")).first_user_message == "hi there"


async def test_delete_sessions_removes_everything_the_runtime_stored(store, database):
    """delete_sessions removes the runtime rows of a session and orphans its attachments."""
    rt = await runtime(store, "doomed")
    keep = await runtime(store, "kept")
    for handle in (rt, keep):
        sid = handle.session_id
        commit = make_commit(
            sid, None, replace([user("u", None, "hello")]), usage_deltas=[entry("t1", 3)]
        )
        await handle.commit_runtime_state(commit.with_turn_commit("t1"))
        await handle.enqueue_queued_work(QueuedWorkBatchDraft(items=["x"]))
        await handle.save_session_meta(SessionMeta(session_id=sid, cwd="/work"))
        for attachment_id in (f"{sid}-committed", f"{sid}-pending"):
            await handle.record_intent(
                AttachmentIntent(
                    attachment_id=attachment_id,
                    session_id=sid,
                    canonical_uri=f"/files/{attachment_id}",
                    intent_at_epoch_ms=1_000,
                )
            )
        await handle.commit_refs([f"{sid}-committed"])
    for table in RUNTIME_TABLES:
        assert database.count(table, "session_id = ?", ("doomed",)) == 1, table

    assert await store.delete_sessions(["doomed"]) is True

    for table in (*RUNTIME_TABLES, "sessions"):
        assert database.count(table, "session_id = ?", ("doomed",)) == 0, table
        assert database.count(table, "session_id = ?", ("kept",)) == 1, table
    assert await rt.load_session() is None
    assert await store.session_summary("doomed") is None
    orphans = await rt.list_uncommitted(2**62)
    assert sorted(e.attachment_id for e in orphans) == ["doomed-committed", "doomed-pending"]
    assert all(e.committed_at_epoch_ms is None for e in orphans)
    assert [e.attachment_id for e in await keep.list_uncommitted(2**62)] == ["kept-pending"]


# --- session meta and the picker --------------------------------------------------------------


@pytest.mark.parametrize(
    ("relation", "parent", "tag"),
    [
        pytest.param(RootRelation(), None, "root", id="root"),
        pytest.param(ForkRelation(parent_session_id="p"), "p", "fork", id="fork"),
        pytest.param(SubagentRelation(parent_session_id="q"), "q", "subagent", id="subagent"),
    ],
)
async def test_session_meta_round_trips_with_its_relation(store, database, relation, parent, tag):
    """save_session_meta then load_session_meta returns the meta; the relation is tagged."""
    rt = await runtime(store, "s")
    assert await rt.load_session_meta() is None
    meta = SessionMeta(
        session_id="s",
        session_name="My session",
        created_at="2024-05-01T10:00:00Z",
        model="model-a",
        cwd="/home/me/project",
        relation=relation,
    )
    await rt.save_session_meta(meta)

    loaded = await rt.load_session_meta()
    assert loaded == meta
    assert loaded.parent_session_id() == parent
    stored = msgspec.json.decode(database.query("SELECT meta_json FROM session_meta")[0][0])
    assert stored["relation"]["type"] == tag


async def test_saving_session_meta_again_replaces_it(store):
    """A second save_session_meta replaces the first."""
    rt = await runtime(store, "s")
    await rt.save_session_meta(SessionMeta(session_id="s", session_name="one", cwd="/a"))
    second = SessionMeta(
        session_id="s", session_name="two", relation=ForkRelation(parent_session_id="p")
    )
    await rt.save_session_meta(second)
    assert await rt.load_session_meta() == second


async def test_picker_info_reads_first_user_message_count_cwd_and_relation(store):
    """picker_info: first user message text from its parts, user message count, meta's cwd."""
    rt = await runtime(store, "s")
    first = SessionNodeRecord(
        node_id="u1",
        parent_node_id="sys",
        payload=message(
            "user", part("Hello, "), part("img-bytes", kind="image"), part("world"), message_id="m"
        ),
    )
    nodes = [node("sys", role="system", text="system prompt"), first, node("a1", "u1")]
    await rt.commit_runtime_state(make_commit("s", None, replace(nodes)))
    await rt.commit_runtime_state(
        make_commit(
            "s",
            1,
            append([user("u2", "a1", "again"), node("a2", "u2"), user("u3", "a2", "and again")]),
        )
    )
    await rt.save_session_meta(
        SessionMeta(session_id="s", cwd="/repo", relation=SubagentRelation(parent_session_id="p"))
    )

    info = await rt.picker_info()
    assert info == SessionPickerInfo(
        session_id="s",
        cwd="/repo",
        relation=SubagentRelation(parent_session_id="p"),
        first_user_message="Hello, world",
        user_message_count=3,
    )
    assert info.parent_session_id() == "p"


async def test_picker_info_of_an_unknown_session_is_none(store):
    """picker_info returns None for a session with neither head nor metadata."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    assert await (await runtime(store, "missing")).picker_info() is None


async def test_picker_info_without_meta_or_messages_has_defaults(store):
    """Without metadata the picker shows no cwd and a root relation; without user messages, ""."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    info = await rt.picker_info()
    assert (info.cwd, info.relation, info.first_user_message, info.user_message_count) == (
        None,
        RootRelation(),
        "",
        0,
    )
    assert info.parent_session_id() is None

    meta_only = await runtime(store, "meta-only")
    await meta_only.save_session_meta(SessionMeta(session_id="meta-only", cwd="/x"))
    info = await meta_only.picker_info()
    assert (info.cwd, info.first_user_message, info.user_message_count) == ("/x", "", 0)


# --- tombstones and vacuum ------------------------------------------------------------------


async def seed_branches(rt):
    """Commit a root `a` with the active branch `b` (the leaf) and the side branch `c`→`d`."""
    nodes = [node("a"), node("b", "a"), node("c", "a"), node("d", "c")]
    await rt.commit_runtime_state(make_commit(rt.session_id, None, replace(nodes, leaf="b")))


async def test_tombstoned_nodes_are_skipped_by_loads(store):
    """Tombstoned nodes are skipped by load_session and load_node before vacuum runs."""
    rt = await runtime(store, "s")
    await seed_branches(rt)
    await rt.tombstone_nodes(["c", "d"])

    read = await rt.load_session(FullGraph())
    assert [n.node_id for n in read.graph.nodes] == ["a", "b"]
    assert await rt.load_node("c") is None
    assert await rt.load_node("d") is None
    assert await rt.load_node("b") == node("b", "a")


async def test_vacuum_physically_removes_tombstoned_rows_of_its_session(store, database):
    """vacuum deletes this session's tombstoned rows and reports how many it removed."""
    rt = await runtime(store, "s")
    other = await runtime(store, "other")
    await seed_branches(rt)
    await seed_branches(other)
    await rt.tombstone_nodes(["c", "d", "not-a-node"])
    await other.tombstone_nodes(["d"])
    assert database.count("graph_nodes", "session_id = ?", ("s",)) == 4

    assert await rt.vacuum() == VacuumReport(removed_node_count=2)
    assert database.count("graph_nodes", "session_id = ?", ("s",)) == 2
    assert database.count("graph_nodes", "session_id = ?", ("other",)) == 4
    assert await rt.vacuum() == VacuumReport(removed_node_count=0)
    assert [n.node_id for n in (await rt.load_session()).graph.nodes] == ["a", "b"]
    assert await other.vacuum() == VacuumReport(removed_node_count=1)


# --- stored record schema versions ------------------------------------------------------------


async def test_a_head_with_an_unsupported_schema_version_is_refused(store, database):
    """load_session refuses a head row whose schema_version this build does not read."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    database.query("UPDATE runtime_heads SET schema_version = 9")

    with pytest.raises(turnstore.errors.UnsupportedRecordSchemaVersion) as caught:
        await rt.load_session(FullGraph())
    assert str(caught.value) == (
        "session head schema_version 9 is not supported by this binary (expected 1)"
    )
    assert (caught.value.record_kind, caught.value.actual, caught.value.expected) == (
        "session head",
        9,
        1,
    )
    with pytest.raises(turnstore.errors.UnsupportedRecordSchemaVersion):
        await rt.load_session(ActivePath())


async def test_a_checkpoint_manifest_with_an_unsupported_schema_version_is_refused(store, database):
    """load_session refuses a stored checkpoint manifest of another schema_version."""
    rt = await runtime(store, "s")
    result = await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), checkpoint=HydratedSessionCheckpoint())
    )
    database.query(
        "UPDATE blobs SET data = ? WHERE blob_ref = ?",
        (b'{"schema_version":7}', result.checkpoint_ref),
    )

    with pytest.raises(turnstore.errors.UnsupportedRecordSchemaVersion) as caught:
        await rt.load_session(FullGraph())
    assert str(caught.value) == (
        "session checkpoint schema_version 7 is not supported by this binary (expected 1)"
    )


async def test_durability_tier_is_inline(store):
    """The store's commits are durable when they return: durability_tier() is "inline"."""
    rt = await runtime(store, "s")
    assert rt.durability_tier() == "inline"
