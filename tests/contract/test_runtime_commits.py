"""Contract: runtime commits, their head-revision CAS, turn-commit idempotency and binding.

The `lash_core` store contract (seed 004): `commit_runtime_state` is one atomic transaction
(head CAS, graph, blobs, ledger, queued-work completions, attachments, turn stamp);
`RuntimeCommit::turn_commit_hash` hashes the commit's meaning with
`scrub_turn_commit_hash_value`; a handle is bound to one session. Messages are the seed's
`StoreError` texts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest
from runtime_helpers import (
    LONG_LEASE_MS,
    RUNTIME_TABLES,
    append,
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
    HydratedSessionCheckpoint,
    QueuedWorkBatchDraft,
    RuntimeCommit,
    SessionNodeRecord,
)
from turnstore.records import (
    AgentFrameRecord,
    AttachmentIntent,
    GraphUnchanged,
    PersistedTurnState,
    QueuedWorkClaim,
    QueuedWorkCompletion,
    RuntimeTurnCommitStamp,
    SessionCheckpoint,
    SessionMeta,
)

BINDING_MESSAGE = "store is already bound to session `A` and cannot be reused for `B`"


# --- binding ----------------------------------------------------------------------------------


def _claim_of_b() -> QueuedWorkClaim:
    return QueuedWorkClaim(
        session_id="B",
        claim_id="c",
        owner_id="w",
        boundary="turn",
        batches=[],
        lease_expires_at_ms=1,
    )


def _commit_stamped_for_b() -> RuntimeCommit:
    """A commit of `A` whose turn stamp names `B` (with the right hash)."""
    commit = make_commit("A", None, replace([node("n")]))
    stamp = RuntimeTurnCommitStamp(
        session_id="B", turn_id="t", turn_commit_hash=commit.turn_commit_hash()
    )
    return msgspec.structs.replace(commit, turn_commit=stamp)


# The records that name their session (stored or hashed whole) are what can name another one;
# calls that only need the session take none, since the handle knows it.
BINDING_CALLS: dict[str, Any] = {
    "commit": lambda rt: rt.commit_runtime_state(make_commit("B", None, replace([node("n")]))),
    "commit-stamp": lambda rt: rt.commit_runtime_state(_commit_stamped_for_b()),
    "renew": lambda rt: rt.renew_queued_work_claim(_claim_of_b(), LONG_LEASE_MS),
    "abandon": lambda rt: rt.abandon_queued_work_claim(_claim_of_b()),
    "record-intent": lambda rt: rt.record_intent(
        AttachmentIntent(
            attachment_id="att", session_id="B", canonical_uri="/f/att", intent_at_epoch_ms=1
        )
    ),
    "save-meta": lambda rt: rt.save_session_meta(SessionMeta(session_id="B", cwd="/b")),
}


@pytest.mark.parametrize("call", list(BINDING_CALLS.values()), ids=list(BINDING_CALLS))
async def test_a_handle_refuses_calls_naming_another_session(store, database, call):
    """A handle bound to `A` raises SessionBindingMismatch for a call naming `B`; no write."""
    rt = await runtime(store, "A")
    with pytest.raises(turnstore.errors.SessionBindingMismatch) as caught:
        await call(rt)
    assert str(caught.value) == BINDING_MESSAGE
    assert (caught.value.bound_session_id, caught.value.attempted_session_id) == ("A", "B")
    for table in ("sessions", "blobs", "attachment_manifest", *RUNTIME_TABLES):
        assert database.count(table) == 0, table
    assert await (await runtime(store, "B")).load_session() is None


async def test_a_refused_binding_leaves_the_bound_session_unchanged(store, database):
    """A mismatched call on a handle with stored state writes nothing to either session."""
    rt = await runtime(store, "A")
    await seed_session(rt, "a")
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=[1]))
    before = snapshot(database, "A")
    for call in BINDING_CALLS.values():
        with pytest.raises(turnstore.errors.SessionBindingMismatch):
            await call(rt)
    assert snapshot(database, "A") == before
    assert database.count("sessions", "session_id = ?", ("B",)) == 0


# --- head-revision CAS ------------------------------------------------------------------------


async def test_head_revisions_count_commits_from_one(store):
    """A new session is committed with expected None; each commit then expects the last revision."""
    rt = await runtime(store, "s")
    results = [await rt.commit_runtime_state(make_commit("s", None, replace([node("a")])))]
    for expected in (1, 2):
        results.append(await rt.commit_runtime_state(make_commit("s", expected)))
    assert [r.head_revision for r in results] == [1, 2, 3]
    assert (await rt.load_session()).head_revision == 3


@pytest.mark.parametrize(
    ("stored_commits", "expected", "message_text", "actual"),
    [
        pytest.param(0, 1, "expected Some(1), actual 0", 0, id="new-session-expects-some"),
        pytest.param(1, None, "expected None, actual 1", 1, id="existing-session-expects-none"),
        pytest.param(2, 1, "expected Some(1), actual 2", 2, id="stale-revision"),
        pytest.param(1, 2, "expected Some(2), actual 1", 1, id="future-revision"),
    ],
)
async def test_a_stale_expected_head_revision_is_refused_and_writes_nothing(
    store, database, stored_commits, expected, message_text, actual
):
    """A commit whose expected head revision is not the stored one raises HeadRevisionConflict."""
    rt = await runtime(store, "s")
    for revision in range(stored_commits):
        graph = replace([node("a")]) if revision == 0 else GraphUnchanged(leaf_node_id="a")
        await rt.commit_runtime_state(make_commit("s", revision or None, graph))
    await rt.record_intent(
        AttachmentIntent(
            attachment_id="att", session_id="s", canonical_uri="/f/att", intent_at_epoch_ms=1
        )
    )
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=[1]))
    claim = await rt.claim_ready_queued_work("worker", "turn", LONG_LEASE_MS, 1)
    before = snapshot(database, "s")
    commit = make_commit(
        "s",
        expected,
        append([node("new", "a" if stored_commits else None)]),
        usage_deltas=[entry("t", 7)],
        checkpoint=HydratedSessionCheckpoint(tool_state={"new": True}),
    )
    commit = commit.completing_queue_claims(claim.completion()).with_committed_attachments(["att"])

    with pytest.raises(turnstore.HeadRevisionConflict) as caught:
        await rt.commit_runtime_state(commit)
    assert str(caught.value) == f"store head revision conflict: {message_text}"
    assert (caught.value.expected, caught.value.actual) == (expected, actual)
    assert snapshot(database, "s") == before


async def test_two_writers_from_one_revision_only_one_wins(store):
    """Two handles committing from the same revision: the second gets HeadRevisionConflict."""
    first = await runtime(store, "s")
    second = await runtime(store, "s")
    await seed_session(first, "a")
    await first.commit_runtime_state(make_commit("s", 1, append([node("x", "a")])))
    with pytest.raises(turnstore.HeadRevisionConflict):
        await second.commit_runtime_state(make_commit("s", 1, append([node("y", "a")])))
    read = await second.load_session()
    assert ([n.node_id for n in read.graph.nodes], read.head_revision) == (["a", "x"], 2)


# --- what one commit stores -----------------------------------------------------------------


async def test_the_checkpoint_ref_is_the_content_address_of_the_manifest(store, database):
    """The result's checkpoint_ref addresses the stored manifest; every blob hashes to its ref."""
    rt = await runtime(store, "s")
    checkpoint = HydratedSessionCheckpoint(
        turn_state=PersistedTurnState(turn_index=2),
        tool_state={"tool": 1},
        plugin_snapshot=[1, 2, 3],
        plugin_snapshot_revision=9,
        execution_state=b"exec",
    )
    result = await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), checkpoint=checkpoint)
    )

    manifest = result.manifest
    assert (manifest.turn_state, manifest.plugin_snapshot_revision) == (
        PersistedTurnState(turn_index=2),
        9,
    )
    assert manifest.execution_state_ref == sha256_ref(b"exec")
    rows = dict(database.query("SELECT blob_ref, data FROM blobs"))
    assert set(rows) == {
        result.checkpoint_ref,
        manifest.tool_state_ref,
        manifest.plugin_snapshot_ref,
        manifest.execution_state_ref,
    }
    for ref, data in rows.items():
        assert sha256_ref(bytes(data)) == ref
    assert msgspec.json.decode(bytes(rows[result.checkpoint_ref]), type=SessionCheckpoint) == (
        manifest
    )
    assert msgspec.json.decode(bytes(rows[manifest.tool_state_ref])) == {"tool": 1}
    assert result.checkpoint_ref == sha256_ref(manifest.to_json())


