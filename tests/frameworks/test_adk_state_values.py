"""State values that are not JSON, each through ADK's `DatabaseSessionService` and ours.

One table: each row is a state delta, given to `create_session` and to `append_event` of ADK's
database service (on SQLite, its aiosqlite URL) and of turnstore's (SQLite, PostgreSQL). What
a later `get_session` and `get_user_state` return must be the same, or both must refuse the
call (ours with `InvalidInput`, changing nothing). docs/how-to/adk.md shows the table.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from conftest import POSTGRES_URL, postgres_connection, require_postgres

pytestmark = pytest.mark.peers


class Point(BaseModel):
    """A pydantic model as a state value."""

    x: int = 1
    y: int = 2


class Colour(enum.Enum):
    """An enum member as a state value."""

    RED = "red"


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


_circular: dict[str, Any] = {}
_circular["self"] = _circular

VALUES: dict[str, Any] = {
    "datetime": datetime.datetime(2026, 1, 2, 3, 4, 5, 678901),
    "aware datetime": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    "date": datetime.date(2026, 1, 2),
    "time": datetime.time(3, 4, 5),
    "timedelta": datetime.timedelta(seconds=90),
    "set": {3, 1, 2},
    "frozenset": frozenset({"a"}),
    "tuple": (1, "a"),
    "bytes": b"hi",
    "non-UTF-8 bytes": b"\xff\x00",
    "Decimal": decimal.Decimal("1.10"),
    "NaN": math.nan,
    "infinity": math.inf,
    "-infinity": -math.inf,
    "int-keyed dict": {1: "a", 2: "b"},
    "tuple-keyed dict": {(1, 2): "a"},
    "None-keyed dict": {None: 1},
    "NaN-keyed dict": {math.nan: 1},
    "callable": len,
    "lambda": lambda: 1,
    "object": object(),
    "UUID": uuid.UUID(int=5),
    "enum": Colour.RED,
    "pydantic model": Point(),
    "integer beyond 64 bits": 2**70,
    "NUL in text": "a\x00b",
    "lone surrogate": "\ud800",
    "lone surrogate in a key": {"\ud800": 1},
    "nested 40 levels": _nested(40),
    "nested 3,000 levels": _nested(3000),
    "circular": _circular,
    "looks stored as text": {"adk-json": "[1]"},
    "nested mix": {"d": [datetime.date(2026, 1, 2), {1: b"x", "n": math.nan}]},
}
"""Each value is set under a session, a `user:` and an `app:` key."""

KEYS: dict[str, str] = {
    "NUL in keys": "k\x00",
    "escape-like keys": 'adk-key:"k"',
    "empty keys": "",
}
"""Each key is set (with the value 1) in the session's, the user's and the app's state."""

REFUSED = {"non-UTF-8 bytes", "lone surrogate in a key", "nested 3,000 levels", "circular"}
"""The rows ADK's database service refuses (a `ValueError`); turnstore's raises `InvalidInput`."""

ROWS = {name: {"k": v, "user:k": v, "app:k": v} for name, v in VALUES.items()}
ROWS |= {name: {k: 1, f"user:{k}": 1, f"app:{k}": 1} for name, k in KEYS.items()}


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


async def _outcome(service: Any, row: str, refusal: type[BaseException]) -> dict[str, str]:
    """What a service does with a row's delta, on create and on append, as comparable text."""
    from google.adk.events.event import Event, EventActions

    delta, app, found = ROWS[row], f"app {row}", {}
    try:
        created = await service.create_session(
            app_name=app, user_id="u", session_id="c", state=delta
        )
    except ValueError as error:
        refused = isinstance(error, refusal)
        found["create"] = "refused" if refused else f"raised {type(error).__name__}"
        stored = await service.get_session(app_name=app, user_id="u", session_id="c")
        found["create stored"] = repr(stored)
    else:
        stored = await service.get_session(app_name=app, user_id="u", session_id="c")
        found["create"] = _shown([created.state, stored.state])
    session = await service.create_session(app_name=app, user_id="v", session_id="e")
    sent = EVENTS.setdefault(row, Event(author="user", actions=EventActions(state_delta=delta)))
    try:
        await service.append_event(session, sent)
    except ValueError as error:
        refused = isinstance(error, refusal)
        found["append"] = "refused" if refused else f"raised {type(error).__name__}"
    stored = await service.get_session(app_name=app, user_id="v", session_id="e")
    events = [e.model_dump(mode="json", exclude_none=True) for e in stored.events]
    user = await service.get_user_state(app_name=app, user_id="v")
    found["append stored"] = _shown([stored.state, events, user])
    return found


EVENTS: dict[str, Any] = {}
"""One event per row, appended to both services: the same id, timestamp and objects."""


@pytest.fixture(params=["sqlite", "postgres"])
async def services(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Any, Any]]:
    """ADK's database service on SQLite, and turnstore's on one backend."""
    from google.adk.sessions import DatabaseSessionService

    from turnstore.integrations.adk import TurnstoreSessionService

    theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
    schema = f"test_{uuid.uuid4().hex}"
    if request.param == "postgres":
        require_postgres()
        separator = "&" if "?" in POSTGRES_URL else "?"
        ours = TurnstoreSessionService(f"{POSTGRES_URL}{separator}schema={schema}")
    else:
        ours = TurnstoreSessionService(str(tmp_path / "turnstore.sqlite3"))
    yield theirs, ours
    await theirs.close()
    await ours.close()
    if request.param == "postgres":
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_every_state_value_comes_back_as_adks_database_service_returns_it(
    services: tuple[Any, Any],
) -> None:
    """Row by row, turnstore stores what ADK's database service stores and refuses only what
    it refuses."""
    from turnstore import InvalidInput

    theirs, ours = services
    differ, refused = {}, set()
    for row in ROWS:
        adk = await _outcome(theirs, row, ValueError)
        mine = await _outcome(ours, row, InvalidInput)
        if adk != mine:
            differ[row] = {"adk": adk, "turnstore": mine}
        if adk.get("append") == "refused":
            refused.add(row)
    assert differ == {}
    assert refused == REFUSED
