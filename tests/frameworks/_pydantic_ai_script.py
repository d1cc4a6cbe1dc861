"""Scripted calls run on Pydantic AI's `InMemoryConversationStore` and on ours, side by side.

A script is a list of steps (tuples); `Pair.step` runs one on both stores and returns what
each answered, made comparable: entry ids and revisions (random on each store) become labels
in the order each store first showed them (`e1`, `r1`, …), times are dropped, and an error is
its class's name. A step names entries by those labels, which each store maps back to its own
ids, so the same script means the same thing on both.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RequestUsage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RunUsage

_SAID = itertools.count(1)


def turn(tool: bool = False) -> list[ModelMessage]:
    """A user prompt and its answer (through a tool call and its return, if `tool`): messages
    made once and handed to both stores."""
    n = next(_SAID)
    usage = RequestUsage(input_tokens=10 * n, output_tokens=n)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"question {n}")])]
    if tool:
        call = ToolCallPart("lookup", {"n": n}, tool_call_id=f"call-{n}")
        messages += [
            ModelResponse(parts=[call], usage=usage, model_name="scripted"),
            ModelRequest(parts=[ToolReturnPart("lookup", {"found": n}, tool_call_id=f"call-{n}")]),
        ]
    messages.append(ModelResponse(parts=[TextPart(f"answer {n}")], usage=usage))
    return messages


class Labels:
    """One store's ids as labels in the order they were first shown, and back."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._labels: dict[str, str] = {}
        self._ids: dict[str, str] = {}

    def of(self, id: str | None) -> str | None:
        if id is None:
            return None
        if id not in self._labels:
            label = f"{self._prefix}{len(self._labels) + 1}"
            self._labels[id], self._ids[label] = label, id
        return self._labels[id]

    def id(self, label: str | None) -> str | None:
        """The id a label stands for on this store; an unknown label, a missing id."""
        return None if label is None else self._ids.get(label, f"missing-{label}")


