"""A pytest plugin that runs the OpenAI Agents SDK's own session tests against turnstore.

Loaded (`-p agents_sdk_plugin`) into a pytest process run inside the SDK's unpacked source
distribution. Before collection it puts `TurnstoreSqliteSession` where the tests look up
`SQLiteSession` (`agents.SQLiteSession`, `agents.memory.SQLiteSession`), so every test that
builds the SDK's SQLite session builds a turnstore session instead. The SDK's internals
(`agents.memory.sqlite_session.SQLiteSession`, which other SDK classes subclass or check
with isinstance) keep the real class.

The substitute takes `SQLiteSession`'s constructor: the same `db_path` and session id share
history, and each `":memory:"` session is private. Each distinct `db_path` is one turnstore
database: that SQLite file itself, or on PostgreSQL (`--turnstore-backend postgres`) one
schema. A test's schemas are emptied row by row once it ends and handed to later tests
(creating one costs about ten times as much); they are dropped when the run ends.
"""

from __future__ import annotations

import collections
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emptied_schemas import empty

from turnstore.integrations.openai_agents import TurnstoreSession

BACKEND = "sqlite"
"""The backend under test, set from `--turnstore-backend`."""
POSTGRES_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REPORT = os.environ.get("TURNSTORE_AGENTS_SDK_REPORT")
"""A file this plugin writes at the end: how many turnstore sessions the tests built."""
_SCHEMAS: list[str] = []
_BUILT = [0]
_KEYED: dict[str, str] = {}
"""The current test's schemas by db_path (a private session's key is its own)."""
_EMPTIED: collections.deque[str] = collections.deque()
"""Schemas earlier tests used, emptied; taken oldest first."""
_SETTLE = 8
"""Emptied schemas wait this many others before reuse: a session a test left open has long
gone quiet by then."""
_ADMIN: list[Any] = []
_SCRATCH = Path(tempfile.mkdtemp(prefix="turnstore-agents-sdk-"))
_RUN = uuid.uuid4().hex[:8]


def store_url(db_path: str | os.PathLike[str]) -> str:
    """The turnstore database behind one `SQLiteSession` db_path on the backend under test."""
    private = str(db_path) == ":memory:"
    if BACKEND == "postgres":
        key = uuid.uuid4().hex if private else str(Path(db_path).resolve())
        if key not in _KEYED:
            _KEYED[key] = _a_schema()
        separator = "&" if "?" in POSTGRES_URL else "?"
        return f"{POSTGRES_URL}{separator}schema={_KEYED[key]}"
    if private:
        return str(_SCRATCH / f"memory-{uuid.uuid4().hex}.sqlite3")
    return str(Path(db_path))


def _a_schema() -> str:
    if len(_EMPTIED) > _SETTLE:
        return _EMPTIED.popleft()
    schema = f"agents_sdk_{_RUN}_{len(_SCHEMAS)}"
    _SCHEMAS.append(schema)
    return schema


def _empty(schema: str) -> None:
    """Empty `schema` for a later test, over one admin connection opened when first needed."""
    import psycopg

    if not _ADMIN:
        _ADMIN.append(psycopg.connect(POSTGRES_URL, autocommit=True))
    empty(_ADMIN[0], schema)


class TurnstoreSqliteSession(TurnstoreSession):
    """A `TurnstoreSession` built with `SQLiteSession`'s constructor, over its own store."""

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        from agents.memory.session_settings import coerce_session_settings

        super().__init__(
            session_id,
            store_url(db_path),
            session_settings=(
                None if session_settings is None else coerce_session_settings(session_settings)
            ),
        )
        self.db_path = db_path
        _BUILT[0] += 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--turnstore-backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the backend the substituted sessions use",
    )


def pytest_configure(config: pytest.Config) -> None:
    global BACKEND
    BACKEND = config.getoption("--turnstore-backend")
    import agents
    import agents.memory

    # Both packages resolve SQLiteSession lazily (a module __getattr__): an attribute set
    # here wins, for every test module collected after this.
    agents.SQLiteSession = TurnstoreSqliteSession  # type: ignore[attr-defined]
    agents.memory.SQLiteSession = TurnstoreSqliteSession  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After each test, its schemas are emptied for later ones."""
    yield
    for schema in _KEYED.values():
        _empty(schema)
        _EMPTIED.append(schema)
    _KEYED.clear()


def pytest_report_header(config: pytest.Config) -> str:
    return f"SQLiteSession is turnstore's TurnstoreSqliteSession on {BACKEND}"


def pytest_unconfigure(config: pytest.Config) -> None:
    if REPORT:
        Path(REPORT).write_text(f"{_BUILT[0]}\n")
    if not _SCHEMAS:
        return
    import psycopg

    for admin in _ADMIN:
        admin.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for schema in _SCHEMAS:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
