"""`TurnstoreSession` beyond what the SDK's suites check, on both backends.

- it is an `agents.memory.Session`, and the SDK's runner (async and `run_sync`) keeps a
  conversation in it across a reopened store;
- its sessions are in turnstore's catalog with their owner, and `delete_sessions` removes them;
- a process killed inside `add_items` keeps the whole batch or none of it, and every
  acknowledged batch survives;
- four processes adding to one session keep one total order: no pair is split, nothing is lost;
- `pop_item` and `clear_session` write a bounded number of rows, whatever the history.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import SessionPageRequest, StoreClosed
from turnstore.integrations.openai_agents import TurnstoreSession

pytestmark = pytest.mark.peers

WRITER = Path(__file__).with_name("_agents_writer.py")


def scripted_agent(*answers: str) -> Any:
    from agents import Agent
    from agents.testing import ScriptedModel

    steps = [[_message(answer)] for answer in answers]
    return Agent(name="scripted", model=ScriptedModel(steps=steps))


def _message(text: str) -> Any:
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    return ResponseOutputMessage(
        id=f"msg-{text}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def test_it_is_an_agents_sdk_session(store_url: str) -> None:
    import agents

    session = TurnstoreSession("s", store_url)
    try:
        assert isinstance(session, agents.memory.Session)
    finally:
        session.close()


async def test_the_runner_keeps_a_conversation_across_a_reopened_store(store_url: str) -> None:
    from agents import Runner, set_tracing_disabled

    set_tracing_disabled(True)
    session = TurnstoreSession("chat", store_url, owner_id="ada")
    await Runner.run(scripted_agent("hello ada"), "Hi, I am Ada", session=session)
    await session.aclose()

    reopened = TurnstoreSession("chat", store_url)
    result = await Runner.run(scripted_agent("you are ada"), "Who am I?", session=reopened)
    assert result.final_output == "you are ada"
    items = await reopened.get_items()
    assert [item.get("content") for item in items if item.get("role") == "user"] == [
        "Hi, I am Ada",
        "Who am I?",
    ]
    assert len(items) == 4  # two user messages, two answers
    await reopened.aclose()


def test_run_sync_uses_the_session(store_url: str) -> None:
    from agents import Runner, set_tracing_disabled

    set_tracing_disabled(True)

    def conversation() -> list[Any]:
        # run_sync leaves its thread's default loop open by design; this thread closes it.
        session = TurnstoreSession("sync-chat", store_url)
        try:
            Runner.run_sync(scripted_agent("one"), "first", session=session)
            Runner.run_sync(scripted_agent("two"), "second", session=session)
            loop = asyncio.get_event_loop_policy().get_event_loop()
            try:
                return loop.run_until_complete(session.get_items())
            finally:
                loop.close()
        finally:
            session.close()

    with ThreadPoolExecutor(1) as pool:
        items = pool.submit(conversation).result()
    assert [item.get("content") for item in items if item.get("role") == "user"] == [
        "first",
        "second",
    ]


async def test_sessions_are_in_the_catalog_and_deleted_with_it(store_url: str) -> None:
    async with turnstore.open(store_url) as store:
        for name in ("a", "b"):
            session = TurnstoreSession(f"user-7-{name}", store, owner_id="user-7")
            await session.add_items([{"role": "user", "content": f"hello {name}"}])
        page = await store.list_sessions_page(SessionPageRequest(limit=10, owner_id="user-7"))
        assert {summary.session_id for summary in page.sessions} == {"user-7-a", "user-7-b"}
        assert {summary.first_user_message for summary in page.sessions} == {
            "hello a",
            "hello b",
        }
        assert await store.delete_sessions(["user-7-a"]) is True
        assert await TurnstoreSession("user-7-a", store).get_items() == []


async def test_a_closed_session_refuses_every_call(store_url: str) -> None:
    session = TurnstoreSession("closing", store_url)
    await session.add_items([{"role": "user", "content": "x"}])
    session.close()
    for call in (session.get_items(), session.add_items([]), session.pop_item()):
        with pytest.raises(StoreClosed):
            await call


async def test_a_closed_session_raises_a_runtime_error_as_the_sdks_own(
    store_url: str, tmp_path: Path
) -> None:
    """Code written for the SDK's `SQLiteSession` catches `RuntimeError` after `close()`:
    it catches ours too, on every call."""
    from agents import SQLiteSession

    theirs = SQLiteSession("closing", str(tmp_path / "sdk.sqlite3"))
    ours = TurnstoreSession("closing", store_url)
    item = {"role": "user", "content": "x"}
    for session in (theirs, ours):
        await session.add_items([item])
        session.close()
        calls = (
            session.get_items(),
            session.add_items([item]),
            session.add_items([]),
            session.pop_item(),
            session.clear_session(),
        )
        caught = []
        for call in calls:
            try:
                await call
            except RuntimeError as error:
                caught.append(error)
        assert len(caught) == len(calls), type(session).__name__


NOT_JSON = [
    pytest.param([{"role": "user", "content": b"bytes"}], id="bytes"),
    pytest.param([{"role": "user", "content": {1, 2}}], id="set"),
    pytest.param([object()], id="object"),
    pytest.param([{"role": "user", "content": {(1, 2): "x"}}], id="tuple-key"),
]


@pytest.mark.parametrize("items", NOT_JSON)
async def test_an_item_that_is_not_json_raises_the_sdks_type_error(
    store_url: str, tmp_path: Path, items: list[Any]
) -> None:
    """The SDK's `SQLiteSession` raises `TypeError` for an item JSON cannot hold (it is
    `json.dumps`'s); ours raises the same, an `InvalidInput` too, and stores nothing."""
    from agents import SQLiteSession

    theirs = SQLiteSession("typed", str(tmp_path / "sdk.sqlite3"))
    ours = TurnstoreSession("typed", store_url)
    try:
        for session in (theirs, ours):
            with pytest.raises(TypeError):
                await session.add_items(items)
            assert await session.get_items() == [], type(session).__name__
        with pytest.raises(turnstore.InvalidInput):
            await ours.add_items(items)
    finally:
        theirs.close()
        ours.close()


