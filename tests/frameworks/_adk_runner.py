"""One ADK `Runner` turn with a scripted model on turnstore's session service, then exit.

    python _adk_runner.py URL TURN

The model calls a tool that adds 2 to a user-scoped counter and counts turns in the
session's state, then answers. Prints the session as stored after the turn.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from turnstore.integrations.adk import TurnstoreSessionService


class ScriptedLlm(BaseLlm):
    """Answers a tool call the first time it is asked in a turn, text the second."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts[0]
        if last.function_response is None:
            call = types.FunctionCall(name="bump_counter", args={"by": 2})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


def bump_counter(by: int, tool_context: ToolContext) -> dict[str, Any]:
    """Adds `by` to the user's counter."""
    tool_context.state["user:counter"] = tool_context.state.get("user:counter", 0) + by
    tool_context.state["turns"] = tool_context.state.get("turns", 0) + 1
    tool_context.state["temp:scratch"] = "never stored"
    return {"counter": tool_context.state["user:counter"]}


async def main(url: str, turn: int) -> None:
    logging.disable(logging.WARNING)
    service = TurnstoreSessionService(url)
    agent = LlmAgent(name="helper", model=ScriptedLlm(model="scripted"), tools=[bump_counter])
    runner = Runner(app_name="demo", agent=agent, session_service=service)
    if turn == 1:
        await service.create_session(app_name="demo", user_id="u1", session_id="s1")
    message = types.Content(role="user", parts=[types.Part(text=f"turn {turn}")])
    async for _ in runner.run_async(user_id="u1", session_id="s1", new_message=message):
        pass
    await runner.close()
    session = await service.get_session(app_name="demo", user_id="u1", session_id="s1")
    assert session is not None
    print(
        f"events={len(session.events)} counter={session.state['user:counter']}"
        f" turns={session.state['turns']} temp={'temp:scratch' in session.state}"
    )
    print(f"user_state={await service.get_user_state(app_name='demo', user_id='u1')}")
    await service.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
