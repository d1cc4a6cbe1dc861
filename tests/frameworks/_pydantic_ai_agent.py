"""A Pydantic AI agent on a fake model, and a process that runs it on turnstore until killed.

    python _pydantic_ai_agent.py URL CONVERSATION

Each turn runs the agent on the conversation (a tool call, its return, an answer) and saves the
result. After the save returns, the process prints one JSON line, the turn's number, the
messages it added (as Pydantic AI dumps them) and the new revision, and flushes: the parent
knows which turns were acknowledged before it killed the process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from turnstore.integrations.pydantic_ai import TurnstoreConversationStore

SCOPE = "ada"
"""The scope every turn is saved with."""


def _prompts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call `recall` on the newest prompt, then answer with what it returned and how many
    prompts came before it: the answer says how much history the model was sent."""
    prompts = _prompts(messages)
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        answer = f"{last.content}, after {len(prompts) - 1} earlier prompts"
        return ModelResponse(parts=[TextPart(answer)])
    return ModelResponse(parts=[ToolCallPart("recall", {"prompt": prompts[-1]})])


def agent() -> Agent[None, str]:
    """The agent: `reply` as its model and one tool."""
    built = Agent(FunctionModel(reply))

    @built.tool_plain
    def recall(prompt: str) -> str:
        return f"recalled {prompt}"

    return built


def dumped(messages: Sequence[ModelMessage]) -> list[Any]:
    """Messages as Pydantic AI dumps them to JSON, to compare across processes."""
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")  # type: ignore[no-any-return]


async def main(url: str, conversation_id: str) -> None:
    store = TurnstoreConversationStore.from_url(url)
    runner = agent()
    chat = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
    for turn in itertools.count(1):
        result = await runner.run(f"prompt {turn}", conversation=chat)
        await store.save(result, scope=SCOPE)
        chat = result.conversation
        line = {"turn": turn, "messages": dumped(result.new_messages()), "revision": chat.revision}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
