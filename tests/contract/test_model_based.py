"""Random operation sequences agree with a plain in-memory model of the checkpoint contract."""

from __future__ import annotations

import copy
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import sizes
import turnstore
from conftest import (
    FRESH_SCHEMAS,
    postgres_connection,
    postgres_store_url,
    require_postgres,
    schema_pool,
)
from turnstore import (
    Checkpoint,
    Event,
    EventPageRequest,
    SessionPageRequest,
    TranscriptPageRequest,
)
from turnstore.events import (
    SessionResumeRequestedEvent,
    WarningEvent,
)

IDS = st.sampled_from(["a", "b", "c", "d"])


@dataclass
class ModelSession:
    checkpoint: Checkpoint
    parent: str | None
    events: list[int] = field(default_factory=list)
    latest_event: int = 0
    transcript: list[int] = field(default_factory=list)


class CheckpointStoreModel(RuleBasedStateMachine):
    """Drives a blocking store and a dict-based model with the same operations."""

    def __init__(self, fresh_url: Callable[[], tuple[str, Callable[[], None]]]) -> None:
        super().__init__()
        url, self.cleanup = fresh_url()
        self.store = turnstore.open_blocking(url)
        self.model: dict[str, ModelSession] = {}
        self.item = 0

    def teardown(self) -> None:
        self.store.close()
        self.cleanup()

    def _items(self, count: int) -> list[dict[str, Any]]:
        self.item += count
        return [{"n": self.item - i} for i in range(count)]

    @rule(session=IDS, step=st.integers(-1, 2), grow=st.integers(0, 3), rewrite=st.booleans())
    def save(self, session: str, step: int, grow: int, rewrite: bool) -> None:
        known = self.model.get(session)
        checkpoint = copy.deepcopy(known.checkpoint) if known else Checkpoint.empty(session)
        checkpoint.sequence = max(0, checkpoint.sequence + step)
        if rewrite:
            checkpoint.context_epoch += 1
            checkpoint.context = self._items(1)
        delta = self._items(grow)
        checkpoint.context.extend(delta)
        if known is not None and checkpoint.sequence <= known.checkpoint.sequence:
            with pytest.raises(turnstore.SequenceConflict):
                self.store.save(checkpoint, delta)
            return
        self.store.save(checkpoint, delta)
        if known is None:
            known = self.model[session] = ModelSession(checkpoint, None)
        known.checkpoint = checkpoint
        if delta:
            known.transcript.append(checkpoint.sequence)

    @rule(session=IDS, transient=st.booleans())
    def append_event(self, session: str, transient: bool) -> None:
        msg: Any = (
            SessionResumeRequestedEvent(session_id=session)
            if transient
            else WarningEvent(message="w")
        )
        event = Event(msg=msg)
        known = self.model.get(session)
        if known is None:
            with pytest.raises(turnstore.SessionNotFound):
                self.store.append_event(session, 1, event)
            return
        stored = self.store.append_event(session, 1, event)
        known.latest_event += 1
        assert stored.sequence == known.latest_event
        if not transient:
            known.events.append(stored.sequence)

    @rule(parent=IDS, child=IDS, back=st.integers(-1, 2))
    def fork(self, parent: str, child: str, back: int) -> None:
        known = self.model.get(parent)
        at = max(0, (known.checkpoint.sequence if known else 0) - back)
        start = Checkpoint.empty(child)
        start.context = self._items(1)
        if parent == child:
            expected: type[Exception] | None = turnstore.InvalidInput
        elif known is None:
            expected = turnstore.SessionNotFound
        elif at > known.checkpoint.sequence:
            expected = turnstore.InvalidInput
        elif child in self.model:
            expected = turnstore.errors.SessionExists
        else:
            expected = None
        if expected is not None:
            with pytest.raises(expected):
                self.store.fork(parent, at, start)
            return
        summary = self.store.fork(parent, at, start)
        assert (summary.parent_session_id, summary.parent_sequence) == (parent, at)
        self.model[child] = ModelSession(start, parent, transcript=[0])

    @rule(ids=st.lists(IDS, min_size=1, max_size=3))
    def delete(self, ids: list[str]) -> None:
        present = all(session in self.model for session in ids)
        assert self.store.delete_sessions(ids) is present
        if not present:
            return
        doomed = set(ids)
        while True:
            children = {s for s, m in self.model.items() if m.parent in doomed} - doomed
            if not children:
                break
            doomed |= children
        for session in doomed:
            del self.model[session]

    @invariant()
    def store_matches_model(self) -> None:
        page = self.store.list_sessions_page(SessionPageRequest(limit=10))
        assert {s.session_id for s in page.sessions} == set(self.model)
        for session, known in self.model.items():
            assert self.store.load(session) == known.checkpoint
            events = self.store.event_page(session, EventPageRequest(limit=1000))
            assert events.latest_sequence == known.latest_event
            assert [e.sequence for e in events.into_chronological()] == known.events
            transcript = self.store.transcript_page(
                session, TranscriptPageRequest(max_batches=1000)
            )
            assert [b.sequence for b in reversed(transcript.batches)] == known.transcript


def _fresh_sqlite() -> tuple[str, Callable[[], None]]:
    folder = tempfile.TemporaryDirectory()
    return str(Path(folder.name) / "model.sqlite3"), folder.cleanup


def _fresh_postgres() -> tuple[str, Callable[[], None]]:
    # Each program gets a schema as fresh as a new one; from the process's pool, as the
    # `store` fixture's, since migrating one a program (60 in CI) was most of this test's time.
    if not FRESH_SCHEMAS:
        pool = schema_pool()
        pooled = pool.take()
        return postgres_store_url(pooled), lambda: pool.give_back(pooled)
    schema = f"model_{uuid.uuid4().hex}"

    def drop() -> None:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    return postgres_store_url(schema), drop


# 60 to 150 programs of 40 steps in one test: 10-25 s on a quiet machine, past the default
# 120 s once when CI ran it beside the frameworks' pip install on two cores.
@pytest.mark.timeout(300)
def test_store_agrees_with_the_model(backend_name: str) -> None:
    """Any sequence of saves, events, forks and deletes leaves the store equal to the model."""
    if backend_name == "postgres":
        require_postgres()
    fresh = _fresh_postgres if backend_name == "postgres" else _fresh_sqlite
    run_state_machine_as_test(
        lambda: CheckpointStoreModel(fresh),
        settings=settings(
            max_examples=(
                sizes.MODEL_EXAMPLES_SQLITE
                if backend_name == "sqlite"
                else sizes.MODEL_EXAMPLES_POSTGRES
            ),
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
