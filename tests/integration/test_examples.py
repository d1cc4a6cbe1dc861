"""The programs in `examples/` run as a user would run them; a second run resumes the first."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from programs import run_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def backend_name() -> str:
    """`store_url` here is a fresh PostgreSQL schema."""
    return "postgres"


def run(name: str, folder: Path, *arguments: str) -> list[str]:
    """Copy example `name` into `folder` and run it there twice; return both outputs."""
    shutil.copy(EXAMPLES / name, folder / name)
    return run_program(folder / name, *arguments, env=dict(os.environ))


def test_every_example_is_run_by_a_test() -> None:
    """No program in examples/ goes untested."""
    tested = {"agent_loop.py", "web_service.py", "openai_agents_sdk.py", "langgraph_graph.py"}
    assert {path.name for path in EXAMPLES.glob("*.py")} == tested


def test_the_agent_loop_resumes_at_the_next_turn(tmp_path: Path) -> None:
    """Each run answers the next question; a turn's streamed deltas are compacted on commit."""
    first, second = run("agent_loop.py", tmp_path)
    assert "turn 1:" in first
    assert "turn 2:" in second
    assert "model_step_completed" in second
    assert "agent_message_content_delta" not in second


def test_the_agent_loop_runs_on_postgresql(tmp_path: Path, store_url: str) -> None:
    """The same loop against a PostgreSQL schema."""
    first, second = run("agent_loop.py", tmp_path, store_url)
    assert ("turn 1:" in first, "turn 2:" in second) == (True, True)


def test_the_web_service_keeps_chats_across_restarts(tmp_path: Path) -> None:
    """Two concurrent clients post to one chat; a restarted service sees every message."""
    first, second = run("web_service.py", tmp_path, "--self-test")
    assert "(4 messages)" in first
    assert "(8 messages)" in second


@pytest.mark.peers
def test_the_openai_agents_sdk_example_keeps_the_conversation(tmp_path: Path) -> None:
    """The SDK's runner with a scripted model; the second run continues the same session."""
    first, second = run("openai_agents_sdk.py", tmp_path)
    assert "2 turns, 8 items" in first
    assert "4 turns, 16 items" in second
    assert 'first message "What\'s the weather in Lisbon?"' in second


@pytest.mark.peers
def test_the_langgraph_example_keeps_the_thread(tmp_path: Path) -> None:
    """A compiled StateGraph with a scripted model; the second run continues the thread."""
    first, second = run("langgraph_graph.py", tmp_path)
    assert "2 turns, 4 messages" in first
    assert "4 turns, 8 messages" in second
