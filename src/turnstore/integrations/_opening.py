"""An adapter opened for one `with` or `async with` block, as the frameworks' own
`from_conn_string` context managers open theirs (LangGraph's `SqliteSaver` and
`AsyncSqliteSaver`), from one object that serves both statements."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar


class Closable(Protocol):
    """What an opened adapter offers: a blocking and an async close."""

    def close(self) -> None:
        """Release what the adapter opened, blocking."""

    async def aclose(self) -> None:
        """Release what the adapter opened, without blocking the event loop."""


class Closes:
    """`with` and `async with` for an adapter: leaving the block runs its `close()` or
    `aclose()`, which the adapter defines."""

    def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

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


C = TypeVar("C", bound=Closable)

_LATE_CLOSES: set[asyncio.Task[None]] = set()
"""Closes of adapters whose opening finished after its `async with` was cancelled."""


def _close_late(opening: asyncio.Future[C]) -> None:
    if opening.cancelled() or opening.exception() is not None:
        return
    closing = asyncio.ensure_future(opening.result().aclose())
    _LATE_CLOSES.add(closing)  # a task nobody holds may be collected before it runs
    closing.add_done_callback(_LATE_CLOSES.discard)


class Opening(Generic[C]):
    """Opens the adapter on entering and closes it on leaving; one use, `with` or `async with`.

    `async with` opens it in a worker thread, so the event loop never waits for a database
    to answer; cancelled while opening, it closes the adapter once that thread is done.
    """

    def __init__(self, open: Callable[[], C]) -> None:
        self._open = open
        self._opened: C | None = None
        self._used = False

    def _claim(self) -> None:
        if self._used:
            raise RuntimeError("from_conn_string() opens one adapter for one block: call it again")
        self._used = True

    def __enter__(self) -> C:
        self._claim()
        self._opened = self._open()
        return self._opened

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.close()

    async def __aenter__(self) -> C:
        self._claim()
        opening = asyncio.ensure_future(asyncio.to_thread(self._open))
        try:
            self._opened = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_late)
            raise
        return self._opened

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.aclose()
