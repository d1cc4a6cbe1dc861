"""A pytest plugin that runs Strands Agents' own session-manager tests against turnstore.

Loaded (`-p strands_plugin`) into a pytest process run inside Strands' unpacked source
distribution, with `--noconftest`: the sdist's root conftest imports moto for its S3 tests,
and none of its fixtures is used by the session-manager tests. Before collection it puts
`TurnstoreMockedRepository` where the tests take their repository
(`tests.fixtures.mock_session_repository.MockedSessionRepository`), so the `mock_repository`
fixture, and every test that calls the class itself, gets a turnstore repository: each one
empty, as the mock is, in its own SQLite file or, on PostgreSQL (`--turnstore-backend
postgres`), its own schema. The one test that restores a session through Strands'
`FileSessionManager` over one directory gets a `RepositorySessionManager` over a turnstore
repository per directory instead (`TurnstoreFileSessionManager`). `--turnstore-backend
strands` substitutes nothing: Strands' own mock, for the counts beside ours.

Strands' default model builds a boto3 Bedrock client per `Agent` (0.4 s of CPU each); no test
here calls a model, so the plugin builds one client per service and region and hands it to
every agent, which leaves the tests' behaviour as it is and their time a third of what it was.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emptied_schemas import empty

BACKEND = "sqlite"
"""The backend under test, set from `--turnstore-backend`."""
POSTGRES_URL = os.environ.get(
    "TURNSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REPORT = os.environ.get("TURNSTORE_STRANDS_REPORT")
"""A file this plugin writes at the end: how many turnstore repositories the tests built."""
COLLECTED = os.environ.get("TURNSTORE_STRANDS_COLLECTED")
"""A file this plugin writes the id of every collected test into, before any is deselected."""
_SCHEMAS: list[str] = []
_BUILT = [0]
_OPEN: list[Any] = []
"""The current test's repositories, closed once it ends."""
_KEYED: dict[str, str] = {}
"""The current test's stores by key (a directory, or a repository's own key)."""
_EMPTIED: collections.deque[str] = collections.deque()
"""Schemas earlier tests used, emptied; taken oldest first."""
_ADMIN: list[Any] = []
_SCRATCH = Path(tempfile.mkdtemp(prefix="turnstore-strands-"))
_RUN = uuid.uuid4().hex[:8]
_CLIENTS: dict[tuple[Any, ...], Any] = {}


def store_url(key: str | None = None) -> str:
    """The turnstore database behind one key (a directory), or a new one for no key."""
    key = uuid.uuid4().hex if key is None else str(Path(key).resolve())
    if key not in _KEYED:
        if BACKEND == "postgres":
            separator = "&" if "?" in POSTGRES_URL else "?"
            _KEYED[key] = f"{POSTGRES_URL}{separator}schema={_a_schema()}"
        else:
            _KEYED[key] = str(_SCRATCH / f"{uuid.uuid4().hex}.sqlite3")
    return _KEYED[key]


def _a_schema() -> str:
    if _EMPTIED:
        return _EMPTIED.popleft()
    schema = f"strands_{_RUN}_{len(_SCHEMAS)}"
    _SCHEMAS.append(schema)
    return schema


def _empty(url: str) -> None:
    """Empty the schema of `url` for a later test, over one admin connection."""
    import psycopg

    if not _ADMIN:
        _ADMIN.append(psycopg.connect(POSTGRES_URL, autocommit=True))
    schema = url.rpartition("schema=")[2]
    empty(_ADMIN[0], schema)
    _EMPTIED.append(schema)


@functools.cache
def _substitutes() -> tuple[type, type]:
    from strands.session.repository_session_manager import RepositorySessionManager

    from turnstore.integrations.strands import TurnstoreSessionRepository

    class TurnstoreMockedRepository(TurnstoreSessionRepository):
        """A `TurnstoreSessionRepository` built as the mock is: no argument, empty."""

        def __init__(self, key: str | None = None) -> None:
            super().__init__(store_url(key))
            _OPEN.append(self)
            _BUILT[0] += 1

    class TurnstoreFileSessionManager(RepositorySessionManager, TurnstoreSessionRepository):
        """`FileSessionManager` as Strands builds it (a manager that is its own repository),
        over one turnstore store per storage directory."""

        def __init__(self, session_id: str, storage_dir: str | None = None, **kwargs: Any):
            TurnstoreSessionRepository.__init__(
                self, store_url(storage_dir or str(_SCRATCH / "default"))
            )
            _OPEN.append(self)
            _BUILT[0] += 1
            RepositorySessionManager.__init__(
                self, session_id=session_id, session_repository=self, **kwargs
            )

    return TurnstoreMockedRepository, TurnstoreFileSessionManager


def _one_client_each() -> None:
    """Every boto3 client of one service, region and endpoint is the first one built."""
    import boto3.session

    build = boto3.session.Session.client

    def client(self: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
        key = (service_name, kwargs.get("region_name"), kwargs.get("endpoint_url"))
        if key not in _CLIENTS:
            _CLIENTS[key] = build(self, service_name, *args, **kwargs)
        return _CLIENTS[key]

    boto3.session.Session.client = client  # type: ignore[method-assign]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--turnstore-backend",
        choices=("sqlite", "postgres", "strands"),
        default="sqlite",
        help="the backend the substituted repositories use (strands: substitute nothing)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global BACKEND
    BACKEND = config.getoption("--turnstore-backend")
    _one_client_each()
    if BACKEND == "strands":
        return
    sys.path.insert(0, str(config.rootpath))
    import tests.fixtures.mock_session_repository as fixtures

    # The test modules import the name when collected, after this: they get ours.
    fixtures.MockedSessionRepository = _substitutes()[0]  # type: ignore[misc]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if COLLECTED:
        Path(COLLECTED).write_text("".join(f"{item.nodeid}\n" for item in items))


@pytest.fixture(autouse=True)
def _file_manager_substituted(request: pytest.FixtureRequest) -> Iterator[None]:
    """The module's `FileSessionManager`, while its test runs, is a turnstore one."""
    module = request.module
    if BACKEND == "strands" or not hasattr(module, "FileSessionManager"):
        yield
        return
    real = module.FileSessionManager
    module.FileSessionManager = _substitutes()[1]
    try:
        yield
    finally:
        module.FileSessionManager = real


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After each test, its repositories are closed and their schemas emptied for later ones."""
    yield
    while _OPEN:
        _OPEN.pop().close()
    if BACKEND == "postgres":
        for url in _KEYED.values():
            _empty(url)
    _KEYED.clear()


def pytest_report_header(config: pytest.Config) -> str:
    if BACKEND == "strands":
        return "MockedSessionRepository is Strands' own"
    return f"MockedSessionRepository is turnstore's TurnstoreSessionRepository on {BACKEND}"


def pytest_unconfigure(config: pytest.Config) -> None:
    if REPORT:
        Path(REPORT).write_text(f"{_BUILT[0]}\n")
    for admin in _ADMIN:
        admin.close()
    if not _SCHEMAS:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for schema in _SCHEMAS:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
