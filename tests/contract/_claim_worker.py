"""One claimer process of the multi-process queued-work test.

Run as `python _claim_worker.py STORE OWNER SEED LOG LATE SESSION...`. The worker opens the
store, prints `ready` and waits for a line on stdin. LATE is `-` or a comma-separated list of
sessions: first, for each of them in turn, the worker claims a group and completes it only
after sleeping past its lease, so that commit must raise QueuedWorkClaimExpired. Then it claims
from the SESSIONs' queues until every queue is empty. Each claim is, at random: dropped (a
"crash": the lease is left to expire), abandoned, renewed then completed, or completed through
a runtime commit. Every event is appended to LOG as one JSON line, with wall-clock times
(`time.time()`) taken just before (`t0`) and just after (`t1`) the call.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any, TextIO

from turnstore import (
    BlockingRuntimeStore,
    HeadRevisionConflict,
    QueuedWorkClaimExpired,
    RuntimeCommit,
    open_blocking,
)
from turnstore.records import (
    QueuedWorkClaim,
)

DEADLINE_S = 60.0
"""A worker that has not emptied the queues by then gives up (and the test fails)."""


class Log:
    """Appends one JSON object per line, flushed, so the parent reads whatever happened."""

    def __init__(self, file: TextIO, owner: str) -> None:
        self.file = file
        self.owner = owner

    def __call__(self, event: str, **fields: Any) -> None:
        fields.update(ev=event, owner=self.owner)
        self.file.write(json.dumps(fields) + "\n")
        self.file.flush()


def _claim_fields(claim: QueuedWorkClaim) -> dict[str, Any]:
    return {
        "claim_id": claim.claim_id,
        "session": claim.session_id,
        "batches": [batch.batch_id for batch in claim.batches],
        "expires_ms": claim.lease_expires_at_ms,
    }


def _complete(runtime: BlockingRuntimeStore, claim: QueuedWorkClaim, log: Log, late: bool) -> None:
    """Complete `claim` in a runtime commit, retrying head-revision conflicts."""
    conflicts = 0
    while True:
        read = runtime.load_session()
        expected = None if read is None else read.head_revision
        commit = RuntimeCommit(
            session_id=claim.session_id, expected_head_revision=expected
        ).completing_queue_claims(claim.completion())
        t0 = time.time()
        try:
            result = runtime.commit_runtime_state(commit)
        except HeadRevisionConflict:
            conflicts += 1
            continue
        except QueuedWorkClaimExpired:
            log("complete_expired", t0=t0, t1=time.time(), late=late, **_claim_fields(claim))
            return
        log(
            "complete",
            t0=t0,
            t1=time.time(),
            late=late,
            revision=result.head_revision,
            conflicts=conflicts,
            **_claim_fields(claim),
        )
        return


def _complete_late(runtime: BlockingRuntimeStore, owner: str, log: Log, deadline: float) -> None:
    """Claim a group, sleep past its lease, then try to complete it (which must fail)."""
    while True:
        if time.monotonic() > deadline:
            log("timeout")
            sys.exit(2)
        t0 = time.time()
        claim = runtime.claim_ready_queued_work(owner, "turn", 150, 2)
        t1 = time.time()
        if claim is not None:
            break
        time.sleep(0.005)
    log("claim", t0=t0, t1=t1, ttl=150, **_claim_fields(claim))
    # The lease runs on the database clock, which is this machine's clock.
    time.sleep(max(0.0, claim.lease_expires_at_ms / 1000 - time.time()) + 0.05)
    _complete(runtime, claim, log, late=True)


def run(
    store_url: str, owner: str, seed: int, log: Log, late: list[str], sessions: list[str]
) -> None:
    """Claim and settle queued work on `sessions` until every queue is empty."""
    rng = random.Random(seed)
    store = open_blocking(store_url)
    runtimes = {session: store.runtime(session) for session in {*sessions, *late}}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    deadline = time.monotonic() + DEADLINE_S
    for session in late:
        _complete_late(runtimes[session], owner, log, deadline)
    empty: set[str] = set()
    while len(empty) < len(sessions):
        if time.monotonic() > deadline:
            log("timeout")
            sys.exit(2)
        session = rng.choice([s for s in sessions if s not in empty])
        runtime = runtimes[session]
        ttl = rng.randint(100, 300)
        max_batches = rng.randint(1, 3)
        t0 = time.time()
        claim = runtime.claim_ready_queued_work(owner, "turn", ttl, max_batches)
        t1 = time.time()
        if claim is None:
            if not runtime.list_queued_work():
                empty.add(session)
            else:
                time.sleep(rng.uniform(0.002, 0.02))
            continue
        log("claim", t0=t0, t1=t1, ttl=ttl, **_claim_fields(claim))
        roll = rng.random()
        if roll < 0.12:
            log("drop", **_claim_fields(claim))  # a crashed holder: the lease just runs out
            continue
        if roll < 0.24:
            t0 = time.time()
            runtime.abandon_queued_work_claim(claim)
            log("abandon", t0=t0, t1=time.time(), **_claim_fields(claim))
            continue
        time.sleep(rng.uniform(0.0, 0.03))  # the "turn" runs
        if roll < 0.45:
            t0 = time.time()
            try:
                claim = runtime.renew_queued_work_claim(claim, rng.randint(100, 300))
            except QueuedWorkClaimExpired:
                log("renew_expired", t0=t0, t1=time.time(), **_claim_fields(claim))
                continue
            log("renew", t0=t0, t1=time.time(), **_claim_fields(claim))
            time.sleep(rng.uniform(0.0, 0.03))
        _complete(runtime, claim, log, late=False)
    log("done")


if __name__ == "__main__":
    url, owner_id, seed_text, log_path, late_text, *session_ids = sys.argv[1:]
    late_sessions = [] if late_text == "-" else late_text.split(",")
    with open(log_path, "a", encoding="utf-8") as log_file:
        run(url, owner_id, int(seed_text), Log(log_file, owner_id), late_sessions, session_ids)
