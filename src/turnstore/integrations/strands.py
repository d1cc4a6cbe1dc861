"""A Strands Agents session repository whose sessions live in turnstore.

    from strands import Agent
    from strands.session.repository_session_manager import RepositorySessionManager
    from turnstore.integrations.strands import TurnstoreSessionRepository

    repository = TurnstoreSessionRepository.from_url("sqlite:///agents.db", owner_id="user-42")
    manager = RepositorySessionManager(session_id="chat-1", session_repository=repository)
    agent = Agent(session_manager=manager)

A Strands session `S` is the turnstore session `strands/S`, owned in the catalog by the
repository's `owner_id` (Strands' sessions name no user). Its messages, of every agent in it,
are the session's context items in the order created, one commit each, each the message
Strands shows (the conversation view and search read it) with Strands' own fields beside it.
The session's record, each agent's record and each multi-agent's state are middleware state
in the scope of the session's id, so turnstore's own delete, export, copy and prune carry them
with the messages. `update_message` replaces that one item in place (`replace_context`, a
compare-and-set on the session's sequence); a redacted message's original is kept in state,
out of the conversation and the search index. Errors the Strands contract names (a session,
agent or message that exists or does not) are Strands' `SessionException`; input the store
cannot hold is turnstore's `InvalidInput` (a `ValueError`, as Strands raises for a bad id).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from turnstore import BlockingStore, Store
from turnstore.errors import SequenceConflict, SessionNotFound, StateConflict, StorageError
from turnstore.integrations import requires_extra
from turnstore.integrations._opening import Closes
from turnstore.records.kinds.strands import INCARNATION_KEY, SESSION_KEY
from turnstore.records.kinds.strands import KIND as STRANDS
from turnstore.seam import Shared, borrow, optional_identifier, validate_session_id

with requires_extra(__name__, "Strands Agents", "strands"):
    from strands.session.session_repository import SessionRepository
    from strands.types.exceptions import SessionException
    from strands.types.session import Session, SessionAgent, SessionMessage

    from turnstore.integrations import _strands_records as records

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase

PREFIX = STRANDS.id_prefix or ""
"""Every Strands session's turnstore id starts with this (`strands/`, declared with its kind)."""
KIND = STRANDS.name
"""The kind of session a Strands session is in the catalog and in search."""
WRITE_SECONDS = 30.0
"""How long one call keeps trying a write that finds the session moved on by another writer
before it gives up (every lost try means another writer's write landed)."""


def _tries() -> Iterator[None]:
    """The tries of an optimistic write: one at once, then each after a random pause that
    grows to 50 ms, so writers that keep colliding spread out, until `WRITE_SECONDS` pass."""
    deadline = time.monotonic() + WRITE_SECONDS
    pause = 0.001
    while True:
        yield
        if time.monotonic() >= deadline:
            return
        time.sleep(random.uniform(0, pause))
        pause = min(pause * 2, 0.05)


def turnstore_id(session_id: str) -> str:
    """The turnstore session id of one Strands session; `InvalidInput` for an unusable id."""
    return validate_session_id(PREFIX + validate_session_id(session_id))


