"""A Google ADK memory service whose memories live in turnstore's long-term memory.

    from turnstore.integrations.adk_memory import TurnstoreMemoryService

    runner = Runner(app_name="app", agent=agent, memory_service=TurnstoreMemoryService(url))

A memory is one event's text: the text of its parts, thoughts left out, as ADK's
`SqliteMemoryService` reads it; an event without text is no memory. It is the memory item
`(adk, <app>, <user>, <session>)` / `<event id>` (`__unknown_session_id__` for events added
without a session, as ADK's services bucket them), owned by the user in the catalog, as the
user's sessions are; a memory written with `add_memory` is the item `(adk, <app>, <user>)` /
`<its id>`. Labels hold no `.` (the store's separator): `%` and `.` are escaped in them. Only
the `text` of an item's value is searched; the event's content, author, time and ids are kept
beside it, unsearched (`custom_metadata`).

`search_memory` finds a user's memories holding any of the query's words (whole words, as
both ADK services match; the query's first `MAX_TERMS` distinct words), however many sessions
the user has, and ranks them as `InMemoryMemoryService` does: by how many of the query's words
each holds, then the oldest first, then in the order they were added (`position`, kept beside
the value); at most `max_results` (10, as `InMemoryMemoryService`). A user of at most
`SCANNED` memories is read whole (one range of the store's key), so a search costs what the
user holds, not what the store holds; past that the text index's `CANDIDATES` best matches
(BM25, `ts_rank_cd`) are ranked. `delete_memory` erases a memory's text and content at once
and keeps a tombstone of its id, so adding its session again does not bring it back (as
`InMemoryMemoryService`). Adding a session writes only its events that are new or changed
since it was last added, in one transaction.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput
from turnstore.integrations import requires_extra
from turnstore.records.memory import (
    MemoryCall,
    MemoryCatalogRequest,
    MemoryGet,
    MemoryPut,
    MemoryRow,
    MemorySearch,
    MemoryWrite,
)
from turnstore.seam import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    Shared,
    borrow,
    query_term_words,
    value_word_list,
)

with requires_extra(__name__, "Google ADK", "adk"):
    from google.adk.events.event import Event
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session
    from google.genai import types

ROOT = "adk"
"""The first label of every ADK memory's namespace."""
UNKNOWN_SESSION = "__unknown_session_id__"
"""The session label of events added without a session id (ADK's own services' bucket)."""
MAX_RESULTS = 10
"""Memories a search returns by default (`InMemoryMemoryService`'s ten)."""
SCANNED = 1000
"""A user with at most this many memories is searched by reading them all (one range of the
store's key), so a search costs what the user holds, however large the store."""
CANDIDATES = 1000
"""Past `SCANNED`, the index's best matches (BM25, `ts_rank_cd`) a search ranks by words held:
a user with more matches than this has the rest ranked by the index alone."""
_ERASED = msgspec.json.encode({"erased": True}).decode()
"""A deleted memory's value: no text, so nothing of it is searched or shown."""
_WORD = re.compile(r"\w+")


def _label(part: str, what: str) -> str:
    """A namespace label of an ADK name: `%` and `.` escaped, since `.` joins labels."""
    if not isinstance(part, str) or not part:
        raise InvalidInput(f"{what} must be a non-empty string")
    return part.replace("%", "%25").replace(".", "%2E")


def _user(app_name: str, user_id: str) -> tuple[str, ...]:
    return (ROOT, _label(app_name, "app name"), _label(user_id, "user ID"))


def memory_place(
    app_name: str, user_id: str, session_id: str, memory_id: str
) -> tuple[tuple[str, ...], str]:
    """Where the service keeps a memory of an event: its namespace and key."""
    return (*_user(app_name, user_id), _label(session_id, "session ID")), memory_id


def content_text(content: types.Content | None) -> str:
    """What a memory of this content is searched by: its parts' text, thoughts left out."""
    parts = content.parts if content is not None else None
    texts = (
        part.text.replace("\n", " ").strip()
        for part in parts or ()
        if part.text and not part.thought
    )
    return " ".join(text for text in texts if text)


def _hashed_id(author: str, timestamp: object, content_json: str) -> str:
    """The id of a memory that came with none, as ADK's `SqliteMemoryService` derives it."""
    payload = f"{author}:{timestamp}:{content_json}".encode()
    return hashlib.sha256(payload).hexdigest()[:32]


class _Memory(NamedTuple):
    """One memory as stored: where, under which key, and its value's JSON."""

    namespace: tuple[str, ...]
    key: str
    value_json: str


