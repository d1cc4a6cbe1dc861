"""How long the long runs run: their full sizes in CI, a sample on a developer's machine.

The one place the sizes are set. `CI=true` (what CI sets; `TURNSTORE_FULL_SIZES=1` does the
same anywhere) picks the full sizes; without it `./dev test` runs a sample that still calls
every method and kills every writer schedule, so a newcomer waits minutes, not a quarter hour.
"""

from __future__ import annotations

import math
import os

FULL = (
    os.environ.get("CI", "").lower() in ("true", "1", "yes")
    or os.environ.get("TURNSTORE_FULL_SIZES") == "1"
)
"""Whether this run takes the full sizes."""


def pick(full: int, sample: int) -> int:
    """`full` in CI, `sample` elsewhere."""
    return full if FULL else sample


def share(full: int, fraction: float) -> int:
    """`full` in CI, else that fraction of it but at least 5 (or `full`, when smaller)."""
    return full if FULL else max(min(full, 5), math.ceil(full * fraction))


FUZZ_SHARE = 0.1
"""The fraction of each method's inputs the property test checks outside CI."""
FUZZ_ASYNC_SQLITE = pick(300, 60)
"""Inputs drawn across every method through the async face on SQLite."""
FUZZ_POSTGRES_BLOCKING = pick(200, 60)
FUZZ_POSTGRES_ASYNC = pick(100, 40)
"""Inputs drawn across every method on PostgreSQL, through each face."""

MODEL_EXAMPLES_SQLITE = pick(150, 30)
MODEL_EXAMPLES_POSTGRES = pick(60, 15)
"""Hypothesis programs the model-based test runs against each backend."""

CRASH_KILLS_SQLITE_MIXED = pick(24, 6)
CRASH_KILLS_POSTGRES_MIXED = pick(16, 4)
CRASH_KILLS_POSTGRES_LARGE = pick(10, 3)
"""SIGKILLs of the crash writer per schedule and backend."""
