"""OpenAI Agents SDK sessions moved: SQLiteSession files and SQLAlchemySession databases into
turnstore (SQLite and PostgreSQL) and back out.

Every source is filled by the SDK's own session classes (`add_items`, `pop_item`, and the
runner for one conversation), never by hand-written rows (but the one undecodable row).
Each move is checked by `verify_sessions`, and against the SDK's own `get_items`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres
from sizes import pick
from turnstore.cli import main
from turnstore.errors import CorruptRecord, InvalidInput, TurnstoreError
from turnstore.records import SessionPageRequest

pytestmark = pytest.mark.peers

KILLS = pick(20, 3)
"""SIGKILLs of a copy in the kill test."""
KILLED_SESSIONS, KILLED_TURNS = 120, 40
"""The kill test's source: sessions of turns of four items (a copy of about a second)."""


def turn(session: str, number: int) -> list[dict[str, Any]]:
    """One turn as the runner stores it: the user's message, a function call and its output,
    the model's answer (with non-ASCII text and a nested JSON argument)."""
    call = f"call-{session}-{number}"
    return [
        {"role": "user", "content": f"Question {number} of {session}: what about Zürich? ☀"},
        {
            "type": "function_call",
            "id": f"fc-{number}",
            "call_id": call,
            "name": "lookup",
            "arguments": json.dumps({"city": "Zürich", "days": [1, 2], "deep": {"x": None}}),
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": call, "output": "sunny, " * 40},
        {
            "id": f"msg-{number}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": f"Answer {number}: sunny.", "annotations": []}
            ],
        },
    ]


async def fill(open_session: Any, sessions: int = 4, turns: int = 3, prefix: str = "") -> None:
    """Sessions of every shape through the SDK's API: turns added, a retried answer popped and
    added again, a session emptied by pops (listed, with no item)."""
    for number in range(sessions):
        session = open_session(f"{prefix}chat-{number}")
        for index in range(turns):
            await session.add_items(turn(session.session_id, index))
        await session.pop_item()  # a retry: the last answer is taken back ...
        await session.add_items(turn(session.session_id, 99)[-1:])  # ... and given again
        _close(session)
    emptied = open_session(f"{prefix}emptied")
    await emptied.add_items([{"role": "user", "content": "hello?"}])
    await emptied.pop_item()
    _close(emptied)


def _close(session: Any) -> None:
    if hasattr(session, "close"):
        session.close()


