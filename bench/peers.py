"""One adapter per store under test, all with the same small async interface.

Every adapter commits one turn durably per `save_turn` the way its library is meant to be
used, keeps between turns only what an agent loop would keep in memory anyway, and loads
the latest state through the library's own read API. Peer libraries are imported lazily, so
turnstore's rows run without them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import turnstore
from bench.measure import ByteMeter, NoBytes
from bench.turn_events import TurnEvents
from bench.workload import Turn, compact
from turnstore import (
    Checkpoint,
    SessionContext,
    SessionPageRequest,
)
from turnstore.rules.search import index_texts

CATALOG_PAGE = 20
"""Sessions per catalog page."""


def first_checkpoint(session: str, turn: Turn) -> Checkpoint:
    """A new session's checkpoint, at sequence 0, named by its first turn's user text."""
    return Checkpoint(
        session_id=session,
        session_context=SessionContext(owner_id="bench", origin_label="bench"),
        first_user_message=turn.user_text[:200],
    )


def advance(checkpoint: Checkpoint, turn: Turn) -> Checkpoint:
    """`checkpoint` at its next sequence: context grown by the turn's items, its loop state."""
    checkpoint.sequence += 1
    checkpoint.context.extend(turn.items)
    checkpoint.metadata = {"loop_state": turn.state}
    return checkpoint


class Peer:
    """The interface every adapter implements; a None read means the peer has no such API."""

    name = "peer"
    label = "peer"
    backend = "sqlite"
    note = ""
    meter: ByteMeter = NoBytes()

    async def setup(self) -> None:
        """Create or open the store; not timed."""

    async def save_turn(self, session: str, turn: Turn) -> None:
        """Commit one turn durably: four transcript items and the loop state."""
        raise NotImplementedError

    async def load_latest(self, session: str) -> int | None:
        """Load the session's latest state; return how many transcript items it holds."""
        return None

    async def catalog_page(self) -> int | None:
        """Read the newest page of the session list; return how many sessions it holds."""
        return None

    def size(self) -> int:
        """Bytes the store occupies (called after `close`)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections and threads."""