def _value(text: str, memory_id: str, author: str | None, timestamp: object, **kept: Any) -> str:
    # Everything but `text` under keys that search skips (`rules.search.SKIPPED_KEYS`).
    value = {
        "text": text,
        "id": memory_id,
        "author": author,
        "timestamp": timestamp,
        "custom_metadata": kept,
    }
    return msgspec.json.encode(value).decode()


def _event_memory(
    base: tuple[str, ...], session_id: str, event: Event, position: tuple[int, int]
) -> _Memory | None:
    text = content_text(event.content)
    if not text:
        return None
    assert event.content is not None  # content_text's guard
    content = event.content.model_dump(mode="json", exclude_none=True)
    timestamp = float(event.timestamp)
    event_id = event.id or _hashed_id(
        event.author or "", timestamp, msgspec.json.encode(content).decode()
    )
    metadata = {"session_id": session_id, "event_id": event_id}
    value = _value(
        text,
        event_id,
        event.author,
        timestamp,
        content=content,
        metadata=metadata,
        position=position,
    )
    namespace = (*base, _label(session_id, "session ID"))
    return _Memory(namespace, event_id, value)


def _entry_memory(base: tuple[str, ...], entry: MemoryEntry, position: tuple[int, int]) -> _Memory:
    content = entry.content.model_dump(mode="json", exclude_none=True)
    text = content_text(entry.content)
    memory_id = entry.id or _hashed_id(
        entry.author or "", entry.timestamp, msgspec.json.encode(content).decode()
    )
    value = _value(
        text,
        memory_id,
        entry.author,
        entry.timestamp,
        content=content,
        metadata=dict(entry.custom_metadata),
        position=position,
    )
    return _Memory(base, memory_id, value)


def query_terms(query: str) -> str | None:
    """The query as the store reads it: its first distinct words, each quoted (ADK's query
    is text, not turnstore's query syntax), within the store's limits; None if it has none."""
    seen: dict[str, None] = {}
    length = 0
    for word in _WORD.findall(unicodedata.normalize("NFC", query)):
        lowered = word.lower()
        if lowered in seen:
            continue
        if len(seen) == MAX_TERMS or length + len(lowered) + 3 > MAX_QUERY_CHARS:
            break
        seen[lowered] = None
        length += len(lowered) + 3
    found = " ".join(f'"{word}"' for word in seen)
    try:
        return found if query_term_words(found) else None
    except InvalidInput:  # words of no letter the index knows (`_` alone, say)
        return None


def _held(words: tuple[str, ...], terms: list[tuple[str, ...]]) -> int:
    """How many of the terms the words hold, each term's words one after another."""
    starts: dict[str, list[int]] = {}
    for at, word in enumerate(words):
        starts.setdefault(word, []).append(at)
    return sum(
        any(words[at : at + len(term)] == term for at in starts.get(term[0], ()))
        for term in terms
        if term
    )


def _ranked(rows: Sequence[MemoryRow], query: str) -> list[dict[str, Any]]:
    """The values of the rows that hold a term of the query, by how many they hold, then by
    time (the oldest first), then the order they were added in, as `InMemoryMemoryService`
    ranks them; then by namespace and key, so that both databases agree."""
    terms = query_term_words(query)
    ranked = []
    for row in rows:
        held = _held(value_word_list(row.value_json), terms)
        if not held:  # a tombstone, or a memory the scan read that holds no term
            continue
        value = msgspec.json.decode(row.value_json)
        moment = value.get("timestamp")
        moment = moment if isinstance(moment, (int, float)) else 0.0
        ranked.append(((-held, moment, *_position(value), row.namespace, row.key), value))
    ranked.sort(key=lambda found: found[0])
    return [value for _, value in ranked]


def _position(value: dict[str, Any]) -> tuple[int, int]:
    """When a memory was added (microseconds) and its place in the call that added it (a
    session's events in the session's order): what keeps ties in time in the order added."""
    found = value.get("custom_metadata", {}).get("position")
    if isinstance(found, list) and len(found) == 2 and all(type(n) is int for n in found):
        return found[0], found[1]
    return 0, 0


def _unplaced(value_json: str) -> str:
    """A memory's value without its `position`: what says whether adding it again changes
    it."""
    value = msgspec.json.decode(value_json)
    if isinstance(value, dict) and isinstance(value.get("custom_metadata"), dict):
        value["custom_metadata"].pop("position", None)
    return msgspec.json.encode(value).decode()


def _added() -> int:
    return time.time_ns() // 1000


def _entry(value: dict[str, Any]) -> MemoryEntry:
    kept = value["custom_metadata"]
    timestamp = value["timestamp"]
    if isinstance(timestamp, (int, float)):
        timestamp = datetime.fromtimestamp(timestamp).isoformat()
    return MemoryEntry(
        id=value["id"],
        content=types.Content.model_validate(kept["content"]),
        author=value["author"],
        timestamp=timestamp,
        custom_metadata=kept["metadata"],
    )


