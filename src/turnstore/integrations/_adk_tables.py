"""Google ADK's `DatabaseSessionService` tables, read beside its API for a move.

ADK's API cannot list apps or users, and `get_session` reads a session whole and makes an
`Event` of every row: for a `DatabaseSessionService` database the move reads its tables
instead (schema v1, ADK's current one: `sessions`, `events`, `app_states`, `user_states`),
through an async SQLAlchemy engine the caller may have made read-only, with column types of
its own (an event's JSON as text on SQLite, decoded here, so a row that cannot be decoded is
named instead of failing the whole statement). A session's events come in the order
`get_session` gives them (time, then id), built as its `StorageEvent.to_event` builds them:
the stored JSON with the row's id and invocation id, and the stored exact time (the column's,
to the microsecond, only when the JSON has none).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from google.adk.events.event import Event

from turnstore.errors import CorruptRecord, InvalidInput

PAGE = 500
"""Events (and sessions listed) read at a time."""
CURRENT_SCHEMA = "1"
"""The schema version of ADK's `adk_internal_metadata` this reads (ADK 1.19 on)."""


class Key(NamedTuple):
    """One ADK session: its app, user and id."""

    app_name: str
    user_id: str
    session_id: str


class Place(NamedTuple):
    """Where in a source a difference or a bad row is: a session, and an event's index in it
    and id (None: the session as a whole; `user_id` and `session_id` empty: the app's state)."""

    app_name: str
    user_id: str
    session_id: str
    event: int | None = None
    event_id: str | None = None

    def __str__(self) -> str:
        where = "/".join(part for part in self[:3] if part)
        if self.event is not None:
            where += f" event {self.event}"
        return where if self.event_id is None else f"{where} ({self.event_id})"


class Problem(NamedTuple):
    """A session (or state) the copy did not copy whole, and why: a conflict or a bad row."""

    place: Place
    reason: str


def timestamp(value: datetime) -> float:
    """A stored time as ADK reads it: naive times are UTC."""
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()


def _params(key: Key) -> dict[str, str]:
    """A session's key as the parameters of `DatabaseTables`' reads of one session."""
    return {"app": key.app_name, "user": key.user_id, "session": key.session_id}


