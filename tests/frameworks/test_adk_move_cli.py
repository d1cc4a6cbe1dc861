"""`turnstore import-from adk` and `export-to adk`: the dry run, the move with `--verify`, a
re-run, JSON, the way out, a conflict's exit code, what the command cannot take, and a copy
killed at random points and run again.

Sources are filled by ADK's own `DatabaseSessionService` (`test_adk_move.fill`).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_adk_move import (
    APPS,
    EVENTS,
    USERS,
    database_service,
    digest,
    event,
    every_key,
    fill,
    url_of,
)

import turnstore
from sizes import pick
from turnstore.cli import main
from turnstore.errors import TurnstoreError
from turnstore.records import SessionPageRequest

pytestmark = pytest.mark.peers

KILLS = pick(12, 3)
"""SIGKILLs of a copy in the kill test."""
KILLED_SESSIONS, KILLED_EVENTS = 30, 40
"""The kill test's source: sessions of events, filled by ADK once per run."""


def cli(*args: object) -> Any:
    """The command through click's runner, as a plain pipe would run it."""
    runner = CliRunner(env={"COLUMNS": "80", "TURNSTORE_URL": None})
    result = runner.invoke(main, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def source_path(tmp_path: Path) -> Path:
    path = tmp_path / "sessions.db"
    fill(url_of(path))
    return path


def test_the_command_moves_in_and_out_and_reports(source_path, store_url, tmp_path):
    """Dry run, the move with --verify, a re-run, JSON, the way out and a conflict's exit."""
    before = digest(source_path)
    sessions, events = len(every_key()), len(every_key()) * (EVENTS + 1)
    dry = cli("import-from", "adk", source_path, store_url, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    assert (planned["session_count"], planned["event_count"]) == (sessions, events)
    assert planned["dry_run"] is True
    text = cli("import-from", "adk", url_of(source_path), store_url, "--dry-run").stdout
    assert f"Would move {sessions} sessions ({events} events" in text
    picked = cli("import-from", "adk", source_path, store_url, "--apps", "sales", "--users", "bob")
    assert picked.stdout.startswith("Moved in 2 sessions in "), picked.output
    moved = cli("import-from", "adk", url_of(source_path), store_url, "--verify")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.startswith(f"Moved in {sessions} sessions in ")
    assert f"({events - 2 * (EVENTS + 1)} events, {2 * (EVENTS + 1)} already there" in moved.stdout
    assert ": no difference." in moved.stdout
    again = cli("import-from", "adk", source_path, store_url, "--json")
    body = json.loads(again.stdout)
    assert (body["event_count"], body["present_count"], body["state_count"]) == (0, events, 0)
    assert body["turnstore_bytes"] > 0
    assert digest(source_path) == before
    target = tmp_path / "out.db"
    out = cli("export-to", "adk", store_url, url_of(target), "--verify", "--json")
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert (body["event_count"], body["verify"]["difference"]) == (events, None)
    asyncio.run(_replace_last(target))
    clash = cli("export-to", "adk", store_url, target, "--sessions", "chat-1", "--json")
    assert clash.exit_code == 1
    conflicts = json.loads(clash.stdout)["conflicts"]
    assert len(conflicts) == len(APPS) * len(USERS)
    assert conflicts[0]["event"] == 0  # the session was created again: its first event differs
    assert {c["session_id"] for c in conflicts} == {"chat-1"}


async def _replace_last(path: Path) -> None:
    """Every `chat-1` on ADK's side deleted and created again with another event."""
    service = database_service(url_of(path))
    for app, user, session_id in every_key():
        if session_id == "chat-1":
            await service.delete_session(app_name=app, user_id=user, session_id=session_id)
            session = await service.create_session(
                app_name=app, user_id=user, session_id=session_id
            )
            await service.append_event(session, event(0))
    await service.db_engine.dispose()


def test_the_command_names_what_it_cannot_take(tmp_path):
    """A missing file and a URL without an async driver are one `Error:` line each."""
    store = tmp_path / "store.sqlite3"
    missing = cli("import-from", "adk", tmp_path / "nothing.db", store)
    assert missing.exit_code == 1
    assert "no DatabaseSessionService database there" in missing.stderr
    plain = cli("import-from", "adk", "postgresql://db/x", store)
    assert plain.exit_code == 1
    assert "sqlite+aiosqlite:///" in plain.stderr
    assert not store.exists()


def copied_any(url: str) -> bool:
    """Whether the store at `url` holds a session yet (False while it cannot be opened)."""
    try:
        with turnstore.open_blocking(url, read_only=True) as store:
            return bool(store.list_sessions_page(SessionPageRequest(limit=1)).sessions)
    except TurnstoreError:
        return False


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kill test's source, filled once by ADK (a copy of a quarter second)."""
    path = tmp_path_factory.mktemp("adk-big") / "big.db"

    async def run() -> None:
        service = database_service(url_of(path))
        for number in range(KILLED_SESSIONS):
            session = await service.create_session(
                app_name="big", user_id=f"user-{number % 7}", session_id=f"s-{number}"
            )
            for index in range(KILLED_EVENTS):
                delta = {"n": index, "user:seen": index, "app:last": number}
                await service.append_event(session, event(index, **delta))
        await service.db_engine.dispose()

    asyncio.run(run())
    return path


def test_a_killed_command_run_again_ends_as_an_uninterrupted_one(big_source, tmp_path, store_url):
    """SIGKILL `import-from adk` at random points; the run after ends equal to the source,
    event for event, nothing doubled."""
    path = tmp_path / "big.db"
    shutil.copy(big_source, path)
    before = digest(path)
    command = [sys.executable, "-m", "turnstore.cli", "import-from", "adk", str(path), store_url]
    rng = random.Random(45)
    landed = 0
    for _ in range(KILLS):
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not copied_any(store_url) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.2))
        landed += child.poll() is None
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert landed >= 1, "every kill came after the copy had ended"
    finished = cli("import-from", "adk", path, store_url, "--verify", "--json")
    assert finished.exit_code == 0, finished.output
    body = json.loads(finished.stdout)
    assert body["conflicts"] == []
    assert body["verify"]["difference"] is None
    total = KILLED_SESSIONS * KILLED_EVENTS
    assert body["event_count"] + body["present_count"] == total
    assert body["verify"]["event_count"] == total
    assert digest(path) == before
