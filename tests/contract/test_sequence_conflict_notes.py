"""A forgotten `checkpoint.sequence += 1` says where it happened and what to do.

`str(error)` stays the contract's text; the session, both sequences and a hint are in the
exception's notes (PEP 678: a traceback prints them, and so do the CLI's and the server's
error lines) and in its `repr`.
"""

from __future__ import annotations

import pickle
import traceback

import pytest

import turnstore
from turnstore import Checkpoint


async def test_a_save_that_did_not_advance_names_the_session_sequences_and_fix(store):
    """Saving the same sequence twice: the contract's message, then notes that say more."""
    checkpoint = Checkpoint.empty("chat-7")
    checkpoint.sequence = 4
    await store.save(checkpoint)
    with pytest.raises(turnstore.SequenceConflict) as refused:
        await store.save(checkpoint)  # the loop forgot `checkpoint.sequence += 1`
    error = refused.value
    assert str(error) == "checkpoint sequence did not advance"
    assert (error.session_id, error.stored, error.attempted) == ("chat-7", 4, 4)
    notes = "\n".join(error.__notes__)
    assert "'chat-7'" in notes
    assert "sequence 4" in notes
    assert "checkpoint.sequence += 1" in notes
    shown = "".join(traceback.format_exception(error))
    assert "checkpoint.sequence += 1" in shown
    assert repr(error) == (
        "SequenceConflict('checkpoint sequence did not advance', "
        "session_id='chat-7', stored=4, attempted=4)"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert copy.__notes__ == error.__notes__
    assert repr(copy) == repr(error)


async def test_an_older_sequence_names_both(store):
    """A lower sequence than the stored one names the two values apart."""
    checkpoint = Checkpoint.empty("chat-8")
    checkpoint.sequence = 9
    await store.save(checkpoint)
    checkpoint.sequence = 3
    with pytest.raises(turnstore.SequenceConflict) as refused:
        await store.save(checkpoint)
    assert str(refused.value) == "checkpoint sequence did not advance"
    notes = "\n".join(refused.value.__notes__)
    assert "9" in notes
    assert "3" in notes
    assert "stored" in notes


async def test_an_append_that_expected_an_older_sequence_says_to_read_again(store):
    """`append_context` expecting a sequence the session has moved past: its own hint."""
    assert await store.append_context("chat-9", [{"role": "user"}], None, 0) == 1
    with pytest.raises(turnstore.SequenceConflict) as refused:
        await store.append_context("chat-9", [{"role": "user"}], None, 0)
    notes = "\n".join(refused.value.__notes__)
    assert "'chat-9'" in notes
    assert "sequence 1" in notes
    assert "sequence += 1" not in notes
    assert "again" in notes