def _messages(messages: Sequence[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


@dataclasses.dataclass
class Side:
    """One store, its handles (conversations a script holds) and its labels."""

    store: ConversationStore
    handles: dict[str, Conversation | None] = dataclasses.field(default_factory=dict)
    entries: Labels = dataclasses.field(default_factory=lambda: Labels("e"))
    revisions: Labels = dataclasses.field(default_factory=lambda: Labels("r"))

    def conversation(self, conversation: Conversation | None) -> Any:
        if conversation is None:
            return None
        return {
            "id": conversation.conversation_id,
            "messages": _messages(conversation.messages),
            "usage": dataclasses.asdict(conversation.usage),
            "revision": self.revisions.of(conversation.revision),
            "new_message_index": conversation.new_message_index,
        }

    def entry_list(self, entries: Sequence[ConversationEntry] | None) -> Any:
        if entries is None:
            return None
        return [
            (self.entries.of(e.id), self.entries.of(e.parent_id), _messages([e.message]))
            for e in entries
        ]

    def record(self, record: ConversationRecord) -> Any:
        return {
            "id": record.conversation_id,
            "head": self.entries.of(record.head_id),
            "usage": dataclasses.asdict(record.usage),
            "scope": record.scope,
            "forked_from": record.forked_from,
            "forked_at": self.entries.of(record.forked_at),
            "title": record.title,
            "metadata": record.metadata,
            "branches": [self.entries.of(tip) for tip in record.branches],
            "revision": self.revisions.of(record.revision),
        }


class Pair:
    """The reference and ours, run step by step."""

    def __init__(self, reference: ConversationStore, ours: ConversationStore) -> None:
        self.sides = (Side(reference), Side(ours))

    async def step(self, step: tuple[Any, ...]) -> tuple[Any, Any]:
        """Run one step on both stores; what each answered, comparable."""
        shared = _shared(step)
        reference, ours = [await _answer(side, step, shared) for side in self.sides]
        return reference, ours

    async def run(self, script: Sequence[tuple[Any, ...]]) -> list[tuple[Any, Any, Any]]:
        """Every step with both answers, for a test to compare."""
        return [(step, *(await self.step(step))) for step in script]

    async def forget_all(self) -> None:
        """Delete every conversation on both stores, for the next script."""
        for side in self.sides:
            for record in await side.store.list_conversations():
                await side.store.delete(record.conversation_id)
            side.handles.clear()


def _shared(step: tuple[Any, ...]) -> Any:
    """What a step hands both stores that must be the same objects: new messages."""
    if step[0] == "turns":
        return [message for tool in step[2] for message in turn(tool)]
    return None


async def _answer(side: Side, step: tuple[Any, ...], shared: Any) -> Any:
    try:
        return await _STEPS[step[0]](side, *step[1:], shared=shared)
    except Exception as error:
        return type(error).__name__


async def _new(side: Side, handle: str, conversation_id: str, *, shared: Any) -> Any:
    side.handles[handle] = Conversation(conversation_id=conversation_id)
    return None


async def _turns(side: Side, handle: str, tools: Any, *, shared: Any) -> Any:
    held = side.handles.get(handle)
    if held is None:
        return "no handle"
    held.messages = [*held.messages, *shared]
    held.usage = held.usage + RunUsage(requests=len(tools), tool_calls=sum(tools))
    return None


async def _rewrite(side: Side, handle: str, keep: int, *, shared: Any) -> Any:
    held = side.handles.get(handle)
    if held is None:
        return "no handle"
    held.messages = held.messages[:keep]
    return None


async def _load(side: Side, handle: str, cid: str, limit: Any, scope: Any, *, shared: Any) -> Any:
    loaded = await side.store.load(cid, limit=limit, scope=scope)
    side.handles[handle] = loaded
    return side.conversation(loaded)


async def _save(side: Side, handle: str, scope: Any, *, shared: Any) -> Any:
    held = side.handles.get(handle)
    if held is None:
        return "no handle"
    saved = await side.store.save(held, scope=scope)
    return [side.entry_list(saved), side.revisions.of(held.revision)]


async def _branch(
    side: Side, handle: str, cid: str, at: Any, entry: Any, scope: Any, *, shared: Any
) -> Any:
    held = side.handles.get(handle)
    revision = held.revision if held is not None else None
    branched = await side.store.branch(
        cid, at=at, from_entry=side.entries.id(entry), expected_revision=revision, scope=scope
    )
    side.handles[handle] = branched
    return side.conversation(branched)


async def _fork(
    side: Side,
    handle: str,
    cid: str,
    at: Any,
    entry: Any,
    new_id: Any,
    scopes: tuple[Any, Any],
    *,
    shared: Any,
) -> Any:
    forked = await side.store.fork(
        cid,
        at=at,
        from_entry=side.entries.id(entry),
        new_conversation_id=new_id,
        scope=scopes[0],
        source_scope=scopes[1],
    )
    side.handles[handle] = forked
    return side.conversation(forked)


async def _list(side: Side, scope: Any, limit: Any, *, shared: Any) -> Any:
    listed = await side.store.list_conversations(scope=scope, limit=limit)
    return [side.record(record) for record in listed]


async def _record(side: Side, cid: str, *, shared: Any) -> Any:
    record = await side.store.read_record(cid)
    return None if record is None else side.record(record)


async def _update(side: Side, cid: str, changes: dict[str, Any], scope: Any, *, shared: Any) -> Any:
    return side.record(await side.store.update(cid, scope=scope, **changes))


async def _delete(side: Side, cid: str, scope: Any, *, shared: Any) -> Any:
    await side.store.delete(cid, scope=scope)
    return None


async def _entries(side: Side, cid: str, limit: Any, scope: Any, *, shared: Any) -> Any:
    return side.entry_list(await side.store.load_entries(cid, limit=limit, scope=scope))


async def _entry(side: Side, label: str, *, shared: Any) -> Any:
    entry_id = side.entries.id(label)
    assert entry_id is not None
    return side.entry_list([await side.store.read_entry(entry_id)])


_STEPS: dict[str, Any] = {
    "new": _new,
    "turns": _turns,
    "rewrite": _rewrite,
    "load": _load,
    "save": _save,
    "branch": _branch,
    "fork": _fork,
    "list": _list,
    "record": _record,
    "update": _update,
    "delete": _delete,
    "entries": _entries,
    "entry": _entry,
}
"""Each step's name and what runs it: `(name, *arguments)`."""
