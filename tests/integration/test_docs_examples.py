"""Every Python code block of the README and the docs runs as written, twice.

Each block is a complete program: it is written unmodified to a file in a fresh folder and
run there with the installed turnstore, then run again in the same folder (a second run finds
the first one's database, as a reader trying it twice would). A block that reads
`DATABASE_URL` gets the test PostgreSQL server, in a schema of its own.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from programs import run_program

from conftest import POSTGRES_URL, postgres_connection, require_postgres

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
FRAMEWORK = re.compile(r"^\s*(from|import) (agents|langgraph|google\.adk)\b", re.MULTILINE)
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
    run_program(program, env=env)
