"""A Google ADK session service whose sessions live in turnstore.

    from turnstore.integrations.adk import TurnstoreSessionService

    runner = Runner(app_name="app", agent=agent, session_service=TurnstoreSessionService(url))

An ADK session `(app, user, session)` is the turnstore session `adk/<app>/<user>/<session>`
(each part with `%` and `/` escaped), owned by the user in the catalog. Its events are the
checkpoint's context items, one per `append_event` in the order appended, journaled in the
transcript too; `get_session` returns them in the order ADK's `DatabaseSessionService` does, by
time to the microsecond, then event id (`_order_key`). Its own state is one middleware state
value (scope: the session's id, so it is deleted with the session); `app:` state is one value
per key in the scope `adk-app/<app>`, `user:` state in `adk-user/<app>/<user>`; `temp:` keys
are never stored. An event and every state change it carries commit together, and only while
the session is still at the sequence the caller's `Session` was read at, in the incarnation it
was read from: a superseded session, or one deleted and created again, gets
`StaleSessionError`, decided by the store's per-session sequence and the incarnation's token,
never by timestamps. An event id is stored once per session. State values are made JSON as
ADK's `DatabaseSessionService` makes them (`_adk_storage`).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, SequenceConflict, SessionNotFound, StorageError
from turnstore.integrations import _adk_storage as storage
from turnstore.integrations import requires_extra
from turnstore.integrations._adk_order import in_order, instant, order_key
from turnstore.records import SessionCursor, SessionPageRequest
from turnstore.records.kinds.adk import KIND as ADK
from turnstore.records.kinds.adk import SESSION_KEY
from turnstore.seam import Shared, borrow

with requires_extra(__name__, "Google ADK", "adk"):
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions import _session_util
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
    from google.adk.sessions.state import State

PREFIX = ADK.id_prefix or ""
"""Every ADK session's turnstore id starts with this (`adk/`, declared with its kind)."""
KIND = ADK.name
"""The kind of session an ADK session is in the catalog and in search; `SESSION_KEY` (from
`turnstore.records.kinds.adk`, where both are declared) keeps a session's own state."""
PAGE = 200
"""Sessions or events read at a time."""
LIST_PAGE = 1000
"""Sessions `list_sessions` reads with their records in one query."""
Scopes = dict[tuple[str, ...], dict[str, Any]]
"""App and user state read for a listing, prefixed as ADK shows it, by (app,) or (app, user)."""
READ_TRIES = 10
"""Reads of a session that keeps changing under a reader before it gives up."""
STALE = (
    "The session has been modified in storage since it was loaded. Please reload the session"
    " before appending more events."
)
"""ADK's own message for a stale session."""


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def _unescape(part: str) -> str:
    return part.replace("%2F", "/").replace("%25", "%")


def turnstore_id(app_name: str, user_id: str, session_id: str) -> str:
    """The turnstore session id of one ADK session."""
    return PREFIX + "/".join(_escape(part) for part in (app_name, user_id, session_id))


def _id_prefix(app_name: str, user_id: str | None) -> str:
    """What the ids of the app's sessions (of one user, if given) start with."""
    prefix = PREFIX + _escape(app_name) + "/"
    return prefix if user_id is None else prefix + _escape(user_id) + "/"


def _app_scope(app_name: str) -> str:
    return f"adk-app/{_escape(app_name)}"


def _user_scope(app_name: str, user_id: str) -> str:
    return f"adk-user/{_escape(app_name)}/{_escape(user_id)}"


def _marker(record: dict[str, Any], sequence: int) -> str:
    """A `Session`'s storage marker: the incarnation it was read from and its sequence."""
    return f"{record.get('incarnation', '')}:{sequence}"


def _read_marker(marker: str) -> tuple[str, int]:
    """The incarnation and the sequence a marker names."""
    incarnation, _, sequence = marker.rpartition(":")
    try:
        return incarnation, int(sequence)
    except ValueError:
        raise InvalidInput(f"session marker {marker!r} is not turnstore's") from None


