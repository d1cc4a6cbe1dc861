"""Contract: every read of a stored head or checkpoint manifest checks its schema version.

A record stored at a `schema_version` this build does not read raises
`UnsupportedRecordSchemaVersion` (naming the record kind, the actual and expected versions and
the session) right after it is read: by `load_session`, `picker_info`, `commit_runtime_state`
(which would otherwise rewrite a newer head at this version), a retried turn returning its
stored result, `tombstone_nodes` and `gc_unreachable` (which could otherwise delete blobs a
newer manifest reaches). Nothing is written by a refused call.
"""

from __future__ import annotations

import json

import pytest
from runtime_helpers import (
    append,
    make_commit,
    node,
    replace,
    runtime,
    snapshot,
)

from turnstore import HydratedSessionCheckpoint
from turnstore.errors import UnsupportedRecordSchemaVersion

HEAD = "session head"
MANIFEST = "session checkpoint"


async def seeded(store):
    """A session `s` at revision 1 with a tool-state blob, and its first commit's result."""
    rt = await runtime(store, "s")
    commit = make_commit(
        "s",
        None,
        replace([node("a"), node("b", "a")]),
        checkpoint=HydratedSessionCheckpoint(tool_state={"cwd": "/"}),
    )
    return rt, await rt.commit_runtime_state(commit)


def assert_refused(
    caught: pytest.ExceptionInfo[UnsupportedRecordSchemaVersion], kind: str, actual: int
) -> None:
    """The error names the record kind, both versions and the session."""
    error = caught.value
    assert (error.record_kind, error.actual, error.expected) == (kind, actual, 1)
    assert error.session_id == "s"
    assert (
        str(error) == f"{kind} schema_version {actual} is not supported by this binary (expected 1)"
    )


READS = [
    pytest.param(lambda rt: rt.load_session(), id="load_session"),
    pytest.param(lambda rt: rt.picker_info(), id="picker_info"),
    pytest.param(lambda rt: rt.commit_runtime_state(make_commit("s", 1)), id="commit"),
    pytest.param(
        lambda rt: rt.commit_runtime_state(make_commit("s", 1, append([node("c", "b")]))),
        id="commit-append",
    ),
    pytest.param(lambda rt: rt.tombstone_nodes(["a"]), id="tombstone_nodes"),
]


@pytest.mark.parametrize("read", READS)
async def test_a_head_of_another_schema_version_is_refused_by_every_read(store, database, read):
    """Each call that reads the head refuses one stored at another version and writes nothing."""
    rt, _ = await seeded(store)
    database.query("UPDATE runtime_heads SET schema_version = 9")
    before = snapshot(database, "s")
    with pytest.raises(UnsupportedRecordSchemaVersion) as caught:
        await read(rt)
    assert_refused(caught, HEAD, 9)
    assert snapshot(database, "s") == before
    assert database.query("SELECT schema_version FROM runtime_heads") == [(9,)]


async def test_gc_refuses_to_collect_around_a_head_of_another_version(store, database):
    """gc_unreachable deletes nothing while some head is of a version this build cannot read."""
    rt, _ = await seeded(store)
    other = await runtime(store, "other")
    await other.commit_runtime_state(make_commit("other", None, replace([node("x")])))
    # An unreachable blob that a collection would delete.
    await other.commit_runtime_state(
        make_commit("other", 1, checkpoint=HydratedSessionCheckpoint(tool_state={"old": 1}))
    )
    await other.commit_runtime_state(make_commit("other", 2))
    database.query("UPDATE runtime_heads SET schema_version = 2 WHERE session_id = 's'")
    blobs = database.count("blobs")
    with pytest.raises(UnsupportedRecordSchemaVersion) as caught:
        await rt.gc_unreachable()
    assert_refused(caught, HEAD, 2)
    assert database.count("blobs") == blobs


async def test_gc_refuses_a_manifest_of_another_version(store, database):
    """A manifest of another version may reach blobs this build cannot see: gc deletes nothing."""
    rt, result = await seeded(store)
    database.query(
        "UPDATE blobs SET data = ? WHERE blob_ref = ?",
        (b'{"schema_version":7}', result.checkpoint_ref),
    )
    blobs = database.count("blobs")
    with pytest.raises(UnsupportedRecordSchemaVersion) as caught:
        await rt.gc_unreachable()
    assert (caught.value.record_kind, caught.value.actual) == (MANIFEST, 7)
    assert database.count("blobs") == blobs


async def test_a_manifest_of_another_version_names_its_session(store, database):
    """load_session's manifest check carries the session id, as every CorruptRecord does."""
    rt, result = await seeded(store)
    database.query(
        "UPDATE blobs SET data = ? WHERE blob_ref = ?",
        (b'{"schema_version":7}', result.checkpoint_ref),
    )
    with pytest.raises(UnsupportedRecordSchemaVersion) as caught:
        await rt.load_session()
    assert_refused(caught, MANIFEST, 7)


async def test_a_retried_turn_refuses_a_stored_result_of_another_version(store, database):
    """A retry returns the stored result of its turn only if that result's manifest is readable."""
    rt, _ = await seeded(store)
    commit = make_commit("s", 1, append([node("c", "b")])).with_turn_commit("t1")
    await rt.commit_runtime_state(commit)
    (stored,) = database.query("SELECT result_json FROM turn_commits")
    result = json.loads(stored[0])
    result["manifest"]["schema_version"] = 5
    database.query("UPDATE turn_commits SET result_json = ?", (json.dumps(result),))
    before = snapshot(database, "s")
    with pytest.raises(UnsupportedRecordSchemaVersion) as caught:
        await rt.commit_runtime_state(commit)
    assert_refused(caught, MANIFEST, 5)
    assert snapshot(database, "s") == before
