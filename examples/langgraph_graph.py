"""A LangGraph graph whose conversation lives in turnstore, with a scripted model.

Each user message is one turn: the graph runs on the thread's messages loaded from turnstore,
and the messages the run added are saved as the next checkpoint (and the turn's transcript
batch) in one commit, so a thread costs one append per turn however long it grows. The model
node is scripted, so this runs without a network.

This keeps the thread's messages by hand; a LangGraph checkpointer on turnstore, which keeps
every channel of the graph's state, is the LangGraph integration's job.

    python examples/langgraph_graph.py [DATABASE_URL]
"""

from __future__ import annotations

import sys

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.graph import END, START, MessagesState, StateGraph

import turnstore
from turnstore import Checkpoint

THREAD = "langgraph-thread-1"


def scripted_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
    """Answer the last human message; a chat model call in a real graph."""
    question = str(state["messages"][-1].content)
    turns = sum(isinstance(message, HumanMessage) for message in state["messages"])
    return {"messages": [AIMessage(content=f"Answer {turns}: noted '{question}'.")]}


builder = StateGraph(MessagesState)
builder.add_node("model", scripted_model)
builder.add_edge(START, "model")
builder.add_edge("model", END)
graph = builder.compile()


def turn(store: turnstore.BlockingStore, text: str) -> str:
    """Run the graph on one user message and commit the messages it added."""
    checkpoint = store.load(THREAD) or Checkpoint(session_id=THREAD, first_user_message=text)
    history = messages_from_dict(checkpoint.context)
    result = graph.invoke({"messages": [*history, HumanMessage(content=text)]})
    added = messages_to_dict(result["messages"][len(history) :])
    checkpoint.context.extend(added)
    checkpoint.sequence += 1
    store.save(checkpoint, added)
    return str(result["messages"][-1].content)


def main(url: str) -> None:
    with turnstore.open_blocking(url) as store:
        for text in ("Remember that I like window seats", "Book the 9:00 train"):
            print(f"{text} -> {turn(store, text)}")
        checkpoint = store.load(THREAD)
        assert checkpoint is not None
        print(f"{THREAD}: {checkpoint.sequence} turns, {len(checkpoint.context)} messages")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///langgraph.sqlite3")
