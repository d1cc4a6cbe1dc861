"""A process that adds tool-call pairs to one Agents SDK session until it is killed.

    python _agents_writer.py URL SESSION WRITER COUNT

Each `add_items` call adds one pair: a `function_call` and its `function_call_output`,
numbered per writer. After a call returns, the writer prints `acked WRITER N` and flushes, so
the parent knows which pairs were acknowledged before it killed the process.
"""

from __future__ import annotations

import asyncio
import sys

from turnstore.integrations.openai_agents import TurnstoreSession


def pair(writer: str, number: int) -> list[dict[str, str]]:
    """One tool call and its output; the call id names the writer and the number."""
    call_id = f"{writer}-{number}"
    return [
        {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": "x" * 2_000},
    ]


async def main(url: str, session_id: str, writer: str, count: int) -> None:
    session = TurnstoreSession(session_id, url, owner_id="crash-test")
    try:
        for number in range(count):
            await session.add_items(pair(writer, number))
            print(f"acked {writer} {number}", flush=True)
    finally:
        await session.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
