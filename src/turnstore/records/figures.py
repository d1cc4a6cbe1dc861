"""Internal: a session's figures (runs, model and tool calls, time, tokens), and which it records.

A turnstore session counts its figures as it saves (`ExecutionStats`). A framework's session
does not: its framework keeps what it measured inside the items it stores (token counts on a
LangGraph `AIMessage` or an ADK event, timestamps, tool calls and their errors). The search
indexer, which reads every item a session gains anyway, derives those figures off the save
path (`Derived`), and a kind says which figures its items carry (`SessionKind.figures`), so
a figure a framework never records reads as unrecorded, never as a measured zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

from turnstore.records.base import U64_MAX, Record
from turnstore.records.checkpoint import ExecutionStats

Figure = Literal[
    "runs", "failed_runs", "model_calls", "tool_calls", "failed_tool_calls", "elapsed", "tokens"
]
"""One figure of a session, by the `ExecutionStats` fields it reads: `runs` (`run_count`),
`failed_runs` (`failed_run_count`, `aborted_run_count`), `model_calls`, `tool_calls`,
`failed_tool_calls`, `elapsed` (`elapsed_ms`), `tokens` (`usage`)."""
FIGURES: tuple[Figure, ...] = (
    "runs",
    "failed_runs",
    "model_calls",
    "tool_calls",
    "failed_tool_calls",
    "elapsed",
    "tokens",
)
"""Every figure, in the order the catalog shows them."""


class Derived(Record, kw_only=True):
    """What the indexer derived of a session from the items it holds."""

    stats: ExecutionStats = msgspec.field(default_factory=ExecutionStats)
    """The figures its items carry, added to what its saves counted."""
    measured: list[Figure] = msgspec.field(default_factory=list)
    """The figures some item carried: a token count is measured once an item held one."""
    waiting: list[str] = msgspec.field(default_factory=list)
    """The nodes a LangGraph thread runs next: an interrupted or unfinished run; [] if none."""

    def add(self, more: Derived) -> bool:
        """Add `more`'s figures in place (its `waiting` replaces this one's); False and
        nothing changed on overflow."""
        stats = msgspec.structs.replace(self.stats)
        if not stats.checked_add(more.stats):
            return False
        self.stats = stats
        self.measured = [name for name in FIGURES if name in {*self.measured, *more.measured}]
        self.waiting = list(more.waiting)
        return True


FigureReader = Callable[[Sequence[Any], Any], Derived]
"""A kind's reader of figures: `(items, item before them or None)` -> what they carry."""


def count(value: object) -> int:
    """A stored count as an int: anything but a non-negative integer (a damaged or foreign
    value) counts as 0, so one odd item cannot stop a session's figures."""
    return value if type(value) is int and 0 <= value <= U64_MAX else 0


def field(value: object, *path: str) -> Any:
    """The value at `path` through nested objects, or None where one is missing."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


__all__ = ["FIGURES", "Derived", "Figure", "FigureReader", "count", "field"]
