"""Pydantic AI conversations on turnstore through a process's death, a move and retention.

A real `Agent` (on `FunctionModel`: no network) runs turns on `TurnstoreConversationStore` in a
child process that is killed with SIGKILL, and this process carries the conversation on. A
conversation with a branch and a fork is exported, imported into the other backend, and read
back the same through Pydantic AI's API. `turnstore prune` removes an old conversation whole
and keeps the recent ones. Conversations are read through Pydantic AI's `ConversationStore`
methods; turnstore's own faces only for search and the catalog's owner.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from _pydantic_ai_agent import SCOPE, agent, dumped
from click.testing import CliRunner
from pydantic_ai.conversation import Conversation

import turnstore
from conftest import Database, postgres_connection, postgres_store_url, require_postgres
from turnstore import Store
from turnstore.cli import main
from turnstore.integrations.pydantic_ai import TurnstoreConversationStore
from turnstore.records import SearchRequest
from turnstore.transfer import export_jsonl_async, import_jsonl_async

pytestmark = pytest.mark.peers

WRITER = Path(__file__).with_name("_pydantic_ai_agent.py")
ACKED = 3
"""Turns the writer acknowledges before it is killed."""
KILL_WITHIN = 0.05
"""Seconds after the last of those within which the kill comes: a few turns' time."""
TURN = 4
"""Messages one turn adds: the prompt, the tool call, its return, the answer."""
DAY = 86_400


@pytest.fixture
async def ours(store_url: str) -> AsyncIterator[TurnstoreConversationStore]:
    async with turnstore.open(store_url, index_in_background=False) as store:
        conversations = TurnstoreConversationStore(store)
        yield conversations
        await conversations.aclose()


@pytest.fixture
def other_url(backend_name: str, tmp_path: Path) -> Iterator[str]:
    """A fresh store on the other backend, for an export to move to."""
    if backend_name == "postgres":
        yield str(tmp_path / "moved.sqlite3")
        return
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    yield postgres_store_url(schema)
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def _run(
    conversations: TurnstoreConversationStore,
    chat: Conversation,
    *prompts: str,
    scope: str | None = None,
) -> Conversation:
    """Run the agent on each prompt in turn, saving after each run; the conversation after."""
    runner = agent()
    for prompt in prompts:
        result = await runner.run(prompt, conversation=chat)
        await conversations.save(result, scope=scope)
        chat = result.conversation
    return chat


async def _hits(store: Store, words: str) -> list[str]:
    """The sessions whose text search finds `words` in."""
    found = await store.search(SearchRequest(query=words, limit=20))
    return sorted({hit.session_id for hit in found.hits})


async def _seen(conversations: TurnstoreConversationStore) -> dict[str, Any]:
    """What Pydantic AI's API reads of a store: the lists, and per conversation its record, the
    conversation loaded, its entries, the histories of the branches it left, and each of those
    entries read on its own."""
    records = await conversations.list_conversations()
    seen: dict[str, Any] = {
        "all": records,
        "ada": await conversations.list_conversations(scope=SCOPE, limit=1),
    }
    for record in records:
        cid = record.conversation_id
        entries = await conversations.load_entries(cid)
        assert entries is not None
        left = [await conversations.read_history(tip) for tip in record.branches]
        held = [entry for history in [entries, *left] for entry in history]
        alone = [await conversations.read_entry(entry.id) for entry in held]
        seen[cid] = (await conversations.read_record(cid), await conversations.load(cid))
        seen[cid] += (entries, left, alone)
    return seen


# --- a process killed, another carrying on ------------------------------------------------------


