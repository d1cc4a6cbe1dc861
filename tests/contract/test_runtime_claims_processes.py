"""Queued-work claims under concurrent claimer processes, with leases expiring mid-run."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import turnstore
from turnstore import (
    QueuedWorkBatchDraft,
)

WORKER = Path(__file__).with_name("_claim_worker.py")
WORKERS = 5
QUEUES = {"claims-a": 60, "claims-b": 20, "claims-late": 2}
"""Batches enqueued per session before the workers start."""
SHARED = ("claims-a", "claims-b")
"""The sessions every worker claims from; only the first worker claims from `claims-late`."""
LATE = ("claims-late", "claims-a")
"""Sessions where the first worker first completes a claim only after sleeping past its lease:
on `claims-late` nobody else can have re-claimed the group meanwhile, on `claims-a` others may.
"""
TOLERANCE_MS = 5
"""Slack between a worker's `time.time()` and the database clock (the same machine clock)."""
RUN_TIMEOUT_S = 90.0


@dataclass
class Held:
    """One claim as its holder logged it: the lease interval and how it ended."""

    claim_id: str
    owner: str
    session: str
    batches: list[str]
    start_ms: int
    """Database time of the claim: the first lease expiry minus its TTL."""
    t0: float
    t1: float
    expires_ms: int
    """The last lease expiry the holder was granted (by the claim or a renewal)."""
    released_ms: float | None = None
    """Wall-clock time just before a successful abandon or completion (a lower bound)."""
    outcome: str = "claimed"
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def end_ms(self) -> float:
        """When the holder's right ended: its release, or else its lease expiry."""
        if self.released_ms is None:
            return self.expires_ms
        return min(self.released_ms, self.expires_ms)


def _spawn(store_url: str, tmp_path: Path, seed: int) -> list[tuple[subprocess.Popen[bytes], Any]]:
    workers = []
    for n in range(WORKERS):
        stderr = (tmp_path / f"worker-{n}.err").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                store_url,
                f"w{n}",
                str(seed + n),
                str(tmp_path / f"worker-{n}.jsonl"),
                ",".join(LATE) if n == 0 else "-",
                *(QUEUES if n == 0 else SHARED),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        workers.append((process, stderr))
    return workers


def _run_workers(store_url: str, tmp_path: Path, seed: int) -> None:
    """Start every worker, release them at once, and wait for them all to finish."""
    workers = _spawn(store_url, tmp_path, seed)
    try:
        for process, _ in workers:
            assert process.stdout is not None
            assert process.stdout.readline() == b"ready\n", "a worker did not start"
        for process, _ in workers:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            process.stdin.flush()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for process, _ in workers:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for process, stderr in workers:
            if process.poll() is None:
                process.kill()
                process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
            stderr.close()
    failures = [
        f"w{n} exit {process.returncode}: {(tmp_path / f'worker-{n}.err').read_text()[-3000:]}"
        for n, (process, _) in enumerate(workers)
        if process.returncode != 0
    ]
    assert not failures, "\n".join(failures)


