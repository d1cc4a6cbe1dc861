"""Pydantic AI's records and entries in the store's shapes, and back.

A conversation `c` is the session `pydantic-ai/c`. Its `ConversationRecord` is one middleware
state value in the session's scope (`RECORD_KEY`), beside what writing the next one needs: the
session sequence the record was written at (the compare-and-set of the next write), how many
items the session holds, and where its head and branch tips are among them. Each entry is one
item (`turnstore.records.kinds.pydantic_ai` describes it), and one state value per entry
(`ENTRY_KEY` + a digest of its id, as ADK's event ids are kept) says where it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import pydantic_core
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from turnstore.errors import InvalidInput
from turnstore.records.kinds.pydantic_ai import ENTRY_KEY
from turnstore.records.kinds.pydantic_ai import KIND as PYDANTIC_AI
from turnstore.seam import validate_session_id

PREFIX = PYDANTIC_AI.id_prefix or ""
"""Every conversation's session id starts with this (`pydantic-ai/`, declared with its kind)."""
_RECORDS: pydantic.TypeAdapter[ConversationRecord] = pydantic.TypeAdapter(ConversationRecord)
_ROLES = {"user-prompt": "user", "system-prompt": "system", "tool-return": "tool"}


def session_id(conversation_id: str) -> str:
    """The turnstore session id of a conversation; `InvalidInput` if it cannot be one."""
    if not isinstance(conversation_id, str):
        raise InvalidInput(f"conversation ID must be text, not {type(conversation_id).__name__}")
    return validate_session_id(PREFIX + conversation_id)


def entry_key(entry_id: str) -> str:
    """The state key saying where an entry is (hashed: an id may be any text, NUL included)."""
    return ENTRY_KEY + hashlib.sha256(entry_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Stored:
    """A conversation's record as stored, with what the next write of it needs."""

    record: ConversationRecord
    sequence: int
    """The session's sequence when the record was written: the next write expects it."""
    length: int
    """How many items (entries) the session held then."""
    at: dict[str, int]
    """Where the record's head and branch tips are among the session's items."""


def stored_value(record: ConversationRecord, sequence: int, length: int, at: dict[str, int]) -> Any:
    """The state value of a record written at `sequence`, with `length` items."""
    try:
        dumped = _RECORDS.dump_python(record, mode="json")
    except pydantic_core.PydanticSerializationError as error:
        raise InvalidInput(f"conversation record cannot be stored as JSON: {error}") from error
    if _RECORDS.validate_python(dumped) != record:  # NaN, a tuple: JSON would change it
        raise InvalidInput("conversation metadata must be JSON: numbers finite, lists not tuples")
    return {"record": dumped, "sequence": sequence, "length": length, "at": at}


def loaded(value: Any) -> Stored:
    """A state value read back as a `Stored`."""
    return Stored(
        record=_RECORDS.validate_python(value["record"]),
        sequence=value["sequence"],
        length=value["length"],
        at=dict(value["at"]),
    )


def _dumped(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    try:
        dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(
            list(messages), mode="json"
        )
        return dumped
    except (pydantic_core.PydanticSerializationError, pydantic.ValidationError) as error:
        raise InvalidInput(f"a message cannot be stored as JSON: {error}") from error


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _view(message: dict[str, Any]) -> dict[str, Any]:
    """What the conversation view, the catalog and search read of a message: a role, its
    text and its tool calls, in the chat messages' shape."""
    parts = [part for part in message.get("parts", ()) if isinstance(part, dict)]
    kinds = [part.get("part_kind") for part in parts]
    texts = [_text(part["content"]) for part in parts if part.get("content")]
    calls = [
        {"id": part.get("tool_call_id"), "name": part.get("tool_name"), "args": part.get("args")}
        for part in parts
        if part.get("part_kind") == "tool-call"
    ]
    if message.get("kind") == "response":
        role = "reasoning" if kinds and set(kinds) == {"thinking"} else "assistant"
    else:
        role = next((_ROLES[kind] for kind in _ROLES if kind in kinds), "tool")
    view: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
    if calls:
        view["tool_calls"] = calls
    returns = [part.get("tool_call_id") for part in parts if "tool_call_id" in part]
    if role == "tool" and len(returns) == 1:
        view["tool_call_id"] = returns[0]
    return view


def items(entries: Sequence[ConversationEntry], parents: Sequence[int | None]) -> list[Any]:
    """The items of entries whose parents are at `parents` among the session's items."""
    dumped = _dumped([entry.message for entry in entries])
    return [
        {
            "id": entry.id,
            "parent_id": entry.parent_id,
            "parent_index": parent,
            **_view(message),
            "message": message,
        }
        for entry, parent, message in zip(entries, parents, dumped, strict=True)
    ]


def entries(stored: Sequence[Any]) -> list[ConversationEntry]:
    """Stored items read back as entries."""
    messages = ModelMessagesTypeAdapter.validate_python([item["message"] for item in stored])
    return [
        ConversationEntry(id=item["id"], parent_id=item["parent_id"], message=message)
        for item, message in zip(stored, messages, strict=True)
    ]
