"""A ReAct-shaped LangGraph graph with a scripted model, for the saver's tests and writers.

The model answers a user message with a tool call, the tool node answers the call, and the
model then gives the final answer: four messages per turn, as a real agent loop writes.
`delta=True` keeps the messages in LangGraph's `DeltaChannel` instead of `add_messages`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.types import Send


class State(TypedDict):
    """The messages (LangGraph's default channel) and a counter of finished turns."""

    messages: Annotated[list[Any], add_messages]
    turns: Annotated[int, operator.add]


class DeltaState(TypedDict):
    """The same with the messages in a `DeltaChannel` that snapshots every third update."""

    messages: Annotated[list[Any], DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]
    turns: Annotated[int, operator.add]


def build(saver: Any, *, delta: bool = False) -> Any:
    """Compile model ⇄ tools over the messages and the counter with `saver`."""

    def model(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            call = {"name": "lookup", "args": {"q": last.content}, "id": f"call-{last.id}"}
            return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{last.id}")]}
        return {
            "messages": [AIMessage(content=f"answer to {last.content}", id=f"final-{last.id}")],
            "turns": 1,
        }

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        output = ToolMessage(content=f"found {call['args']['q']}", tool_call_id=call["id"])
        output.id = f"tool-{call['id']}"
        return {"messages": [output]}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(DeltaState if delta else State)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def user(thread: str, turn: int, text: str = "") -> dict[str, Any]:
    """The input of one turn: a user message with a stable id."""
    content = text or f"question {turn} of {thread}"
    return {"messages": [HumanMessage(content=content, id=f"user-{thread}-{turn}")]}


def config(thread: str, **configurable: Any) -> dict[str, Any]:
    """The config of a thread."""
    return {"configurable": {"thread_id": thread, **configurable}}


class Fan(TypedDict):
    """Items that parallel tasks append to."""

    items: Annotated[list[str], operator.add]


def build_fan_out(saver: Any) -> Any:
    """Three parallel `Send` tasks; the one for "b" fails after the others wrote."""

    def fan_out(state: Fan) -> list[Send]:
        return [Send("work", {"items": [name]}) for name in ("c", "a", "b")]

    def work(state: Fan) -> dict[str, Any]:
        if state["items"] == ["b"]:
            raise RuntimeError("b fails after a and c wrote")
        return {"items": [state["items"][0].upper()]}

    builder = StateGraph(Fan)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, fan_out, ["work"])
    builder.add_edge("work", END)
    return builder.compile(checkpointer=saver)


@dataclass
class Booking:
    """A type of the graph's own, which a strict serializer revives only when allowed."""

    seat: str