class TurnstoreMemoryService(BaseMemoryService):
    """An ADK `BaseMemoryService` on turnstore's long-term memory (SQLite or PostgreSQL).

    `store` is an open `turnstore.Store` (or `BlockingStore`) whose connections the service
    shares and leaves open, or a store URL that this service opens and `close()` closes.
    """

    def __init__(
        self,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        max_results: int = MAX_RESULTS,
    ) -> None:
        if type(max_results) is not int or not 1 <= max_results <= CANDIDATES:
            raise InvalidInput(f"max_results must be an integer from 1 to {CANDIDATES}")
        self._shared: Shared = borrow(store)
        self.store: Store = self._shared.store
        self.max_results = max_results

    async def close(self) -> None:
        """Release the service's threads, and the store's connections if it opened them."""
        await self._shared.aclose()

    async def add_session_to_memory(self, session: Session) -> None:
        """Add the session's events with text, each a memory (those unchanged are left)."""
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add these events with text, each a memory, replacing an earlier version of it; an
        event whose memory was deleted stays deleted. `custom_metadata` is not read."""
        base = _user(app_name, user_id)
        session = session_id or UNKNOWN_SESSION
        added = _added()
        found = (_event_memory(base, session, one, (added, n)) for n, one in enumerate(events))
        await self._write(user_id, [memory for memory in found if memory is not None])

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add these entries, each a memory under its `id` (or one derived from its content,
        as ADK's SQLite service derives an event's); `custom_metadata` is not read."""
        base = _user(app_name, user_id)
        added = _added()
        found = [_entry_memory(base, one, (added, n)) for n, one in enumerate(memories)]
        await self._write(user_id, found)

    async def _write(self, user_id: str, memories: list[_Memory]) -> None:
        """Put the memories not stored as they are, nor deleted, in one transaction."""
        if not memories:
            return
        last = {(one.namespace, one.key): one for one in memories}
        keys = list(last)
        # Read first: an unchanged memory is not written again, a deleted one not restored.
        answer = await self.store.memory.run(
            MemoryCall(gets=tuple(MemoryGet(namespace, key) for namespace, key in keys))
        )
        writes: list[MemoryWrite] = []
        for key, row in zip(keys, answer.gets, strict=True):
            one = last[key]
            if row is not None and (
                row.value_json == _ERASED or _unplaced(row.value_json) == _unplaced(one.value_json)
            ):
                continue
            writes.append(
                MemoryPut(one.namespace, one.key, one.value_json, None, user_id, text=True)
            )
        if writes:
            await self.store.memory.run(MemoryCall(writes=tuple(writes)))

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories holding any of the query's words, most words first."""
        base = _user(app_name, user_id)
        if not isinstance(query, str):
            raise InvalidInput("a memory search's query must be a string")
        terms = query_terms(query)
        if terms is None:
            return SearchMemoryResponse()
        # A user's memories are one range of the key: read them all while they are few (the
        # cost then follows the user's memories, not the store's), else ask the index.
        listing = MemorySearch(base, limit=SCANNED + 1, page=SCANNED + 1)
        [rows] = (await self.store.memory.run(MemoryCall(searches=(listing,)))).searches
        if len(rows) > SCANNED:
            search = MemorySearch(base, query=terms, any_of=True, limit=CANDIDATES, page=CANDIDATES)
            [rows] = (await self.store.memory.run(MemoryCall(searches=(search,)))).searches
        chosen = _ranked([found.row for found in rows], terms)[: self.max_results]
        return SearchMemoryResponse(memories=[_entry(value) for value in chosen])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Erase the memory with this id wherever the user has it (its text and content at
        once), keeping a tombstone so that adding its session again does not restore it."""
        if not memory_id:
            return
        base = _user(app_name, user_id)
        namespaces = [base]
        after: tuple[str, ...] | None = None
        while True:
            page = await self.store.memory.catalog(
                MemoryCatalogRequest(prefix=base, after=after, limit=1000)
            )
            namespaces += [found.namespace for found in page.namespaces if found.namespace != base]
            if page.next_after is None:
                break
            after = page.next_after

        answer = await self.store.memory.run(
            MemoryCall(gets=tuple(MemoryGet(namespace, memory_id) for namespace in namespaces))
        )
        writes: list[MemoryWrite] = [
            MemoryPut(namespace, memory_id, _ERASED, None, user_id)
            for namespace, row in zip(namespaces, answer.gets, strict=True)
            if row is not None
        ]
        if writes:
            await self.store.memory.run(MemoryCall(writes=tuple(writes)))


__all__ = ["MAX_RESULTS", "TurnstoreMemoryService", "content_text", "query_terms"]
