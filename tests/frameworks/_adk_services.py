"""The ADK session services the ADK tests run on: ADK's own, then turnstore's on both backends.

A test marked `@services("adk-inmemory", "adk-database")` runs first on the named ADK services
that have the behaviour it states (proving the test), then on `TurnstoreSessionService` on
SQLite and PostgreSQL (proving the service). `adk-database` is ADK's `DatabaseSessionService`
on SQLite (its aiosqlite URL), `adk-sqlite` its `SqliteSessionService`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_URL, postgres_connection, require_postgres

APP = "app"
TURNSTORE = ["turnstore-sqlite", "turnstore-postgres"]


def services(*adk: str, xfail: tuple[str, ...] = ()) -> Any:
    """Run a test on the named ADK services, then on turnstore's on both backends."""
    params = [pytest.param(name, id=name) for name in adk]
    params += [
        pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason="ADK's own"))
        for name in xfail
    ]
    params += [pytest.param(name, id=name) for name in TURNSTORE]
    return pytest.mark.parametrize("service", params, indirect=True)


async def _adk_service(name: str, tmp_path: Path) -> Any:
    if name == "adk-inmemory":
        from google.adk.sessions import InMemorySessionService

        return InMemorySessionService()
    if name == "adk-sqlite":
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        return SqliteSessionService(str(tmp_path / "adk-sqlite.db"))
    from google.adk.sessions import DatabaseSessionService

    return DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")


@contextlib.asynccontextmanager
async def opened(name: str, tmp_path: Path) -> AsyncIterator[Any]:
    """The session service a test names, closed (and its schema dropped) after the test.

    Each test module's `service` fixture opens `request.param` with it.
    """
    if name.startswith("adk-"):
        theirs = await _adk_service(name, tmp_path)
        yield theirs
        if hasattr(theirs, "close"):
            await theirs.close()
        return
    from turnstore.integrations.adk import TurnstoreSessionService

    if name == "turnstore-sqlite":
        ours = TurnstoreSessionService(str(tmp_path / "turnstore.sqlite3"))
        yield ours
        await ours.close()
        return
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    separator = "&" if "?" in POSTGRES_URL else "?"
    ours = TurnstoreSessionService(f"{POSTGRES_URL}{separator}schema={schema}")
    yield ours
    await ours.close()
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def is_turnstore(service: Any) -> bool:
    """Whether `service` is turnstore's (not one of ADK's own)."""
    from turnstore.integrations.adk import TurnstoreSessionService

    return isinstance(service, TurnstoreSessionService)


def event(
    text: str = "",
    *,
    delta: dict[str, Any] | None = None,
    at: float | None = None,
    ident: str | None = None,
) -> Any:
    """A user event saying `text`, with a state delta, a timestamp and an id if given."""
    from google.adk.events.event import Event, EventActions
    from google.genai import types

    fields: dict[str, Any] = {
        "invocation_id": "inv",
        "author": "user",
        "actions": EventActions(state_delta=delta or {}),
        "content": types.Content(role="user", parts=[types.Part(text=text)]),
    }
    if at is not None:
        fields["timestamp"] = at
    if ident is not None:
        fields["id"] = ident
    return Event(**fields)


def texts(session: Any) -> list[str]:
    """The text of each of a session's events."""
    return [e.content.parts[0].text for e in session.events]


def ids(session: Any) -> list[str]:
    """The id of each of a session's events."""
    return [e.id for e in session.events]


async def reload(service: Any, session: Any, config: Any = None) -> Any:
    """The session as stored now."""
    return await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id, config=config
    )
