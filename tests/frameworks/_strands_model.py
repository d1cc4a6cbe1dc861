"""A Strands model that answers from a script (no network), and a tool, for the tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from strands import tool
from strands.models import Model


class ScriptedModel(Model):
    """A Strands model that answers with the next scripted message, with token counts."""

    def __init__(self, *replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        blocks = self.replies.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        stop = "end_turn"
        for block in blocks:
            if "toolUse" in block:
                stop = "tool_use"
                use = block["toolUse"]
                yield {
                    "contentBlockStart": {
                        "start": {"toolUse": {k: use[k] for k in ("name", "toolUseId")}}
                    }
                }
                yield {
                    "contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(use["input"])}}}
                }
            else:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": stop}}
        usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def text_reply(text: str) -> list[dict[str, Any]]:
    """A scripted reply of one text block."""
    return [{"text": text}]
