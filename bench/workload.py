"""The workload: deterministic agent turns in the OpenAI Responses item shape, from a seed."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

USER_BYTES = 1_000
"""Target size of the user message item, as compact JSON."""
CALL_BYTES = 500
"""Target size of the function_call item."""
OUTPUT_BYTES = 500
"""Target size of the function_call_output item."""
ASSISTANT_BYTES = 1_000
"""Target size of the assistant message item."""
ITEMS_PER_TURN = 4
"""Transcript items one turn adds: user message, function call, its output, the answer."""
STATE_BYTES = 500
"""Target size of the loop state, which is replaced each turn and never grows."""
SEED = 20_240_601
"""The benchmark's seed: every run writes the same bytes."""

_WORDS = (
    "agent",
    "session",
    "turn",
    "tool",
    "call",
    "output",
    "model",
    "token",
    "context",
    "window",
    "retry",
    "stream",
    "delta",
    "commit",
    "durable",
    "row",
    "index",
    "page",
    "cursor",
    "schema",
    "query",
    "plan",
    "budget",
    "latency",
    "cache",
    "shard",
    "weather",
    "forecast",
    "city",
    "umbrella",
    "rain",
    "sunny",
    "report",
    "summary",
    "table",
    "chart",
    "file",
    "patch",
    "diff",
    "test",
    "build",
    "deploy",
    "error",
    "warning",
    "trace",
    "span",
    "metric",
    "log",
    "user",
    "assistant",
    "reply",
    "answer",
    "search",
    "result",
    "source",
    "citation",
    "draft",
    "review",
    "approve",
    "reject",
    "queue",
    "lease",
    "owner",
    "graph",
)


def compact(value: Any) -> str:
    """Compact JSON text: the unit every payload size is counted in."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text(rng: random.Random, size: int) -> str:
    """Pseudo-random prose of exactly `size` characters (ASCII, so also bytes)."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[: max(size, 0)]


def _fill(rng: random.Random, target: int, build: Any) -> Any:
    """Build an item whose one free-text field is sized so the item's JSON is `target` bytes."""
    overhead = len(compact(build("")))
    return build(text(rng, target - overhead))


@dataclass(frozen=True, slots=True)
class Turn:
    """One agent turn: four transcript items and the loop state after it."""

    items: list[dict[str, Any]]
    state: dict[str, Any]

    @property
    def user_text(self) -> str:
        """The user's message text."""
        return str(self.items[0]["content"][0]["text"])

    @property
    def call(self) -> dict[str, Any]:
        """The function_call item."""
        return self.items[1]

    @property
    def tool_output(self) -> str:
        """The function_call_output text."""
        return str(self.items[2]["output"])

    @property
    def assistant_text(self) -> str:
        """The assistant's final message text."""
        return str(self.items[3]["content"][0]["text"])

    def payload_bytes(self) -> int:
        """Compact JSON bytes of the four items (the loop state is counted once per session)."""
        return sum(len(compact(item).encode()) for item in self.items)


def make_turn(seed: int, session: str, index: int) -> Turn:
    """The turn `index` (0-based) of `session`; the same arguments always give the same turn."""
    rng = random.Random(f"{seed}:{session}:{index}")
    call_id = f"call_{session}_{index}"
    items = [
        _fill(rng, USER_BYTES, _user),
        _fill(rng, CALL_BYTES, lambda query: _call(call_id, query)),
        _fill(rng, OUTPUT_BYTES, lambda output: _output(call_id, output)),
        _fill(rng, ASSISTANT_BYTES, lambda answer: _assistant(f"msg_{session}_{index}", answer)),
    ]
    state = _fill(rng, STATE_BYTES, lambda scratch: _state(index, scratch))
    return Turn(items=items, state=state)


def _user(message: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": message}]}


def _call(call_id: str, query: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "search_docs",
        "arguments": compact({"query": query, "max_results": 5}),
        "status": "completed",
    }


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _assistant(item_id: str, answer: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": answer, "annotations": []}],
    }


def _state(index: int, scratch: str) -> dict[str, Any]:
    # Loop state an agent runtime keeps beside the transcript: replaced every turn, same size.
    return {
        "turn": index,
        "model": "bench/fake-model",
        "budget": {"max_tool_calls": 16, "tool_calls_left": 15, "max_tokens": 32_000},
        "plan": ["read the question", "search the docs", "answer"],
        "scratchpad": scratch,
    }


def session_id(index: int) -> str:
    """The id of the `index`-th benchmark session."""
    return f"session-{index:03d}"
