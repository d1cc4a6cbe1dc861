"""Deferred durability: a block whose writes are answered before their fsync, durable at its end.

`store.deferred_durability()` is for loads that can be run again (a move): what the block
writes is answered and readable at once, and a process killed inside it loses no answered
write (the operating system keeps what SQLite handed it); its end makes everything durable.
That SQLite skips the fsync inside the block is pinned at the writer
(tests/sqlite/test_writer.py); PostgreSQL's commits stay durable when they return.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest

import turnstore
from turnstore import BlockingStore, Checkpoint

CHILD = """
import json, sys, turnstore
from turnstore import Checkpoint
with turnstore.open_blocking(sys.argv[1], index_in_background=False) as store:
    checkpoint = Checkpoint.empty("deferred")
    with store.deferred_durability():
        for sequence in range(1, 100_000):
            checkpoint.sequence = sequence
            checkpoint.context.append({"role": "user", "content": f"turn {sequence}"})
            store.save(checkpoint, [{"text": f"turn {sequence}"}])
            print(sequence, flush=True)
"""


def _checkpoint(session_id: str, sequence: int) -> Checkpoint:
    """The session after `sequence` turns (a context only grows)."""
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    checkpoint.context = [{"role": "user", "content": f"turn {n}"} for n in range(1, sequence + 1)]
    return checkpoint


def test_writes_in_the_block_are_answered_read_and_kept_after_it(store_url):
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        with store.deferred_durability():
            for sequence in (1, 2, 3):
                store.save(_checkpoint("block", sequence), [{"text": f"turn {sequence}"}])
            loaded = store.load("block")
            assert loaded is not None
            assert loaded.sequence == 3
        store.save(_checkpoint("after", 1), [])
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        loaded = store.load("block")
        assert loaded is not None
        assert (loaded.sequence, loaded.context) == (3, _checkpoint("block", 3).context)
        assert store.load("after") is not None


def test_an_error_in_the_block_keeps_what_it_wrote(store_url):
    def load_then_fail(store: BlockingStore) -> None:
        with store.deferred_durability():
            store.save(_checkpoint("failing", 1), [])
            raise RuntimeError("the load stopped")

    with (
        turnstore.open_blocking(store_url, index_in_background=False) as store,
        pytest.raises(RuntimeError),
    ):
        load_then_fail(store)
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        assert store.load("failing") is not None


def test_a_store_closed_in_the_block_ends_it_quietly(store_url):
    store = turnstore.open_blocking(store_url, index_in_background=False)
    with store.deferred_durability():
        store.save(_checkpoint("closed", 1), [])
        store.close()
    with turnstore.open_blocking(store_url, index_in_background=False) as again:
        assert again.load("closed") is not None


async def test_the_async_face_defers_too(store_url):
    store = turnstore.open(store_url, index_in_background=False)
    try:
        with store.deferred_durability():
            await store.save(_checkpoint("async", 1), [])
        loaded = await store.load("async")
        assert loaded is not None
    finally:
        await store.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_process_killed_in_the_block_loses_no_answered_write(store_url, seed):
    rng = random.Random(seed)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, store_url], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    answered = 0
    deadline = time.monotonic() + 30
    wanted = rng.randint(5, 60)
    while answered < wanted and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        answered = int(line)
    child.send_signal(signal.SIGKILL)
    # Lines already written by the child were answered saves too.
    rest, _ = child.communicate(timeout=30)
    answered = max([answered, *map(int, rest.split())])
    assert answered >= wanted, f"the child stopped at {answered}"
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        loaded = store.load("deferred")
        assert loaded is not None
        assert loaded.sequence >= answered
        # The newest save whole, never a part of one.
        assert json.dumps(loaded.context) == json.dumps(
            _checkpoint("deferred", loaded.sequence).context
        )
