"""Internal: progress bars on standard error, drawn only when it is a terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from turnstore.cli import common

ProgressCallback = Callable[[int, int], None]
"""What the transfer functions call: (trees done, trees in all; 0 when unknown)."""


@contextmanager
def progress_bar(description: str) -> Iterator[ProgressCallback | None]:
    """A bar counting trees on a terminal, as a callback; None (no bar) off a terminal."""
    if not common.on_terminal(stderr=True):
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # Transient: once done, the bar gives way to the command's report.
    with Progress(*columns, console=Console(stderr=True, markup=False), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        yield advance