async def converse(path: Path) -> None:
    """One conversation the SDK's runner keeps in a SQLiteSession."""
    from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
    from agents.testing import ScriptedModel
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    session = SQLiteSession("runner", path)
    for text in ("hello", "again"):
        reply = ResponseOutputMessage(
            id=f"msg-{text}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        agent = Agent(name="scripted", model=ScriptedModel(steps=[[reply]]))
        await Runner.run(agent, f"say {text}", session=session)
    session.close()


def sqlite_file(path: Path, **sizes: int) -> Path:
    from agents import SQLiteSession

    asyncio.run(fill(lambda session_id: SQLiteSession(session_id, path), **sizes))
    return path


def digest(path: Path) -> tuple[str, str]:
    """The file's bytes and its log's (none and empty alike: nothing logged)."""
    log = path.with_name(f"{path.name}-wal")
    logged = log.read_bytes() if log.exists() else b""
    return hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(logged).hexdigest()


async def sdk_items(path: Path, session_id: str) -> list[Any]:
    """A session's items as the SDK's own SQLiteSession reads them."""
    from agents import SQLiteSession

    session = SQLiteSession(session_id, path)
    try:
        return await session.get_items()
    finally:
        session.close()


async def turnstore_items(url: str, session_id: str) -> list[Any]:
    from turnstore.integrations.openai_agents import TurnstoreSession

    session = TurnstoreSession(session_id, url)
    try:
        return await session.get_items()
    finally:
        await session.aclose()


@pytest.fixture
def source_path(tmp_path: Path) -> Path:
    """A SQLiteSession file filled by the SDK, closed."""
    path = sqlite_file(tmp_path / "sessions.db")
    asyncio.run(converse(path))
    return path


@pytest.fixture
def ours(store_url: str) -> Iterator[Any]:
    from turnstore.integrations.openai_agents_move import TurnstoreSessions

    with TurnstoreSessions(store_url, owner_id="ada") as sessions:
        yield sessions


def session_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT session_id FROM agent_sessions ORDER BY 1").fetchall()
    connection.close()
    return [row[0] for row in rows]


def test_a_sqlite_session_file_into_turnstore_and_back_out(source_path, ours, store_url, tmp_path):
    """Every session and item goes in and out, exact and in order; the source is untouched."""
    from turnstore.integrations.openai_agents_move import (
        SQLiteSessions,
        copy_sessions,
        survey,
        verify_sessions,
    )

    before = digest(source_path)
    with SQLiteSessions(source_path) as source:
        planned = survey(source)
        report = copy_sessions(source, ours)
        assert (report.conflicts, report.skipped) == ([], [])
        assert (report.session_count, report.item_count) == (6, planned.item_count)
        assert planned.session_count == 6
        assert planned.source_bytes
        checked = verify_sessions(source, ours)
        assert checked.difference is None
        assert checked.item_count == planned.item_count
    for session_id in session_ids(source_path):
        expected = asyncio.run(sdk_items(source_path, session_id))
        assert asyncio.run(turnstore_items(store_url, session_id)) == expected
    back_path = tmp_path / "back.db"
    with SQLiteSessions(back_path) as back:
        out = copy_sessions(ours, back)
        assert out.item_count == report.item_count
        assert verify_sessions(ours, back).difference is None
    for session_id in session_ids(source_path):
        if session_id != "emptied":  # no item: a SQLiteSession target never hears of it
            expected = asyncio.run(sdk_items(source_path, session_id))
            assert asyncio.run(sdk_items(back_path, session_id)) == expected
    assert digest(source_path) == before
    with turnstore.open_blocking(store_url, read_only=True) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=20))
    kinds = {s.session_id: (s.kind, s.session_context.owner_id) for s in page.sessions}
    assert kinds["chat-0"] == ("openai-agents", "ada")
    assert kinds["runner"] == ("openai-agents", "ada")


def test_a_second_run_copies_nothing_and_a_grown_source_only_the_new(tmp_path, ours):
    """Run again: nothing; after the source grew: only its new items and sessions."""
    from agents import SQLiteSession

    from turnstore.integrations.openai_agents_move import (
        SQLiteSessions,
        copy_sessions,
        verify_sessions,
    )

    path = sqlite_file(tmp_path / "growing.db", turns=2)
    source = SQLiteSessions(path)
    first = copy_sessions(source, ours)
    again = copy_sessions(source, ours)
    assert again.item_count == 0
    assert again.present_count == first.item_count

    async def grow() -> None:
        old, new = SQLiteSession("chat-1", path), SQLiteSession("newcomer", path)
        await old.add_items(turn("chat-1", 7))
        await new.add_items(turn("newcomer", 0))
        old.close()
        new.close()

    asyncio.run(grow())
    grown = copy_sessions(source, ours)
    assert grown.item_count == 8
    assert grown.present_count == first.item_count
    assert verify_sessions(source, ours).difference is None
    source.close()


def test_a_differing_session_is_a_conflict_left_alone_and_a_longer_one_is_kept(
    source_path, ours, store_url
):
    """A target session whose items differ is reported and not written; one that went on
    after the source's items (workers switched to turnstore) is kept as it is."""
    from turnstore.integrations.openai_agents_move import Place, SQLiteSessions, copy_sessions

    planted = asyncio.run(sdk_items(source_path, "chat-2"))[:5]
    planted[3] = {"role": "user", "content": "not what the source holds"}
    asyncio.run(ours.add("chat-2", planted))
    source = SQLiteSessions(source_path)
    report = copy_sessions(source, ours)
    assert [p.place for p in report.conflicts] == [Place("chat-2", 3)]
    assert "not what the source holds" in report.conflicts[0].reason
    assert asyncio.run(turnstore_items(store_url, "chat-2")) == planted
    asyncio.run(ours.add("chat-1", [{"role": "user", "content": "a turn on turnstore"}]))
    again = copy_sessions(source, ours)
    assert (again.item_count, again.ahead_count, len(again.conflicts)) == (0, 1, 1)
    source.close()


