"""A Pydantic AI conversation store whose conversations live in turnstore.

    from turnstore.integrations.pydantic_ai import TurnstoreConversationStore

    store = TurnstoreConversationStore.from_url("sqlite:///conversations.db")
    conversation = await store.load(chat_id) or Conversation(conversation_id=chat_id)
    result = await agent.run("Hello", conversation=conversation)
    await store.save(result, scope="user-42")

Pydantic AI's `ConversationStore` works out what a save appends, where a history branches and
what a fork keeps; this class stores it. A conversation `c` is the turnstore session
`pydantic-ai/c`, owned in the catalog by its `scope`; each entry is one item of the session,
stored once, and the record one state value beside them (`_pydantic_ai_encoding`). A write
commits the record and the entries it adds in one transaction, and only while the session is
still at the sequence the record was read at: the store's compare-and-set, so of two writers
holding one `revision` one wins and the other gets `ConversationConflict`.

A session holds every entry its histories reach, so a fork copies the history it keeps into
its own session (Pydantic AI's forks share entries; turnstore's forks are deleted with their
parent, so they are not used): deleting a conversation erases its session, its entries and
their text from search, and leaves its forks whole. A branch is a move of the record's head
within the session. `list_conversations` reads the catalog, a page at a time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, Self

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, SequenceConflict, SessionNotFound
from turnstore.integrations import requires_extra
from turnstore.integrations._opening import Closes, Opening
from turnstore.records import SessionCursor, SessionPageRequest
from turnstore.records.kinds.pydantic_ai import KIND as PYDANTIC_AI
from turnstore.records.kinds.pydantic_ai import RECORD_KEY
from turnstore.seam import Shared, borrow, optional_identifier

with requires_extra(__name__, "Pydantic AI", "pydantic-ai"):
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationDetails,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )

    from turnstore.integrations import _pydantic_ai_encoding as encoding
    from turnstore.integrations._pydantic_ai_encoding import PREFIX, Stored, entry_key

KIND = PYDANTIC_AI.name
"""The kind of session a conversation is in the catalog and in search."""
PAGE = 200
"""Conversations read at a time from the catalog."""
CLOCK_SLACK = 5
"""Seconds a record's `updated_at` may run ahead of the database's clock (see `read_records`)."""
REMEMBERED = 20_000
"""Entries whose place a store remembers, so reading a history it just found costs no lookup."""
_DETAILS = frozenset({"title", "metadata"})


class TurnstoreConversationStore(Closes, ConversationStore):
    """A Pydantic AI `ConversationStore` on turnstore (SQLite or PostgreSQL).

    `store` is an open `turnstore.Store` (or `BlockingStore`) whose connections this shares
    and leaves open, or a store URL (or path) that this opens and `close()` closes.
    """

    def __init__(self, store: Store | BlockingStore | str | os.PathLike[str]) -> None:
        self._shared: Shared = borrow(store)
        self.store: Store = self._shared.store
        self._where: dict[str, tuple[str, int]] = {}

    @classmethod
    def from_url(cls, url: str | os.PathLike[str]) -> TurnstoreConversationStore:
        """A conversation store over the store at `url` (a SQLite path or URL, or
        `postgresql://…`)."""
        return cls(url)

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str]) -> Opening[Self]:
        """A conversation store for one `with` or `async with` block, closed on leaving."""
        return Opening(lambda: cls(conn_string))

    def close(self) -> None:
        """Release this store's threads, and the store's connections if it opened them."""
        self._shared.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        await self._shared.aclose()

    # --- records ------------------------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record, or None when it is not stored."""
        stored = await self._stored(encoding.session_id(conversation_id))
        return None if stored is None else stored.record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The records (of `scope`), newest `updated_at` first, at most `limit` of them.

        Read from the catalog, newest write first, a page at a time, until no conversation left
        unread can be newer than the `limit`-th found: the catalog keeps whole seconds, and a
        record's `updated_at` (Pydantic AI's clock) is never after its session's last write (the
        database's), give or take `CLOCK_SLACK`.
        """
        owner = optional_identifier(scope, "scope")
        if limit is not None and limit < 0:
            raise InvalidInput("limit must not be negative")
        found: list[ConversationRecord] = []
        cursor: SessionCursor | None = None
        while limit != 0:
            request = SessionPageRequest(
                owner_id=owner, cursor=cursor, limit=PAGE, id_prefix=PREFIX
            )
            page = await self.store.list_sessions_page(request)
            ids = [summary.session_id for summary in page.sessions]
            values = await self.store.load_states(ids, RECORD_KEY)
            found += [encoding.loaded(values[id]).record for id in ids if id in values]
            cursor = page.next_cursor
            if cursor is None or _complete(found, limit, page.sessions[-1].updated_at):
                break
        found.sort(key=lambda record: record.updated_at, reverse=True)
        return found[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store the record and its new entries in one commit, if the stored record still has
        `expected_revision` (None: if there is none); else `ConversationConflict`."""
        sid = encoding.session_id(record.conversation_id)
        owner = optional_identifier(record.scope, "scope")
        new = encoding.items(new_entries, [None] * len(new_entries))  # refused before any I/O
        moved: tuple[int, int] | None = None
        while True:
            current = await self._stored(sid)
            self._check_revision(record.conversation_id, current, expected_revision)
            at = _position(current, moved)
            if current is not None:
                if current.record.scope != record.scope:
                    raise InvalidInput("a conversation's scope is its owner and cannot change")
                record = dataclasses.replace(
                    record, title=current.record.title, metadata=current.record.metadata
                )
            plan = _Plan(self, sid, current, at[1])
            await plan.place(record, new)
            value = encoding.stored_value(record, at[0] + 1, at[1] + len(plan.items), plan.tips)
            try:
                await self._commit(
                    sid, plan.items, owner, at[0], [*plan.state, (RECORD_KEY, value)]
                )
            except (SequenceConflict, SessionNotFound):
                if current is None:
                    raise ConversationConflict(record.conversation_id) from None
                moved = await self._moved(sid, current)
                continue
            plan.remember()
            return

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Replace the record's title or metadata, in one compare-and-set commit that keeps its
        revision; `ConversationConflict` when it is not at `expected_revision` and `expected`."""
        unknown = set(details) - _DETAILS | set(expected or {}) - _DETAILS
        if unknown:
            raise NotImplementedError(f"a conversation stores no {sorted(unknown)}")
        sid = encoding.session_id(conversation_id)
        moved: tuple[int, int] | None = None
        while True:
            current = await self._stored(sid)
            self._check_revision(conversation_id, current, expected_revision)
            assert current is not None
            record = current.record
            if any(getattr(record, key) != value for key, value in (expected or {}).items()):
                raise ConversationConflict(conversation_id)
            record = dataclasses.replace(record, **details)
            sequence, length = _position(current, moved)
            value = encoding.stored_value(record, sequence + 1, length, current.at)
            try:
                await self._commit(sid, [], None, sequence, [(RECORD_KEY, value)])
            except (SequenceConflict, SessionNotFound):
                moved = await self._moved(sid, current)
                continue
            return record

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation's session: its record, its entries, their text in search.

        Its forks keep theirs (each holds its own copy). The revision is checked, then the
        session deleted: turnstore's delete is unconditional, so a save committed between the
        two is deleted with the conversation, as if it had come first.
        """
        sid = encoding.session_id(conversation_id)
        current = await self._stored(sid)
        self._check_revision(conversation_id, current, expected_revision)
        await self.store.delete_sessions([sid])

    # --- entries ------------------------------------------------------------------------------

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id, from any conversation holding it; `KeyError` if none does."""
        return (await self.read_history(entry_id, limit=1))[0]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to `head_id`, oldest first (the last `limit` of them), read a run of
        items at a time; `KeyError` when no conversation holds `head_id`."""
        if head_id is None or limit == 0:
            return []
        return await self._located_history(head_id, limit)

    # --- the store ----------------------------------------------------------------------------

    async def _history(
        self, sid: str, index: int, head_id: str, limit: int | None = None
    ) -> list[ConversationEntry]:
        read = _History(self.store, sid, head_id, limit)
        try:
            return await read.read(index)
        finally:
            self._remember(read.places)

    async def _located_history(
        self, entry_id: str, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The history up to an entry wherever it is: where this store last saw it, else in
        the catalog's conversations."""
        known = self._where.pop(entry_id, None)
        if known is not None:
            try:
                return await self._history(*known, entry_id, limit)
            except KeyError:
                pass  # seen in a session since deleted, or deleted and created again
        sid, index = await self._find(entry_id)
        return await self._history(sid, index, entry_id, limit)

    async def _history_from(self, entry_id: str, source: str | None) -> list[ConversationEntry]:
        """The history up to an entry of another conversation: `source` (a fork's), where
        this store last saw it, or any conversation of the catalog."""
        if source is not None:
            sid = encoding.session_id(source)
            index = await self.store.load_state(sid, entry_key(entry_id))
            if type(index) is int:
                return await self._history(sid, index, entry_id)
        return await self._located_history(entry_id)

    async def _stored(self, sid: str) -> Stored | None:
        value = await self.store.load_state(sid, RECORD_KEY)
        if value is None:
            return None
        stored = encoding.loaded(value)
        self._remember({entry: (sid, index) for entry, index in stored.at.items()})
        return stored

    @staticmethod
    def _check_revision(conversation_id: str, current: Stored | None, expected: str | None) -> None:
        if (current.record.revision if current is not None else None) != expected:
            raise ConversationConflict(conversation_id)

    async def _commit(
        self,
        sid: str,
        items: list[Any],
        owner: str | None,
        sequence: int,
        state: list[tuple[str, Any]],
    ) -> None:
        writes = [(sid, key, value) for key, value in state]
        await self.store.append_context(sid, items, owner, sequence, writes, kind=KIND)

    async def _moved(self, sid: str, read: Stored) -> tuple[int, int] | None:
        """After a lost compare-and-set: the session's sequence and length if it moved by a
        write that left the record as `read` (not one of this store's), else None."""
        window = await self.store.context_window(sid, None, 0)
        again = await self._stored(sid)
        if again is None or again.sequence != read.sequence:
            return None
        return window.sequence, window.length

    def _remember(self, places: dict[str, tuple[str, int]]) -> None:
        self._where.update(places)
        while len(self._where) > REMEMBERED:
            del self._where[next(iter(self._where))]

    async def _find(self, entry_id: str) -> tuple[str, int]:
        """Where an entry is among the catalog's conversations, looked up a page of them at
        a time; `KeyError` when none holds it."""
        key = entry_key(entry_id)
        cursor: SessionCursor | None = None
        while True:
            request = SessionPageRequest(cursor=cursor, limit=PAGE, id_prefix=PREFIX)
            page = await self.store.list_sessions_page(request)
            ids = [summary.session_id for summary in page.sessions]
            found = await self.store.load_states(ids, key)
            for sid in ids:
                if type(found.get(sid)) is int:
                    return sid, found[sid]
            cursor = page.next_cursor
            if cursor is None:
                raise KeyError(entry_id)


def _complete(found: list[ConversationRecord], limit: int | None, written: int) -> bool:
    """Whether `found` holds the newest `limit` records, when every record not read yet was
    written in the second `written` or before."""
    if limit is None or len(found) < limit:
        return False
    newest = sorted((record.updated_at for record in found), reverse=True)
    return newest[limit - 1].timestamp() >= written + 1 + CLOCK_SLACK


def _position(current: Stored | None, moved: tuple[int, int] | None) -> tuple[int, int]:
    """The sequence a write expects and the items the session holds before it."""
    if moved is not None:
        return moved
    return (current.sequence, current.length) if current is not None else (0, 0)


class _History:
    """One history read: from an entry back to the first, a run of items per read."""

    def __init__(self, store: Store, sid: str, head: str, limit: int | None) -> None:
        self._store, self._sid, self._limit = store, sid, limit
        self._expected: str | None = head
        self._items: list[Any] = []
        self.places: dict[str, tuple[str, int]] = {}
        """Where each entry read is, and the parent of the oldest one: a read further back
        (Pydantic AI reads a history on in steps) starts there."""

    def _wanted(self, index: int) -> int:
        left = index + 1
        return left if self._limit is None else min(left, self._limit - len(self._items))

    async def read(self, index: int | None) -> list[ConversationEntry]:
        """The entries from the one at `index` back, oldest first."""
        while index is not None and self._expected is not None and self._wanted(index) > 0:
            window = await self._store.context_window(self._sid, index + 1, self._wanted(index))
            if not window.items or window.start + len(window.items) != index + 1:
                raise KeyError(self._expected)  # the session is gone, or not the one read
            while index is not None and index >= window.start and self._wanted(index) > 0:
                index = self._take(window.items[index - window.start], index)
        if self._expected is not None and index is not None:
            self.places[self._expected] = (self._sid, index)
        self._items.reverse()
        return encoding.entries(self._items)

    def _take(self, item: Any, index: int) -> int | None:
        """Take the item at `index`, which must be the entry expected; its parent's index."""
        if not isinstance(item, dict) or item.get("id") != self._expected:
            raise KeyError(self._expected)
        self._items.append(item)
        self.places[item["id"]] = (self._sid, index)
        self._expected = item["parent_id"]
        parent: int | None = item["parent_index"]
        return parent


class _Plan:
    """What one write of a conversation appends: items, the state saying where each is, and
    where the record's head and branch tips are."""

    def __init__(
        self, owner: TurnstoreConversationStore, sid: str, current: Stored | None, length: int
    ) -> None:
        self._owner, self._sid, self._length = owner, sid, length
        self._known: dict[str, int] = dict(current.at) if current is not None else {}
        self.items: list[Any] = []
        self.state: list[tuple[str, Any]] = []
        self.tips: dict[str, int] = {}

    async def place(self, record: ConversationRecord, new: Sequence[Any]) -> None:
        """Place the new entries' items (encoded) after the session's, and find the tips."""
        for item in new:
            parent = item["parent_id"]
            at = None if parent is None else await self._index(parent, record)
            self._add([{**item, "parent_index": at}])
        for tip in (record.head_id, *record.branches):
            if tip is not None:
                self.tips[tip] = await self._index(tip, record)

    def remember(self) -> None:
        """Remember where the written items are, once committed."""
        start = self._length
        self._owner._remember(
            {item["id"]: (self._sid, start + n) for n, item in enumerate(self.items)}
        )

    def _add(self, items: list[Any]) -> None:
        for item in items:
            index = self._length + len(self.items)
            self.items.append(item)
            self._known[item["id"]] = index
            self.state.append((entry_key(item["id"]), index))

    async def _held(self, entry_id: str) -> int | None:
        """Where the session holds an entry, or None."""
        if entry_id in self._known:
            return self._known[entry_id]
        if not self._length:
            return None
        found = await self._owner.store.load_state(self._sid, entry_key(entry_id))
        return found if type(found) is int else None

    async def _index(self, entry_id: str, record: ConversationRecord) -> int:
        held = await self._held(entry_id)
        if held is None:
            await self._copy(entry_id, record)
            held = self._known[entry_id]
        return held

    async def _copy(self, entry_id: str, record: ConversationRecord) -> None:
        """Copy the history of an entry another conversation holds (a fork's source), but
        for the oldest entries this session holds already."""
        try:
            history = await self._owner._history_from(entry_id, record.forked_from)
        except KeyError:
            raise ConversationConflict(record.conversation_id) from None
        held = len(history)
        while held and await self._held(history[held - 1].id) is None:
            held -= 1
        parent = None if held == 0 else self._known[history[held - 1].id]
        copied = history[held:]
        base = self._length + len(self.items)
        self._add(encoding.items(copied, [parent, *range(base, base + len(copied) - 1)]))
