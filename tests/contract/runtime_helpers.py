"""Shared helpers of the runtime-face contract tests (`test_runtime_*.py`).

`runtime(store, session_id)` returns a handle whose methods are awaitable on both faces: the
async face's `RuntimeStore` as is, the blocking face's `BlockingRuntimeStore` wrapped the way
`conftest.BlockingAsAsync` wraps a `BlockingStore`.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from typing import Any

from turnstore import (
    BlockingRuntimeStore,
    GraphAppend,
    HydratedSessionCheckpoint,
    RuntimeCommit,
    SessionNodeRecord,
)
from turnstore.events import (
    TokenUsage,
)
from turnstore.records import (
    AgentFrameRecord,
    GraphCommitDelta,
    GraphReplaceFull,
    GraphUnchanged,
    ModelSpec,
    PersistedSessionConfig,
    SessionGraph,
    TokenLedgerEntry,
)

RUNTIME_TABLES = (
    "runtime_heads",
    "graph_nodes",
    "token_ledger",
    "turn_commits",
    "queued_work",
    "session_meta",
)
"""Runtime tables whose rows belong to one session (`session_id` column)."""

LONG_LEASE_MS = 60_000
SHORT_LEASE_MS = 150
FAR_FUTURE_MS = 2**62


class RuntimeAsAsync:
    """Runs a `BlockingRuntimeStore` from async tests; `session_id` and `durability_tier` stay."""

    def __init__(self, runtime: BlockingRuntimeStore) -> None:
        self._runtime = runtime
        self.blocking = runtime

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._runtime, name)
        if name == "durability_tier" or not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(attribute, *args, **kwargs)

        return call


async def runtime(store: Any, session_id: str) -> Any:
    """The runtime handle of `session_id` on either face, with awaitable methods."""
    handle = store.runtime(session_id)
    if inspect.isawaitable(handle):
        handle = await handle
    if isinstance(handle, BlockingRuntimeStore):
        return RuntimeAsAsync(handle)
    return handle


def now_ms() -> int:
    """Wall-clock time in milliseconds."""
    return time.time_ns() // 1_000_000


def sha256_ref(data: bytes) -> str:
    """The content address of `data`, computed independently of turnstore."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def part(text: str, kind: str = "text", part_id: str | None = None) -> dict[str, Any]:
    """A message part as the picker and the turn-commit hash recognise it."""
    value: dict[str, Any] = {"kind": kind, "content": text, "prune_state": "kept"}
    if part_id is not None:
        value["id"] = part_id
    return value


def message(role: str, *parts: dict[str, Any], message_id: str | None = None) -> dict[str, Any]:
    """A message payload (`role` and `parts`)."""
    value: dict[str, Any] = {"role": role, "parts": list(parts)}
    if message_id is not None:
        value["id"] = message_id
    return value


def node(
    node_id: str,
    parent: str | None = None,
    role: str = "assistant",
    text: str | None = None,
    timestamp: int | None = None,
) -> SessionNodeRecord:
    """A message node whose single text part is `text` (default: the node id)."""
    return SessionNodeRecord(
        node_id=node_id,
        parent_node_id=parent,
        payload=message(role, part(node_id if text is None else text)),
        timestamp=timestamp,
    )


def user(node_id: str, parent: str | None, text: str) -> SessionNodeRecord:
    """A user message node."""
    return node(node_id, parent, role="user", text=text)


def chain(*ids: str) -> list[SessionNodeRecord]:
    """Nodes each the child of the one before."""
    nodes: list[SessionNodeRecord] = []
    parent = None
    for node_id in ids:
        nodes.append(node(node_id, parent))
        parent = node_id
    return nodes


def entry(turn_id: str, total: int) -> TokenLedgerEntry:
    """A token ledger entry."""
    return TokenLedgerEntry(
        turn_id=turn_id,
        model="model-a",
        usage=TokenUsage(input_tokens=total - 1, output_tokens=1, total_tokens=total),
        recorded_at_ms=total,
    )


def make_commit(
    session_id: str,
    expected: int | None,
    graph: GraphCommitDelta | None = None,
    **changes: Any,
) -> RuntimeCommit:
    """A runtime commit with a config, one agent frame and `changes` applied."""
    fields: dict[str, Any] = {
        "session_id": session_id,
        "expected_head_revision": expected,
        "config": PersistedSessionConfig(
            provider_id="provider-a", model=ModelSpec(name="model-a", parameters={"t": 1})
        ),
        "agent_frames": [AgentFrameRecord(frame_id="main", agent_name="main")],
        "current_agent_frame_id": "main",
        "graph": GraphUnchanged() if graph is None else graph,
        "checkpoint": HydratedSessionCheckpoint(),
    }
    fields.update(changes)
    return RuntimeCommit(**fields)


def replace(nodes: list[SessionNodeRecord], leaf: str | None = None) -> GraphReplaceFull:
    """A full-graph delta ending at `leaf` (default: the last node)."""
    if leaf is None and nodes:
        leaf = nodes[-1].node_id
    return GraphReplaceFull(graph=SessionGraph(nodes=nodes, leaf_node_id=leaf))


def append(nodes: list[SessionNodeRecord], leaf: str | None = None) -> GraphAppend:
    """An append delta ending at `leaf` (default: the last node)."""
    if leaf is None and nodes:
        leaf = nodes[-1].node_id
    return GraphAppend(nodes=nodes, leaf_node_id=leaf)


async def seed_session(rt: Any, *ids: str) -> int:
    """Create the handle's session with a chain of nodes; return the head revision."""
    result = await rt.commit_runtime_state(make_commit(rt.session_id, None, replace(chain(*ids))))
    return int(result.head_revision)


def row_counts(database: Any, session_id: str) -> dict[str, int]:
    """Rows of every runtime table, the catalog and the attachment manifest for a session."""
    counts = {
        table: database.count(table, "session_id = ?", (session_id,))
        for table in (*RUNTIME_TABLES, "sessions", "attachment_manifest")
    }
    counts["blobs"] = database.count("blobs")
    return counts


def snapshot(database: Any, session_id: str) -> list[list[tuple[Any, ...]]]:
    """Every row the runtime stores for a session (and all blobs), to compare before/after."""
    tables = {
        "runtime_heads": "session_id",
        "graph_nodes": "position",
        "token_ledger": "position",
        "turn_commits": "turn_id",
        "queued_work": "position",
        "session_meta": "session_id",
        "attachment_manifest": "attachment_id",
    }
    rows = [
        database.query(
            f"SELECT * FROM {table} WHERE session_id = ? ORDER BY {order}", (session_id,)
        )
        for table, order in tables.items()
    ]
    rows.append(database.query("SELECT blob_ref FROM blobs ORDER BY blob_ref"))
    return [[tuple(row) for row in table] for table in rows]