async def test_a_shared_store_stays_open_after_a_session_closes(store_url: str) -> None:
    async with turnstore.open(store_url) as store:
        session = TurnstoreSession("shared", store)
        await session.add_items([{"role": "user", "content": "x"}])
        session.close()
        assert await store.context_tail("shared") == [{"role": "user", "content": "x"}]
        # The session borrowed the store: closing it ended the session's calls, not the store's.
        with pytest.raises(StoreClosed):
            await session.get_items()
        with pytest.raises(StoreClosed):
            await session.add_items([])


def test_a_session_borrows_a_blocking_store_too(store_url: str) -> None:
    with turnstore.open_blocking(store_url) as store:
        session = TurnstoreSession("lent", store)
        asyncio.run(session.add_items([{"role": "user", "content": "x"}]))
        session.close()
        assert store.context_tail("lent") == [{"role": "user", "content": "x"}]


def _writer(url: str, session_id: str, writer: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), url, session_id, writer, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _acknowledged(output: str) -> set[str]:
    return {f"{w}-{n}" for _, w, n in (line.split() for line in output.splitlines() if line)}


def _pairs(items: list[Any]) -> list[str]:
    """The call ids of `items`, checking that each call is followed by its own output."""
    assert len(items) % 2 == 0, "a pair was split"
    ids = []
    for call, output in zip(items[0::2], items[1::2], strict=True):
        assert call["type"] == "function_call", call
        assert output["type"] == "function_call_output", output
        assert call["call_id"] == output["call_id"], (call, output)
        ids.append(call["call_id"])
    return ids