def _read_logs(tmp_path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for n in range(WORKERS):
        lines = (tmp_path / f"worker-{n}.jsonl").read_text().splitlines()
        assert lines, f"w{n} logged nothing"
        assert json.loads(lines[-1])["ev"] == "done", f"w{n} did not finish"
        events.extend(json.loads(line) for line in lines)
    return events


def _holds(events: list[dict[str, Any]]) -> dict[str, Held]:
    """Fold the logged events into one `Held` per claim."""
    holds: dict[str, Held] = {}
    for event in events:
        kind = event["ev"]
        if kind == "claim":
            assert event["claim_id"] not in holds, "a claim id was granted twice"
            holds[event["claim_id"]] = Held(
                claim_id=event["claim_id"],
                owner=event["owner"],
                session=event["session"],
                batches=event["batches"],
                start_ms=event["expires_ms"] - event["ttl"],
                t0=event["t0"],
                t1=event["t1"],
                expires_ms=event["expires_ms"],
                events=[event],
            )
            continue
        if kind == "done":
            continue
        held = holds[event["claim_id"]]
        held.events.append(event)
        held.outcome = kind
        if kind == "renew":
            assert event["batches"] == held.batches, "a renewal changed the claimed batches"
            held.expires_ms = event["expires_ms"]
        elif kind in ("abandon", "complete"):
            held.released_ms = event["t0"] * 1000
    return holds


def test_concurrent_claimer_processes_never_share_a_batch_and_complete_each_exactly_once(
    backend_name, store_url, database, tmp_path
):
    """Claimer processes never hold one batch at once; every batch completes exactly once."""
    seed = random.randrange(2**31)
    context = f"{backend_name}, seed {seed}"
    started = time.monotonic()
    enqueued: dict[str, set[str]] = {}
    with turnstore.open_blocking(store_url) as store:
        for session, count in QUEUES.items():
            runtime = store.runtime(session)
            for n in range(count):
                runtime.enqueue_queued_work(
                    QueuedWorkBatchDraft(batch_id=f"{session}-{n:03}", items=[{"n": n}])
                )
            enqueued[session] = {b.batch_id for b in runtime.list_queued_work()}
            assert len(enqueued[session]) == count

    _run_workers(store_url, tmp_path, seed)
    events = _read_logs(tmp_path)
    holds = _holds(events)

    # Every batch was completed exactly once, and nothing is left in the queue.
    completions = [e for e in events if e["ev"] == "complete"]
    completed = Counter(batch for e in completions for batch in e["batches"])
    twice = {batch: n for batch, n in completed.items() if n > 1}
    assert not twice, f"{context}: batches completed more than once: {twice}"
    everything = set().union(*enqueued.values())
    assert set(completed) == everything, (
        f"{context}: lost {sorted(everything - set(completed))[:10]}, "
        f"unknown {sorted(set(completed) - everything)[:10]}"
    )
    assert database.count("queued_work") == 0, context
    with turnstore.open_blocking(store_url) as store:
        for session in QUEUES:
            runtime = store.runtime(session)
            assert runtime.list_queued_work() == [], context
            # Only the commits that returned moved the head: a refused completion (expired
            # lease) rolled its whole commit back.
            read = runtime.load_session()
            assert read is not None, context
            commits = [e for e in completions if e["session"] == session]
            assert read.head_revision == len(commits), context
            assert sorted(e["revision"] for e in commits) == list(range(1, len(commits) + 1))

    for held in holds.values():
        # The lease starts on the database clock inside the claim call.
        assert held.t0 * 1000 - TOLERANCE_MS <= held.start_ms <= held.t1 * 1000 + TOLERANCE_MS, (
            f"{context}: lease of {held.claim_id} starts at {held.start_ms}, "
            f"outside its claim call [{held.t0 * 1000:.0f}, {held.t1 * 1000:.0f}]"
        )
        if held.outcome == "complete":
            # A completion that was accepted was sent before the lease ran out.
            assert held.released_ms is not None
            assert held.released_ms <= held.expires_ms + TOLERANCE_MS, (
                f"{context}: {held.claim_id} completed at {held.released_ms:.0f}, "
                f"after its lease expired at {held.expires_ms}"
            )

    # No two holders' lease intervals on one batch overlap; a completed batch is never
    # claimed again.
    by_batch: dict[str, list[Held]] = defaultdict(list)
    for held in holds.values():
        for batch in held.batches:
            by_batch[batch].append(held)
    takeovers = 0
    for batch, claims in by_batch.items():
        # Lease starts are whole milliseconds: a claim and its abandon can both fall in the
        # millisecond in which the next holder's claim starts, so among equal starts the one
        # that ended first comes first.
        claims.sort(key=lambda held: (held.start_ms, held.end_ms))
        for earlier, later in itertools.pairwise(claims):
            assert later.start_ms >= earlier.end_ms - TOLERANCE_MS, (
                f"{context}: batch {batch} held by {later.owner} ({later.claim_id}) from "
                f"{later.start_ms} while {earlier.owner} ({earlier.claim_id}, "
                f"{earlier.outcome}) held it until {earlier.end_ms:.0f}"
            )
            assert earlier.outcome != "complete", (
                f"{context}: batch {batch} was claimed again after {earlier.claim_id} completed it"
            )
            if earlier.released_ms is None:
                takeovers += 1
        assert claims[-1].outcome == "complete", f"{context}: {batch} ended {claims[-1].outcome}"

    # Every completion sent after its lease ran out was refused as expired, whether or not
    # another worker had re-claimed the batches meanwhile.
    late = [e for e in events if e.get("late")]
    assert [e["session"] for e in late] == list(LATE), context
    assert all(e["ev"] == "complete_expired" for e in late), f"{context}: {late}"
    private = holds[late[0]["claim_id"]]
    assert all(
        other is private or other.start_ms > late[0]["t1"] * 1000
        for batch in private.batches
        for other in by_batch[batch]
    ), f"{context}: {LATE[0]} was claimed by someone else"
    expired = sum(e["ev"] == "complete_expired" for e in events)
    # Leases ran out during the run and others took the batches over.
    assert takeovers >= 1, f"{context}: no lease expired and was taken over"
    outcomes = Counter(held.outcome for held in holds.values())
    renewals = sum(e["ev"] == "renew" for e in events)
    elapsed = time.monotonic() - started
    print(
        f"{context}: {len(holds)} claims {dict(outcomes)}, {renewals} renewals, "
        f"{takeovers} takeovers, {expired} expired completions, {elapsed:.1f}s"
    )
