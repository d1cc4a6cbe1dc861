"""The blocking face of the LangGraph tables (`store.langgraph`): the third contract's operations.

Generated from `turnstore.faces.aio_langgraph` by `tools/async_to_sync.py`; do not edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from turnstore.drivers.steps import BlockingDriver
from turnstore.ops import langgraph as langgraph_ops
from turnstore.records.langgraph import (
    CheckpointRow,
    DeltaHistory,
    LoadedCheckpoint,
    PutRequest,
    PutResult,
    SearchQuery,
    WritesRequest,
)


class BlockingLangGraphTables:
    """The blocking face of the LangGraph checkpoint tables, on its store's engine."""

    def __init__(self, driver: BlockingDriver) -> None:
        self._driver = driver

    def put(self, request: PutRequest) -> PutResult:
        """Store a checkpoint and its new channel versions in one commit."""
        return self._driver.run(langgraph_ops.put(request))

    def put_writes(self, request: WritesRequest) -> None:
        """Store a task's pending writes on a checkpoint."""
        self._driver.run(langgraph_ops.put_writes(request))

    def get(
        self, session_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> LoadedCheckpoint | None:
        """Load one checkpoint by id, or a namespace's newest."""
        return self._driver.run(
            langgraph_ops.get(session_id, checkpoint_ns, checkpoint_id), session_id
        )

    def search(self, query: SearchQuery) -> list[CheckpointRow]:
        """One newest-first page of checkpoint rows matching a listing."""
        return self._driver.run(langgraph_ops.search(query))

    def load_rows(self, rows: Iterable[CheckpointRow]) -> list[LoadedCheckpoint]:
        """The values and writes of checkpoints a search found."""
        return self._driver.run(langgraph_ops.load_rows(rows))

    def delta_history(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        channels: Sequence[str],
    ) -> list[DeltaHistory]:
        """Each channel's writes on a checkpoint's ancestors back to its nearest stored value."""
        return self._driver.run(
            langgraph_ops.delta_history(session_id, checkpoint_ns, checkpoint_id, channels),
            session_id,
        )

    def delete_threads(self, session_ids: Sequence[str]) -> None:
        """Delete threads' sessions (and everything hanging off them); absent ones are ignored."""
        self._driver.run(langgraph_ops.delete_threads(session_ids))

    def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes the given runs made."""
        self._driver.run(langgraph_ops.delete_runs(run_ids))

    def keep_latest(self, session_ids: Sequence[str]) -> None:
        """Prune each thread to its namespaces' newest checkpoints (and what they replay)."""
        self._driver.run(langgraph_ops.keep_latest(session_ids))

    def copy(self, source: str, target: str) -> bool:
        """Copy a thread's checkpoints, values and writes to another thread."""
        return self._driver.run(langgraph_ops.copy(source, target))