def _json_safe(state: dict[str, Any], what: str) -> dict[str, dict[str, Any]]:
    """The app, user and session parts of `state`, made JSON as ADK's database service does.

    What it cannot make JSON (bytes that are not UTF-8, a key that is not UTF-8, a circular
    or too deep value) it refuses, and so does this: `InvalidInput`, a `ValueError` as ADK's.
    """
    try:
        return _session_util.extract_json_safe_state_delta(state)
    except ValueError as error:
        raise InvalidInput(f"{what} holds a value ADK cannot store as JSON: {error}") from error


def _scope_writes(app_name: str, user_id: str, deltas: dict[str, dict[str, Any]]) -> list[Any]:
    """The middleware state writes of the app's and the user's part of a delta."""
    return [
        (scope, storage.stored_key(key), storage.stored(value))
        for scope, part in ((_app_scope(app_name), "app"), (_user_scope(app_name, user_id), "user"))
        for key, value in deltas[part].items()
    ]


def _event(item: dict[str, Any]) -> Event:
    """A stored event as ADK's `Event`."""
    return Event.model_validate(storage.loaded(item))


def _check_current(
    stored: dict[str, Any] | None, session: Session, incarnation: str | None, expected: int
) -> None:
    """Refuse a session that is gone, superseded, or read from another incarnation of its id."""
    if stored is None:
        raise SessionNotFoundError(f"Session {session.id} not found.")
    if stored["sequence"] != expected or incarnation not in (None, stored.get("incarnation", "")):
        raise StaleSessionError(STALE)