@pytest.mark.slow
def test_a_writer_killed_inside_add_items_keeps_whole_batches(store_url: str) -> None:
    rng = random.Random(20261201)
    acknowledged: set[str] = set()
    kills = 12
    for kill in range(kills):
        process = _writer(store_url, "killed", f"k{kill}", 10_000)
        assert process.stdout is not None
        # Past start-up: wait for some acknowledged adds, then kill at a random instant.
        lines = [process.stdout.readline() for _ in range(rng.randint(1, 15))]
        time.sleep(rng.uniform(0, 0.01))
        process.send_signal(signal.SIGKILL)
        output, _ = process.communicate()
        acknowledged |= _acknowledged("".join(lines) + output)
        assert process.returncode == -signal.SIGKILL
    session = TurnstoreSession("killed", store_url)
    try:
        ids = _pairs(asyncio.run(session.get_items()))
    finally:
        session.close()
    assert len(ids) == len(set(ids))
    assert acknowledged <= set(ids)  # no acknowledged batch lost
    assert len(ids) - len(acknowledged) <= kills  # at most the batch in flight at each kill
    assert len(acknowledged) >= kills


@pytest.mark.slow
async def test_four_processes_on_one_session_keep_one_total_order(store_url: str) -> None:
    count = 60
    processes = [_writer(store_url, "shared", f"w{n}", count) for n in range(4)]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0, 0]
    assert all(len(_acknowledged(output)) == count for output in outputs)
    session = TurnstoreSession("shared", store_url)
    ids = _pairs(await session.get_items())
    assert sorted(ids) == sorted(f"w{n}-{i}" for n in range(4) for i in range(count))
    for n in range(4):  # each writer's pairs in the order it added them
        mine = [int(i.split("-")[1]) for i in ids if i.startswith(f"w{n}-")]
        assert mine == list(range(count))
    # The journal holds the same order: one batch per add, in commit order.
    async with turnstore.open(store_url) as store:
        request = turnstore.TranscriptPageRequest(max_batches=1000)
        page = await store.transcript_page("shared", request)
        journaled = [item for batch in reversed(page.batches) for item in batch.items]
    assert _pairs(journaled) == ids
    await session.aclose()


def _chunk_versions(backend_name: str, database: Any, session_id: str) -> dict[int, str]:
    version = "ctid::text" if backend_name == "postgres" else "CAST(rowid AS TEXT)"
    rows = database.query(
        f"SELECT start, {version} FROM context_chunks WHERE session_id = ?", (session_id,)
    )
    return dict(rows)


async def test_pop_and_clear_leave_the_history_unwritten(
    store_url: str, backend_name: str, database: Any
) -> None:
    session = TurnstoreSession("long", store_url)
    for number in range(300):
        await session.add_items([{"role": "user", "content": f"m{number}"}])
    before = _chunk_versions(backend_name, database, "long")
    assert await session.pop_item() == {"role": "user", "content": "m299"}
    after = _chunk_versions(backend_name, database, "long")
    assert set(before) - set(after) == {299}  # the popped item's chunk, no other
    assert all(after[start] == before[start] for start in after)
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.aclose()


def test_the_frameworks_benchmark_runs(tmp_path: Path) -> None:
    """`python -m bench.frameworks --smoke` runs every peer it names, so it cannot rot."""
    out = tmp_path / "frameworks.json"
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bench.frameworks", "--smoke", "--json", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert {name for name, peer in doc["peers"].items() if peer["status"] == "ran"} >= {
        "turnstore",
        "agents-sqlitesession",
        "agents-sqlalchemysession",
        "turnstore-pg",
    }
    assert len(doc["targets"]) == 12
    assert set(doc["adk"]["rows"]) >= {"database full list at 200", "turnstore page at 200"}
    for part, peers in (
        ("strands", {"turnstore", "turnstore-pg", "strands-file", "strands-file+fsync"}),
        ("pydantic_ai", {"turnstore", "turnstore-pg", "inmemory"}),
    ):
        ran = doc["turns"][part]["peers"]
        assert {name for name, peer in ran.items() if peer["status"] == "ran"} >= peers
        for name in peers:
            # Every point timed, and the resumed load holds the session's messages.
            assert [row["turns"] for row in ran[name]["points"]] == [3, 6]
            assert [row["loaded_messages"] for row in ran[name]["points"]] == [12, 24]
