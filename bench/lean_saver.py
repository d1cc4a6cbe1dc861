"""The leanest durable LangGraph saver one could write: the ceiling row of `bench.langgraph_saver`.

stdlib `sqlite3` in WAL mode at `synchronous=FULL`, LangGraph's own serializer, one commit
per `put` and per `put_writes`. A channel value is stored once per version, as
`PostgresSaver` stores it (a checkpoint names its versions; an unchanged channel is not
written again), so nothing is spent that durability does not need: one lock (LangGraph puts
from a background thread), no thread of its own, no list encoding of any kind. It implements
what a graph calls (`get_tuple`, `list`, `put`, `put_writes`) and nothing else. Not a
product: the ceiling the saver's targets are set against.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (thread TEXT, ns TEXT, id TEXT, parent TEXT,
    type TEXT, checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread, ns, id));
CREATE TABLE IF NOT EXISTS blobs (thread TEXT, ns TEXT, channel TEXT, version TEXT,
    type TEXT, value BLOB, PRIMARY KEY (thread, ns, channel, version));
CREATE TABLE IF NOT EXISTS writes (thread TEXT, ns TEXT, id TEXT, task TEXT, idx INTEGER,
    channel TEXT, type TEXT, value BLOB, path TEXT, PRIMARY KEY (thread, ns, id, task, idx));
"""
COLUMNS = "thread, ns, id, parent, type, checkpoint, metadata"


class LeanSaver(BaseCheckpointSaver[str]):
    """One SQLite file; each `put` and `put_writes` its own durable commit."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.executescript(SCHEMA)
        # LangGraph puts from a background thread while the graph's thread writes: one
        # connection, one caller at a time.
        self.lock = threading.RLock()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The checkpoint without its values, and the values of its new versions."""
        conf = config["configurable"]
        thread, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        values = checkpoint["channel_values"]
        blobs = [
            (thread, ns, channel, str(version), *self._dumps(values, channel))
            for channel, version in new_versions.items()
        ]
        row = (thread, ns, checkpoint["id"], conf.get("checkpoint_id"))
        stored = {**checkpoint, "channel_values": {}}
        meta = get_checkpoint_metadata(config, metadata)
        with self._transaction():
            self.conn.executemany("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?)", blobs)
            self.conn.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*row, *self.serde.dumps_typed(stored), json.dumps(meta).encode()),
            )
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": row[2]}}

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self.lock:
            self.conn.execute("BEGIN")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def _dumps(self, values: dict[str, Any], channel: str) -> tuple[str, bytes | None]:
        if channel not in values:
            return "empty", None
        return self.serde.dumps_typed(values[channel])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """A task's writes; special channels replace, others keep the first."""
        conf = config["configurable"]
        key = (str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        verb = "REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE"
        rows = [
            (*key, task_id, WRITES_IDX_MAP.get(channel, idx), channel,
             *self.serde.dumps_typed(value), task_path)
            for idx, (channel, value) in enumerate(writes)
        ]  # fmt: skip
        with self._transaction():
            self.conn.executemany(
                f"INSERT OR {verb} INTO writes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """One checkpoint by id, or the namespace's newest."""
        conf = config["configurable"]
        thread, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        if checkpoint_id := get_checkpoint_id(config):
            where, params = "thread = ? AND ns = ? AND id = ?", (thread, ns, checkpoint_id)
        else:
            where, params = "thread = ? AND ns = ? ORDER BY id DESC LIMIT 1", (thread, ns)
        row = self.conn.execute(
            f"SELECT {COLUMNS} FROM checkpoints WHERE {where}", params
        ).fetchone()
        return None if row is None else self._tuple(row)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """A thread's checkpoints, newest first (what a graph's history reads)."""
        assert config is not None, "the ceiling lists one thread"
        conf = config["configurable"]
        sql = f"SELECT {COLUMNS} FROM checkpoints WHERE thread = ?"
        params: list[Any] = [str(conf["thread_id"])]
        if "checkpoint_ns" in conf:
            sql += " AND ns = ?"
            params.append(conf["checkpoint_ns"])
        if before is not None:
            sql += " AND id < ?"
            params.append(before["configurable"]["checkpoint_id"])
        sql += " ORDER BY id DESC"
        count = 0
        with self.lock:
            rows = self.conn.execute(sql, params).fetchall()
        for row in rows:
            with self.lock:
                found = self._tuple(row)
            if filter and any(found.metadata.get(k) != v for k, v in filter.items()):
                continue
            yield found
            count += 1
            if limit is not None and count >= limit:
                return

    def _tuple(self, row: tuple[Any, ...]) -> CheckpointTuple:
        thread, ns, checkpoint_id, parent, kind, data, meta = row
        checkpoint: Checkpoint = self.serde.loads_typed((kind, data))
        values = {}
        for channel, version in checkpoint["channel_versions"].items():
            found = self.conn.execute(
                "SELECT type, value FROM blobs WHERE thread = ? AND ns = ? AND channel = ?"
                " AND version = ?",
                (thread, ns, channel, str(version)),
            ).fetchone()
            if found is not None and found[0] != "empty":
                values[channel] = self.serde.loads_typed(found)
        writes = self.conn.execute(
            "SELECT task, channel, type, value FROM writes WHERE thread = ? AND ns = ? AND id = ?"
            " ORDER BY task, idx",
            (thread, ns, checkpoint_id),
        ).fetchall()
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                   "checkpoint_id": checkpoint_id}}  # fmt: skip
        parent_config = None
        if parent is not None:
            parent_config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                              "checkpoint_id": parent}}  # fmt: skip
        return CheckpointTuple(
            config,  # type: ignore[arg-type]
            {**checkpoint, "channel_values": values},
            json.loads(meta),
            parent_config,  # type: ignore[arg-type]
            [(task, channel, self.serde.loads_typed((t, v))) for task, channel, t, v in writes],
        )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
