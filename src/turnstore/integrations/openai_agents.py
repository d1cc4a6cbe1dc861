"""OpenAI Agents SDK sessions whose items live in turnstore.

    from turnstore.integrations.openai_agents import TurnstoreSession

    session = TurnstoreSession("user-42-chat", "sqlite:///agents.db")
    result = await Runner.run(agent, "Hello", session=session)

A session's items are its checkpoint's context: `add_items` appends them (and journals them as
one transcript batch) in one durable commit, `pop_item` and `clear_session` remove items
without rewriting the history, and `get_items(limit)` reads only the newest `limit` items.
Every call takes the session row's lock, so concurrent writers on one session, in one process
or many, keep one total order. The session is in turnstore's catalog, owned by `owner_id`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from turnstore import BlockingStore, Store
from turnstore.errors import InvalidInput, StoreClosed
from turnstore.integrations import requires_extra
from turnstore.records.kinds.openai_agents import KIND as AGENTS
from turnstore.seam import Shared, borrow, optional_identifier, validate_session_id

with requires_extra(__name__, "the OpenAI Agents SDK", "openai-agents"):
    from agents.memory.session import _CompactionSnapshot
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )


KIND = AGENTS.name
"""The kind of session an SDK session is in the catalog and in search."""
_PAGE = 100
"""Items read at a time when looking for an expired prefix."""


class TurnstoreSession:
    """An `agents.memory.Session` stored in turnstore (SQLite or PostgreSQL).

    `store` is an open `turnstore.Store` (or `BlockingStore`), shared by many sessions, whose
    connections the session borrows and leaves open; or a store URL (or path) that this
    session opens and `close()` closes. `owner_id` owns the session in the catalog when this
    session creates it. `session_settings.limit` is the default of `get_items`.
    """

    def __init__(
        self,
        session_id: str,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        owner_id: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self.owner_id = optional_identifier(owner_id, "owner ID")
        self.session_settings: SessionSettings | None = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self._shared: Shared = borrow(store)
        self.store: Store = self._shared.store

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first: the newest `limit` (settings' default) or all.

        As the SDK's own sessions: a limit of 0 returns nothing, a negative one everything.
        """
        resolved = resolve_session_limit(limit, self.session_settings)
        if resolved is not None and resolved < 0:
            resolved = None
        return await self.store.context_tail(self.session_id, resolved)

    async def add_items(self, items: Sequence[Any]) -> None:
        """Append items as one durable commit: all of them or, after a crash, none."""
        if isinstance(items, str | bytes | dict):
            raise InvalidInput(f"items must be a list, not {type(items).__name__}")
        batch = list(items)
        if self._shared.closed:
            raise StoreClosed("the session is closed")  # even for nothing to add
        if batch:
            await self.store.append_context(self.session_id, batch, self.owner_id, kind=KIND)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item, or None when the session has none."""
        removed = await self.store.pop_context(self.session_id, 1)
        return removed[0] if removed else None

    async def clear_session(self) -> None:
        """Remove every item; the session stays in the catalog with its transcript."""
        await self.store.clear_context(self.session_id)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> _CompactionSnapshot:
        """The newest `limit` items, and a replacement of their suffix that is atomic.

        The hook the SDK's compaction wrappers (`OpenAIResponsesCompactionSession`,
        `EncryptedSession`) look for: the replacement commits only while the session is still
        at the sequence of this read (any write in between makes it return False), and drops
        the prefix of items `prune_prefix` calls expired (EncryptedSession's TTL) with it.
        """
        window = await self.store.context_window(self.session_id, None, limit)

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            if start >= len(window.items):
                return False  # nothing of the read left to replace
            keep = window.start + start
            expired = 0 if prune_prefix is None else await self._expired(prune_prefix, keep)
            return await self.store.replace_context(
                self.session_id, window.sequence, keep, list(output), expired
            )

        return _CompactionSnapshot(list(window.items), window.start == 0, replace_suffix)

    async def _expired(self, expired: Callable[[Any], bool], end: int) -> int:
        """How many of the first `end` items are a run of expired ones, read page by page."""
        count = 0
        while count < end:
            page = await self.store.context_window(
                self.session_id, min(end, count + _PAGE), min(end, count + _PAGE) - count
            )
            for item in page.items:
                if not expired(item):
                    return count
                count += 1
            if not page.items:
                break
        return count

    def close(self) -> None:
        """Close the session, and the store it opened from a URL; blocks, as
        `SQLiteSession.close`.

        A store passed in stays open: it belongs to the caller. Later calls of a closed
        session raise `StoreClosed`.
        """
        self._shared.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        await self._shared.aclose()