async def test_equal_checkpoint_content_gives_equal_refs(store):
    """Two commits with the same checkpoint content get the same refs; other content, others."""
    checkpoint = HydratedSessionCheckpoint(
        turn_state=PersistedTurnState(turn_index=1), tool_state={"k": "v"}
    )
    results = []
    for sid in ("s1", "s2"):
        rt = await runtime(store, sid)
        results.append(
            await rt.commit_runtime_state(
                make_commit(sid, None, replace([node(f"{sid}-a")]), checkpoint=checkpoint)
            )
        )
    rt = await runtime(store, "s3")
    other = await rt.commit_runtime_state(
        make_commit(
            "s3",
            None,
            replace([node("a")]),
            checkpoint=msgspec.structs.replace(checkpoint, turn_state=PersistedTurnState()),
        )
    )
    assert results[0].checkpoint_ref == results[1].checkpoint_ref
    assert results[0].manifest == results[1].manifest
    assert other.checkpoint_ref != results[0].checkpoint_ref
    assert other.manifest.tool_state_ref == results[0].manifest.tool_state_ref


async def test_a_checkpoint_part_given_by_ref_keeps_the_stored_blob(store):
    """A checkpoint part given only by its ref reuses the stored blob; loads hydrate it."""
    rt = await runtime(store, "s")
    first = await rt.commit_runtime_state(
        make_commit(
            "s",
            None,
            replace([node("a")]),
            checkpoint=HydratedSessionCheckpoint(tool_state={"big": "state"}),
        )
    )
    ref = first.manifest.tool_state_ref
    second = await rt.commit_runtime_state(
        make_commit("s", 1, checkpoint=HydratedSessionCheckpoint(tool_state_ref=ref))
    )
    assert second.manifest.tool_state_ref == ref
    hydrated = (await rt.load_session()).checkpoint
    assert (hydrated.tool_state_ref, hydrated.tool_state) == (ref, {"big": "state"})


