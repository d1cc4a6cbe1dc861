"""A memory writer killed at a random instant loses no acknowledged batch and leaves none in
part: every batch acked is there whole, and any batch there is whole; and each batch is found
whole by its word, however the kill fell between its put and the search indexer (SQLite's
index holds each batch's word in exactly its items' rows)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import turnstore
from conftest import fts5_terms
from sizes import pick
from turnstore.records.memory import MemoryCall, MemoryGet, MemorySearch

WRITER = Path(__file__).with_name("_memory_writer.py")
KILLS = pick(6, 2)
WIDTH = 5


def _run_until_killed(url: str, delay_s: float) -> list[int]:
    """Start the writer, SIGKILL it `delay_s` after its first ack; the batches it acked."""
    acked: list[int] = []
    first = threading.Event()
    process = subprocess.Popen(
        [sys.executable, str(WRITER), url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode()
            if line.startswith("ack ") and line.endswith("\n"):
                acked.append(int(line.split()[1]))
                first.set()
        first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert first.wait(60), "the writer acknowledged nothing"
    time.sleep(delay_s)
    process.kill()
    process.wait()
    reader.join(10)
    assert process.stdout is not None
    process.stdout.close()
    return acked


def test_a_killed_memory_writer_loses_no_acked_batch_and_leaves_none_in_part(store_url, database):
    turnstore.open_blocking(store_url).close()  # migrated before the first writer races it
    rng = random.Random()
    for _ in range(KILLS):
        acked = _run_until_killed(store_url, rng.uniform(0.0, 0.3))
        assert acked, "the writer died before its first acknowledgement"
        # One snapshot: a commit the killed client sent that lands late is in both reads or
        # in neither.
        with turnstore.open_blocking(store_url) as store:
            memory = store.memory
            answer = memory.run(
                MemoryCall(
                    gets=(MemoryGet(("crash",), "last"),),
                    searches=(MemorySearch(("crash",), limit=None),),
                )
            )
            sizes: dict[str, int] = {}
            for one in answer.searches[0]:
                sizes[one.row.namespace] = sizes.get(one.row.namespace, 0) + 1
            last = answer.gets[0]
            assert last is not None
            newest = json.loads(last.value_json)["n"]
            assert newest >= max(acked)
            batches = {name: count for name, count in sizes.items() if name != "crash"}
            assert all(count == WIDTH for count in batches.values()), batches
            assert all(f"crash.{n}" in batches for n in acked)
            assert f"crash.{newest}" in batches
            assert f"crash.{newest + 1}" not in batches
            for n in {*acked[-3:], newest}:
                word = MemorySearch(("crash",), limit=None, query=f"batch{n}")
                (rows,) = memory.run(MemoryCall(searches=(word,))).searches
                assert sorted(one.row.key for one in rows) == [f"k{i}" for i in range(WIDTH)]
    if database.backend == "sqlite":
        assert set(fts5_terms(database.path).values()) == {WIDTH}
