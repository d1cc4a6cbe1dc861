"""The writer process of the memory crash test: `python _memory_writer.py STORE`.

It puts batches forever, batch `n` writing `WIDTH` items of namespace ("crash", str(n)),
searched by the word `batch<n>` (which its store's search indexer indexes meanwhile), and
rewriting the one item `("crash", "last")` to say `n`, and prints `ack n` once the batch has
returned, resuming after the batch the marker names. The test kills it at a random instant.
"""

from __future__ import annotations

import json
import sys

from turnstore import open_blocking
from turnstore.records.memory import MemoryCall, MemoryGet, MemoryPut

WIDTH = 5


def batch(n: int) -> MemoryCall:
    """Batch `n`: its items, and the marker naming it."""
    value = json.dumps({"n": n, "text": f"batch{n}"})
    items = [
        MemoryPut(("crash", str(n)), f"k{i}", value, None, "crash", text=True) for i in range(WIDTH)
    ]
    return MemoryCall(
        writes=(*items, MemoryPut(("crash",), "last", json.dumps({"n": n}), None, "crash"))
    )


def main(url: str) -> None:
    """Put batches until killed, each acknowledged once it has returned."""
    with open_blocking(url) as store:
        (last,) = store.memory.run(MemoryCall(gets=(MemoryGet(("crash",), "last"),))).gets
        n = 0 if last is None else json.loads(last.value_json)["n"] + 1
        while True:
            store.memory.run(batch(n))
            print(f"ack {n}", flush=True)
            n += 1


if __name__ == "__main__":
    main(sys.argv[1])
