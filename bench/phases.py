"""The benchmark's phases: interleaved throughput, reads, one growing session, concurrency."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import turnstore
from bench.measure import ByteMeter, Series, timed
from bench.peers import DiskCeilingPeer, Peer, TurnstorePeer
from bench.same_work import SameWorkPeer
from bench.workload import ITEMS_PER_TURN, Turn, make_turn, session_id

T = TypeVar("T")

LOAD_REPEATS = 3
"""Loads of every session per peer after the throughput phase."""
CATALOG_REPEATS = 20
"""Catalog pages read per peer."""
SCALING_LOADS = 15
"""Loads per peer at each scaling point."""
SCALING_PROBES = 20
"""Saves per peer timed at each scaling point, all lengths side by side."""
CEILING_BLOCK = 300
"""Commits in one block of the disk-ceiling measurement of the concurrency phase."""


def rotated(items: Sequence[T], by: int) -> list[T]:
    """`items` starting at position `by`: every peer takes every place in the order in turn."""
    if not items:
        return []
    by %= len(items)
    return [*items[by:], *items[:by]]


async def throughput(
    peers: Sequence[Peer], seed: int, sessions: int, turns: int
) -> dict[str, Series]:
    """S sessions x T turns, round-robin; every turn is saved by every peer before the next."""
    series = {peer.name: Series() for peer in peers}
    for index in range(turns):
        for number in range(sessions):
            session = session_id(number)
            turn = make_turn(seed, session, index)
            for peer in rotated(peers, index * sessions + number):
                await _save(peer, session, turn, series[peer.name])
    return series


async def _save(peer: Peer, session: str, turn: Turn, series: Series) -> None:
    _, seconds, written = await timed(lambda: peer.save_turn(session, turn), peer.meter)
    series.add(seconds, written)


async def reads(
    peers: Sequence[Peer], sessions: int, turns: int
) -> tuple[dict[str, Series | None], dict[str, Series | None]]:
    """Load-latest of every session and catalog pages, interleaved across peers.

    Each load is also checked: a peer must give back every item it was handed.
    """
    loads: dict[str, Series | None] = {peer.name: Series() for peer in peers}
    pages: dict[str, Series | None] = {peer.name: Series() for peer in peers}
    for repeat in range(LOAD_REPEATS):
        for number in range(sessions):
            for peer in rotated(peers, repeat * sessions + number):
                session = session_id(number)
                found = await _read(loads, peer.name, lambda p=peer, s=session: p.load_latest(s))
                _check_items(peer, session, found, turns * ITEMS_PER_TURN)
    for repeat in range(CATALOG_REPEATS):
        for peer in rotated(peers, repeat):
            await _read(pages, peer.name, peer.catalog_page)
    return loads, pages


def _check_items(peer: Peer, session: str, found: int | None, expected: int) -> None:
    if found is not None and found != expected:
        raise RuntimeError(f"{peer.name} loaded {found} items of {session}, not {expected}")


async def _read(into: dict[str, Series | None], key: str, call: Callable[[], Any]) -> Any:
    """Time one read into `into[key]`; a None answer marks the read as unsupported."""
    series = into[key]
    if series is None:
        return None
    start = time.perf_counter()
    value = await call()
    elapsed = time.perf_counter() - start
    if value is None:
        into[key] = None  # the peer has no such read
    else:
        series.add(elapsed)
    return value


@dataclass
class ScalingPoint:
    """One peer at one length of a growing session."""

    turns: int
    save_s: float
    load_s: float | None
    bytes_written: int


async def scaling(
    peers: Sequence[Peer], seed: int, points: Sequence[int], probes: int = SCALING_PROBES
) -> dict[str, list[ScalingPoint]]:
    """Save and load cost against history length, and bytes written as one session grows.

    Bytes: one session grows to the longest point alone, cumulative bytes read at each point.
    Latency: the disk's speed drifts over seconds, so lengths are timed side by side, not one
    after another: a session per shorter point is grown to just below it, then every length
    gets `probes` more saves and its loads in one interleaved round, the longest session
    carrying on from where it stopped.
    """
    longest = max(points)
    sessions = {n: f"scaling-{n:04d}" for n in points}
    bytes_at = await _grow(peers, seed, {sessions[longest]: longest}, points)
    shorter = {sessions[n]: max(0, n - probes // 2) for n in points if n != longest}
    await _grow(peers, seed, shorter, ())
    started = {**shorter, sessions[longest]: longest}
    saves = await _probe_saves(peers, seed, started, probes)
    loads = await _probe_loads(peers, list(sessions.values()))
    return {
        peer.name: [
            ScalingPoint(
                n,
                saves[peer.name][sessions[n]].median(),
                loads[peer.name][sessions[n]],
                bytes_at[peer.name][sessions[longest]][n],
            )
            for n in points
        ]
        for peer in peers
    }


async def _grow(
    peers: Sequence[Peer], seed: int, lengths: dict[str, int], marks: Sequence[int]
) -> dict[str, dict[str, dict[int, int]]]:
    """Grow each session to its length, interleaved; bytes written so far at each mark."""
    written = {peer.name: dict.fromkeys(lengths, 0) for peer in peers}
    marked: dict[str, dict[str, dict[int, int]]] = {
        peer.name: {session: {} for session in lengths} for peer in peers
    }
    for index in range(max(lengths.values(), default=0)):
        for session, length in lengths.items():
            if index >= length:
                continue
            turn = make_turn(seed, session, index)
            for peer in rotated(peers, index):
                series = Series()
                await _save(peer, session, turn, series)
                written[peer.name][session] += series.bytes_written
                if index + 1 in marks:
                    marked[peer.name][session][index + 1] = written[peer.name][session]
    return marked


async def _probe_saves(
    peers: Sequence[Peer], seed: int, started: dict[str, int], probes: int
) -> dict[str, dict[str, Series]]:
    saves = {peer.name: {session: Series() for session in started} for peer in peers}
    for probe in range(probes):
        for number, (session, length) in enumerate(rotated(list(started.items()), probe)):
            turn = make_turn(seed, session, length + probe)
            for peer in rotated(peers, probe + number):
                await _save(peer, session, turn, saves[peer.name][session])
    return saves


async def _probe_loads(
    peers: Sequence[Peer], sessions: list[str]
) -> dict[str, dict[str, float | None]]:
    loads: dict[str, dict[str, Series | None]] = {
        peer.name: {session: Series() for session in sessions} for peer in peers
    }
    for repeat in range(SCALING_LOADS):
        for number, session in enumerate(rotated(sessions, repeat)):
            for peer in rotated(peers, repeat + number):
                await _read(loads[peer.name], session, lambda p=peer, s=session: p.load_latest(s))
    return {
        name: {session: None if s is None else s.median() for session, s in per.items()}
        for name, per in loads.items()
    }


# --- concurrency --------------------------------------------------------------------------


@dataclass
class ConcurrencyRow:
    """One concurrency run: how many writers, how, and what they achieved."""

    mode: str
    writers: int
    turns: int
    seconds: float
    bytes_written: int
    transactions: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.seconds


def pregenerate(seed: int, prefix: str, writers: int, turns: int) -> dict[str, list[Turn]]:
    """Every writer's turns, built before the clock starts."""
    sessions = [f"{prefix}-{number:03d}" for number in range(writers)]
    return {s: [make_turn(seed, s, index) for index in range(turns)] for s in sessions}