def test_an_undecodable_row_stops_the_copy_or_is_skipped_when_asked(source_path, ours):
    """A row the SDK cannot decode is named with its place; `skip_bad` leaves it out as the
    SDK's own `get_items` does, and the verify agrees."""
    from turnstore.integrations.openai_agents_move import (
        Place,
        SQLiteSessions,
        copy_sessions,
        verify_sessions,
    )

    with sqlite3.connect(source_path) as connection:
        connection.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('chat-0', '{oops')"
        )
    connection.close()
    source = SQLiteSessions(source_path)
    with pytest.raises(CorruptRecord, match="chat-0 item 12"):
        copy_sessions(source, ours)
    report = copy_sessions(source, ours, skip_bad=True)
    assert [p.place for p in report.skipped] == [Place("chat-0", 12)]
    assert verify_sessions(source, ours).difference is None
    assert len(asyncio.run(sdk_items(source_path, "chat-0"))) == 12
    source.close()


def test_any_other_session_is_copied_by_the_ids_named(source_path, ours):
    """A session store the copy cannot list (a callable opening SDK sessions) needs ids; a
    session that would read only its newest items is refused."""
    from agents import SQLiteSession

    from turnstore.integrations.openai_agents_move import copy_sessions, verify_sessions

    opened: list[Any] = []

    def opener(session_id: str, limit: int | None = None) -> Any:
        opened.append(SQLiteSession(session_id, source_path, session_settings={"limit": limit}))
        return opened[-1]

    try:
        with pytest.raises(InvalidInput, match="session_ids"):
            copy_sessions(opener, ours)
        report = copy_sessions(opener, ours, session_ids=["chat-0", "runner"])
        assert report.session_count == 2
        assert report.item_count == 12 + len(asyncio.run(sdk_items(source_path, "runner")))
        assert verify_sessions(opener, ours, session_ids=["chat-0"]).difference is None
        with pytest.raises(InvalidInput, match="newest 3 items"):
            copy_sessions(lambda i: opener(i, limit=3), ours, session_ids=["chat-1"])
    finally:
        for session in opened:
            session.close()


def test_verify_names_the_first_difference(source_path, ours):
    """An item added on the target after the copy: the verify names its session and index."""
    from turnstore.integrations.openai_agents_move import (
        Place,
        SQLiteSessions,
        copy_sessions,
        verify_sessions,
    )

    source = SQLiteSessions(source_path)
    copy_sessions(source, ours)
    asyncio.run(ours.add("chat-3", [{"role": "user", "content": "extra"}]))
    found = verify_sessions(source, ours).difference
    assert found is not None
    assert found.place == Place("chat-3", 12)
    assert "only the target" in found.reason
    source.close()


# --- SQLAlchemySession ----------------------------------------------------------------------


@pytest.fixture(params=["aiosqlite", "psycopg"])
def alchemy_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty SQLAlchemySession database: a SQLite file, or a PostgreSQL schema."""
    if request.param == "aiosqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'alchemy.db'}"
        return
    require_postgres()
    schema = f"sdk_move_{uuid.uuid4().hex}"
    with postgres_connection() as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    base = POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    separator = "&" if "?" in base else "?"
    yield f"{base}{separator}options=-csearch_path%3D{schema}"
    with postgres_connection() as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def alchemy_fill(url: str) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    async def run() -> None:
        engine = create_async_engine(url)
        await fill(lambda i: SQLAlchemySession(i, engine=engine, create_tables=True))
        await engine.dispose()

    asyncio.run(run())


def test_a_sqlalchemy_session_database_into_turnstore_and_back_out(alchemy_url, ours, tmp_path):
    """SQLAlchemySession's sessions go in (its engine read-only) and out to another one."""
    from turnstore.integrations.openai_agents_move import (
        SQLAlchemySessions,
        copy_sessions,
        survey,
        verify_sessions,
    )

    alchemy_fill(alchemy_url)
    with SQLAlchemySessions(alchemy_url, read_only=True) as source:
        planned = survey(source)
        assert planned.session_count == 5
        report = copy_sessions(source, ours)
        assert report.item_count == planned.item_count
        assert verify_sessions(source, ours).difference is None
        assert verify_sessions(ours, source).difference is None  # read through SQLAlchemySession
        asyncio.run(ours.add("extra", [{"role": "user", "content": "only on turnstore"}]))
        with pytest.raises(Exception, match=r"read-?only"):  # a read-only source's engine
            copy_sessions(ours, source, session_ids=["extra"])
    back_url = f"sqlite+aiosqlite:///{tmp_path / 'back.db'}"
    with SQLAlchemySessions(back_url, create_tables=True) as back:
        assert copy_sessions(ours, back).item_count == report.item_count + 1
        assert verify_sessions(ours, back).difference is None
        assert copy_sessions(ours, back).item_count == 0


