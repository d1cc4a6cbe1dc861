"""The blocking face of long-term memory (`store.memory`): items by namespace and key.

Generated from `turnstore.faces.aio_memory` by `tools/async_to_sync.py`; do not edit.
"""

from __future__ import annotations

from turnstore.drivers.steps import BlockingDriver
from turnstore.ops import memory as memory_ops
from turnstore.records.memory import (
    MemoryAnswer,
    MemoryCall,
    MemoryCatalogPage,
    MemoryCatalogRequest,
    MemoryFindPage,
    MemoryFindRequest,
)


class BlockingMemoryTables:
    """The blocking face of the memory tables, on its store's engine."""

    def __init__(self, driver: BlockingDriver) -> None:
        self._driver = driver

    def run(self, call: MemoryCall) -> MemoryAnswer:
        """Run a batch in one transaction: its reads see the store as it was before the
        batch; its writes (the last per item) commit together."""
        return self._driver.run(memory_ops.run(call))

    def catalog(self, request: MemoryCatalogRequest) -> MemoryCatalogPage:
        """One page of the namespaces that hold live items, in order: how many each holds
        (of `request.owner_id`, if given) and when the newest was written."""
        return self._driver.run(memory_ops.catalog(request))

    def find(self, request: MemoryFindRequest) -> MemoryFindPage:
        """A page of every live item whose words match the query, best match first, each
        with the part of its text that matches (items just put are indexed first)."""
        return self._driver.run(memory_ops.find(request))

    def index(self) -> int:
        """Index the words of every item that puts left for the search indexer, now (after a
        bulk load, say); how many there were."""
        return self._driver.run(memory_ops.catch_up())

    def sweep(self) -> int:
        """Delete every expired item; how many there were."""
        return self._driver.run(memory_ops.sweep())