async def test_a_checkpoint_ref_to_a_missing_blob_is_refused(store, database):
    """A checkpoint naming a blob the store does not hold raises InvalidInput; nothing written."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    missing = sha256_ref(b"never stored")
    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_runtime_state(
            make_commit("s", 1, checkpoint=HydratedSessionCheckpoint(execution_state_ref=missing))
        )
    assert snapshot(database, "s") == before


async def test_usage_deltas_are_appended_to_the_ledger_in_order(store):
    """Each commit appends its usage deltas after the ledger's entries; none adds nothing."""
    rt = await runtime(store, "s")
    await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), usage_deltas=[entry("t1", 1), entry("t1", 2)])
    )
    await rt.commit_runtime_state(make_commit("s", 1))
    await rt.commit_runtime_state(make_commit("s", 2, usage_deltas=[entry("t2", 3)]))
    other = await runtime(store, "other")
    await other.commit_runtime_state(
        make_commit("other", None, replace([node("a")]), usage_deltas=[entry("x", 99)])
    )
    assert (await rt.load_session()).token_ledger == [
        entry("t1", 1),
        entry("t1", 2),
        entry("t2", 3),
    ]


async def test_a_commit_completes_queue_claims_and_attachments_with_the_head(store, database):
    """One commit moves the head, deletes its claimed batches and stamps its attachments."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    for batch_id in ("b1", "b2", "b3"):
        await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id=batch_id, items=[batch_id]))
    claim = await rt.claim_ready_queued_work("worker", "turn", LONG_LEASE_MS, 2)
    for attachment_id in ("att-1", "att-2"):
        await rt.record_intent(
            AttachmentIntent(
                attachment_id=attachment_id,
                session_id="s",
                canonical_uri=f"/f/{attachment_id}",
                intent_at_epoch_ms=5,
            )
        )
    commit = make_commit("s", 1, append([node("b", "a")]))
    result = await rt.commit_runtime_state(
        commit.completing_queue_claims(claim.completion()).with_committed_attachments(["att-1"])
    )

    assert result.head_revision == 2
    assert [b.batch_id for b in await rt.list_queued_work()] == ["b3"]
    assert [e.attachment_id for e in await rt.list_uncommitted(2**62)] == ["att-2"]
    committed_at = database.query(
        "SELECT committed_at_ms FROM attachment_manifest WHERE attachment_id = 'att-1'"
    )[0][0]
    assert committed_at is not None


async def test_committing_an_attachment_without_an_intent_is_refused(store, database):
    """A commit naming an attachment with no recorded intent raises InvalidInput; no write."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_runtime_state(
            make_commit("s", 1, append([node("b", "a")])).with_committed_attachments(["nope"])
        )
    assert snapshot(database, "s") == before