# --- the command ----------------------------------------------------------------------------


def cli(*args: object) -> Any:
    """The command through click's runner, as a plain pipe would run it."""
    runner = CliRunner(env={"COLUMNS": "80", "TURNSTORE_URL": None})
    result = runner.invoke(main, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_the_command_moves_in_and_out_and_reports(source_path, store_url, tmp_path):
    """Dry run, the move with --verify, a re-run, JSON, the way out and a conflict's exit."""
    before = digest(source_path)
    dry = cli("import-from", "openai-agents", source_path, store_url, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    assert (planned["session_count"], planned["dry_run"]) == (6, True)
    text = cli("import-from", "openai-agents", source_path, store_url, "--dry-run").stdout
    assert f"Would move 6 sessions ({planned['item_count']:,} items" in text
    moved = cli("import-from", "openai-agents", source_path, store_url, "--verify", "--owner", "x")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.startswith("Moved in 6 sessions in ")
    assert f"({planned['item_count']:,} items, source " in moved.stdout
    assert ": no difference." in moved.stdout
    again = cli("import-from", "openai-agents", source_path, store_url, "--json")
    body = json.loads(again.stdout)
    assert (body["item_count"], body["present_count"]) == (0, planned["item_count"])
    assert body["turnstore_bytes"] > 0
    assert digest(source_path) == before
    target = tmp_path / "out.db"
    out = cli("export-to", "openai-agents", store_url, target, "--verify", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["verify"]["difference"] is None
    assert asyncio.run(sdk_items(target, "chat-1")) == asyncio.run(sdk_items(source_path, "chat-1"))
    asyncio.run(_pop(target, "chat-1"))
    asyncio.run(_add(target, "chat-1", [{"role": "user", "content": "changed"}]))
    clash = cli("export-to", "openai-agents", store_url, target, "--sessions", "chat-1", "--json")
    assert clash.exit_code == 1
    conflicts = json.loads(clash.stdout)["conflicts"]
    assert conflicts == [
        {"session_id": "chat-1", "item": 11, "reason": conflicts[0]["reason"]},
    ]


async def _pop(path: Path, session_id: str) -> None:
    from agents import SQLiteSession

    session = SQLiteSession(session_id, path)
    await session.pop_item()
    session.close()


async def _add(path: Path, session_id: str, items: list[Any]) -> None:
    from agents import SQLiteSession

    session = SQLiteSession(session_id, path)
    await session.add_items(items)
    session.close()


def test_the_command_names_what_it_cannot_take(tmp_path):
    """A missing file and a URL without an async driver are one `Error:` line each."""
    store = tmp_path / "store.sqlite3"
    missing = cli("import-from", "openai-agents", tmp_path / "nothing.db", store)
    assert missing.exit_code == 1
    assert "no SQLiteSession database there" in missing.stderr
    plain = cli("import-from", "openai-agents", "postgresql://db/x", store)
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


def test_a_killed_command_run_again_ends_as_an_uninterrupted_one(tmp_path, store_url):
    """SIGKILL `import-from openai-agents` at random points; the run after ends equal to the
    source, item for item, nothing doubled."""
    path = sqlite_file(tmp_path / "big.db", sessions=KILLED_SESSIONS, turns=KILLED_TURNS)
    command = [sys.executable, "-m", "turnstore.cli", "import-from", "openai-agents"]
    command += [str(path), store_url]
    rng = random.Random(45)
    landed = 0
    for _ in range(KILLS):
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not copied_any(store_url) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4))
        landed += child.poll() is None
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert landed >= 1, "every kill came after the copy had ended"
    finished = cli("import-from", "openai-agents", path, store_url, "--verify", "--json")
    assert finished.exit_code == 0, finished.output
    body = json.loads(finished.stdout)
    assert body["conflicts"] == []
    assert body["verify"]["difference"] is None
    total = KILLED_SESSIONS * (KILLED_TURNS * 4)
    assert body["item_count"] + body["present_count"] == total
    assert body["verify"]["item_count"] == total
