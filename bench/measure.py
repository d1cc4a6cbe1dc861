"""What the benchmark measures with: clocks, write-byte meters, RSS and summary statistics."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class ByteMeter(Protocol):
    """A monotonically growing count of bytes written on a peer's behalf."""

    def read(self) -> int: ...


class ProcIo:
    """Bytes this process caused to be sent to storage (`write_bytes` of /proc/self/io).

    Linux counts a page when it is dirtied, in every thread of the process, so a SQLite
    writer thread, aiosqlite's worker and `asyncio.to_thread` all count. Page-granular: a
    100-byte commit that touches three pages counts 12 KiB, which is what the disk sees.
    """

    def read(self) -> int:
        with open("/proc/self/io", encoding="ascii") as io:
            for line in io:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
        raise RuntimeError("/proc/self/io has no write_bytes line")


def proc_io_available() -> bool:
    """Whether /proc/self/io can be read here (Linux with task I/O accounting)."""
    try:
        ProcIo().read()
    except (OSError, RuntimeError):
        return False
    return True


class PgWal:
    """WAL bytes the PostgreSQL server inserted, read on a separate monitoring connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def read(self) -> int:
        row = self._connection.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        high, low = row[0].split("/")
        return (int(high, 16) << 32) + int(low, 16)


class NoBytes:
    """For peers whose writes cannot be attributed (reported as missing, never as zero)."""

    def read(self) -> int:
        return 0


@dataclass
class Series:
    """Latencies of one operation of one peer, in seconds, and the bytes it wrote."""

    seconds: list[float] = field(default_factory=list)
    bytes_written: int = 0

    def add(self, seconds: float, written: int = 0) -> None:
        self.seconds.append(seconds)
        self.bytes_written += written

    def median(self) -> float:
        return statistics.median(self.seconds)

    def percentile(self, fraction: float) -> float:
        return percentile(self.seconds, fraction)

    def rate(self) -> float:
        """Operations per second of time spent in this operation alone."""
        total = sum(self.seconds)
        return len(self.seconds) / total if total > 0 else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of `values` (fraction 0.99 is p99)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def timed(call: Callable[[], Awaitable[T]], meter: ByteMeter) -> tuple[T, float, int]:
    """Await `call()` and return its value, its wall time and the bytes written meanwhile."""
    before = meter.read()
    start = time.perf_counter()
    value = await call()
    elapsed = time.perf_counter() - start
    return value, elapsed, meter.read() - before


def max_rss_bytes() -> int:
    """The process's peak resident set size so far.

    `VmHWM` of /proc/self/status where there is one: `ru_maxrss` (getrusage) survives
    fork and exec on Linux, so a child started by a large parent would report the parent's
    peak as its own.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def current_rss_bytes() -> int:
    """The process's resident set size now."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize()
