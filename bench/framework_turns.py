"""Strands' and Pydantic AI's turns on turnstore against their own stores; ratios from one run.

python -m bench.framework_turns [--probes 40] [--json PATH] [--smoke] [--no-postgres]

(`./dev bench-frameworks` runs this part after the Agents SDK and ADK rows.) Each framework
is driven through its own write path, every peer timed at each history length side by side,
in one interleaved round: `bench.strands_turns` (a real `Agent` on `RepositorySessionManager`
against `FileSessionManager`) and `bench.pydantic_turns` (`ConversationStore.save` and
`load` against `InMemoryConversationStore`) say what each row times.

Equal durability: a turnstore commit is on disk when it returns (SQLite `synchronous=FULL`,
PostgreSQL `synchronous_commit=on`); Strands' file manager never fsyncs. The save target
compares our SQLite file on disk with the file manager with an fsync added
(`strands-file+fsync`); the same ratio with both on tmpfs, where no fsync costs anything, is
printed under the Strands table, beside its ceiling (`bench.strands_floor`). The load
targets are the latest state at 800 turns against 50: Strands' default window, and Pydantic
AI's `load(limit=40)`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import pydantic_turns, strands_turns
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable

POINTS = (50, 800)
"""History lengths, in turns, at which loads are timed (and saves, from there on)."""
SMOKE_POINTS = (3, 6)
SHM = Path("/dev/shm")
SAVE_AT_LEAST = 1.5
LOAD_AT_MOST = 1.2


def _shm() -> Path | None:
    return SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None


async def run_turns(probes: int, postgres_url: str | None, small: bool) -> dict[str, Any]:
    """The Strands and Pydantic AI rows, with their target rows."""
    points = SMOKE_POINTS if small else POINTS
    shm = _shm()
    why = None if postgres_url is None else unavailable(postgres_url)
    database = ScratchDatabase(postgres_url) if postgres_url is not None and why is None else None
    try:
        urls = {
            part: database.turnstore_url(database.schema(part)) if database else None
            for part in ("strands", "pydantic_ai")
        }
        # Strands' agent is blocking: it runs its own event loop in a thread of its own.
        strands = await asyncio.to_thread(strands_turns.run, points, probes, urls["strands"], shm)
        pydantic = await pydantic_turns.run(points, probes, urls["pydantic_ai"], shm)
    finally:
        if database is not None:
            database.drop()
    if why is not None:
        for part in (strands, pydantic):
            part["peers"]["turnstore-pg"] = {"status": f"skipped: {why}", "points": []}
    doc = {"strands": strands, "pydantic_ai": pydantic}
    doc["targets"] = targets(doc)
    return doc


def _at(part: dict[str, Any], peer: str, turns: int) -> dict[str, Any] | None:
    found = part["peers"].get(peer)
    if found is None or found["status"] != "ran":
        return None
    return next((row for row in found["points"] if row["turns"] == turns), None)


def _row(target: str, measured: float, bound: str, passed: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "required": bound, "passed": passed}


def _save_rows(doc: dict[str, Any], low: int) -> list[dict[str, Any]]:
    """Each integration's turn save against Strands' file manager (with its fsync): the
    issue's one durable peer for both (a Pydantic AI turn writes four messages too)."""
    peer = _at(doc["strands"], "strands-file+fsync", low)
    rows = []
    for label, part in (("Strands", doc["strands"]), ("Pydantic AI", doc["pydantic_ai"])):
        mine = _at(part, "turnstore", low)
        if not (mine and peer):
            continue
        ratio = peer["save"] / mine["save"]
        rows.append(
            _row(
                f"{label} turn save at {low}: file manager+fsync / turnstore (SQLite, disk)",
                ratio,
                f">= {SAVE_AT_LEAST}",
                ratio >= SAVE_AT_LEAST,
            )
        )
    return rows


def _load_rows(part: dict[str, Any], label: str, low: int, high: int) -> list[dict[str, Any]]:
    rows = []
    for peer in ("turnstore", "turnstore-pg"):
        first, last = _at(part, peer, low), _at(part, peer, high)
        if first and last:
            ratio = last["load"] / first["load"]
            rows.append(
                _row(
                    f"{label} at {high} / at {low} turns ({peer})",
                    ratio,
                    f"<= {LOAD_AT_MOST}",
                    ratio <= LOAD_AT_MOST,
                )
            )
    return rows


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 50's ratios, measured in this run."""
    strands, pydantic = doc["strands"], doc["pydantic_ai"]
    low, high = strands["points"][0], strands["points"][-1]
    return [
        *_save_rows(doc, low),
        *_load_rows(strands, "Strands load (window of 40)", low, high),
        *_load_rows(pydantic, "Pydantic AI load(limit=40)", low, high),
    ]


def render(doc: dict[str, Any]) -> list[str]:
    """The two tables, as lines (the caller prints the target rows)."""
    return [
        *strands_turns.describe(doc["strands"]),
        "",
        *pydantic_turns.describe(doc["pydantic_ai"]),
    ]


def render_targets(rows: list[dict[str, Any]]) -> list[str]:
    """Target rows as lines: PASS or MISS."""
    return [
        f"{row['target']:<78} {row['measured']:>7.3f} {row['required']:>7}"
        f"  {'PASS' if row['passed'] else 'MISS'}"
        for row in rows
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run this part alone and print it; write --json if asked."""
    parser = argparse.ArgumentParser(prog="python -m bench.framework_turns", description=__doc__)
    parser.add_argument("--probes", type=int, default=40, help="turns and loads timed a point")
    parser.add_argument("--postgres-url", default=DEFAULT_URL)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    postgres = None if args.no_postgres else args.postgres_url
    probes = 3 if args.smoke else args.probes
    doc = asyncio.run(run_turns(probes, postgres, args.smoke))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print("\n".join([*render(doc), "", "Targets", *render_targets(doc["targets"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