async def test_a_failure_in_the_last_write_rolls_the_whole_commit_back(store, database):
    """A forced failure inserting the turn stamp rolls back head, graph, ledger, queue, files."""
    rt = await runtime(store, "s")
    await rt.commit_runtime_state(
        make_commit("s", None, replace([node("a")]), usage_deltas=[entry("t0", 1)])
    )
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(batch_id="b1", items=[1]))
    claim = await rt.claim_ready_queued_work("worker", "turn", LONG_LEASE_MS, 1)
    await rt.record_intent(
        AttachmentIntent(
            attachment_id="att", session_id="s", canonical_uri="/f/att", intent_at_epoch_ms=5
        )
    )
    loaded_before = await rt.load_session()
    before = snapshot(database, "s")
    commit = (
        make_commit(
            "s",
            1,
            append([user("u", "a", "hello")]),
            usage_deltas=[entry("t1", 2)],
            checkpoint=HydratedSessionCheckpoint(tool_state={"after": 1}, execution_state=b"x"),
        )
        .completing_queue_claims(claim.completion())
        .with_committed_attachments(["att"])
        .with_turn_commit("t1")
    )
    database.fail_inserts_into("turn_commits")

    with pytest.raises(turnstore.StorageError) as caught:
        await rt.commit_runtime_state(commit)
    assert "forced failure" in str(caught.value)
    assert snapshot(database, "s") == before
    assert await rt.load_session() == loaded_before
    assert [b.claim_id for b in await rt.list_queued_work()] == [claim.claim_id]
    assert [e.attachment_id for e in await rt.list_uncommitted(2**62)] == ["att"]

    database.stop_failing_inserts_into("turn_commits")
    result = await rt.commit_runtime_state(commit)
    assert result.head_revision == 2
    assert await rt.list_queued_work() == []
    assert await rt.list_uncommitted(2**62) == []


# --- turn commits: the hash -----------------------------------------------------------------


def _reference_scrub(value: Any) -> Any:
    """The seed's `scrub_turn_commit_hash_value`, written out independently."""
    if isinstance(value, dict):
        drop_id = ("role" in value and "parts" in value) or (
            "kind" in value and "content" in value and "prune_state" in value
        )
        return {
            key: _reference_scrub(item)
            for key, item in value.items()
            if key not in ("node_id", "parent_node_id", "leaf_node_id", "timestamp")
            and not (key == "id" and drop_id)
        }
    if isinstance(value, list):
        return [_reference_scrub(item) for item in value]
    return value


