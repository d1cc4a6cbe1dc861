"""Internal: the sides of a Google ADK session move: where sessions live.

A `Sessions` lists ADK sessions, reads one whole (own state, times, events as ADK's JSON),
writes one, reads and sets the app's and the user's state, and reads a session through ADK's
`get_session` for the verify. The base serves any `BaseSessionService` through ADK's API;
`DatabaseSessions` reads a `DatabaseSessionService`'s tables (`_adk_tables`) and writes
through the service; `TurnstoreSessions` writes into turnstore the records
`TurnstoreSessionService` keeps, at the source's times (`turnstore.integrations.adk_move` is
the public face).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput
from turnstore.integrations import _adk_storage as storage
from turnstore.integrations._adk_tables import DatabaseTables, Key, Problem
from turnstore.integrations._agents_tables import read_only_engine
from turnstore.integrations._opening import Closes
from turnstore.integrations.adk import (
    KIND,
    PREFIX,
    TurnstoreSessionService,
    _app_scope,
    _unescape,
    _user_scope,
    turnstore_id,
)
from turnstore.records import SessionCursor, SessionPageRequest
from turnstore.records.kinds.adk import SESSION_KEY

PAGE = 1000
"""Events written into turnstore in one commit."""
STATE_SESSION = "turnstore-move-state-"
"""Starts the id of the session a move creates, and deletes at once, to set app and user
state on an ADK service (its API sets them only through a session's state or events)."""


@dataclass
class Read:
    """One source session, whole: its own state (no `app:` or `user:` key), its times and its
    events as ADK's JSON, in `get_session` order."""

    key: Key
    state: dict[str, Any]
    created: float | None
    updated: float
    events: list[dict[str, Any]]


@dataclass
class Held:
    """A target session: its event ids in order, and what its side needs to append."""

    ids: list[str]
    session: Session | None = None
    record: dict[str, Any] | None = None
    sequence: int = 0


def split(merged: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A `get_session` state as the session's own, the app's and the user's (no prefixes)."""
    own: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in merged.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        else:
            own[key] = value
    return own, app, user


class Sessions(Closes):
    """Any ADK `BaseSessionService`, through its API: `InMemorySessionService`, Vertex AI's,
    your own.

    As a source it lists the sessions of `apps` (required: ADK's API cannot list apps) for
    `users` (default: every user `list_sessions` gives) and reads each through `get_session`;
    as a target it writes through `create_session` (which stamps the current time) and
    `append_event` (which applies each event's state delta again).
    """

    keeps_times = False
    """Whether sessions written here keep the source's create and update times."""

    def __init__(
        self,
        service: BaseSessionService,
        *,
        apps: Sequence[str] | None = None,
        users: Sequence[str] | None = None,
    ) -> None:
        self.service = service
        self.apps, self.users = apps, users

    async def prepare(self) -> None:
        """Made ready to be written to; called once, on the target."""

    def deferred(self) -> AbstractContextManager[None]:
        """Around a whole copy into this side: its commits durable at the end, where it can."""
        return nullcontext()

    async def keys(
        self,
        apps: Sequence[str] | None,
        users: Sequence[str] | None,
        session_ids: Sequence[str] | None,
    ) -> AsyncIterator[Key]:
        """Every session of the apps (and users) named, here or to the side."""
        apps = apps if apps is not None else self.apps
        users = users if users is not None else self.users
        if apps is None:
            raise InvalidInput("ADK's session API cannot list apps: name them (apps=[...])")
        for app_name in apps:
            for user_id in users if users is not None else [None]:
                listed = await self.service.list_sessions(app_name=app_name, user_id=user_id)
                found = sorted((s.user_id, s.id) for s in listed.sessions)
                for user, session_id in found:
                    if session_ids is None or session_id in session_ids:
                        yield Key(app_name, user, session_id)

    async def get(self, key: Key) -> Session | None:
        """The session as ADK's `get_session` gives it."""
        return await self.service.get_session(
            app_name=key.app_name, user_id=key.user_id, session_id=key.session_id
        )

    async def read(self, key: Key, skipped: list[Problem] | None) -> Read | None:
        """The session whole, through `get_session` (None: it is gone)."""
        session = await self.get(key)
        if session is None:
            return None
        own, _, _ = split(session.state)
        events = [event.model_dump(mode="json", exclude_none=True) for event in session.events]
        return Read(key, own, None, session.last_update_time, events)

    async def count(self, key: Key) -> int:
        """How many events the session holds."""
        session = await self.get(key)
        return 0 if session is None else len(session.events)

    async def held(self, key: Key) -> Held | None:
        """The target's session, to compare and append to (None: not there)."""
        session = await self.get(key)
        if session is None:
            return None
        return Held([event.id for event in session.events], session=session)

    async def write(self, read: Read, held: Held | None, start: int) -> None:
        """Create the session (with the source's own state) if missing, then append the
        source's events from `start` on through `append_event`."""
        key = read.key
        session = held.session if held is not None else None
        if session is None:
            session = await self.service.create_session(
                app_name=key.app_name,
                user_id=key.user_id,
                state=read.state,
                session_id=key.session_id,
            )
        for data in read.events[start:]:
            await self.service.append_event(session, Event.model_validate(data))

    async def states(self, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
        """The app's and the user's state (no prefixes), as the session `key` sees them."""
        config = GetSessionConfig(num_recent_events=0)
        session = await self.service.get_session(
            app_name=key.app_name, user_id=key.user_id, session_id=key.session_id, config=config
        )
        _, app, user = split(session.state if session is not None else {})
        return app, user

    async def set_states(self, key: Key, app: dict[str, Any], user: dict[str, Any]) -> None:
        """Set app and user state values: ADK's API sets them only through a session, so a
        session is created with them, and deleted at once."""
        state = {State.APP_PREFIX + name: value for name, value in app.items()}
        state.update({State.USER_PREFIX + name: value for name, value in user.items()})
        session_id = STATE_SESSION + uuid.uuid4().hex
        await self.service.create_session(
            app_name=key.app_name, user_id=key.user_id, state=state, session_id=session_id
        )
        await self.service.delete_session(
            app_name=key.app_name, user_id=key.user_id, session_id=session_id
        )

    async def size(self) -> int | None:
        """The store's bytes, when known."""
        return None

    async def settle(self) -> None:
        """Release pooled connections bound to the running event loop (before it ends)."""

    async def aclose(self) -> None:
        """Close what this opened."""

    def close(self) -> None:
        """Close what this opened, blocking (not from async code)."""
        asyncio.run(self.aclose())


class DatabaseSessions(Sessions):
    """The sessions of a `DatabaseSessionService` database: listed and read from its tables
    (every app and user, which its API cannot list), written through the service.

    `database` is a `DatabaseSessionService` (the caller's, left open) or its async URL
    (`sqlite+aiosqlite:///sessions.db`, `postgresql+asyncpg://…`, `postgresql+psycopg://…`),
    whose service `aclose()` closes; `read_only` makes that URL's engine unable to write (a
    SQLite file opened `mode=ro`, PostgreSQL transactions read-only), for a source.
    """

    def __init__(self, database: DatabaseSessionService | str, *, read_only: bool = False) -> None:
        self.owned = isinstance(database, str)
        if isinstance(database, str):
            if read_only:
                _check_file(database)
                service = DatabaseSessionService(db_engine=read_only_engine(database))
            else:
                service = DatabaseSessionService(database)
        else:
            service = database
        super().__init__(service)
        self.service: DatabaseSessionService = service
        self.tables = DatabaseTables(service.db_engine)

    async def prepare(self) -> None:
        """ADK's tables, created by the service itself."""
        await self.service.prepare_tables()

    def keys(
        self,
        apps: Sequence[str] | None,
        users: Sequence[str] | None,
        session_ids: Sequence[str] | None,
    ) -> AsyncIterator[Key]:
        return self.tables.keys(apps, users, session_ids)

    async def read(self, key: Key, skipped: list[Problem] | None) -> Read | None:
        """The session's events, then its row: its state is at least as new as its events
        (a run after a write between the two appends what it missed)."""
        events = [event async for page in self.tables.pages(key, skipped) for event in page]
        row = await self.tables.session(key)
        if row is None:
            return None
        state, created, updated = row
        return Read(key, state, created, updated, events)

    async def count(self, key: Key) -> int:
        return await self.tables.count(key)

    async def states(self, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
        if not await self.tables.check():
            return {}, {}
        app = await self.tables.app_state(key.app_name)
        return app, await self.tables.user_state(key.app_name, key.user_id)

    async def size(self) -> int | None:
        return await self.tables.size()

    async def settle(self) -> None:
        await self.service.db_engine.dispose()

    async def aclose(self) -> None:
        if self.owned:
            await self.service.db_engine.dispose()


def _check_file(url: str) -> None:
    """A SQLite source must be there: the read-only engine would say so less clearly."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database or "").absolute()
        if not path.is_file():
            raise InvalidInput(f"{path}: no DatabaseSessionService database there; check the path")


class TurnstoreSessions(Sessions):
    """ADK sessions in a store, as `TurnstoreSessionService` keeps them: listed from the
    catalog (sessions of kind `adk`), read as the service reads them; written with the
    source's create and update times and event timestamps, owned by `owner_id` (default:
    each session's ADK user id). `store` is an open store (left open) or a URL (closed by
    `close()`)."""

    keeps_times = True

    def __init__(
        self, store: Store | BlockingStore | str | os.PathLike[str], *, owner_id: str | None = None
    ) -> None:
        service = TurnstoreSessionService(store)
        super().__init__(service)
        self.service: TurnstoreSessionService = service
        self.store = service.store
        self.owner_id = owner_id

    def deferred(self) -> AbstractContextManager[None]:
        """The store's `deferred_durability`: one fsync (or WAL flush) for the copy."""
        return self.store.deferred_durability()

    async def keys(
        self,
        apps: Sequence[str] | None,
        users: Sequence[str] | None,
        session_ids: Sequence[str] | None,
    ) -> AsyncIterator[Key]:
        """The catalog's ADK sessions, a page at a time, that the filters keep."""
        cursor: SessionCursor | None = None
        while True:
            page = await self.store.list_sessions_page(SessionPageRequest(cursor=cursor, limit=500))
            for summary in page.sessions:
                if summary.kind != KIND or not summary.session_id.startswith(PREFIX):
                    continue
                key = Key(
                    *(_unescape(part) for part in summary.session_id[len(PREFIX) :].split("/"))
                )
                if (
                    (apps is None or key.app_name in apps)
                    and (users is None or key.user_id in users)
                    and (session_ids is None or key.session_id in session_ids)
                ):
                    yield key
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def read(self, key: Key, skipped: list[Problem] | None) -> Read | None:
        read = await self.service._read(turnstore_id(*key), None)
        if read is None:
            return None
        record, events, _ = read
        own = storage.loaded(record["state"])
        dumped = [event.model_dump(mode="json", exclude_none=True) for event in events]
        updated = record["last_update_time"]
        return Read(key, own, record.get("create_time"), updated, dumped)

    async def count(self, key: Key) -> int:
        return (await self.store.context_window(turnstore_id(*key), None, 0)).length

    async def held(self, key: Key) -> Held | None:
        tid = turnstore_id(*key)
        record = await self.store.load_state(tid, SESSION_KEY)
        if record is None:
            return None
        window = await self.store.context_window(tid, None, None)
        ids = [storage.loaded(item)["id"] for item in window.items]
        return Held(ids, record=record, sequence=window.sequence)

    async def write(self, read: Read, held: Held | None, start: int) -> None:
        """The commits `create_session` and `append_event` make, a page of events each, with
        the source's times: the session's own state and update time as the source's, its
        create time too when it is new."""
        key, tid = read.key, turnstore_id(*read.key)
        owner = self.owner_id or key.user_id
        if held is None or held.record is None:
            record, expected = storage.new_record(read.state, read.updated, read.created), 0
        else:
            record, expected = held.record, held.sequence
        events = read.events[start:]
        for first in range(0, max(len(events), 1) if held is None else len(events), PAGE):
            page = events[first : first + PAGE]
            times = [(event["timestamp"], event["id"]) for event in page]
            record = storage.moved_record(record, read.state, read.updated, times, expected + 1)
            writes: list[Any] = [(tid, SESSION_KEY, record)]
            writes += [(tid, storage.event_key(event["id"]), expected + 1) for event in page]
            items = [storage.stored(event) for event in page]
            expected = await self.store.append_context(
                tid, items, owner, expected, writes, kind=KIND
            )

    async def states(self, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
        app = await self.store.load_state_scope(_app_scope(key.app_name))
        user = await self.store.load_state_scope(_user_scope(key.app_name, key.user_id))
        return storage.loaded_scope(app), storage.loaded_scope(user)

    async def set_states(self, key: Key, app: dict[str, Any], user: dict[str, Any]) -> None:
        for scope, values in (
            (_app_scope(key.app_name), app),
            (_user_scope(key.app_name, key.user_id), user),
        ):
            for name, value in values.items():
                await self.store.save_state(scope, storage.stored_key(name), storage.stored(value))

    async def size(self) -> int | None:
        return None

    async def aclose(self) -> None:
        await self.service.close()

    def close(self) -> None:
        self.service._shared.close()
