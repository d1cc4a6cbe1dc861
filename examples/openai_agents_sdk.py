"""An OpenAI Agents SDK agent whose conversation lives in turnstore, with a scripted model.

The session is a `TurnstoreSession`: where the SDK's examples pass `SQLiteSession(...)`, this
passes the turnstore one, and the runner does the rest. Each `add_items` of the runner is one
durable commit; the session is in turnstore's catalog with its owner. `ScriptedModel` answers
in place of a provider, so this runs without a network or an API key; swap in a real model
and nothing else changes.

    python examples/openai_agents_sdk.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import turnstore
from turnstore.integrations.openai_agents import TurnstoreSession

SESSION = "agents-sdk-1"


@function_tool
def get_forecast(city: str) -> str:
    """The weather forecast for a city."""
    return f"{city}: 17 C with light rain"


class ScriptedModel(Model):
    """Calls the forecast tool for the city the user names, then answers from its output."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        last = items[-1]
        if last.get("type") == "function_call_output":
            text = f"Here is the forecast: {last['output']}."
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"msg-{len(items)}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        else:
            city = str(last["content"]).rstrip("?").split()[-1]
            output = [
                ResponseFunctionToolCall(
                    id=f"fc-{len(items)}",
                    call_id=f"call-{len(items)}",
                    type="function_call",
                    name="get_forecast",
                    arguments=f'{{"city": "{city}"}}',
                    status="completed",
                )
            ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example runs the agent without streaming")


agent = Agent(
    name="forecaster",
    instructions="Answer weather questions with the forecast tool.",
    tools=[get_forecast],
    model=ScriptedModel(),
)


async def main(url: str) -> None:
    set_tracing_disabled(True)  # traces would go to the provider; there is none here
    async with turnstore.open(url) as store:
        session = TurnstoreSession(SESSION, store, owner_id="ada")  # was SQLiteSession(...)
        for question in ("What's the weather in Lisbon?", "And in Porto?"):
            result = await Runner.run(agent, question, session=session)
            print(f"{question} -> {result.final_output}")
        items = await session.get_items()
        turns = sum(1 for item in items if item.get("role") == "user")
        summary = await store.session_summary(SESSION)
        assert summary is not None
        print(
            f"{SESSION}: {turns} turns, {len(items)} items,",
            f"first message {summary.first_user_message!r}",
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///agents_sdk.sqlite3"))