def _killed_writer(url: str) -> list[dict[str, Any]]:
    """Start the writer, SIGKILL it once it has acknowledged `ACKED` turns; every turn it
    acknowledged, in order."""
    command = [sys.executable, str(WRITER), url, "chat"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    lines = [child.stdout.readline() for _ in range(ACKED)]
    time.sleep(random.uniform(0, KILL_WITHIN))
    child.send_signal(signal.SIGKILL)  # while it runs and saves the turns after these
    rest, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    acked = [json.loads(line) for line in [*lines, *rest.splitlines()] if line]
    assert [line["turn"] for line in acked] == list(range(1, len(acked) + 1))
    assert len(acked) >= ACKED
    return acked


def _survived(chat: Conversation, acked: list[dict[str, Any]]) -> int:
    """Check that a loaded conversation holds every acknowledged turn, as acknowledged, and
    the turn in flight whole or not at all; how many turns it holds."""
    acknowledged = [message for line in acked for message in line["messages"]]
    stored = dumped(chat.messages)
    assert stored[: len(acknowledged)] == acknowledged
    in_flight = stored[len(acknowledged) :]
    assert len(in_flight) in (0, TURN)  # a save commits whole or not at all
    if in_flight:
        assert in_flight[0]["parts"][0]["content"] == f"prompt {len(acked) + 1}"
    else:
        assert chat.revision == acked[-1]["revision"]
    turns = len(stored) // TURN
    assert chat.usage.requests == 2 * turns  # the record's usage is the last save's
    return turns


async def test_a_conversation_killed_mid_run_carries_on_whole_in_another_process(
    store_url: str,
) -> None:
    """A writer SIGKILLed while it runs turns leaves every turn it acknowledged, and of the turn
    in flight all or nothing; another process loads exactly that, its agent is sent all of it,
    and its turn is saved after it with the usage counted on."""
    acked = _killed_writer(store_url)
    async with TurnstoreConversationStore.from_conn_string(store_url) as conversations:
        chat = await conversations.load("chat", scope=SCOPE)
        assert chat is not None
        turns = _survived(chat, acked)
        result = await agent().run("prompt resumed", conversation=chat)
        assert result.output == f"recalled prompt resumed, after {turns} earlier prompts"
        await conversations.save(result)
        again = await conversations.load("chat", scope=SCOPE)
        assert again is not None
        assert dumped(again.messages) == dumped([*chat.messages, *result.new_messages()])
        assert again.usage.requests == 2 * (turns + 1)
        [record] = await conversations.list_conversations(scope=SCOPE)
        assert (record.conversation_id, record.revision) == ("chat", again.revision)


# --- export and import, delete --------------------------------------------------------------------


async def _trip(conversations: TurnstoreConversationStore) -> None:
    """`trip` (ada's): three turns, a branch back to the first and a turn on it, a title;
    `trip-fork` (bob's), forked from it, and a turn on the fork; `other`, of no scope."""
    trip = Conversation(conversation_id="trip")
    chat = await _run(
        conversations, trip, "plan Oslo", "book sleeper", "pack suitcase", scope=SCOPE
    )
    branched = await conversations.branch("trip", at=TURN, expected_revision=chat.revision)
    await _run(conversations, branched, "choose Bergen")
    await conversations.update("trip", title="Trip", metadata={"days": 3})
    fork = await conversations.fork("trip", new_conversation_id="trip-fork", scope="bob")
    await _run(conversations, fork, "ask ferries")
    await _run(conversations, Conversation(conversation_id="other"), "unrelated question")


async def _carries_on(moved: TurnstoreConversationStore, before: dict[str, Any]) -> None:
    """Branch `trip` back to the branch it left and run a turn there; delete it, which keeps
    its fork whole and takes its words out of search."""
    record, _, _, left, _ = before["trip"]
    tip = record.branches[0]
    back = await moved.branch("trip", from_entry=tip, expected_revision=record.revision)
    assert back.messages == [entry.message for entry in left[0]]
    await _run(moved, back, "unpack suitcase")
    await moved.delete("trip", scope=SCOPE)
    assert await moved.load("trip") is None
    assert await moved.load("trip-fork") == before["trip-fork"][1]
    assert await _hits(moved.store, "suitcase") == []
    assert await _hits(moved.store, "Bergen") == ["pydantic-ai/trip-fork"]


async def test_an_exported_conversation_reads_back_the_same_from_the_other_backend(
    ours: TurnstoreConversationStore, other_url: str, tmp_path: Path
) -> None:
    """Exported, and imported into the other backend, the conversations read the same through
    Pydantic AI (records, histories, the branch left, each entry, the lists by scope), carry
    on there, and a delete there erases one and keeps its fork whole."""
    await _trip(ours)
    before = await _seen(ours)
    _, loaded, _, left, _ = before["trip"]
    assert (len(loaded.messages), len(left), len(left[0])) == (2 * TURN, 1, 3 * TURN)
    exported = tmp_path / "conversations.jsonl"
    with exported.open("wb") as out:
        await export_jsonl_async(ours.store, out)
    async with turnstore.open(other_url, index_in_background=False) as store:
        with exported.open("rb") as source:
            await import_jsonl_async(store, source)
        moved = TurnstoreConversationStore(store)
        try:
            assert await _seen(moved) == before
            summary = await store.session_summary("pydantic-ai/trip-fork")
            assert summary is not None
            assert summary.session_context.owner_id == "bob"
            await _carries_on(moved, before)
        finally:
            await moved.aclose()


# --- retention ------------------------------------------------------------------------------------


def _prune(url: str, older_than: str) -> list[str]:
    """Run `turnstore prune URL --older-than … --yes --json`; the sessions it removed."""
    args = ["prune", url, "--older-than", older_than, "--yes", "--json"]
    result = CliRunner(env={"TURNSTORE_URL": None}).invoke(main, args)
    assert result.exit_code == 0, result.output
    removed: list[str] = json.loads(result.stdout)["session_ids"]
    return removed


def _age(database: Database, session_id: str, days: int) -> None:
    """Set a session's last update `days` ago, as waiting would."""
    when = int(time.time()) - days * DAY
    database.query("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (when, session_id))


async def test_prune_removes_an_old_conversation_whole_and_keeps_recent_ones(
    ours: TurnstoreConversationStore, database: Database, store_url: str
) -> None:
    """`turnstore prune` removes a conversation nobody saved for longer than it keeps: Pydantic
    AI no longer loads, lists or reads any entry only it held, search no longer finds its
    words; a recent conversation and the recent fork of the old one read as before."""
    old = await _run(ours, Conversation(conversation_id="old"), "plan Oslo", scope=SCOPE)
    await _run(ours, old, "pack suitcase")
    fork = await ours.fork("old", at=TURN, new_conversation_id="old-fork")
    await _run(ours, fork, "ask ferries")
    await _run(ours, Conversation(conversation_id="recent"), "book sleeper", scope=SCOPE)
    before = await _seen(ours)
    only_old = before["old"][2][-1].id  # the suitcase turn's answer: the fork left it
    assert await _hits(ours.store, "suitcase") == ["pydantic-ai/old"]
    _age(database, "pydantic-ai/old", days=40)
    assert _prune(store_url, "30d") == ["pydantic-ai/old"]
    assert await ours.load("old") is None
    assert await ours.read_record("old") is None
    with pytest.raises(KeyError):
        await ours.read_entry(only_old)
    after = await _seen(ours)
    assert {record.conversation_id for record in after["all"]} == {"old-fork", "recent"}
    assert (after["old-fork"], after["recent"]) == (before["old-fork"], before["recent"])
    assert await _hits(ours.store, "suitcase") == []
    assert await _hits(ours.store, "Oslo") == ["pydantic-ai/old-fork"]
    assert _prune(store_url, "30d") == []
