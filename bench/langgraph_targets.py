"""The LangGraph saver's targets (issue 48), judged from one run of `bench.langgraph_saver`.

- SQLite, one thread (at the first history length, each durability mode) and 20 threads
  round-robin (LangGraph's default durability, the only one that workload runs):
  `TurnstoreSaver` >= 1.5x `SqliteSaver`, and >= 0.9x `InMemorySaver`, or, where the lean
  ceiling row is itself below 0.9x `InMemorySaver`, >= 1.0x the ceiling;
- PostgreSQL, both workloads: >= 2x `PostgresSaver`;
- the store at most 3x its payload on both backends;
- the latest state loaded at the last history length at most 1.2x at the first, and at most
  1.2x `InMemorySaver`'s there;
- opening to the first put at most 1.2x `SqliteSaver`'s / `PostgresSaver`'s.

Each line carries the same figure for the reference saver where it means something.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MODES = ("default", "sync")
MEMORY, SQLITE, LEAN, POSTGRES = "memory", "sqlite", "lean", "postgres"
BACKEND_OF = {"turnstore": SQLITE, "turnstore-pg": POSTGRES}
"""Each turnstore saver and the LangGraph saver of its backend."""


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target line of this run: measured, required, passed (None: not measured)."""
    points = doc["config"]["points"]
    low, high = str(points[0]), str(points[-1])
    savers = doc["savers"]
    rows: list[dict[str, Any]] = []

    def add(target: str, measured: Any, op: str, bound: float, reference: Any, why: str) -> None:
        passed = None
        if measured is not None:
            passed = measured >= bound if op == ">=" else measured <= bound
        rows.append(
            {
                "target": target,
                "measured": measured,
                "required": f"{op} {bound:g}",
                "passed": passed,
                "sqlite_saver": reference,
                "why_missing": why if measured is None else "",
            }
        )

    for name, peer in BACKEND_OF.items():
        row = savers.get(name, {})
        why = doc["skipped"].get(name, "not run (not in --savers)")
        if peer == SQLITE:
            _sqlite_speed(doc, row, low, why, add)
        else:
            for mode in MODES:
                add(f"{name} [{mode}] @{low} / PostgresSaver", _at(row, mode, low, "vs_postgres"),
                    ">=", 2, None, why)  # fmt: skip
            add(f"{name} round-robin / PostgresSaver", _rr(doc, name, POSTGRES), ">=", 2, None, why)
        add(f"{name} store / payload", row.get("size_vs_payload"), "<=", 3,
            savers.get(peer, {}).get("size_vs_payload"), why)  # fmt: skip
        loads = row.get("load_ms", {})
        memory_loads = savers.get(MEMORY, {}).get("load_ms", {})
        add(f"{name} load @{high} / @{low}", _over(loads.get(high), loads.get(low)), "<=", 1.2,
            None, why)  # fmt: skip
        add(f"{name} load @{high} / InMemorySaver's", _over(loads.get(high),
            memory_loads.get(high)), "<=", 1.2, None, why)  # fmt: skip
        opens = doc.get("open", {})
        opened = _over(opens.get(name, {}).get("median_ms"), opens.get(peer, {}).get("median_ms"))
        add(f"{name} open to first put / {peer}'s", opened, "<=", 1.2, None, why)
    return rows


Add = Callable[[str, Any, str, float, Any, str], None]


def _sqlite_speed(doc: dict[str, Any], row: dict[str, Any], low: str, why: str, add: Add) -> None:
    """The SQLite saver's speed lines: over SqliteSaver, and over InMemorySaver or the ceiling."""
    savers = doc["savers"]
    for mode in MODES:
        add(f"turnstore [{mode}] @{low} / SqliteSaver", _at(row, mode, low, "vs_sqlite"), ">=",
            1.5, None, why)  # fmt: skip
        lean = _at(savers.get(LEAN, {}), mode, low, "vs_memory")
        if lean is not None and lean < 0.9:
            add(f"turnstore [{mode}] @{low} / lean ceiling (it is {lean:.2f}x memory)",
                _at(row, mode, low, "vs_lean"), ">=", 1.0, None, why)  # fmt: skip
        else:
            add(f"turnstore [{mode}] @{low} / InMemorySaver", _at(row, mode, low, "vs_memory"),
                ">=", 0.9, _at(savers.get(SQLITE, {}), mode, low, "vs_memory"), why)  # fmt: skip
    add("turnstore round-robin / SqliteSaver", _rr(doc, "turnstore", SQLITE), ">=", 1.5,
        None, why)  # fmt: skip
    lean = _rr(doc, LEAN, MEMORY)
    if lean is not None and lean < 0.9:
        add(f"turnstore round-robin / lean ceiling (it is {lean:.2f}x memory)",
            _rr(doc, "turnstore", LEAN), ">=", 1.0, None, why)  # fmt: skip
    else:
        add("turnstore round-robin / InMemorySaver", _rr(doc, "turnstore", MEMORY), ">=", 0.9,
            _rr(doc, SQLITE, MEMORY), why)  # fmt: skip


def _at(row: dict[str, Any], mode: str, point: str, key: str) -> Any:
    return row.get("modes", {}).get(mode, {}).get(point, {}).get(key)


def _rr(doc: dict[str, Any], name: str, baseline: str) -> float | None:
    """A saver's round-robin turns/s over `baseline`'s."""
    savers = doc.get("round_robin", {}).get("savers", {})
    return _over(
        savers.get(name, {}).get("turns_per_s"), savers.get(baseline, {}).get("turns_per_s")
    )


def _over(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b
