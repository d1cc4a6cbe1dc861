"""What the transaction scripts refuse of what they read, decided by rules without a database.

Each rule is handed a value, a row or None as a script reads it, and passes it or raises the
contract's error with its message and attributes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
import pytest

from turnstore.errors import (
    CorruptRecord,
    HeadRevisionConflict,
    InvalidInput,
    QueuedWorkClaimExpired,
    RuntimeTurnCommitConflict,
    SequenceConflict,
    SessionExists,
    SessionNotFound,
    StorageError,
)
from turnstore.records.checkpoint import Checkpoint
from turnstore.records.runtime import AttachmentIntent, QueuedWorkBatch, RuntimeCommit
from turnstore.rules import journal, queue, runtime, saves, stored, transfer


def _save(sequence: int = 2) -> saves.PreparedSave:
    return saves.prepare_save(Checkpoint(session_id="s", sequence=sequence), (), None, ())


# --- saves, forks, context edits -----------------------------------------------------------


def test_relocked_passes_the_row_and_refuses_a_vanished_session() -> None:
    assert saves.relocked("row", "save") == "row"
    with pytest.raises(StorageError) as caught:
        saves.relocked(None, "append")
    assert str(caught.value) == "the session was created and deleted during this append"
    assert caught.value.retryable is True


def test_a_save_must_advance_the_stored_sequence() -> None:
    saves.check_advance(_save(3), 2)
    with pytest.raises(SequenceConflict) as caught:
        saves.check_advance(_save(2), 2)
    error = caught.value
    assert str(error) == "checkpoint sequence did not advance"
    assert (error.session_id, error.stored, error.attempted) == ("s", 2, 2)
    assert error.__notes__[-1].startswith("hint: give each save a higher sequence")


def test_a_fork_needs_its_parent_at_or_after_the_fork_point() -> None:
    fork = saves.prepare_fork("parent", 3, Checkpoint(session_id="child", sequence=0))
    saves.check_fork_parent(fork, 3)
    with pytest.raises(SessionNotFound) as missing:
        saves.check_fork_parent(fork, None)
    assert (str(missing.value), missing.value.session_id) == (
        "fork parent does not exist",
        "parent",
    )
    with pytest.raises(InvalidInput, match=r"^fork point is newer than the parent checkpoint$"):
        saves.check_fork_parent(fork, 2)
    saves.check_fork_created(fork, True)
    with pytest.raises(SessionExists) as exists:
        saves.check_fork_created(fork, False)
    assert (str(exists.value), exists.value.session_id) == (
        "fork child session already exists",
        "child",
    )


def test_an_append_creates_a_missing_session_only_when_it_may() -> None:
    saves.check_append_creates(saves.prepare_append("s", ["a"], None))
    saves.check_append_creates(saves.prepare_append("s", ["a"], None, 0))
    with pytest.raises(SessionNotFound) as caught:
        saves.check_append_creates(saves.prepare_append("s", ["a"], None, 4))
    assert str(caught.value) == "the session to append to does not exist"
    assert caught.value.session_id == "s"


def test_an_append_expecting_a_sequence_finds_the_session_at_it() -> None:
    saves.check_append_sequence(saves.prepare_append("s", ["a"], None), 7)
    saves.check_append_sequence(saves.prepare_append("s", ["a"], None, 7), 7)
    with pytest.raises(SequenceConflict) as caught:
        saves.check_append_sequence(saves.prepare_append("s", ["a"], None, 6), 7)
    error = caught.value
    assert str(error) == "the session moved on since the sequence this append expects"
    assert (error.session_id, error.stored, error.attempted) == ("s", 7, 6)


@pytest.mark.parametrize(("start", "drop", "length"), [(0, 0, 0), (2, 1, 3), (3, 3, 3)])
def test_a_replacement_starts_within_the_context(start: int, drop: int, length: int) -> None:
    saves.check_replace_start(start, drop, length)


@pytest.mark.parametrize(("start", "drop", "length"), [(4, 0, 3), (1, 2, 3)])
def test_a_replacement_outside_the_context_is_refused(start: int, drop: int, length: int) -> None:
    message = (
        f"a replacement must start within the context ({start} of {length} items)"
        f" and after the dropped prefix ({drop})"
    )
    with pytest.raises(InvalidInput) as caught:
        saves.check_replace_start(start, drop, length)
    assert str(caught.value) == message


# --- the event journal -------------------------------------------------------------------------


def test_a_journal_read_needs_its_session_row() -> None:
    assert journal.journal_latest(0, "s") == 0
    with pytest.raises(SessionNotFound) as caught:
        journal.journal_latest(None, "s")
    assert (str(caught.value), caught.value.session_id) == (
        "event journal session does not exist",
        "s",
    )


# --- stored rows ---------------------------------------------------------------------------------


def test_a_stored_value_a_rule_refuses_is_corrupt() -> None:
    def refuse(value: int) -> None:
        if value < 0:
            raise InvalidInput("negative")

    assert stored.valid_stored(refuse, 1, "count", "s") == 1
    with pytest.raises(CorruptRecord) as caught:
        stored.valid_stored(refuse, -1, "count", "s")
    assert (str(caught.value), caught.value.session_id) == (
        "stored count is invalid: negative",
        "s",
    )
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_a_checkpoint_row_matches_its_index_and_length() -> None:
    checkpoint = Checkpoint(session_id="s", sequence=4)
    stored.check_checkpoint_row(checkpoint, "s", 4)
    for session_id, sequence in (("t", 4), ("s", 5)):
        with pytest.raises(CorruptRecord, match=r"^checkpoint row does not match its index$"):
            stored.check_checkpoint_row(checkpoint, session_id, sequence)
    stored.check_context_length(3, 3, "s")
    with pytest.raises(CorruptRecord) as caught:
        stored.check_context_length(2, 3, "s")
    assert str(caught.value) == "checkpoint context does not match its stored length"
    assert caught.value.session_id == "s"


def test_context_chunks_are_contiguous() -> None:
    stored.check_chunk_start(None, 5, "s")
    stored.check_chunk_start(5, 5, "s")
    with pytest.raises(CorruptRecord, match=r"^checkpoint context chunks are not contiguous$"):
        stored.check_chunk_start(5, 6, "s")


@pytest.mark.parametrize("sequences", [[], [2, 1, 3], [1, 1, 3], [1, 2, 4], [1, 2]])
def test_an_event_batch_is_the_run_its_index_names(sequences: list[int]) -> None:
    stored.check_event_batch([1, 2, 3], 1, 3, 3, "s")
    with pytest.raises(CorruptRecord) as caught:
        stored.check_event_batch(sequences, 1, 3, 3, "s")
    assert str(caught.value) == "stored event batch does not match its index"
    assert caught.value.session_id == "s"


def test_rows_another_row_names_must_be_stored() -> None:
    assert stored.stored_blob(memoryview(b"ab"), "ref", "s") == b"ab"
    with pytest.raises(CorruptRecord) as blob:
        stored.stored_blob(None, "ref", None)
    assert (str(blob.value), blob.value.session_id) == (
        "blob `ref` is missing from the store",
        None,
    )
    assert stored.stored_lineage("row", 3, "s") == "row"
    with pytest.raises(CorruptRecord, match=r"^list lineage 3 is missing$"):
        stored.stored_lineage(None, 3, "s")
    stored.check_list_items(2, 2, "messages", "s")
    with pytest.raises(CorruptRecord) as items:
        stored.check_list_items(1, 2, "messages", "s")
    assert str(items.value) == "the list value of channel 'messages' is missing items"


# --- queued work ---------------------------------------------------------------------------------


def _batch(batch_id: str, claim_id: str | None, expires: int | None) -> QueuedWorkBatch:
    return QueuedWorkBatch(
        session_id="s",
        batch_id=batch_id,
        position=1,
        boundary="turn",
        items=[],
        enqueued_at_ms=0,
        claim_id=claim_id,
        lease_expires_at_ms=expires,
    )


def test_a_batch_id_is_new_to_its_queue() -> None:
    queue.check_new_batch(None, "b")
    with pytest.raises(InvalidInput, match=r"^queued work batch `b` already exists$"):
        queue.check_new_batch(1, "b")


def test_a_completion_needs_every_batch_held_by_its_live_claim() -> None:
    stored_queue = [_batch("a", "c", 20), _batch("b", "c", 20), _batch("x", "other", 20)]
    assert [b.batch_id for b in queue.held_batches(stored_queue, 10, "s", "c", ["b", "a"])] == [
        "a",
        "b",
    ]
    for now, wanted in ((10, []), (10, ["a", "x"]), (20, ["a"]), (10, ["gone"])):
        with pytest.raises(QueuedWorkClaimExpired) as caught:
            queue.held_batches(stored_queue, now, "s", "c", wanted)
        assert str(caught.value) == "queued work claim `c` for session `s` is missing or expired"
        assert (caught.value.session_id, caught.value.claim_id) == ("s", "c")


# --- the runtime commit, tombstones, attachments -------------------------------------------------


def test_a_turn_commits_once_with_one_content() -> None:
    runtime.check_turn_commit("s", "t", "h", "h")
    with pytest.raises(RuntimeTurnCommitConflict) as caught:
        runtime.check_turn_commit("s", "t", "h", "other")
    assert str(caught.value) == (
        "runtime turn `t` for session `s` was already committed with a different commit hash"
    )
    assert (caught.value.session_id, caught.value.turn_id) == ("s", "t")


def test_a_commit_is_built_on_the_current_head() -> None:
    assert runtime.next_head_revision(RuntimeCommit(session_id="s"), None) == 1
    assert (
        runtime.next_head_revision(RuntimeCommit(session_id="s", expected_head_revision=4), 4) == 5
    )
    for expected, stored_revision, words in (
        (None, 4, "None, actual 4"),
        (3, None, "Some(3), actual 0"),
    ):
        commit = RuntimeCommit(session_id="s", expected_head_revision=expected)
        with pytest.raises(HeadRevisionConflict) as caught:
            runtime.next_head_revision(commit, stored_revision)
        assert str(caught.value) == f"store head revision conflict: expected {words}"
        assert caught.value.session_id == "s"
        assert (caught.value.expected, caught.value.actual) == (expected, stored_revision or 0)


def test_graph_nodes_and_blobs_a_commit_names_are_stored() -> None:
    runtime.check_live_parent("n", "p", 1)
    with pytest.raises(
        InvalidInput, match=r"^graph node `n` names parent `p`, which is not a live"
    ):
        runtime.check_live_parent("n", "p", None)
    runtime.check_new_node("n", None)
    with pytest.raises(InvalidInput, match=r"^graph node `n` already exists$"):
        runtime.check_new_node("n", 1)
    runtime.check_live_leaf("n", 1)
    with pytest.raises(InvalidInput, match=r"^graph leaf `n` is not a live node of the session$"):
        runtime.check_live_leaf("n", None)
    runtime.check_blobs_stored(["a", "b"], {"a", "b"})
    with pytest.raises(
        InvalidInput, match=r"^checkpoint references blob `b`, which is not stored$"
    ):
        runtime.check_blobs_stored(["a", "b", "c"], {"a"})


class _Link(NamedTuple):
    node_id: str
    parent_node_id: str


def test_a_tombstone_spares_the_leaf_and_takes_whole_subtrees() -> None:
    runtime.check_tombstone_leaf(None, ["a"])
    runtime.check_tombstone_leaf("b", ["a"])
    with pytest.raises(InvalidInput, match=r"^graph node `a` is the session's leaf and cannot be"):
        runtime.check_tombstone_leaf("a", ["a"])
    runtime.check_no_live_child(None)
    with pytest.raises(InvalidInput) as caught:
        runtime.check_no_live_child(_Link("c", "a"))
    assert str(caught.value) == (
        "graph node `a` has the live child `c`; tombstone a node only with all of its descendants"
    )


class _Owner(NamedTuple):
    session_id: str
    canonical_uri: str


def test_an_attachment_belongs_to_one_session_and_payload() -> None:
    intent = AttachmentIntent(
        attachment_id="a", session_id="s", canonical_uri="file:///x", intent_at_epoch_ms=0
    )
    runtime.check_uri_free(intent, None)
    with pytest.raises(InvalidInput, match=r"^attachment `a`: its canonical_uri is already used"):
        runtime.check_uri_free(intent, 1)
    runtime.check_intent_recorded(intent, _Owner("s", "file:///x"))
    for owner in (None, _Owner("t", "file:///x"), _Owner("s", "file:///y")):
        with pytest.raises(InvalidInput, match=r"^attachment `a` is already recorded for another"):
            runtime.check_intent_recorded(intent, owner)
    runtime.check_committable("a", "s", _Owner("s", "file:///x"))
    for owner in (None, _Owner("t", "file:///x")):
        with pytest.raises(InvalidInput) as caught:
            runtime.check_committable("a", "s", owner)
        assert str(caught.value) == "attachment `a` has no recorded intent in session `s`"


# --- exports and imports -------------------------------------------------------------------------


def test_an_export_names_stored_sessions() -> None:
    transfer.check_export_sessions(["a", "b"], {"a", "b", "c"})
    with pytest.raises(SessionNotFound) as caught:
        transfer.check_export_sessions(["a", "b", "d"], {"a"})
    assert (str(caught.value), caught.value.session_id) == ("no session 'b' to export", "b")
    transfer.check_export_tree(["r"], "r")
    with pytest.raises(SessionNotFound, match=r"^no session 'r' to export$"):
        transfer.check_export_tree([], "r")


def test_a_nullable_json_column_holding_json_null_cannot_export() -> None:
    transfer.check_exportable_json("t", "c", False, "null")
    transfer.check_exportable_json("t", "c", True, "[]")
    with pytest.raises(ValueError, match=r"^t.c holds JSON null; it cannot export$"):
        transfer.check_exportable_json("t", "c", True, "null")


class _Line(msgspec.Struct):
    n: int


def test_an_export_line_is_short_enough_and_decodes() -> None:
    decode = msgspec.json.Decoder(_Line).decode
    assert transfer.export_line(b'{"n": 1}\n', 3, None, decode) == _Line(1)
    assert transfer.export_line(b'{"n": 1}\n', 3, 9, decode) == _Line(1)
    with pytest.raises(InvalidInput, match=r"^export line 3 is longer than the 8-byte limit"):
        transfer.export_line(b'{"n": 1}\n', 3, 8, decode)
    with pytest.raises(InvalidInput, match=r"^export line 3: Expected `int`, got `str`"):
        transfer.export_line(b'{"n": "x"}\n', 3, None, decode)
    with pytest.raises(InvalidInput, match=r"^export line 3 is not JSON: "):
        transfer.export_line(b"{", 3, None, decode)


def test_an_import_takes_whole_listed_trees() -> None:
    transfer.check_tree_root(["r", "c"], "r", 2)
    for ids in ([], ["c", "r"]):
        with pytest.raises(InvalidInput, match=r"^export line 2: a tree must list its root first$"):
            transfer.check_tree_root(ids, "r", 2)
    transfer.check_row_owner("sessions", "r", {"r"}, 4)
    with pytest.raises(InvalidInput, match=r"^export line 4: a sessions row of session 'x', which"):
        transfer.check_row_owner("sessions", "x", {"r"}, 4)
    transfer.check_tree_rows("r", 2, "d", 2, "d", 5)
    for count, digest in ((1, "d"), (2, "e")):
        with pytest.raises(InvalidInput, match=r"^export tree 'r' is damaged or cut off: .*line 5"):
            transfer.check_tree_rows("r", count, digest, 2, "d", 5)
    transfer.check_tree_problems("r", [])
    with pytest.raises(InvalidInput, match=r"^export tree 'r': bad; no read could use it, so the"):
        transfer.check_tree_problems("r", ["bad", "worse"])
    transfer.check_tree_session("r", "c", object())
    with pytest.raises(InvalidInput, match=r"^export tree 'r' has no sessions row for 'c'$"):
        transfer.check_tree_session("r", "c", None)


def test_an_imported_row_is_one_a_read_takes() -> None:
    transfer.check_row(3, None, "r")
    with pytest.raises(InvalidInput) as caught:
        transfer.check_row(3, "why", "r")
    assert (
        str(caught.value) == "export line 3: why; no read could use it, so tree 'r' is not imported"
    )
    assert transfer.row_params(3, lambda: (1, "x")) == (1, "x")

    def bad() -> Any:
        return b"\xff".decode()

    with pytest.raises(InvalidInput, match=r"^export line 3: a JSON column is not UTF-8: "):
        transfer.row_params(3, bad)


def test_an_import_fails_on_a_conflict_only_when_told_to() -> None:
    transfer.check_import_conflict("skip", ["a"])
    transfer.check_import_conflict("replace", ["a"])
    with pytest.raises(SessionExists) as caught:
        transfer.check_import_conflict("fail", ["a", "b"])
    assert str(caught.value) == (
        "session 'a' exists with other content; import with on_conflict='skip' to keep it or"
        " 'replace' to overwrite it"
    )
    assert caught.value.session_id == "a"