def _reference_hash(commit: RuntimeCommit) -> str:
    value = msgspec.to_builtins(commit)
    value["expected_head_revision"] = None
    value["turn_commit"] = None
    canonical = json.dumps(
        _reference_scrub(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _attempt(suffix: str, text: str = "hello", expected: int | None = 3) -> RuntimeCommit:
    """One attempt of a turn: ids, timestamps and CAS vary with `suffix`, content with `text`."""
    nested = {
        "role": "assistant",
        "parts": [{"kind": "text", "content": text, "prune_state": "kept", "id": f"p{suffix}"}],
        "id": f"m{suffix}",
        "timestamp": f"ts{suffix}",
        "node_id": f"deep{suffix}",
    }
    nodes = [
        SessionNodeRecord(
            node_id=f"u{suffix}",
            parent_node_id=f"root{suffix}",
            payload=message("user", part(text, part_id=f"up{suffix}"), message_id=f"um{suffix}"),
            timestamp=int(suffix) * 1000,
        ),
        SessionNodeRecord(
            node_id=f"a{suffix}",
            parent_node_id=f"u{suffix}",
            payload={"wrapper": {"history": [nested]}, "leaf_node_id": f"l{suffix}"},
            timestamp=int(suffix) * 1000 + 1,
        ),
    ]
    return make_commit(
        "s",
        expected,
        append(nodes),
        agent_frames=[
            AgentFrameRecord(
                frame_id="main", agent_name="main", state={"last": nested, "timestamp": suffix}
            )
        ],
        checkpoint=HydratedSessionCheckpoint(tool_state={"log": [nested]}),
        usage_deltas=[entry("t", 5)],
    )


def test_turn_commit_hash_is_sha256_of_the_scrubbed_canonical_commit():
    """turn_commit_hash is the hex SHA-256 of the canonical JSON of the scrubbed commit."""
    commit = _attempt("1")
    digest = commit.turn_commit_hash()
    assert digest == _reference_hash(commit)
    assert len(digest) == 64
    assert digest == digest.lower()
    int(digest, 16)


def test_turn_commit_hash_ignores_ids_timestamps_cas_and_stamp_at_every_depth():
    """Two attempts differing only in node/message/part ids, timestamps and CAS hash equal."""
    first = _attempt("1", expected=3)
    second = _attempt("2", expected=None).with_turn_commit("some-turn")
    assert first.turn_commit_hash() == second.turn_commit_hash()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda c: _attempt("1", text="goodbye"), id="message-text"),
        pytest.param(
            lambda c: msgspec.structs.replace(c, usage_deltas=[entry("t", 6)]), id="usage"
        ),
        pytest.param(
            lambda c: msgspec.structs.replace(c, current_agent_frame_id="other"), id="frame"
        ),
        pytest.param(
            lambda c: msgspec.structs.replace(c, checkpoint=HydratedSessionCheckpoint()),
            id="checkpoint",
        ),
        pytest.param(
            lambda c: msgspec.structs.replace(c, committed_attachment_ids=["att"]),
            id="attachments",
        ),
        pytest.param(
            lambda c: msgspec.structs.replace(
                c,
                completed_queue_claims=[QueuedWorkCompletion(claim_id="c", batch_ids=["b"])],
            ),
            id="queue-claims",
        ),
        pytest.param(lambda c: msgspec.structs.replace(c, session_id="s2"), id="session"),
    ],
)
def test_turn_commit_hash_changes_with_content(change):
    """Commits differing in content (text, usage, frames, checkpoint, claims, ...) hash apart."""
    commit = _attempt("1")
    assert change(commit).turn_commit_hash() != commit.turn_commit_hash()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            {"id": "x", "role": "user"}, {"id": "y", "role": "user"}, id="no-parts-not-a-message"
        ),
        pytest.param(
            {"id": "x", "kind": "text", "content": "c"},
            {"id": "y", "kind": "text", "content": "c"},
            id="no-prune-state-not-a-part",
        ),
        pytest.param({"id": "x"}, {"id": "y"}, id="plain-object"),
        pytest.param({"message_id": "x"}, {"message_id": "y"}, id="other-id-key"),
    ],
)
def test_turn_commit_hash_keeps_ids_of_objects_that_are_not_messages_or_parts(first, second):
    """An `id` is scrubbed only from messages (role+parts) and parts (kind+content+prune_state)."""
    commits = [
        make_commit("s", None, append([SessionNodeRecord(node_id="n", payload=p)]))
        for p in (first, second)
    ]
    assert commits[0].turn_commit_hash() != commits[1].turn_commit_hash()


# --- turn commits: idempotency --------------------------------------------------------------


async def test_a_retried_turn_commit_returns_the_first_result_without_writing(store, database):
    """After a lost acknowledgement, the identical stamped commit returns the first result."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    commit = make_commit(
        "s",
        1,
        append([user("u", "a", "question"), node("b", "u")]),
        usage_deltas=[entry("t1", 4)],
        checkpoint=HydratedSessionCheckpoint(tool_state={"x": 1}),
    ).with_turn_commit("t1")
    first = await rt.commit_runtime_state(commit)
    # The acknowledgement is lost; the runtime retries the very same commit.
    before = snapshot(database, "s")
    retried = await rt.commit_runtime_state(commit)
    assert retried == first
    assert snapshot(database, "s") == before
    assert database.count("turn_commits", "session_id = ?", ("s",)) == 1


async def test_a_retry_after_the_head_moved_still_returns_the_first_result(store, database):
    """A retried turn with a stale expected revision returns the earlier result, not a conflict."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    commit = make_commit("s", 1, append([node("b", "a")])).with_turn_commit("t1")
    first = await rt.commit_runtime_state(commit)
    await rt.commit_runtime_state(make_commit("s", 2, append([node("c", "b")])))
    before = snapshot(database, "s")

    retried = await rt.commit_runtime_state(commit)
    assert retried == first
    assert retried.head_revision == 2
    assert snapshot(database, "s") == before
    read = await rt.load_session()
    assert (read.head_revision, [n.node_id for n in read.graph.nodes]) == (3, ["a", "b", "c"])


