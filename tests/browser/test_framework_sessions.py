"""Strands Agents and Pydantic AI sessions, written by the frameworks themselves, in a real
Chromium: the catalog's kind and owner, the conversation with its tool call and result, and
the figures each framework records (`./dev test-peers`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turnstore import BlockingStore
from turnstore.records import SearchRequest

from .conftest import Browser
from .pages import session_url, wait_rows
from .test_conversations import MESSAGE, by_index, docs_screenshot, messages, roles

pytestmark = pytest.mark.peers


def _catalog_row(browser: Browser, base: str, session_id: str) -> list[str]:
    """The catalog's cells of `session_id`, once it is the only row."""
    browser.open(f"{base}/")
    wait_rows(browser, 1)
    (row,) = browser.snapshot(browser.testid("session-row"))
    assert row["data"]["sessionId"] == session_id
    return str(row["text"]).split("\t")


def _stat(browser: Browser, name: str) -> str:
    return str(browser.one(browser.testid(f"stat-{name}")).text.split("\n")[0])


def test_a_strands_session_reads_as_its_messages(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str, backend_name: str
) -> None:
    """A Strands agent with a tool: its messages, the tool's use and result, tokens."""
    pytest.importorskip("strands")
    from strands import Agent
    from strands.session.repository_session_manager import RepositorySessionManager

    from frameworks._strands_model import ScriptedModel, text_reply, weather
    from turnstore.integrations.strands import TurnstoreSessionRepository

    asked = [{"toolUse": {"name": "weather", "toolUseId": "t-1", "input": {"city": "Oslo"}}}]
    with TurnstoreSessionRepository.from_url(store_url, owner_id="ada") as repository:
        manager = RepositorySessionManager(session_id="trip", session_repository=repository)
        model = ScriptedModel(asked, text_reply("Sunny in Oslo: take sunglasses."))
        agent = Agent(
            agent_id="guide",
            model=model,
            tools=[weather],
            session_manager=manager,
            callback_handler=None,
        )
        agent("Do I need sunglasses in Oslo today?")
    blocking_store.search(SearchRequest(query="Oslo"))  # a writer derives the figures
    server = serve()

    cells = _catalog_row(browser, server.base, "strands/trip")
    assert cells[2] == "strands"
    assert "Do I need sunglasses in Oslo today?" in "\t".join(cells)
    browser.open(session_url(server.base, "strands/trip"))
    shown = by_index(messages(browser, 4))
    assert roles(shown) == "user assistant tool assistant"
    assert "Do I need sunglasses in Oslo today?" in shown[0]["text"]
    assert 'weather({"city": "Oslo"})' in shown[1]["text"]
    assert "result of weather t-1" in shown[2]["text"]
    assert "sunny in Oslo" in shown[2]["text"]
    assert "take sunglasses" in shown[3]["text"]
    assert browser.one(browser.testid("conversation-kind")).text == "strands"
    assert (_stat(browser, "model-calls"), _stat(browser, "tool-calls")) == ("2", "1")
    assert (_stat(browser, "input-tokens"), _stat(browser, "output-tokens")) == ("20", "10")
    docs_screenshot(browser, backend_name, "viewer-strands.png", 900)
    browser.screenshot("strands")


def test_a_pydantic_ai_conversation_reads_as_its_messages(
    blocking_store: BlockingStore, serve: Any, browser: Browser, store_url: str, backend_name: str
) -> None:
    """A Pydantic AI agent with a tool, saved to a scope: its messages, the tool call and
    its return, and the responses' usage as the figures."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from turnstore.integrations.pydantic_ai import TurnstoreConversationStore

    def answer(history: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(history) == 1:
            call = ToolCallPart("find_train", {"to": "Lyon"}, tool_call_id="call-1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("The 9:04 TGV gets you to Lyon by 11:00.")])

    agent = Agent(FunctionModel(answer))

    @agent.tool_plain
    def find_train(to: str) -> str:
        """The next train to a city."""
        return f"TGV 6601 to {to}, 9:04 from Paris Gare de Lyon"

    async def run() -> None:
        async with TurnstoreConversationStore.from_conn_string(store_url) as conversations:
            chat = Conversation(conversation_id="rail")
            result = await agent.run("When is the next train to Lyon?", conversation=chat)
            await conversations.save(result, scope="grace")

    asyncio.run(run())
    blocking_store.search(SearchRequest(query="Lyon"))  # a writer derives the figures
    server = serve()

    cells = _catalog_row(browser, server.base, "pydantic-ai/rail")
    assert (cells[2], "grace" in cells) == ("pydantic-ai", True)
    browser.open(session_url(server.base, "pydantic-ai/rail"))
    shown = by_index(messages(browser, 4))
    assert roles(shown) == "user assistant tool assistant"
    assert "When is the next train to Lyon?" in shown[0]["text"]
    assert 'find_train({"to": "Lyon"})' in shown[1]["text"]
    assert "result of find_train call-1" in shown[2]["text"]
    assert "TGV 6601" in shown[2]["text"]
    assert "9:04 TGV" in shown[3]["text"]
    assert browser.one(browser.testid("conversation-kind")).text == "pydantic-ai"
    assert (_stat(browser, "model-calls"), _stat(browser, "tool-calls")) == ("2", "1")
    assert int(_stat(browser, "input-tokens").replace(",", "")) > 0
    assert len(browser.css(MESSAGE)) == 4
    docs_screenshot(browser, backend_name, "viewer-pydantic-ai.png", 900)
    browser.screenshot("pydantic-ai")