class TurnstoreSessionRepository(Closes, SessionRepository):
    """A Strands `SessionRepository` on turnstore (SQLite or PostgreSQL), multi-agents too.

    `store` is an open `turnstore.Store` (or `BlockingStore`) whose connections the repository
    shares and leaves open, or a store URL (or path) that it opens and `close()` closes.
    `owner_id` owns, in the catalog, the sessions this repository creates.
    """

    def __init__(
        self,
        store: Store | BlockingStore | str | os.PathLike[str],
        *,
        owner_id: str | None = None,
    ) -> None:
        self.owner_id = optional_identifier(owner_id, "owner ID")
        self._shared: Shared = borrow(store)
        self.store: BlockingStore = self._shared.blocking
        # Keyed by session id, and by (session id, agent id) for agents' records.
        self._remembered = records.Remembered()

    @classmethod
    def from_url(cls, url: str | os.PathLike[str], **options: Any) -> TurnstoreSessionRepository:
        """A repository over the store at `url` (a SQLite path or URL, or `postgresql://…`)."""
        return cls(url, **options)

    def close(self) -> None:
        """Release the repository's threads, and the store's connections if it opened them."""
        self._shared.close()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        await self._shared.aclose()

    # --- sessions ---------------------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Create the session, empty, in one commit; `SessionException` if it exists."""
        tid = turnstore_id(session.session_id)
        record = records.new_record(session)
        writes = [(tid, SESSION_KEY, record), (tid, INCARNATION_KEY, record["incarnation"])]
        try:
            self.store.append_context(tid, [], self.owner_id, 0, writes, kind=KIND)
        except SequenceConflict:
            raise SessionException(f"Session {session.session_id} already exists") from None
        self._remembered.put(tid, record)
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        """The session, or None when there is none."""
        record = self._record(turnstore_id(session_id))
        return None if record is None else records.loaded_session(record)

    def _record(self, tid: str) -> dict[str, Any] | None:
        record = self.store.load_state(tid, SESSION_KEY)
        if not isinstance(record, dict):
            self._remembered.drop(tid)
            return None
        if "incarnation" in record:  # one without is written expecting nothing: never reused
            self._remembered.put(tid, record)
        return record

    def _existing(self, tid: str, session_id: str) -> dict[str, Any]:
        record = self._record(tid)
        if record is None:
            raise SessionException(f"Session {session_id} does not exist")
        return record

    def _commit(
        self, tid: str, record: dict[str, Any], items: list[Any], state: list[Any]
    ) -> dict[str, Any] | None:
        """Append `items` with `state` and the session's next `record`, only while the session
        is at the sequence `record` follows, in the incarnation `record` names; the record as
        committed, or None, writing nothing, when the session moved on.

        Within an incarnation, only appends (which advance the sequence) write the record, so
        the sequence and the incarnation tell whether a remembered record is still stored.
        """
        incarnation = record.get("incarnation")
        expected = [(tid, INCARNATION_KEY, incarnation)]
        if incarnation is None:  # a session created before incarnations: it gets one now
            record = {**record, "incarnation": records.new_incarnation()}
            expected, state = [], [*state, (tid, INCARNATION_KEY, record["incarnation"])]
        writes = [*state, (tid, SESSION_KEY, record)]
        try:
            self.store.append_context(
                tid, items, None, record["sequence"] - 1, writes, kind=KIND, expected_state=expected
            )
        except (SequenceConflict, StateConflict):
            self._remembered.drop(tid)
            return None
        except SessionNotFound:
            self._remembered.drop(tid)
            raise SessionException(f"Session {tid[len(PREFIX) :]} does not exist") from None
        self._remembered.put(tid, record)
        return record

    def _current(
        self, tid: str, session_id: str, moved: bool, agent_id: str, present: bool
    ) -> dict[str, Any]:
        """The session's record as the next write builds on it: the one this repository
        remembers (the write checks its sequence and incarnation), else read; after a write
        found the session `moved`, read again at its actual sequence.

        A remembered record that does not have `agent_id` `present` (as the write needs) is
        read again first: only a stored record refuses a write.
        """
        if not moved:
            remembered = self._remembered.get(tid)
            if remembered is None or (agent_id in remembered["agents"]) != present:
                remembered = self._existing(tid, session_id)
            return remembered
        # The context first, then the record: a record read first could predate a commit the
        # context shows, and the write would put that stale record back (an agent another
        # writer added lost). Read after, it is at least as new; if newer, the write conflicts
        # and is tried again.
        window = self.store.context_window(tid, None, 0)
        record = self._existing(tid, session_id)
        return records.resynced(record, window.sequence, window.length)

    # --- agents -----------------------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Add the agent to the session; `SessionException` if it is there, or no session."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(session_agent.agent_id)
        value = session_agent.to_dict()
        state = [(tid, records.agent_key(agent_id), value)]
        moved = False
        for _ in _tries():
            record = self._current(tid, session_id, moved, agent_id, present=False)
            if agent_id in record["agents"]:
                raise SessionException(f"Agent {agent_id} already exists in session {session_id}")
            committed = self._commit(tid, records.with_agent(record, agent_id), [], state)
            if committed is not None:
                self._remember_agent(tid, agent_id, value, committed.get("incarnation"))
                return
            moved = True
        raise _busy()

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        """The agent, or None when the session has no such agent."""
        found = self.store.load_state(
            turnstore_id(session_id), records.agent_key(records.agent_id_of(agent_id))
        )
        return None if found is None else SessionAgent.from_dict(found)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Replace the agent's record, keeping when it was created (as Strands' file manager
        does); `SessionException` when the session has no such agent."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(session_agent.agent_id)
        key = records.agent_key(agent_id)
        known = self._known_agent(tid, agent_id)
        for _ in _tries():
            if known is None:
                known = self._read_agent(tid, session_id, agent_id, key)
            incarnation, created_at = known
            session_agent.created_at = created_at or session_agent.created_at
            value = session_agent.to_dict()
            expected = [] if incarnation is None else [(tid, INCARNATION_KEY, incarnation)]
            try:
                self.store.save_state(tid, key, value, expected_state=expected)
            except StateConflict:  # the session was created again since
                self._remembered.drop(tid)
                known = None
                continue
            self._remember_agent(tid, agent_id, value, incarnation)
            return
        raise _busy()

    def _known_agent(self, tid: str, agent_id: str) -> tuple[str | None, str | None] | None:
        """The incarnation and `created_at` remembered of an agent, if the session's
        remembered record is of that incarnation (an agent's `created_at` never changes
        within one: every update keeps it)."""
        session, agent = self._remembered.get(tid), self._remembered.get((tid, agent_id))
        if session is None or agent is None or agent["incarnation"] is None:
            return None
        if agent["incarnation"] != session.get("incarnation"):
            return None
        return agent["incarnation"], agent["created_at"]

    def _read_agent(
        self, tid: str, session_id: str, agent_id: str, key: str
    ) -> tuple[str | None, str | None]:
        """The session's incarnation and the agent's `created_at`, read."""
        record = self._record(tid)
        previous = self.store.load_state(tid, key)
        if record is None or not isinstance(previous, dict):
            raise SessionException(f"Agent {agent_id} in session {session_id} does not exist")
        return record.get("incarnation"), previous.get("created_at")

    def _remember_agent(
        self, tid: str, agent_id: str, value: dict[str, Any], incarnation: str | None
    ) -> None:
        self._remembered.put(
            (tid, agent_id), {"incarnation": incarnation, "created_at": value.get("created_at")}
        )

    # --- messages ---------------------------------------------------------------------------

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Append the message to the session's context in one commit; `SessionException` when
        the agent (or the session) is missing or already holds this message id."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(agent_id)
        message_id = records.index_of(session_message.message_id)
        item = records.stored_message(agent_id, session_message)
        moved = False
        for _ in _tries():
            record = self._current(tid, session_id, moved, agent_id, present=True)
            if agent_id not in record["agents"]:
                raise SessionException(f"Agent {agent_id} does not exist in session {session_id}")
            if not records.after_newest(record, agent_id, message_id) and self._find(
                tid, record, agent_id, message_id
            ):
                raise SessionException(
                    f"Message {message_id} already exists in agent {agent_id} in session"
                    f" {session_id}"
                )
            following = records.with_message(record, agent_id, message_id)
            if self._commit(tid, following, [item], []) is not None:
                return
            moved = True
        raise _busy()

    def _find(
        self, tid: str, record: dict[str, Any], agent_id: str, message_id: int
    ) -> tuple[int, Any] | None:
        """The index and item of one message, read by its index while the layout allows, else
        by a scan of the context."""
        if record["indexed"] and record["sole"] == agent_id:
            if message_id >= record["length"]:
                return None
            window = self.store.context_window(tid, message_id + 1, 1)
            if window.items and records.is_message(window.items[0], agent_id, message_id):
                return message_id, window.items[0]
        for index, item in enumerate(self.store.context_tail(tid)):
            if records.is_message(item, agent_id, message_id):
                return index, item
        return None

    def _loaded(self, tid: str, agent_id: str, item: Any) -> SessionMessage:
        fields = records.meta(item) or {}
        original = None
        if fields.get("redacted"):
            key = records.original_key(agent_id, fields["message_id"])
            original = self.store.load_state(tid, key)
        return records.loaded_message(item, original)

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> SessionMessage | None:
        """The message, or None when the session, the agent or the message is missing."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(agent_id)
        message_id = records.index_of(message_id)
        record = self._record(tid)
        if record is None or agent_id not in record["agents"]:
            return None
        found = self._find(tid, record, agent_id, message_id)
        return None if found is None else self._loaded(tid, agent_id, found[1])

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Replace the message's item in place, keeping when it was created; a redacted one's
        original is kept in state. `SessionException` when there is no such message."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(agent_id)
        message_id = records.index_of(session_message.message_id)
        records.stored_message(agent_id, session_message)  # refused before any write
        for _ in _tries():
            window = self.store.context_window(tid, None, 0)
            record = records.resynced(
                self._existing(tid, session_id), window.sequence, window.length
            )
            found = self._find(tid, record, agent_id, message_id)
            if found is None:
                raise SessionException(
                    f"Message {message_id} does not exist in session {session_id}"
                )
            if self._replace(tid, record, found[0], agent_id, session_message):
                return
        raise _busy()

    def _replace(
        self, tid: str, record: dict[str, Any], index: int, agent_id: str, message: SessionMessage
    ) -> bool:
        """Replace the item at `index` if the session is still at the record's sequence; the
        items after it are written back as they are (none, for the newest message)."""
        tail = self.store.context_window(tid, None, record["length"] - index)
        if tail.sequence != record["sequence"] or tail.start != index:
            return False
        fields = records.meta(tail.items[0]) or {}
        message.created_at = fields.get("created_at", message.created_at)
        if message.redact_message is not None:
            # Stored before the item says it is redacted: a crash between leaves the message
            # unredacted, as it was, never redacted without its original.
            key = records.original_key(agent_id, message.message_id)
            self.store.save_state(tid, key, records.stored_original(message))
        replaced = [records.stored_message(agent_id, message), *tail.items[1:]]
        # A replacement writes no state: the record's sequence is one behind after it, which
        # the next append finds (one refused write) and corrects.
        return self.store.replace_context(tid, record["sequence"], index, replaced)

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: int | None = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> list[SessionMessage]:
        """The agent's messages by id, from `offset`, at most `limit`; [] when the session or
        the agent is missing."""
        tid = turnstore_id(session_id)
        agent_id = records.agent_id_of(agent_id)
        offset = records.index_of(offset, "offset")
        if limit is not None:
            limit = records.index_of(limit, "limit")
        record = self._record(tid)
        if record is None or agent_id not in record["agents"]:
            return []
        if record["indexed"]:
            return self._indexed(tid, record, agent_id, limit, offset)
        return self._scanned(tid, agent_id, limit, offset)

    def _scanned(
        self, tid: str, agent_id: str, limit: int | None, offset: int
    ) -> list[SessionMessage]:
        """The agent's messages found by a scan of the whole context, put in id order."""
        items = [
            item for item in self.store.context_tail(tid) if records.is_message(item, agent_id)
        ]
        items.sort(key=records.message_id_in)
        end = None if limit is None else offset + limit
        return [self._loaded(tid, agent_id, item) for item in items[offset:end]]

    def _indexed(
        self, tid: str, record: dict[str, Any], agent_id: str, limit: int | None, offset: int
    ) -> list[SessionMessage]:
        """Messages of an indexed layout, read as one window of the context: only the page."""
        length = record["length"] if record["sole"] == agent_id else 0
        end = length if limit is None else min(length, offset + limit)
        if end <= offset:
            return []
        window = self.store.context_window(tid, end, end - offset)
        expected = range(offset, end)
        if window.length != record["length"] or not all(
            records.is_message(item, agent_id, message_id)
            for item, message_id in zip(window.items, expected, strict=True)
        ):
            # Edited by a write the record does not know of (another writer's): scan it.
            return self._scanned(tid, agent_id, limit, offset)
        return [self._loaded(tid, agent_id, item) for item in window.items]

    # --- multi-agents -----------------------------------------------------------------------

    def create_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        """Store the multi-agent's state (`serialize_state()`) in the session."""
        tid = turnstore_id(session_id)
        self._existing(tid, session_id)
        key = records.multi_agent_key(records.agent_id_of(multi_agent.id))
        self.store.save_state(tid, key, multi_agent.serialize_state())

    def read_multi_agent(
        self, session_id: str, multi_agent_id: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        """The multi-agent's state, or None when the session holds none."""
        key = records.multi_agent_key(records.agent_id_of(multi_agent_id))
        found = self.store.load_state(turnstore_id(session_id), key)
        return found if isinstance(found, dict) else None

    def update_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        """Replace the multi-agent's state; `SessionException` when the session holds none."""
        tid = turnstore_id(session_id)
        self._existing(tid, session_id)
        key = records.multi_agent_key(records.agent_id_of(multi_agent.id))
        if self.store.load_state(tid, key) is None:
            raise SessionException(
                f"MultiAgent state {multi_agent.id} in session {session_id} does not exist"
            )
        self.store.save_state(tid, key, multi_agent.serialize_state())


def _busy() -> StorageError:
    return StorageError(
        "the Strands session kept changing under this write; try again", retryable=True
    )