async def ceiling_block(path: Path) -> float:
    """Durable single commits per second on this disk: one block of append + fdatasync."""
    peer = DiskCeilingPeer(path)
    await peer.setup()
    turn = make_turn(0, "ceiling", 0)
    start = time.perf_counter()
    for _ in range(CEILING_BLOCK):
        await peer.save_turn("ceiling", turn)
    elapsed = time.perf_counter() - start
    await peer.close()
    return CEILING_BLOCK / elapsed


async def async_writers(
    url: str, work: dict[str, list[Turn]], meter: ByteMeter, *, one_writer: bool = False
) -> ConcurrencyRow:
    """One asyncio task per session, all saving at once on one async Store (or one task)."""
    peer = TurnstorePeer(url, events=False)
    await peer.setup()

    async def writer(session: str) -> None:
        for turn in work[session]:
            await peer.save_turn(session, turn)

    async def round_robin() -> None:
        for index in range(len(next(iter(work.values())))):
            for session, turns in work.items():
                await peer.save_turn(session, turns[index])

    async def run() -> None:
        if one_writer:
            await round_robin()
        else:
            await asyncio.gather(*(writer(session) for session in work))

    _, seconds, written = await timed(run, meter)
    stats = peer.store.writer_stats()
    await peer.close()
    mode = "asyncio, 1 task" if one_writer else "asyncio tasks"
    total = sum(len(turns) for turns in work.values())
    writers = 1 if one_writer else len(work)
    return ConcurrencyRow(mode, writers, total, seconds, written, stats.transactions)


def thread_writers(url: str, work: dict[str, list[Turn]], meter: ByteMeter) -> ConcurrencyRow:
    """One thread per session, all saving at once through one BlockingStore."""
    peer = TurnstorePeer(url, events=False)
    store = turnstore.open_blocking(url)
    barrier = threading.Barrier(len(work) + 1)

    def writer(session: str) -> None:
        barrier.wait()
        for turn in work[session]:
            store.save(peer.next_checkpoint(session, turn), turn.items)

    threads = [threading.Thread(target=writer, args=(session,)) for session in work]
    for thread in threads:
        thread.start()
    before = meter.read()
    start = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    written = meter.read() - before
    stats = store.writer_stats()
    store.close()
    total = sum(len(turns) for turns in work.values())
    return ConcurrencyRow("threads", len(work), total, seconds, written, stats.transactions)


GROUPED = "same work, one commit a round"
"""The concurrency row of stdlib sqlite3 sending every writer's turn of a round in one commit."""


async def same_work_grouped(
    path: Path, work: dict[str, list[Turn]], meter: ByteMeter
) -> ConcurrencyRow:
    """The concurrent writers' rows sent by stdlib sqlite3 from one thread, one commit a round.

    Each round carries one turn of every writer, each in a SAVEPOINT, as turnstore's group
    commit carries concurrent saves when every writer's turn joins one commit: the most
    turns per second a store sending these rows from Python can reach on this disk.
    """
    peer = SameWorkPeer(path, events=False)
    await peer.setup()
    rounds = len(next(iter(work.values())))

    def run() -> None:
        for index in range(rounds):
            peer.save_group([(session, turns[index]) for session, turns in work.items()])

    _, seconds, written = await timed(lambda: asyncio.to_thread(run), meter)
    await peer.close()
    total = sum(len(turns) for turns in work.values())
    return ConcurrencyRow(GROUPED, len(work), total, seconds, written, rounds)
