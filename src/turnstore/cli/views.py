"""Internal: what each command shows, read from the store through the public API only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnstore import (
    BlockingStore,
    EventPageRequest,
    ExecutionPageRequest,
    ExecutionRecord,
    SessionNotFound,
    SessionPageRequest,
    TranscriptPageRequest,
)
from turnstore.events import (
    MessageTarget,
)
from turnstore.records import (
    ConversationPage,
    ConversationRequest,
    JournalEvent,
    SessionSummary,
)
from turnstore.records.kinds import Storage, kind_of, prefixed_ids

PositionedItem = tuple[MessageTarget, Any]
"""A transcript item with its durable position (checkpoint sequence, 1-based item count)."""


@dataclass(frozen=True)
class SessionView:
    """One session as `sessions show` presents it: catalog entry, transcript, a page of events.

    `before` is the sequence the event page ends below (None: the newest events), and
    `next_before_sequence` where the next older page ends (None: no older events).
    """

    summary: SessionSummary
    transcript: list[PositionedItem]
    events: list[JournalEvent]
    conversation: ConversationPage
    before: int | None = None
    next_before_sequence: int | None = None

    def to_builtins(self) -> dict[str, Any]:
        """This view as plain JSON-ready values."""
        return {
            "summary": self.summary.to_builtins(),
            "transcript": [
                {"position": position.to_builtins(), "item": item}
                for position, item in self.transcript
            ],
            "conversation": self.conversation.to_builtins(),
            "events": [event.to_builtins() for event in self.events],
            "next_before_sequence": self.next_before_sequence,
        }


@dataclass(frozen=True)
class StoreView:
    """What the demo prints: the catalog, and one session's turns, transcript and journal."""

    catalog: list[SessionSummary]
    summary: SessionSummary
    turns: list[list[JournalEvent]]
    conversation: ConversationPage
    executions: list[ExecutionRecord]


def catalog(store: BlockingStore, owner_id: str | None, limit: int) -> list[SessionSummary]:
    """The newest `limit` sessions of the catalog, optionally of one owner."""
    page = store.list_sessions_page(SessionPageRequest(owner_id=owner_id, limit=limit))
    return page.sessions


def transcript(store: BlockingStore, session_id: str, batches: int) -> list[PositionedItem]:
    """The items of the newest `batches` transcript batches, oldest first."""
    page = store.transcript_page(session_id, TranscriptPageRequest(max_batches=batches))
    return page.into_positioned_items_chronological()


def session_view(
    store: BlockingStore,
    session_id: str,
    counts: tuple[int, int, int],
    before: int | None = None,
) -> SessionView | None:
    """A session's summary, conversation and a page of events; None if absent.

    `counts` are the newest transcript batches, conversation items (of a session of items or
    a LangGraph thread) and events to show; the events are those below sequence `before`.
    """
    batches, messages, events = counts
    summary = store.session_summary(session_id)
    if summary is None:
        return None
    page = store.event_page(session_id, EventPageRequest(limit=events, before_sequence=before))
    by_batch = kind_of(summary.kind).storage is Storage.TRANSCRIPT
    request = ConversationRequest(limit=batches if by_batch else messages)
    conversation = store.conversation(session_id, request)
    if conversation is None:
        return None
    # A transcript-kind conversation is the same batches: its messages are the positions.
    positioned = (
        [
            (MessageTarget(checkpoint_sequence=m.sequence, batch_item_count=m.index + 1), m.item)
            for m in conversation.messages
            if m.sequence is not None
        ]
        if by_batch
        else transcript(store, session_id, batches)
    )
    return SessionView(
        summary=summary,
        transcript=positioned,
        conversation=conversation,
        events=page.into_chronological(),
        before=before,
        next_before_sequence=page.next_before_sequence if page.events else None,
    )


def meant(store: BlockingStore, session_id: str) -> list[str]:
    """The framework sessions stored under this bare id (`langgraph/<id>`), to suggest."""
    return [found for found in prefixed_ids(session_id) if store.session_summary(found)]


def turns(store: BlockingStore, session_id: str, most: int) -> list[list[JournalEvent]]:
    """The events of the newest `most` turns, one list per turn, oldest turn first."""
    found: list[list[JournalEvent]] = []
    before: int | None = None
    while len(found) < most:
        page = store.event_turn_page(session_id, before)
        if page.events:
            found.append(page.into_chronological())
        if page.next_before_sequence is None:
            break
        before = page.next_before_sequence
    return list(reversed(found))


def store_view(store: BlockingStore, session_id: str) -> StoreView:
    """The catalog, plus one session's recent turns, transcript and execution journal."""
    summary = store.session_summary(session_id)
    if summary is None:
        raise SessionNotFound(f"session {session_id} does not exist", session_id=session_id)
    journal = store.execution_page(session_id, ExecutionPageRequest(limit=20))
    conversation = store.conversation(session_id, ConversationRequest(limit=100))
    if conversation is None:
        raise SessionNotFound(f"session {session_id} does not exist", session_id=session_id)
    return StoreView(
        catalog=catalog(store, None, 20),
        summary=summary,
        turns=turns(store, session_id, 5),
        conversation=conversation,
        executions=list(reversed(journal.executions)),
    )
