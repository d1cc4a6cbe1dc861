"""The async face of the LangGraph tables (`store.langgraph`): the third contract's operations.

Each method forwards to one operation of `turnstore.ops.langgraph`, like the store's other
faces; `tools/async_to_sync.py` writes the blocking twin. The rows are already encoded: the
LangGraph saver (`turnstore.integrations.langgraph`) serialises values and builds requests,
and each of its methods is one call here (a listing, one call a page).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnstore.drivers.steps import AsyncDriver
from turnstore.ops import langgraph as langgraph_ops
from turnstore.records.langgraph import (
    CheckpointRow,
    DeltaHistory,
    ListedPage,
    LoadedCheckpoint,
    PutRequest,
    PutResult,
    SearchQuery,
    WritesRequest,
)


class LangGraphTables:
    """The async face of the LangGraph checkpoint tables, on its store's engine."""

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver

    async def put(
        self,
        request: PutRequest,
        whole: Callable[[list[str]], PutRequest] | None = None,
        writes: Sequence[WritesRequest] = (),
    ) -> PutResult:
        """Store a checkpoint and its new channel versions in one commit, `writes` (pending
        writes on that checkpoint) in the same one.

        A list sent as new items of a lineage that is gone comes back `missing`, unless
        `whole` is given: it builds the request again with those channels' lists whole
        (from their names), and that request is stored.
        """
        return await self._driver.run(langgraph_ops.put(request, whole, writes))

    async def put_writes(self, request: WritesRequest) -> None:
        """Store a task's pending writes on a checkpoint."""
        await self._driver.run(langgraph_ops.put_writes(request))

    async def get(
        self, session_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> LoadedCheckpoint | None:
        """Load one checkpoint by id, or a namespace's newest."""
        return await self._driver.run(
            langgraph_ops.get(session_id, checkpoint_ns, checkpoint_id), session_id
        )

    async def list_page(
        self,
        query: SearchQuery,
        keep: Callable[[CheckpointRow], bool] | None = None,
        remaining: int | None = None,
    ) -> ListedPage:
        """One page of a listing: the checkpoints of a search page that `keep` keeps (at most
        `remaining`), loaded; and the query of the next page, or None at the listing's end."""
        return await self._driver.run(langgraph_ops.list_page(query, keep, remaining))

    async def delta_history(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        channels: Sequence[str],
    ) -> list[DeltaHistory]:
        """Each channel's writes on a checkpoint's ancestors back to its nearest stored value."""
        return await self._driver.run(
            langgraph_ops.delta_history(session_id, checkpoint_ns, checkpoint_id, channels),
            session_id,
        )

    async def delete_threads(self, session_ids: Sequence[str]) -> None:
        """Delete threads' sessions (and everything hanging off them); absent ones are ignored."""
        await self._driver.run(langgraph_ops.delete_threads(session_ids))

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes the given runs made."""
        await self._driver.run(langgraph_ops.delete_runs(run_ids))

    async def keep_latest(self, session_ids: Sequence[str]) -> None:
        """Prune each thread to its namespaces' newest checkpoints (and what they replay)."""
        await self._driver.run(langgraph_ops.keep_latest(session_ids))

    async def prune(self, session_ids: Sequence[str], strategy: str = "keep_latest") -> None:
        """Prune threads: `keep_latest` (see that method) or `delete` (`delete_threads`)."""
        await self._driver.run(langgraph_ops.prune(session_ids, strategy))

    async def copy(self, source: str, target: str) -> bool:
        """Copy a thread's checkpoints, values and writes to another thread."""
        return await self._driver.run(langgraph_ops.copy(source, target))
