"""Internal: Strands' sessions, agents and messages in the store's shapes.

A Strands session's record (middleware state `SESSION_KEY` in its scope) holds Strands'
`Session`, the newest message id of each of its agents, and what lets reads go straight to
an item: while the context holds the messages of one agent only (`sole`), message `i` at
index `i` (`indexed`), a message is read by its index; any other layout (two agents with
messages, ids out of order, items edited outside this repository) is read by a scan.
`sequence` and `length` are the session's as this repository's last write left them: a write
expects that sequence, and a session found at another one is read again (`resynced`).
`incarnation` is drawn when the session is created, so a session deleted and created again
never has a record equal to its predecessor's: a repository that remembers a record
(`Remembered`) and writes expecting it cannot write onto the successor.

A message is one context item: the message Strands shows (its redacted form once redacted),
as the conversation view and search read chat messages (`role`, `content`), with Strands'
own fields beside it under `META`.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from strands.types.session import (
    Session,
    SessionMessage,
    SessionType,
    decode_bytes_values,
    encode_bytes_values,
)

from turnstore.errors import InvalidInput
from turnstore.records.kinds.strands import AGENT_KEY, META, MULTI_AGENT_KEY, ORIGINAL_KEY
from turnstore.seam import optional_identifier


def agent_id_of(agent_id: object) -> str:
    """`agent_id` if it is an identifier the store can key by, else `InvalidInput`."""
    checked = optional_identifier(agent_id, "agent ID")
    if checked is None:
        raise InvalidInput("agent ID must be a string")
    return checked


def index_of(value: object, what: str = "message id") -> int:
    """A message id, offset or limit: a non-negative int (Strands' file manager requires an
    int id too)."""
    if type(value) is not int or value < 0:
        raise InvalidInput(f"{what} must be a non-negative integer, not {value!r}")
    return value


def agent_key(agent_id: str) -> str:
    """The state key of one agent's record."""
    return AGENT_KEY + agent_id


def multi_agent_key(multi_agent_id: str) -> str:
    """The state key of one multi-agent's state."""
    return MULTI_AGENT_KEY + multi_agent_id


def original_key(agent_id: str, message_id: int) -> str:
    """The state key of a redacted message's original (the id is an int: `rpartition` splits)."""
    return f"{ORIGINAL_KEY}{agent_id}/{message_id}"


def new_record(session: Session) -> dict[str, Any]:
    """A new session's record: no agent, no message, at sequence 1."""
    return {
        "session": {**session.to_dict(), "session_type": SessionType(session.session_type).value},
        "incarnation": new_incarnation(),
        "agents": {},
        "sole": None,
        "indexed": True,
        "length": 0,
        "sequence": 1,
    }


def new_incarnation() -> str:
    """A new incarnation id: random, so no two sessions ever draw the same."""
    return uuid.uuid4().hex


REMEMBERED = 1024
"""How many records (sessions' and agents') a repository remembers, the least recent dropped."""


class Remembered:
    """Records as this repository last wrote or read them, by key: guesses that spare a write
    its read, each checked by the write itself (`expected_state`) under the session's lock."""

    def __init__(self) -> None:
        self._records: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> dict[str, Any] | None:
        """The record remembered for `key`, or None."""
        with self._lock:
            return self._records.get(key)

    def put(self, key: Hashable, record: dict[str, Any]) -> None:
        """Remember `record` as the one stored for `key`."""
        with self._lock:
            self._records[key] = record
            self._records.move_to_end(key)
            if len(self._records) > REMEMBERED:
                self._records.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        """Forget what was remembered for `key`: it was found out of date."""
        with self._lock:
            self._records.pop(key, None)


def loaded_session(record: dict[str, Any]) -> Session:
    """Strands' `Session` from its record."""
    session = Session.from_dict(record["session"])
    session.session_type = SessionType(session.session_type)
    return session


def resynced(record: dict[str, Any], sequence: int, length: int) -> dict[str, Any]:
    """The record after a write it did not make moved the session to `sequence`: a context of
    another length was edited outside, and is read by scans from now on."""
    indexed = record["indexed"] and length == record["length"]
    return {**record, "sequence": sequence, "length": length, "indexed": indexed}


def with_agent(record: dict[str, Any], agent_id: str) -> dict[str, Any]:
    """The record after `agent_id` joined the session, one sequence on."""
    agents = {**record["agents"], agent_id: None}
    return {**record, "agents": agents, "sequence": record["sequence"] + 1}


def with_message(record: dict[str, Any], agent_id: str, message_id: int) -> dict[str, Any]:
    """The record after one message of `agent_id` was appended, one sequence on."""
    length, newest = record["length"], record["agents"][agent_id]
    sole = agent_id if length == 0 else record["sole"]
    indexed = record["indexed"] and sole == agent_id and message_id == length
    agents = {
        **record["agents"],
        agent_id: message_id if newest is None else max(newest, message_id),
    }
    return {
        **record,
        "agents": agents,
        "sole": sole,
        "indexed": indexed,
        "length": length + 1,
        "sequence": record["sequence"] + 1,
    }


def after_newest(record: dict[str, Any], agent_id: str, message_id: int) -> bool:
    """Whether `message_id` is above every id `agent_id` has: surely not stored yet."""
    newest = record["agents"][agent_id]
    return newest is None or message_id > newest


def stored_message(agent_id: str, message: SessionMessage) -> dict[str, Any]:
    """A message as its context item: what Strands shows of it, and its own fields."""
    shown = message.message if message.redact_message is None else message.redact_message
    item = encode_bytes_values(shown)
    if not isinstance(item, dict) or META in item:
        raise InvalidInput(f"a Strands message must be an object without a {META!r} key")
    item[META] = {
        "agent_id": agent_id,
        "message_id": message.message_id,
        "redacted": message.redact_message is not None,
        "created_at": message.created_at,
        "updated_at": message.updated_at,
    }
    return item


def meta(item: Any) -> dict[str, Any] | None:
    """Strands' fields of a context item, or None for an item this repository did not write."""
    found = item.get(META) if isinstance(item, dict) else None
    return found if isinstance(found, dict) else None


def is_message(item: Any, agent_id: str, message_id: int | None = None) -> bool:
    """Whether `item` is a message of `agent_id` (with `message_id`, if given)."""
    fields = meta(item)
    return (
        fields is not None
        and fields.get("agent_id") == agent_id
        and (message_id is None or fields.get("message_id") == message_id)
    )


def message_id_in(item: Any) -> int:
    """The message id of an item this repository wrote (a sort key)."""
    return int((meta(item) or {})["message_id"])


def stored_original(message: SessionMessage) -> Any:
    """A redacted message's original, as its state key keeps it."""
    return encode_bytes_values(message.message)


def loaded_message(item: Any, original: Any = None) -> SessionMessage:
    """A context item as Strands' `SessionMessage`; `original` is the message a redacted one
    was, read from its state key."""
    fields = meta(item) or {}
    shown = {key: value for key, value in item.items() if key != META}
    redacted = bool(fields.get("redacted"))
    return SessionMessage(
        message=decode_bytes_values(original if redacted else shown),
        message_id=fields["message_id"],
        redact_message=decode_bytes_values(shown) if redacted else None,
        created_at=fields["created_at"],
        updated_at=fields["updated_at"],
    )