class TurnstoreSessionService(BaseSessionService):
    """An ADK `BaseSessionService` on turnstore (SQLite or PostgreSQL).

    `store` is an open `turnstore.Store` (or `BlockingStore`) whose connections the service
    shares and leaves open, or a store URL that this service opens and `close()` closes.
    `service.store` is the service's async face on that store.
    """

    def __init__(self, store: Store | BlockingStore | str | os.PathLike[str]) -> None:
        self._shared: Shared = borrow(store)
        self.store: Store = self._shared.store

    async def close(self) -> None:
        """Release the service's threads, and the store's connections if it opened them."""
        await self._shared.aclose()

    # --- sessions ---------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session with its initial state in one commit; `AlreadyExistsError` if taken."""
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        deltas = _json_safe(state or {}, "state")
        now = time.time()
        tid = turnstore_id(app_name, user_id, session_id)
        record = storage.new_record(deltas["session"], now)
        writes = [(tid, SESSION_KEY, record), *_scope_writes(app_name, user_id, deltas)]
        try:
            sequence = await self.store.append_context(tid, [], user_id, 0, writes, kind=KIND)
        except SequenceConflict:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, deltas["session"]),
            last_update_time=now,
        )
        session._storage_update_marker = _marker(record, sequence)
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its merged state and its events, as `config` narrows them."""
        session_id = session_id.strip() if session_id else session_id
        tid = turnstore_id(app_name, user_id, session_id)
        read = await self._read(tid, config)
        if read is None:
            return None
        record, events, sequence = read
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, storage.loaded(record["state"])),
            events=events,
            last_update_time=record["last_update_time"],
        )
        session._storage_update_marker = _marker(record, sequence)
        return session

    async def _read(
        self, tid: str, config: GetSessionConfig | None
    ) -> tuple[dict[str, Any], list[Event], int] | None:
        """The session's record and events at one sequence (read again if a write came between)."""
        for _ in range(READ_TRIES):
            record = await self.store.load_state(tid, SESSION_KEY)
            if record is None:
                return None
            events, sequence = await self._events(tid, record, config)
            if sequence == record["sequence"]:
                return record, events, sequence
        raise StorageError(
            "the session kept changing while it was read, or was written outside this service",
            retryable=True,
        )

    async def _events(
        self, tid: str, record: dict[str, Any], config: GetSessionConfig | None
    ) -> tuple[list[Event], int]:
        """The newest events `config` asks for, oldest first, and the sequence read at.

        `num_recent_events` keeps the newest that many; `after_timestamp` keeps events from
        that time on (to the microsecond, and ignored when 0, as ADK's database service does).
        While the session's events are in order (`in_order`), the newest are read alone,
        walking back from the newest to the first older one; otherwise all are read and
        ordered.
        """
        limit = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp
        if limit == 0:
            window = await self.store.context_window(tid, None, 0)
            return [], window.sequence
        if not in_order(record):
            return await self._ordered_events(tid, limit, after)
        if not after:
            window = await self.store.context_window(tid, None, limit)
            return [_event(item) for item in window.items], window.sequence
        since = instant(after)
        kept: list[Event] = []
        before: int | None = None
        sequence: int | None = None
        restarts = 0
        while True:
            window = await self.store.context_window(tid, before, PAGE)
            if sequence is None:
                sequence = window.sequence
            elif window.sequence != sequence:
                restarts += 1  # a write came between the pages: read them again
                if restarts == READ_TRIES:
                    raise StorageError("the session kept changing while read", retryable=True)
                kept, before, sequence = [], None, None
                continue
            for item in reversed(window.items):
                event = _event(item)
                if instant(event.timestamp) < since or (limit is not None and len(kept) == limit):
                    return kept[::-1], sequence
                kept.append(event)
            if window.start == 0:
                return kept[::-1], sequence
            before = window.start

    async def _ordered_events(
        self, tid: str, limit: int | None, after: float | None
    ) -> tuple[list[Event], int]:
        """All the session's events read and put in `_order_key` order, then narrowed as ADK's
        database service narrows them: from `after` on, then the newest `limit`."""
        window = await self.store.context_window(tid, None, None)
        keyed = [
            (order_key(event["timestamp"], event["id"]), event)
            for event in map(storage.loaded, window.items)
        ]
        keyed.sort(key=lambda pair: pair[0])  # event ids are unique in a session: no ties
        if after:
            since = instant(after)
            keyed = [pair for pair in keyed if pair[0][0] >= since]
        if limit is not None:
            keyed = keyed[-limit:]  # `limit` is at least 1: 0 was answered before the read
        return [Event.model_validate(event) for _, event in keyed], window.sequence

    async def _merged(
        self,
        app_name: str,
        user_id: str,
        session_state: dict[str, Any],
        scopes: Scopes | None = None,
    ) -> dict[str, Any]:
        """Session state with the app's and the user's state, prefixed as ADK shows them.

        `scopes` caches the scopes read, prefixed, for a listing of many sessions of one app
        or user.
        """
        scopes = {} if scopes is None else scopes
        merged = dict(session_state)
        for prefix, place, scope in (
            (State.APP_PREFIX, (app_name,), _app_scope),
            (State.USER_PREFIX, (app_name, user_id), _user_scope),
        ):
            shown = scopes.get(place)
            if shown is None:
                loaded = await self.store.load_state_scope(scope(*place))
                shown = {prefix + key: value for key, value in storage.loaded_scope(loaded).items()}
                scopes[place] = shown
            merged.update(shown)
        return merged

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Every session of the app (of one user, if given), oldest update first, no events.

        Read by id, `LIST_PAGE` sessions with their records a query: a session created while
        the pages are read is listed if its id sorts after the page being read.
        """
        prefix = _id_prefix(app_name, user_id)
        sessions: list[Session] = []
        scopes: Scopes = {}  # read once per listing
        after = None
        while True:
            page = await self.store.load_session_states(
                prefix, SESSION_KEY, after=after, limit=LIST_PAGE
            )
            for tid, record in page.states:
                session = await self._summary_session(tid, record, scopes)
                if session is not None:
                    sessions.append(session)
            if page.next_after is None:
                break
            after = page.next_after
        sessions.sort(key=lambda session: (session.last_update_time, session.user_id, session.id))
        return ListSessionsResponse(sessions=sessions)

    async def list_sessions_page(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        limit: int = 50,
        cursor: Any = None,
    ) -> SessionsPage:
        """One page of the app's sessions, newest update first, with a cursor for the next.

        By the user's catalog index when `user_id` is given, so a page costs the same however
        many sessions the store holds; over the whole catalog otherwise.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInput("limit must be an integer of at least 1")
        prefix = _id_prefix(app_name, user_id)
        found: list[Session] = []
        scopes: Scopes = {}  # read once per page call
        while True:
            request = SessionPageRequest(limit=PAGE, owner_id=user_id, cursor=cursor)
            page = await self.store.list_sessions_page(request)
            mine = [one for one in page.sessions if one.session_id.startswith(prefix)]
            # The page's session records in one read, not one a session.
            records = await self.store.load_states([one.session_id for one in mine], SESSION_KEY)
            for summary in mine:
                session = await self._summary_session(
                    summary.session_id, records.get(summary.session_id), scopes
                )
                if session is not None:
                    found.append(session)
                if len(found) == limit:
                    last = SessionCursor(
                        updated_at=summary.updated_at,
                        sequence=summary.sequence,
                        session_id=summary.session_id,
                    )
                    return SessionsPage(sessions=found, next_cursor=last)
            cursor = page.next_cursor
            if cursor is None:
                return SessionsPage(sessions=found, next_cursor=None)

    async def _summary_session(
        self, tid: str, record: dict[str, Any] | None, scopes: Scopes
    ) -> Session | None:
        app_name, user_id, session_id = (_unescape(part) for part in tid[len(PREFIX) :].split("/"))
        if record is None:
            return None
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, storage.loaded(record["state"]), scopes),
            last_update_time=record["last_update_time"],
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session, its events, its own state and its forks; a missing one is fine."""
        session_id = session_id.strip() if session_id else session_id
        await self.store.delete_sessions([turnstore_id(app_name, user_id, session_id)])

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without the `user:` prefix."""
        return storage.loaded_scope(
            await self.store.load_state_scope(_user_scope(app_name, user_id))
        )

    # --- events -------------------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store the event and its state changes in one commit, then apply them to `session`.

        `StaleSessionError` when the stored session moved on since `session` was read, or is
        another incarnation of its id; `SessionNotFoundError` when it is not stored (any
        more); `AlreadyExistsError`, changing nothing, when the session holds the event's id.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        deltas = _json_safe(event.actions.state_delta or {}, "state_delta")
        item = storage.stored(event.model_dump(mode="json", exclude_none=True))
        tid = turnstore_id(session.app_name, session.user_id, session.id)
        incarnation, expected = await self._expected(tid, session)
        # The append below commits only at `expected`: the record read here is the one it
        # replaces, and no write stored the event's id since it was looked up.
        known, stored = await asyncio.to_thread(self._looked_up, tid, event.id)
        _check_current(stored, session, incarnation, expected)
        if known is not None:
            raise AlreadyExistsError(f"Event {event.id} already exists in session {session.id}.")
        record = storage.next_record(
            stored, deltas["session"], event.timestamp, event.id, expected + 1
        )
        # The event's id, with the sequence that stored it: a re-delivery is refused above.
        writes: list[Any] = [
            (tid, SESSION_KEY, record),
            (tid, storage.event_key(event.id), expected + 1),
        ]
        writes += _scope_writes(session.app_name, session.user_id, deltas)
        try:
            sequence = await self.store.append_context(
                tid, [item], None, expected, writes, kind=KIND
            )
        except SequenceConflict:
            raise StaleSessionError(STALE) from None
        except SessionNotFound:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        session._storage_update_marker = _marker(record, sequence)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    def _looked_up(self, tid: str, event_id: str) -> tuple[Any, Any]:
        """The stored entry of an event id and the session's record: two reads, one hop off
        the event loop (the blocking face reads in the calling thread)."""
        blocking = self._shared.blocking
        return blocking.load_state(tid, storage.event_key(event_id)), blocking.load_state(
            tid, SESSION_KEY
        )

    async def _expected(self, tid: str, session: Session) -> tuple[str | None, int]:
        """The incarnation and the sequence `session` was read at, from its marker; for a
        session built by hand, any incarnation at the stored sequence if its newest event is
        the session's newest (else it is stale)."""
        marker = session._storage_update_marker
        if marker is not None:
            return _read_marker(marker)
        # The newest in the order `get_session` returns events, so a session built from a
        # read one (whose events are in that order) is current.
        read = await self._read(tid, GetSessionConfig(num_recent_events=1))
        if read is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        _, newest, sequence = read
        stored = newest[-1].id if newest else None
        mine = session.events[-1].id if session.events else None
        if stored != mine:
            raise StaleSessionError(STALE)
        return None, sequence


class SessionsPage(ListSessionsResponse):
    """One keyset page of `list_sessions_page`: the sessions and the cursor of the next."""

    next_cursor: Any = None
