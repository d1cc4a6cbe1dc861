"""The operations of the checkpoint contract: validate, then run transaction scripts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from turnstore.drivers import indexer
from turnstore.drivers.steps import Steps, call, origin, read, write
from turnstore.engine.protocol import Engine, Tx
from turnstore.errors import InvalidInput
from turnstore.records.checkpoint import (
    Checkpoint,
    ContextWindow,
    EventPage,
    EventPageRequest,
    ExecutionPage,
    ExecutionPageRequest,
    ExecutionRecord,
    ForkTree,
    JournalEvent,
    SessionPage,
    SessionStates,
    SessionSummary,
    TimestampedEvent,
    TranscriptPage,
    TranscriptPageRequest,
)
from turnstore.records.context import Context, ContextMark
from turnstore.records.conversation import ConversationPage, ConversationRequest
from turnstore.records.protocol import Event
from turnstore.records.search import SearchPage, SearchRequest
from turnstore.rules.conversation import conversation_page, conversation_request
from turnstore.rules.journal import event_turn_page_steps, prepare_event
from turnstore.rules.pages import (
    catalog_query,
    fork_tree_limit,
    id_prefix_range,
    journal_query,
    owner_filter,
    page_limit,
    recent_limit,
)
from turnstore.rules.saves import (
    PreparedSave,
    pop_count,
    prepare_append,
    prepare_fork,
    prepare_replace,
    prepare_save,
    state_expectations,
    tail_limit,
    window_bound,
)
from turnstore.rules.search import search_query
from turnstore.rules.validation import identifier, validate_session_id, validate_session_ids
from turnstore.rules.values import collection, encoded_text, json_value, require, text
from turnstore.scripts import (
    checkpoints,
    context_items,
    context_reads,
    conversations,
    journals,
    search,
    sessions,
    transfer,
)

T = TypeVar("T")


def load(session_id: str) -> Steps[Checkpoint | None]:
    """Load the latest checkpoint of a session; its context is marked as held by this store."""
    session_id = validate_session_id(session_id)
    engine = yield from origin()
    return (yield from read(lambda tx: checkpoints.load(tx, session_id, engine)))


def save_with_events(
    checkpoint: Checkpoint,
    transcript_delta: Iterable[Any],
    execution: ExecutionRecord | None,
    events: Iterable[TimestampedEvent],
) -> Steps[list[JournalEvent]]:
    """Commit checkpoint, transcript delta, execution record and events as one unit."""
    prepared = prepare_save(checkpoint, transcript_delta, execution, events)
    engine = yield from origin()
    return (
        yield from _holding(
            checkpoint, prepared, engine, lambda tx: checkpoints.save(tx, prepared, engine)
        )
    )


def _holding(
    checkpoint: Checkpoint, prepared: PreparedSave, engine: object, script: Callable[[Tx], T]
) -> Steps[T]:
    """Run a save's script; once it commits, mark the checkpoint's `Context` as held."""
    context = checkpoint.context if isinstance(checkpoint.context, Context) else None
    if context is None:
        return (yield from write(script))
    edited = context.begin_save()
    try:
        result = yield from write(script)
    except BaseException:
        context.save_failed(edited)
        raise
    context.saved(
        ContextMark(
            engine,
            prepared.session_id,
            prepared.sequence,
            prepared.context_epoch,
            len(prepared.context),
        )
    )
    return result


def append_event(session_id: str, recorded_at_ms: int, event: Event) -> Steps[JournalEvent]:
    """Assign the next session-local sequence to one event and journal it."""
    session_id = validate_session_id(session_id)
    stamped = TimestampedEvent(recorded_at_ms=recorded_at_ms, event=require(event, Event, "event"))
    prepared = prepare_event(stamped)
    return (yield from write(lambda tx: journals.append_event(tx, session_id, prepared)))


def event_page(session_id: str, request: EventPageRequest) -> Steps[EventPage]:
    """Load one newest-first page of a session's journal events."""
    query = journal_query(session_id, request, EventPageRequest)
    return (yield from read(lambda tx: journals.event_page(tx, query)))


def event_turn_page(session_id: str, before_sequence: int | None) -> Steps[EventPage]:
    """Load the newest whole turn of events before a cursor, walking pages of 100."""
    walk = event_turn_page_steps(before_sequence)
    request = next(walk)
    while True:
        page = yield from event_page(session_id, request)
        try:
            request = walk.send(page)
        except StopIteration as done:
            result: EventPage = done.value
            return result