def sqlite_files_size(path: Path) -> int:
    """Size of a SQLite database and whatever WAL it left behind."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def durable_sqlite(path: Path, **kwargs: Any) -> sqlite3.Connection:
    """A stdlib connection at full durability: WAL, synchronous=FULL (fsync every commit)."""
    connection = sqlite3.connect(path, check_same_thread=False, **kwargs)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


# --- turnstore --------------------------------------------------------------------------------


class TurnstorePeer(Peer):
    """turnstore's async Store: one checkpoint + transcript delta per turn, in one commit.

    With `events`, the same commit also journals the turn's frontend events (turn started,
    two model steps with streamed deltas, tool call begin/end, turn complete) and its
    execution record.
    """

    def __init__(
        self,
        url: str,
        *,
        events: bool,
        backend: str = "sqlite",
        sizer: Callable[[], int] | None = None,
        indexing: bool = True,
    ) -> None:
        self.url = url
        self.sizer = sizer
        self.events = events
        self.backend = backend
        self.indexing = indexing
        suffix = ("+events" if events else "") + ("" if indexing else "-noindex")
        self.name = f"turnstore{suffix}" if backend == "sqlite" else f"turnstore-pg{suffix}"
        what = "checkpoint+transcript+events+execution" if events else "checkpoint+transcript"
        self.label = f"turnstore ({what})" + ("" if indexing else ", search indexer off")
        self._checkpoints: dict[str, Checkpoint] = {}

    async def setup(self) -> None:
        # As a user opens it: the search indexer runs in the background (a `-noindex` twin
        # turns it off, to show what indexing costs).
        self.store = turnstore.open(self.url, index_in_background=self.indexing)

    def next_checkpoint(self, session: str, turn: Turn) -> Checkpoint:
        """The session's checkpoint at the next sequence: context grown by the turn's items."""
        checkpoint = self._checkpoints.get(session)
        if checkpoint is None:
            checkpoint = self._checkpoints[session] = first_checkpoint(session, turn)
        return advance(checkpoint, turn)

    async def save_turn(self, session: str, turn: Turn) -> None:
        checkpoint = self.next_checkpoint(session, turn)
        if not self.events:
            await self.store.save(checkpoint, turn.items)
            return
        events, execution = TurnEvents(checkpoint, turn).build()
        await self.store.save_with_events(checkpoint, turn.items, execution, events)

    async def load_latest(self, session: str) -> int | None:
        checkpoint = await self.store.load(session)
        return None if checkpoint is None else len(checkpoint.context)

    async def catalog_page(self) -> int | None:
        page = await self.store.list_sessions_page(SessionPageRequest(limit=CATALOG_PAGE))
        return len(page.sessions)

    def size(self) -> int:
        if self.sizer is not None:
            return self.sizer()
        return sqlite_files_size(Path(self.url.removeprefix("sqlite:///")))

    async def close(self) -> None:
        await self.store.close()


class TurnstoreBlockingPeer(TurnstorePeer):
    """turnstore's blocking Store, called straight from the loop (nothing else runs meanwhile).

    A lone blocking writer runs its transaction in its own thread; the async rows hand each
    write to the writer thread and back.
    """

    def __init__(self, url: str, *, events: bool, indexing: bool = True) -> None:
        super().__init__(url, events=events, indexing=indexing)
        base = "turnstore-blocking+events" if events else "turnstore-blocking"
        self.name = base + ("" if indexing else "-noindex")
        self.label = f"{self.label}, blocking"

    async def setup(self) -> None:
        self.blocking = turnstore.open_blocking(self.url, index_in_background=self.indexing)

    async def save_turn(self, session: str, turn: Turn) -> None:
        checkpoint = self.next_checkpoint(session, turn)
        if not self.events:
            self.blocking.save(checkpoint, turn.items)
            return
        events, execution = TurnEvents(checkpoint, turn).build()
        self.blocking.save_with_events(checkpoint, turn.items, execution, events)

    async def load_latest(self, session: str) -> int | None:
        checkpoint = self.blocking.load(session)
        return None if checkpoint is None else len(checkpoint.context)

    async def catalog_page(self) -> int | None:
        page = self.blocking.list_sessions_page(SessionPageRequest(limit=CATALOG_PAGE))
        return len(page.sessions)

    async def close(self) -> None:
        self.blocking.close()


# --- references without a library --------------------------------------------------------------


class StdlibSqlitePeer(Peer):
    """The plain reference: stdlib sqlite3, one transaction per turn, no library at all."""

    name = "sqlite3-plain"
    label = "stdlib sqlite3, 1 txn/turn"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lengths: dict[str, int] = {}

    async def setup(self) -> None:
        self.db = durable_sqlite(self.path, isolation_level=None)
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS sessions (
                session_id TEXT PRIMARY KEY, turns INTEGER NOT NULL,
                state_json TEXT NOT NULL, updated_at REAL NOT NULL);
            CREATE INDEX IF NOT EXISTS sessions_recent ON sessions(updated_at DESC);
            CREATE TABLE IF NOT EXISTS items (
                session_id TEXT NOT NULL, position INTEGER NOT NULL, item_json TEXT NOT NULL,
                PRIMARY KEY (session_id, position)) WITHOUT ROWID;
            """
        )

    async def save_turn(self, session: str, turn: Turn) -> None:
        start = self._lengths.get(session, 0)
        rows = [(session, start + i, compact(item)) for i, item in enumerate(turn.items)]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO items VALUES (?, ?, ?)", rows)
        self.db.execute(
            "INSERT INTO sessions VALUES (?, 1, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
            " turns = turns + 1, state_json = excluded.state_json,"
            " updated_at = excluded.updated_at",
            (session, compact(turn.state), time.time()),
        )
        self.db.execute("COMMIT")
        self._lengths[session] = start + len(rows)

    async def load_latest(self, session: str) -> int | None:
        self.db.execute("BEGIN")
        try:
            (state,) = self.db.execute(
                "SELECT state_json FROM sessions WHERE session_id = ?", (session,)
            ).fetchone()
            rows = self.db.execute(
                "SELECT item_json FROM items WHERE session_id = ? ORDER BY position", (session,)
            ).fetchall()
        finally:
            self.db.execute("COMMIT")
        json.loads(state)
        return len([json.loads(row[0]) for row in rows])

    async def catalog_page(self) -> int | None:
        rows = self.db.execute(
            "SELECT session_id, turns, updated_at FROM sessions ORDER BY updated_at DESC LIMIT ?",
            (CATALOG_PAGE,),
        ).fetchall()
        return len(rows)

    def size(self) -> int:
        return sqlite_files_size(self.path)

    async def close(self) -> None:
        self.db.close()


