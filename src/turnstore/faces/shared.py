"""Sharing an open store's engine and lifetime with a part built on it (`turnstore.seam`).

`borrow` gives the part its own async and blocking faces on one engine. Their drivers are
the part's, so closing the part ends its faces (later calls raise `StoreClosed`) and its
threads, while the store it borrowed from stays open; an engine the borrow opened from a
URL is the part's too, and closes with it.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Self

from turnstore.backends.urls import open_engine
from turnstore.drivers.steps import AsyncDriver, BlockingDriver
from turnstore.engine.protocol import Engine
from turnstore.faces.aio_store import Store
from turnstore.faces.blocking_store import BlockingStore


class Shared:
    """An async `store` and a `blocking` store on one engine, closed together.

    `close()` / `aclose()` (or `with` / `async with`) close only what `borrow` opened: the
    two faces' drivers and threads, and the engine when it was opened from a URL.
    """

    def __init__(self, engine: Engine, *, owned: bool) -> None:
        # An owned engine closes with the async driver, the last to close.
        self._async = AsyncDriver(engine, borrowed=not owned)
        self._blocking = BlockingDriver(engine, borrowed=True)
        self.store = Store._on_driver(self._async)
        self.blocking = BlockingStore._on_driver(self._blocking)

    @property
    def owns_engine(self) -> bool:
        """Whether closing this closes the engine (it was opened from a URL)."""
        return not self._async.borrowed

    @property
    def closed(self) -> bool:
        """Whether `close()` or `aclose()` has run."""
        return self._async.closed

    def close(self) -> None:
        """Close both faces, and the engine if the borrow opened it; idempotent."""
        self._blocking.close()
        self._async.close_blocking()

    async def aclose(self) -> None:
        """Close, as `close()`, without blocking the event loop."""
        self._blocking.close()
        await self._async.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def borrow(store: Store | BlockingStore | str | os.PathLike[str]) -> Shared:
    """Faces on an open store's engine (closing them leaves the store open), or on a URL's.

    A URL or path is opened as `turnstore.open` opens it, and the engine closes with the
    returned `Shared`. Borrowing from a closed store raises `StoreClosed`.
    """
    if isinstance(store, Store | BlockingStore):
        # Same package: the faces' driver is theirs to share, not a door for other packages.
        store._driver.check_open()
        return Shared(store._driver.engine, owned=False)
    return Shared(open_engine(store), owned=True)
