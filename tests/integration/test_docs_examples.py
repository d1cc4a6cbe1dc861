"""Every Python code block of the README and the docs runs as written, twice.

Each block is a complete program: it is written unmodified to a file in a fresh folder and
run there with the installed turnstore, then run again in the same folder (a second run finds
the first one's database, as a reader trying it twice would). A block that reads
`DATABASE_URL` gets the test PostgreSQL server, in a schema of its own.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from programs import run_program

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres
from turnstore import EventPageRequest, ExecutionPageRequest, SessionPageRequest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        for index, block in enumerate(BLOCK.findall(document.read_text())):
            found.append((f"{document.relative_to(ROOT)}#{index + 1}", block))
    return found


BLOCKS = _blocks()
FRAMEWORK = re.compile(
    r"^\s*(from|import)"
    r" (agents|langgraph|google\.adk|pydantic_ai|strands|turnstore\.integrations)\b",
    re.MULTILINE,
)
"""A block that imports an agent framework runs with the peers (`./dev test-peers`)."""


def _params() -> list[Any]:
    return [
        pytest.param(
            name, block, id=name, marks=[pytest.mark.peers] if FRAMEWORK.search(block) else []
        )
        for name, block in BLOCKS
    ]


def test_the_documents_have_runnable_examples() -> None:
    """The README and the docs show code: at least the README's and getting started's."""
    names = [name for name, _ in BLOCKS]
    assert sum(name.startswith("README.md") for name in names) >= 3
    assert sum(name.startswith("docs/getting-started.md") for name in names) >= 3


@pytest.fixture
def database_url() -> object:
    """A PostgreSQL URL with a fresh schema, dropped afterwards."""
    require_postgres()
    schema = f"docs_{uuid.uuid4().hex}"
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}schema={schema}"
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize(("name", "block"), _params())
def test_a_code_block_runs_as_written(name: str, block: str, tmp_path: Path, request) -> None:
    """The block runs unmodified as a program, and again in the same folder."""
    program = tmp_path / "example.py"
    program.write_text(block)
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    if "DATABASE_URL" in block:
        env["DATABASE_URL"] = request.getfixturevalue("database_url")
    started_ms = time.time_ns() // 1_000_000
    run_program(program, env=env)
    stores = [str(path) for path in sorted(tmp_path.glob("*.sqlite3"))]
    stores += [env["DATABASE_URL"]] if "DATABASE_URL" in env else []
    for url in stores:
        assert_realistic(url, started_ms)


def assert_realistic(url: str, started_ms: int) -> None:
    """What an example stored looks real: events and turns timed now, and no turn left running.

    A reader sees it in the viewer and in `sessions show`: an event at `recorded_at_ms=1` is
    from 1970, and a turn started and never finished is shown running.
    """
    now_ms = time.time_ns() // 1_000_000
    with turnstore.open_blocking(url, read_only=True) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=100))
        for summary in page.sessions:
            session_id = summary.session_id
            checkpoint = store.load(session_id)
            assert checkpoint is None or checkpoint.active_execution is None, session_id
            events = store.event_page(session_id, EventPageRequest(limit=500)).events
            for event in events:
                assert started_ms <= event.recorded_at_ms <= now_ms, (session_id, event)
            turns = store.execution_page(session_id, ExecutionPageRequest(limit=100)).executions
            for record in turns:
                assert started_ms <= record.started_at_ms <= record.finished_at_ms <= now_ms
