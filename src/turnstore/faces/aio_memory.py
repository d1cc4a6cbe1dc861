"""The async face of long-term memory (`store.memory`): items by namespace and key.

Each method forwards to one operation of `turnstore.ops.memory`, like the store's other faces;
`tools/async_to_sync.py` writes the blocking twin. Values arrive encoded: the integration
(`TurnstoreStore` for LangGraph) encodes them, embeds their text and decides what a filter
keeps; each of its batches is one `run`.
"""

from __future__ import annotations

from turnstore.drivers.steps import AsyncDriver
from turnstore.ops import memory as memory_ops
from turnstore.records.memory import (
    MemoryAnswer,
    MemoryCall,
    MemoryCatalogPage,
    MemoryCatalogRequest,
    MemoryFindPage,
    MemoryFindRequest,
)


class MemoryTables:
    """The async face of the memory tables, on its store's engine."""

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver

    async def run(self, call: MemoryCall) -> MemoryAnswer:
        """Run a batch in one transaction: its reads see the store as it was before the
        batch; its writes (the last per item) commit together."""
        return await self._driver.run(memory_ops.run(call))

    async def catalog(self, request: MemoryCatalogRequest) -> MemoryCatalogPage:
        """One page of the namespaces that hold live items, in order: how many each holds
        (of `request.owner_id`, if given) and when the newest was written."""
        return await self._driver.run(memory_ops.catalog(request))

    async def find(self, request: MemoryFindRequest) -> MemoryFindPage:
        """A page of every live item whose words match the query, best match first, each
        with the part of its text that matches (items just put are indexed first)."""
        return await self._driver.run(memory_ops.find(request))

    async def index(self) -> int:
        """Index the words of every item that puts left for the search indexer, now (after a
        bulk load, say); how many there were."""
        return await self._driver.run(memory_ops.catch_up())

    async def sweep(self) -> int:
        """Delete every expired item; how many there were."""
        return await self._driver.run(memory_ops.sweep())