def session_summary(session_id: str) -> Steps[SessionSummary | None]:
    """Load one session's catalog entry without reading its checkpoint."""
    session_id = validate_session_id(session_id)
    return (yield from read(lambda tx: sessions.summary(tx, session_id)))


def list_sessions_page(request: object) -> Steps[SessionPage]:
    """List one newest-first page of the catalog, optionally for one owner or id prefix."""
    query = catalog_query(request)
    return (yield from read(lambda tx: sessions.catalog_page(tx, query)))


def transcript_page(session_id: str, request: TranscriptPageRequest) -> Steps[TranscriptPage]:
    """Load one newest-first page of transcript batches."""
    query = journal_query(session_id, request, TranscriptPageRequest)
    return (yield from read(lambda tx: journals.transcript_page(tx, query)))


def conversation(session_id: str, request: ConversationRequest) -> Steps[ConversationPage | None]:
    """Load one newest-first page of a session of any kind, read as a conversation."""
    session, checked = conversation_request(session_id, request)
    found = yield from read(lambda tx: conversations.stored(tx, session, checked))
    return conversation_page(found)


def execution_page(session_id: str, request: ExecutionPageRequest) -> Steps[ExecutionPage]:
    """Load one newest-first page of finished-turn records."""
    query = journal_query(session_id, request, ExecutionPageRequest)
    return (yield from read(lambda tx: journals.execution_page(tx, query)))


def recent_executions(limit: int, owner_id: str | None = None) -> Steps[list[ExecutionRecord]]:
    """Load the most recently started finished turns across all sessions, or one owner's."""
    checked = recent_limit(limit)
    owner = owner_filter(owner_id)
    return (yield from read(lambda tx: journals.recent_executions(tx, checked, owner)))


def search_sessions(request: SearchRequest) -> Steps[SearchPage]:
    """One page of the items, in every session, whose text matches a query.

    A writable store first indexes what was written since its indexer last looked, so a
    search finds every write committed before it began.
    """
    query = search_query(request)
    yield from catch_up_search()
    return (yield from read(lambda tx: search.search(tx, query)))


def catch_up_search() -> Steps[int]:
    """Index every session written since the indexer last looked; how many it looked at.

    Nothing on a read-only store: a writer's indexer does it there. The loop is the
    indexer's own, run as one engine call (off the event loop on the async face).
    """
    engine = cast(Engine, (yield from origin()))
    if engine.read_only:
        return 0
    return (yield from call(lambda engine: indexer.catch_up(engine, wait=True)))


def fork_tree(session_id: str, limit: int) -> Steps[ForkTree | None]:
    """Load the fork tree holding a session, root first and then breadth-first."""
    session_id = validate_session_id(session_id)
    checked = fork_tree_limit(limit)
    return (yield from read(lambda tx: transfer.fork_tree(tx, session_id, checked)))


def fork(
    parent_session_id: str, parent_sequence: int, checkpoint: Checkpoint
) -> Steps[SessionSummary]:
    """Create a child session branched from the parent at an exact durable sequence."""
    prepared = prepare_fork(parent_session_id, parent_sequence, checkpoint)
    engine = yield from origin()
    return (
        yield from _holding(
            checkpoint, prepared.child, engine, lambda tx: checkpoints.fork(tx, prepared)
        )
    )


def delete_sessions(session_ids: Sequence[str]) -> Steps[bool]:
    """Delete sessions, their descendants and session-scoped state, all or nothing."""
    ids = validate_session_ids(collection(session_ids, "session_ids"))
    return (yield from write(lambda tx: checkpoints.delete(tx, ids)))


def load_state(scope: str, key: str) -> Steps[Any]:
    """Load one middleware state value, or None."""
    scope, key = text(scope, "scope"), text(key, "key")
    return (yield from read(lambda tx: checkpoints.load_state(tx, scope, key), single=True))


MAX_STATE_SCOPES = 1000
"""Scopes one `load_states` reads: a page of sessions at a time, with room."""