class StdlibFts5Peer(StdlibSqlitePeer):
    """The indexing ceiling: the plain reference, and each item's words (as turnstore reads
    them) into a bare FTS5 table in the same transaction."""

    name = "sqlite3-plain+fts5"
    label = "stdlib sqlite3 + bare FTS5 insert, 1 txn/turn"

    async def setup(self) -> None:
        await super().setup()
        self.db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(body,"
            " tokenize='unicode61 remove_diacritics 2')"
        )

    async def save_turn(self, session: str, turn: Turn) -> None:
        start = self._lengths.get(session, 0)
        rows = [(session, start + i, compact(item)) for i, item in enumerate(turn.items)]
        words = [(text,) for _, text in index_texts(turn.items)]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO items VALUES (?, ?, ?)", rows)
        self.db.executemany("INSERT INTO words (body) VALUES (?)", words)
        self.db.execute(
            "INSERT INTO sessions VALUES (?, 1, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
            " turns = turns + 1, state_json = excluded.state_json,"
            " updated_at = excluded.updated_at",
            (session, compact(turn.state), time.time()),
        )
        self.db.execute("COMMIT")
        self._lengths[session] = start + len(rows)


class DiskCeilingPeer(Peer):
    """The disk's raw single-commit ceiling: append the turn's bytes to a file, fdatasync."""

    name = "disk-ceiling"
    label = "raw append + fdatasync (ceiling)"
    backend = "disk"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def setup(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def save_turn(self, session: str, turn: Turn) -> None:
        record = compact({"session": session, "items": turn.items, "state": turn.state})
        os.write(self.fd, (record + "\n").encode())
        os.fdatasync(self.fd)

    def size(self) -> int:
        return self.path.stat().st_size

    async def close(self) -> None:
        os.close(self.fd)


# --- OpenAI Agents SDK ----------------------------------------------------------------------


class AgentsSessionPeer(Peer):
    """OpenAI Agents SDK `SQLiteSession.add_items`, one session object per conversation."""

    name = "agents-sqlitesession"
    label = "OpenAI Agents SQLiteSession.add_items"
    note = "stores the 4 items only: SQLiteSession has no place for the loop state"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sessions: dict[str, Any] = {}

    async def setup(self) -> None:
        from agents import SQLiteSession

        self._factory = SQLiteSession
        # The SDK sets WAL; synchronous is left at SQLite's default, checked to be FULL here.
        with closing(sqlite3.connect(self.path)) as probe:
            self.synchronous = probe.execute("PRAGMA synchronous").fetchone()[0]

    def _session(self, session: str) -> Any:
        found = self._sessions.get(session)
        if found is None:
            found = self._sessions[session] = self._factory(session, str(self.path))
        return found

    async def save_turn(self, session: str, turn: Turn) -> None:
        await self._session(session).add_items(turn.items)

    async def load_latest(self, session: str) -> int | None:
        return len(await self._session(session).get_items())

    def size(self) -> int:
        return sqlite_files_size(self.path)

    async def close(self) -> None:
        for session in self._sessions.values():
            session.close()


# --- LangGraph ------------------------------------------------------------------------------


class _Savers:
    """Opens a LangGraph saver of one kind at full durability."""

    @staticmethod
    def sqlite(path: Path) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(durable_sqlite(path))
        saver.setup()
        return saver

    @staticmethod
    async def async_sqlite(path: Path) -> Any:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        connection = await aiosqlite.connect(path)
        await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = FULL")
        saver = AsyncSqliteSaver(connection)
        await saver.setup()
        return saver

    @staticmethod
    def postgres(url: str) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # As PostgresSaver.from_conn_string: autocommit, so each statement commits durably
        # (synchronous_commit=on is checked by the driver before the run).
        connection = psycopg.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = PostgresSaver(connection)
        saver.setup()
        return saver


class LangGraphPeer(Peer):
    """What LangGraph peers share: a saver of one kind, and its size and close."""

    def __init__(
        self, kind: str, where: Path | str, sizer: Callable[[], int] | None = None
    ) -> None:
        self.kind = kind
        self.where = where
        self.sizer = sizer
        self.backend = "postgres" if kind == "postgres" else "sqlite"
        self.is_async = kind == "async_sqlite"

    async def setup(self) -> None:
        opened = getattr(_Savers, self.kind)(self.where)
        self.saver = await opened if self.is_async else opened

    @staticmethod
    def config(session: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        configurable = {"thread_id": session, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    async def load_latest(self, session: str) -> int | None:
        config = self.config(session)
        if self.is_async:
            found = await self.saver.aget_tuple(config)
        else:
            found = self.saver.get_tuple(config)
        return None if found is None else len(found.checkpoint["channel_values"]["messages"])

    def size(self) -> int:
        if self.sizer is not None:
            return self.sizer()
        return sqlite_files_size(Path(self.where))

    async def close(self) -> None:
        if self.is_async:
            await self.saver.conn.close()
        else:
            self.saver.conn.close()


_KIND_LABELS = {
    "sqlite": "SqliteSaver",
    "async_sqlite": "AsyncSqliteSaver",
    "postgres": "PostgresSaver",
}


class LangGraphDirectPeer(LangGraphPeer):
    """A LangGraph saver driven directly: one `put_writes` + one `put` per turn.

    The checkpoint's `messages` channel holds the whole item list, as LangGraph's channels
    do; the pending writes carry the turn's items and loop state.
    """

    def __init__(
        self, kind: str, where: Path | str, sizer: Callable[[], int] | None = None
    ) -> None:
        super().__init__(kind, where, sizer)
        self.name = f"langgraph-{kind.replace('_', '-')}-direct"
        self.label = f"LangGraph {_KIND_LABELS[kind]} put_writes+put"
        self.note = "two commits per turn (put_writes, then put), as the saver API has them"
        self._latest: dict[str, dict[str, Any]] = {}

    def _next(self, session: str, turn: Turn) -> tuple[dict[str, Any], dict[str, Any], str]:
        from langgraph.checkpoint.base import copy_checkpoint, empty_checkpoint
        from langgraph.checkpoint.base.id import uuid6

        previous = self._latest.get(session) or empty_checkpoint()
        checkpoint: dict[str, Any] = dict(copy_checkpoint(previous))  # type: ignore[arg-type]
        messages = [*previous["channel_values"].get("messages", []), *turn.items]
        versions = {
            channel: self.saver.get_next_version(previous["channel_versions"].get(channel), None)
            for channel in ("messages", "loop_state")
        }
        step = len(messages) // len(turn.items)
        checkpoint.update(
            id=str(uuid6(clock_seq=step)),
            ts=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            channel_values={"messages": messages, "loop_state": turn.state},
            channel_versions={**previous["channel_versions"], **versions},
            updated_channels=list(versions),
        )
        return checkpoint, versions, previous["id"] if session in self._latest else ""

    async def save_turn(self, session: str, turn: Turn) -> None:
        checkpoint, versions, parent_id = self._next(session, turn)
        # Writes belong to the checkpoint they were computed from (the first turn's to itself).
        parent = self.config(session, parent_id or None)
        writes_to = parent if parent_id else self.config(session, checkpoint["id"])
        writes = [("messages", turn.items), ("loop_state", turn.state)]
        metadata = {"source": "loop", "step": checkpoint["channel_values"]["loop_state"]["turn"]}
        task = f"turn-{metadata['step']}"
        if self.is_async:
            await self.saver.aput_writes(writes_to, writes, task)
            await self.saver.aput(parent, checkpoint, metadata, versions)
        else:
            self.saver.put_writes(writes_to, writes, task)
            self.saver.put(parent, checkpoint, metadata, versions)
        self._latest[session] = checkpoint


class LangGraphGraphPeer(LangGraphPeer):
    """A real ReAct-shaped `StateGraph(MessagesState)` compiled with the saver.

    A fake chat model node answers the user with a tool call, a tool node answers the call,
    the model node then gives the final answer: the turn's four items as four messages. One
    `invoke` per turn with the user message, at LangGraph's default durability.
    """

    def __init__(
        self, kind: str, where: Path | str, sizer: Callable[[], int] | None = None
    ) -> None:
        super().__init__(kind, where, sizer)
        self.name = f"langgraph-{kind.replace('_', '-')}-graph"
        self.label = f"LangGraph {_KIND_LABELS[kind]} via StateGraph"
        self._turn: Turn | None = None

    async def setup(self) -> None:
        await super().setup()
        self.graph = build_react_graph(self.saver, lambda: self._turn)

    async def save_turn(self, session: str, turn: Turn) -> None:
        from langchain_core.messages import HumanMessage

        self._turn = turn
        user = HumanMessage(content=turn.user_text, id=f"user-{turn.call['call_id']}")
        inputs = {"messages": [user], "loop_state": turn.state}
        config = self.config(session)
        if self.is_async:
            await self.graph.ainvoke(inputs, config)
        else:
            self.graph.invoke(inputs, config)


def build_react_graph(saver: Any, current_turn: Any) -> Any:
    """Compile agent ⇄ tools over `MessagesState` (+ the loop state) with `saver`."""
    from langgraph.graph import MessagesState

    class ReactState(MessagesState):
        loop_state: dict[str, Any]

    return compile_react_graph(ReactState, saver, current_turn)


def delta_react_state() -> Any:
    """The same state with `messages` on LangGraph 1.2's beta `DeltaChannel`.

    Opting in is a state annotation: `Annotated[list, DeltaChannel(reducer)]`. The reducer is
    LangGraph's batch messages reducer (`add_messages` takes one update, a DeltaChannel
    reducer a batch of them). Built with the functional TypedDict syntax so the annotation
    holds the channel object itself, not a string this module's globals cannot resolve.
    """
    from typing import Annotated, TypedDict

    from langgraph.channels import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer

    reducer: Any = _messages_delta_reducer  # typed for lists, the channel asks for sequences
    return TypedDict(  # type: ignore[operator]
        "DeltaReactState",
        {
            "messages": Annotated[list, DeltaChannel(reducer)],
            "loop_state": dict[str, Any],
        },
    )


def compile_react_graph(schema: Any, saver: Any, current_turn: Any) -> Any:
    """Compile agent ⇄ tools over `schema` (a `messages` list + the loop state) with `saver`."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph

    def model(state: Any) -> dict[str, Any]:
        turn: Turn = current_turn()
        if isinstance(state["messages"][-1], HumanMessage):
            call = turn.call
            tool_call = {
                "name": call["name"],
                "args": json.loads(call["arguments"]),
                "id": call["call_id"],
                "type": "tool_call",
            }
            reply = AIMessage(content="", tool_calls=[tool_call], id=f"ai-{call['call_id']}")
        else:
            reply = AIMessage(content=turn.assistant_text, id=turn.items[3]["id"])
        return {"messages": [reply]}

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        output = ToolMessage(content=current_turn().tool_output, tool_call_id=call["id"])
        return {"messages": [output]}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(schema)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


async def close_all(peers: list[Peer]) -> None:
    """Close every peer, even when one fails."""
    results = await asyncio.gather(*(peer.close() for peer in peers), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