async def test_a_retry_with_new_ids_and_timestamps_is_the_same_turn(store, database):
    """A retry that differs only in volatile ids and timestamps returns the first result."""
    rt = await runtime(store, "s")
    await seed_session(rt, "root1")
    first = await rt.commit_runtime_state(_attempt("1", expected=1).with_turn_commit("t"))
    before = snapshot(database, "s")
    retried = await rt.commit_runtime_state(_attempt("2", expected=None).with_turn_commit("t"))
    assert retried == first
    assert snapshot(database, "s") == before


async def test_a_turn_committed_with_other_content_is_refused(store, database):
    """The same turn id with a different hash raises RuntimeTurnCommitConflict; nothing written."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    await rt.commit_runtime_state(
        make_commit("s", 1, append([user("u", "a", "one")])).with_turn_commit("t")
    )
    before = snapshot(database, "s")
    for expected in (2, 1, None):
        other = make_commit("s", expected, append([user("v", "u", "two")])).with_turn_commit("t")
        with pytest.raises(turnstore.RuntimeTurnCommitConflict) as caught:
            await rt.commit_runtime_state(other)
        assert str(caught.value) == (
            "runtime turn `t` for session `s` was already committed with a different commit hash"
        )
        assert (caught.value.session_id, caught.value.turn_id) == ("s", "t")
    assert snapshot(database, "s") == before


async def test_turn_ids_are_scoped_to_their_session(store):
    """The same turn id in two sessions is two turns: each commits its own content."""
    results = []
    for sid, text in (("s1", "one"), ("s2", "two")):
        rt = await runtime(store, sid)
        commit = make_commit(sid, None, replace([user("u", None, text)])).with_turn_commit("t")
        results.append(await rt.commit_runtime_state(commit))
        assert [n.payload for n in (await rt.load_session()).graph.nodes] == [
            message("user", part(text))
        ]
    assert [r.head_revision for r in results] == [1, 1]


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param(lambda c: "0" * 64, id="wrong-hash"),
        pytest.param(
            lambda c: msgspec.structs.replace(c, usage_deltas=[entry("t", 100)]).turn_commit_hash(),
            id="hash-of-other-content",
        ),
    ],
)
async def test_a_stamp_whose_hash_does_not_match_the_content_is_refused(store, database, stamp):
    """A turn stamp whose hash is not the commit's turn_commit_hash raises InvalidInput."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    commit = make_commit("s", 1, append([node("b", "a")]), usage_deltas=[entry("t", 1)])
    stamped = msgspec.structs.replace(
        commit,
        turn_commit=RuntimeTurnCommitStamp(
            session_id="s", turn_id="t", turn_commit_hash=stamp(commit)
        ),
    )
    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_runtime_state(stamped)
    assert snapshot(database, "s") == before


async def test_a_stamp_with_a_blank_turn_id_is_refused(store, database):
    """A turn stamp needs a turn id."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    before = snapshot(database, "s")
    with pytest.raises(turnstore.InvalidInput):
        await rt.commit_runtime_state(make_commit("s", 1).with_turn_commit(" "))
    assert snapshot(database, "s") == before


async def test_a_stamped_commit_is_recorded_with_its_hash(store, database):
    """A stamped commit records its turn id and hash; an unstamped commit records no turn."""
    rt = await runtime(store, "s")
    await seed_session(rt, "a")
    commit = make_commit("s", 1, append([node("b", "a")])).with_turn_commit("t1")
    await rt.commit_runtime_state(commit)
    assert database.query("SELECT turn_id, commit_hash FROM turn_commits") == [
        ("t1", commit.turn_commit_hash())
    ]
    assert commit.turn_commit.turn_commit_hash == commit.turn_commit_hash()