def load_states(scopes: Sequence[str], key: str) -> Steps[dict[str, Any]]:
    """Load one middleware state key's value in each scope that has one, by scope."""
    checked = [text(scope, "scope") for scope in collection(scopes, "scopes")]
    if len(checked) > MAX_STATE_SCOPES:
        raise InvalidInput(f"load_states reads at most {MAX_STATE_SCOPES} scopes at once")
    key = text(key, "key")
    return (yield from read(lambda tx: checkpoints.load_states(tx, checked, key), single=True))


MAX_SESSION_STATES = 10_000
"""Sessions one `load_session_states` page looks at, at most."""


def load_session_states(
    id_prefix: str, key: str, after: str | None, limit: int
) -> Steps[SessionStates]:
    """One page of the sessions whose id starts with `id_prefix`, each with its own value of
    middleware state `key`, in id order."""
    id_range = id_prefix_range(id_prefix)
    if id_range is None:
        raise InvalidInput("id_prefix must not be empty")
    key = identifier(key, "middleware state key")
    # Every id is above the empty text, so no cursor reads from the range's start.
    checked_after = "" if after is None else identifier(after, "after")
    limit = page_limit(limit, "load_session_states")
    if limit > MAX_SESSION_STATES:
        raise InvalidInput(f"load_session_states reads at most {MAX_SESSION_STATES} at once")
    return (
        yield from read(
            lambda tx: checkpoints.load_session_states(tx, id_range, key, checked_after, limit),
            single=True,
        )
    )


def load_state_scope(scope: str) -> Steps[dict[str, Any]]:
    """Load every middleware state value of one scope, by key."""
    scope = text(scope, "scope")
    return (yield from read(lambda tx: checkpoints.load_state_scope(tx, scope), single=True))


def save_state(
    scope: str, key: str, value: Any, expected_state: Iterable[tuple[str, str, Any]] = ()
) -> Steps[None]:
    """Durably replace one middleware state value, if the expected state values are stored."""
    scope, key = text(scope, "scope"), text(key, "key")
    value_json = encoded_text(json_value(value, "middleware state"), "middleware state")
    expected = state_expectations(expected_state)
    yield from write(lambda tx: checkpoints.save_state(tx, scope, key, value_json, expected))


def append_context(
    session_id: str,
    items: Iterable[Any],
    owner_id: str | None,
    expected_sequence: int | None,
    state: Iterable[tuple[str, str, Any]],
    kind: str,
    expected_state: Iterable[tuple[str, str, Any]] = (),
) -> Steps[int]:
    """Append items to a session's context and transcript in one commit; the new sequence."""
    prepared = prepare_append(
        session_id, items, owner_id, expected_sequence, state, kind, expected_state
    )
    return (yield from write(lambda tx: context_items.append(tx, prepared)))


def pop_context(session_id: str, count: int) -> Steps[list[Any]]:
    """Remove a session's newest context items and return them, oldest first."""
    session_id = validate_session_id(session_id)
    drop = pop_count(count)
    removed = yield from write(lambda tx: context_items.truncate(tx, session_id, drop))
    return [] if removed is None else removed


def clear_context(session_id: str) -> Steps[bool]:
    """Remove every context item of a session; False if there is no such session."""
    session_id = validate_session_id(session_id)
    removed = yield from write(lambda tx: context_items.truncate(tx, session_id, None))
    return removed is not None


def context_tail(session_id: str, limit: int | None) -> Steps[list[Any]]:
    """Load a session's newest context items, oldest first, without the rest."""
    session_id = validate_session_id(session_id)
    checked = tail_limit(limit)
    return (yield from read(lambda tx: context_reads.tail(tx, session_id, checked)))


def context_window(session_id: str, before: int | None, limit: int | None) -> Steps[ContextWindow]:
    """Load the newest `limit` context items before index `before`, with the sequence."""
    session_id = validate_session_id(session_id)
    end, count = window_bound(before, "before"), window_bound(limit, "limit")
    return (yield from read(lambda tx: context_reads.window(tx, session_id, end, count)))


def replace_context(
    session_id: str, sequence: int, start: int, items: Iterable[Any], drop_prefix: int
) -> Steps[bool]:
    """Replace a context's items from `start` on, if the session is still at `sequence`."""
    prepared = prepare_replace(session_id, sequence, start, items, drop_prefix)
    return (
        yield from write(
            lambda tx: context_items.replace(
                tx,
                prepared.session_id,
                prepared.expected_sequence,
                prepared.start,
                prepared.drop_prefix,
                prepared.items,
                prepared.items_json,
            )
        )
    )
