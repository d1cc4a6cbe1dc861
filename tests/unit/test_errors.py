"""Errors: one hierarchy, typed attributes, picklable, the contract's message as `str()`."""

from __future__ import annotations

import pickle

import pytest

from turnstore.errors import (
    CheckpointError,
    ConfigError,
    CorruptRecord,
    HeadRevisionConflict,
    InvalidInput,
    NotFound,
    QueuedWorkClaimExpired,
    RuntimeConflict,
    RuntimeTurnCommitConflict,
    SequenceConflict,
    SessionExists,
    SessionNotFound,
    StorageError,
    StoreClosed,
    TurnstoreError,
)


def test_attributes_are_typed_and_default_to_none() -> None:
    """An error's declared attributes are set from keywords; the rest are None."""
    error = SequenceConflict("checkpoint sequence did not advance", session_id="s", stored=3)
    assert (error.session_id, error.stored, error.attempted) == ("s", 3, None)
    assert str(error) == "checkpoint sequence did not advance"
    assert error.message == "checkpoint sequence did not advance"


def test_an_undeclared_attribute_is_a_programming_error() -> None:
    """Naming an attribute the class does not declare fails loudly, not silently."""
    with pytest.raises(TypeError, match="turn_id"):
        SessionNotFound("no session", turn_id="t")


def test_defaults_declared_on_the_class_are_kept() -> None:
    """StorageError.retryable is False unless given."""
    assert StorageError("disk").retryable is False
    assert StorageError("lock", retryable=True).retryable is True


@pytest.mark.parametrize(
    "error",
    [
        HeadRevisionConflict("conflict", session_id="s", expected=None, actual=2),
        CorruptRecord("bad row", session_id="s"),
        StorageError("lost", retryable=True),
        InvalidInput("bad"),
    ],
)
def test_errors_pickle_with_their_attributes(error: TurnstoreError) -> None:
    """An error crosses a process boundary with its class, message and attributes."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_configuration_and_corruption_are_not_the_callers_input() -> None:
    """ConfigError is outside the contract's refusals; CorruptRecord is not InvalidInput."""
    assert not issubclass(ConfigError, CheckpointError)
    assert issubclass(ConfigError, ValueError)
    assert not issubclass(CorruptRecord, InvalidInput)


RUNTIME_CONFLICTS = [HeadRevisionConflict, RuntimeTurnCommitConflict, QueuedWorkClaimExpired]


@pytest.mark.parametrize("error", RUNTIME_CONFLICTS)
def test_runtime_conflicts_share_a_base_that_says_what_they_are(
    error: type[TurnstoreError],
) -> None:
    """Runtime conflicts are RuntimeConflicts, and still CheckpointErrors until 0.2."""
    assert issubclass(error, RuntimeConflict)
    # Deprecated: kept for one minor version so existing `except CheckpointError` still catches.
    assert issubclass(error, CheckpointError)
    with pytest.raises(RuntimeConflict):
        raise error("conflict", session_id="s")


@pytest.mark.parametrize("error", [SequenceConflict, SessionExists, InvalidInput, NotFound])
def test_checkpoint_refusals_are_not_runtime_conflicts(error: type[TurnstoreError]) -> None:
    """CheckpointError stays the checkpoint contract's base; its own are not RuntimeConflicts."""
    assert issubclass(error, CheckpointError)
    assert not issubclass(error, RuntimeConflict)
    assert not issubclass(RuntimeConflict, CheckpointError)


def test_a_closed_store_is_a_runtime_error() -> None:
    """StoreClosed is also a RuntimeError, as the OpenAI Agents SDK's closed sessions raise
    (and as InvalidInput is a ValueError), and still a TurnstoreError."""
    with pytest.raises(RuntimeError):
        raise StoreClosed("the store is closed")
    assert issubclass(StoreClosed, TurnstoreError)
    assert not issubclass(StoreClosed, CheckpointError)


def test_repr_shows_the_attributes_that_are_set() -> None:
    """repr is a constructor call with the message and every attribute that is not None."""
    assert repr(SessionNotFound("no session", session_id="s")) == (
        "SessionNotFound('no session', session_id='s')"
    )
    assert repr(InvalidInput("bad")) == "InvalidInput('bad')"
    assert repr(StorageError("lost", retryable=True)) == "StorageError('lost', retryable=True)"


def test_a_sequence_conflict_notes_its_session_sequences_and_hint() -> None:
    """The notes name the session, both sequences, then the raiser's hint; str() is unchanged,
    a copy through pickle keeps the notes once, and no session means no facts to note."""
    error = SequenceConflict(
        "checkpoint sequence did not advance", session_id="s", stored=3, attempted=2, hint="h"
    )
    assert str(error) == "checkpoint sequence did not advance"
    assert error.__notes__ == [
        "session 's' is at stored sequence 3; this call gave sequence 2",
        "hint: h",
    ]
    assert pickle.loads(pickle.dumps(error)).__notes__ == error.__notes__
    assert not hasattr(SequenceConflict("bare"), "__notes__")