class DatabaseTables:
    """A `DatabaseSessionService` database through an async engine (read-only when the caller
    made it so)."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, bindparam, select
        from sqlalchemy.dialects.postgresql import JSONB

        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        data: Any = JSONB() if self.postgres else Text()
        metadata = MetaData()

        def key() -> list[Column[str]]:
            return [Column("app_name", String), Column("user_id", String)]

        self.sessions = Table(
            "sessions",
            metadata,
            *key(),
            Column("id", String),
            Column("state", data),
            Column("create_time", DateTime),
            Column("update_time", DateTime),
        )
        self.events = Table(
            "events",
            metadata,
            Column("id", String),
            *key(),
            Column("session_id", String),
            Column("invocation_id", String),
            Column("timestamp", DateTime),
            Column("event_data", data),
        )
        self.app_states = Table(
            "app_states", metadata, Column("app_name", String), Column("state", data)
        )
        self.user_states = Table("user_states", metadata, *key(), Column("state", data))
        self.metadata_table = Table(
            "adk_internal_metadata", metadata, Column("key", String), Column("value", String)
        )
        self._checked = False
        # A session's two reads, built once: building them for each session was a sixth of
        # a copy of short sessions.
        c, e = self.sessions.c, self.events.c
        self._session_query = select(c.state, c.create_time, c.update_time).where(
            (c.app_name == bindparam("app"))
            & (c.user_id == bindparam("user"))
            & (c.id == bindparam("session"))
        )
        self._events_query = (
            select(e.id, e.invocation_id, e.timestamp, e.event_data)
            .where(
                (e.app_name == bindparam("app"))
                & (e.user_id == bindparam("user"))
                & (e.session_id == bindparam("session"))
            )
            .order_by(e.timestamp, e.id)
        )

    async def check(self) -> bool:
        """Whether ADK's tables are there (False: an empty database); refuses schema v0."""
        from sqlalchemy import inspect, select

        if self._checked:
            return True
        async with self.engine.connect() as connection:
            names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            if "sessions" not in names:
                return False
            version = None
            if "adk_internal_metadata" in names:
                table = self.metadata_table
                query = select(table.c.value).where(table.c.key == "schema_version")
                version = (await connection.execute(query)).scalar_one_or_none()
        if version != CURRENT_SCHEMA:
            raise InvalidInput(
                "this DatabaseSessionService database has ADK's legacy schema (v0, events as"
                " pickles): migrate it first with `adk migrate session`"
            )
        self._checked = True
        return True

    def _filtered(self, table: Any, apps: Sequence[str] | None, users: Sequence[str] | None) -> Any:
        query = table.c.app_name.in_(apps) if apps is not None else None
        if users is not None:
            by_user = table.c.user_id.in_(users)
            query = by_user if query is None else query & by_user
        return query

    async def keys(
        self,
        apps: Sequence[str] | None,
        users: Sequence[str] | None,
        session_ids: Sequence[str] | None,
    ) -> AsyncIterator[Key]:
        """Every session the filters keep, by app, user and id, a page at a time."""
        from sqlalchemy import select, tuple_

        if not await self.check():
            return
        c = self.sessions.c
        after: tuple[str, str, str] | None = None
        while True:
            query = select(c.app_name, c.user_id, c.id)
            where = self._filtered(self.sessions, apps, users)
            if session_ids is not None:
                where = c.id.in_(session_ids) if where is None else where & c.id.in_(session_ids)
            if where is not None:
                query = query.where(where)
            if after is not None:
                query = query.where(tuple_(c.app_name, c.user_id, c.id) > tuple_(*after))
            query = query.order_by(c.app_name, c.user_id, c.id).limit(PAGE)
            async with self.engine.connect() as connection:
                page = [Key(*row) for row in await connection.execute(query)]
            for key in page:
                yield key
            if len(page) < PAGE:
                return
            after = page[-1]

    async def session(self, key: Key) -> tuple[dict[str, Any], float, float] | None:
        """A session's own state, create time and update time; None when it is gone."""
        async with self.engine.connect() as connection:
            row = (await connection.execute(self._session_query, _params(key))).first()
        if row is None:
            return None
        state = self._decoded(row[0], Place(*key), "the session's state")
        return state or {}, timestamp(row[1]), timestamp(row[2])

    async def pages(
        self, key: Key, skipped: list[Problem] | None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """A session's events as `get_session` orders them, a page at a time from one
        statement: each the JSON `to_event` validates (`skipped` None: a row that cannot be
        decoded stops the move; else it is reported there and left out)."""
        index = 0
        async with self.engine.connect() as connection:
            result = await connection.stream(self._events_query, _params(key))
            async for rows in result.partitions(PAGE):
                page = []
                for event_id, invocation_id, at, data in rows:
                    place = Place(*key, index, event_id)
                    try:
                        found = self._decoded(data, place, "the event") or {}
                        if not isinstance(found, dict):
                            raise ValueError(f"its JSON is a {type(found).__name__}")
                        item = event_json(found, event_id, invocation_id, at)
                        Event.model_validate(item)  # what `get_session` would refuse
                    except (CorruptRecord, ValueError) as error:
                        if skipped is None:
                            if isinstance(error, CorruptRecord):
                                raise
                            raise CorruptRecord(
                                f"{place}: ADK cannot read the event: {_first_line(error)}"
                                " (pass skip_bad to skip it)"
                            ) from error
                        skipped.append(Problem(place, _reason(error)))
                        continue
                    page.append(item)
                    index += 1
                yield page

    def _decoded(self, data: Any, place: Place, what: str) -> Any:
        if data is None or self.postgres:
            return data
        try:
            return json.loads(data)
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as error:
            raise CorruptRecord(
                f"{place}: {what} cannot be decoded: {error} (pass skip_bad to skip it)"
            ) from error

    async def count(self, key: Key) -> int:
        """How many events the session has."""
        from sqlalchemy import func, select

        c = self.events.c
        query = select(func.count()).where(
            (c.app_name == key.app_name)
            & (c.user_id == key.user_id)
            & (c.session_id == key.session_id)
        )
        async with self.engine.connect() as connection:
            return int((await connection.execute(query)).scalar_one())

    async def app_state(self, app_name: str) -> dict[str, Any]:
        """The app's state, keys without `app:`."""
        from sqlalchemy import select

        table = self.app_states
        query = select(table.c.state).where(table.c.app_name == app_name)
        async with self.engine.connect() as connection:
            data = (await connection.execute(query)).scalar_one_or_none()
        return self._decoded(data, Place(app_name, "", ""), "the app's state") or {}

    async def user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without `user:`."""
        from sqlalchemy import select

        c = self.user_states.c
        query = select(c.state).where((c.app_name == app_name) & (c.user_id == user_id))
        async with self.engine.connect() as connection:
            data = (await connection.execute(query)).scalar_one_or_none()
        place = Place(app_name, user_id, "")
        return self._decoded(data, place, "the user's state") or {}

    async def size(self) -> int | None:
        """The tables' bytes on PostgreSQL, the file's on SQLite; None on other databases."""
        from sqlalchemy import text

        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(url.database.removeprefix("file:").partition("?")[0])
            return sum(_size(path.with_name(path.name + end)) for end in ("", "-wal"))
        if not self.postgres:
            return None
        names = ("sessions", "events", "app_states", "user_states")
        query = text(
            "SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(name))), 0)"
            " FROM unnest(CAST(:names AS text[])) AS name"
        )
        async with self.engine.connect() as connection:
            return int((await connection.execute(query, {"names": list(names)})).scalar_one())


def event_json(data: dict[str, Any], event_id: str, invocation_id: str, at: datetime) -> Any:
    """An event as ADK's `StorageEvent.to_event` builds it from a row, before validation."""
    exact = data.get("timestamp")
    return {
        **data,
        "id": event_id,
        "invocation_id": invocation_id,
        "timestamp": timestamp(at) if exact is None else exact,
    }


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _reason(error: Exception) -> str:
    if isinstance(error, CorruptRecord):
        return str(error).partition(": ")[2].removesuffix(" (pass skip_bad to skip it)")
    return f"ADK cannot read the event: {_first_line(error)}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
