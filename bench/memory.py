"""LangGraph long-term memory stores under one memory tool's load: ops/s, scale, vectors, bytes.

python -m bench.memory [--sides memory,sqlite,turnstore,turnstore-words,postgres,...]
    [--namespaces 10000] [--ops 4000] [--items 100000] [--vectors 10000,100000] [--dims 128]
    [--searches 200]
    [--postgres-url URL | --no-postgres] [--json PATH] [--dir DIR] [--quiet] [--smoke]

The targets (issue 46): the mix runs at >= 1.5x `SqliteStore`'s ops/s on SQLite and >= 2x
`PostgresStore`'s on PostgreSQL; a filtered search's first page over 1,000,000 items costs at
most 1.5x the same over 10,000 (`--items 1000000`); the store takes at most 2x its payload.
Sides, each on a fresh file or schema (`bench.memory_sides`): `InMemoryStore` (reference),
`SqliteStore` (WAL, synchronous=FULL), `PostgresStore` (synchronous_commit=on, checked),
turnstore's `TurnstoreStore` on both (its defaults: WAL + synchronous=FULL; commits with
synchronous_commit on; its default `words=False`), and `-words` sides of it with
`words=True` (each put indexes its words), in the mix only. Rows say "not available" for a
side that cannot open.

How each number is obtained (one thread, the sync `BaseStore` API, the same seeded items and
operations on every side):

* mix: --namespaces users' namespaces `("users", uNNNNNN, "memories")`, 3 memories each,
  filled untimed (and, for turnstore on SQLite, whose puts leave their words to the search
  indexer, indexed untimed). Then --ops operations drawn once: 30% `put` (of 6 keys: half
  update, half insert), 30% `get`, 30% `search(("users", uNNNNNN), filter={"kind": ...},
  limit=10)`, 5% `list_namespaces(prefix=("users", uNNNNNN), limit=10)`, 5% `delete`. They
  run in blocks of 100, every side taking each block in an order rotated block by block, so
  a drift in disk speed lands on all alike. ops/s = operations / summed block time; each
  operation is timed too, and each kind's median printed per side.
* ceiling (`bench.memory_ceiling`): beside each LangGraph store in the mix, a side running
  the same operations as the fastest durable store one could write: one table `(namespace,
  key) -> value JSON` (and the item's two times), each put and delete one commit, get /
  search / list one SQL statement with the filter in SQL (json_extract; `->>`), no
  `BaseStore` layer; stdlib `sqlite3` at WAL + synchronous=FULL, psycopg autocommit at
  synchronous_commit=on. `ceiling ops/s / LangGraph store ops/s` is the best ratio any
  store could reach against it on this machine, printed beside the target; "+ API floor"
  adds the API floor of the mix's reads to the ceiling's time per operation: the median
  get, search and list of an `InMemoryStore` holding one namespace's 3 memories (1,000
  calls each), what LangGraph's `BaseStore` API itself costs. (In the mix, `InMemoryStore`
  scans every namespace per search and list, so its mix medians are no floor.)
* scale: 100 memories per namespace, in two stores per side: one filled (`batch` of 1,000
  `PutOp`s: one transaction per batch on every side) to 10,000 items (100 namespaces), one
  to --items (--items / 100 namespaces, its first 10,000 items the same). Each is then
  indexed (turnstore on SQLite: the words its puts left for the search indexer, counted in
  the fill's rate), then settled as production would after a bulk load: SQLite `ANALYZE`, then
  `wal_checkpoint(TRUNCATE)`; PostgreSQL `VACUUM (ANALYZE)` of the side's table
  (`memory_items` for turnstore, `store` for PostgresStore), then `CHECKPOINT`, so neither
  store is timed with dirty buffers or unset hint bits left by its fill. Then the filtered
  search's first page (`search(("users", u), filter={"kind": "fact"}, limit=10)`, u drawn
  from the store's users) runs --searches times on each store, in blocks of 10 taking turns
  in an order rotated block by block; median per store. Ratio: large / small. Then the
  large store is closed and sized: SQLite: every file of its directory after
  `wal_checkpoint(TRUNCATE)`; PostgreSQL: `pg_total_relation_size` of its schema; against
  the payload (each item's compact JSON value, key and namespace labels). No vectors: the
  scale stores have no index.
* vectors: at each --vectors size, a store with `index={"dims": --dims, "embed": a
  deterministic fake embedding (a seeded unit vector per text, memoised), "fields":
  ["text"]}` filled with that many memories; a query is `search(("users",), query=...,
  limit=10)` over all of them, a fresh text each time (median of 20, 5 past 20,000). The
  exact ceiling: brute-force cosine over the same vectors (float32 arrays, top 10 by
  `heapq`) in this process, numpy if importable, else pure Python (the run says which).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.memory_ceiling import CEILINGS, api_floor, ceiling_rows, exact_ceiling
from bench.memory_report import environment, render, targets
from bench.memory_sides import (
    KINDS,
    PEER_OF,
    SEED,
    SIDES,
    FakeEmbeddings,
    Places,
    Side,
    SideSpec,
    items,
    memory_value,
    namespace,
    payload_bytes,
)
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable

PER_NAMESPACE = 3
"""Memories per namespace before the mix starts."""
KEYS = 6
"""Keys a mix `put` writes to: the first three exist, the rest are inserts."""
BLOCK = 100
"""Mix operations per timed block."""
PER_USER_AT_SCALE = 100
"""Memories per namespace in the scale and vector stores."""
SMALL_ITEMS = 10_000
"""The scale measurement's small store (the target's baseline)."""
FILL_BATCH = 1_000
"""`PutOp`s per `batch` when filling."""
SEARCHES = 200
"""Filtered searches timed on each scale store."""
SEARCH_BLOCK = 10
"""Searches a scale store takes in a row before the other store's turn."""
WEIGHTS = (("put", 30), ("get", 30), ("search", 30), ("list", 5), ("delete", 5))


# --- operations --------------------------------------------------------------------------------


def mix_operations(namespaces: int, count: int, seed: int) -> list[tuple[str, int, str, Any]]:
    """`count` operations of the mix over `namespaces` users: (kind, user, key, value)."""
    rng = random.Random(seed + 1)
    kinds = [kind for kind, weight in WEIGHTS for _ in range(weight)]
    drawn = []
    for serial in range(count):
        kind = rng.choice(kinds)
        user, key = rng.randrange(namespaces), f"m{rng.randrange(KEYS)}"
        drawn.append((kind, user, key, memory_value(rng, serial) if kind == "put" else None))
    return drawn


def run_operation(store: Any, operation: tuple[str, int, str, Any]) -> None:
    """One operation of the mix through the public `BaseStore` API."""
    kind, user, key, value = operation
    if kind == "put":
        store.put(namespace(user), key, value)
    elif kind == "get":
        store.get(namespace(user), key)
    elif kind == "search":
        kind_filter = {"kind": KINDS[user % len(KINDS)]}
        store.search(namespace(user)[:2], filter=kind_filter, limit=10)
    elif kind == "list":
        store.list_namespaces(prefix=namespace(user)[:2], limit=10)
    else:
        store.delete(namespace(user), key)


def fill(store: Any, users: Sequence[int], per_user: int, seed: int) -> tuple[int, float]:
    """Put the seeded memories of `users` by `batch`; returns (payload bytes, seconds)."""
    from langgraph.store.base import PutOp

    payload, pending, started = 0, [], time.perf_counter()
    for ns, key, value in items(users, per_user, seed):
        payload += payload_bytes(ns, key, value)
        pending.append(PutOp(ns, key, value))
        if len(pending) == FILL_BATCH:
            store.batch(pending)
            pending = []
    if pending:
        store.batch(pending)
    return payload, time.perf_counter() - started


# --- measurements ------------------------------------------------------------------------------


def why(error: BaseException) -> str:
    """One line saying why a side could not run."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}"[:160]


def open_sides(
    chosen: Sequence[SideSpec], places: Places, index: Any, skipped: dict[str, str]
) -> dict[str, Side]:
    """Every chosen side that opens; the others land in `skipped` with the reason."""
    opened: dict[str, Side] = {}
    for spec in chosen:
        try:
            opened[spec.name] = spec.open(places, index)
        except Exception as error:  # a side that cannot run here is a row, not a crash
            skipped[spec.name] = f"not available: {why(error)}"
    return opened


def measure_mix(args: argparse.Namespace, chosen: Sequence[SideSpec], places: Places) -> Any:
    """ops/s of the mix per side, blocks rotated across the sides; each kind's median."""
    skipped: dict[str, str] = {}
    ceilings = [CEILINGS[spec.name] for spec in chosen if spec.name in CEILINGS]
    sides = open_sides([*chosen, *ceilings], places, None, skipped)
    for name, side in sides.items():
        args.progress(f"mix: filling {name}")
        fill(side.store, range(args.namespaces), PER_NAMESPACE, SEED)
        if side.indexed is not None:
            side.indexed()
    operations = mix_operations(args.namespaces, args.ops, SEED)
    seconds = dict.fromkeys(sides, 0.0)
    spent: dict[str, dict[str, list[float]]] = {n: {k: [] for k, _ in WEIGHTS} for n in sides}
    for serial, start in enumerate(range(0, len(operations), BLOCK)):
        block = operations[start : start + BLOCK]
        for name in rotated(list(sides), serial):
            seconds[name] += run_block(sides[name].store, block, spent[name])
    for side in sides.values():
        side.close()
    rows = {name: mix_row(len(operations), s, spent[name]) for name, s in seconds.items()}
    counts = {kind: sum(1 for op in operations if op[0] == kind) for kind, _ in WEIGHTS}
    floor = api_floor()
    return {"sides": rows, "skipped": skipped, "counts": counts, "api_floor_us": floor}


def rotated(names: list[Any], serial: int) -> list[Any]:
    """`names` from the `serial`-th on, wrapped: block by block each takes every place."""
    return names[serial % len(names) :] + names[: serial % len(names)]


def run_block(store: Any, block: Sequence[Any], spent: dict[str, list[float]]) -> float:
    """Seconds the block took on `store`; each operation's seconds land in `spent[kind]`."""
    began = time.perf_counter()
    for operation in block:
        one = time.perf_counter()
        run_operation(store, operation)
        spent[operation[0]].append(time.perf_counter() - one)
    return time.perf_counter() - began


def mix_row(count: int, seconds: float, spent: dict[str, list[float]]) -> dict[str, Any]:
    """A side's mix row: ops/s and each kind's median in microseconds."""
    medians = {kind: statistics.median(s) * 1e6 if s else None for kind, s in spent.items()}
    return {"ops": count, "ops_per_s": count / seconds, "median_us": medians}


def time_searches(stores: Sequence[tuple[Any, Sequence[int]]], count: int) -> list[float]:
    """Median seconds of the filtered search's first page on each (store, its users): `count`
    searches each, in blocks of `SEARCH_BLOCK` taking turns in an order rotated block by block."""
    rngs = [random.Random(SEED) for _ in stores]
    spent: list[list[float]] = [[] for _ in stores]
    for store, users in stores:
        store.search(namespace(users[0])[:2], filter={"kind": "fact"}, limit=10)  # warm
    for serial, start in enumerate(range(0, count, SEARCH_BLOCK)):
        for at in rotated(list(range(len(stores))), serial):
            store, users = stores[at]
            for _ in range(min(SEARCH_BLOCK, count - start)):
                prefix = namespace(rngs[at].choice(users))[:2]
                began = time.perf_counter()
                store.search(prefix, filter={"kind": "fact"}, limit=10)
                spent[at].append(time.perf_counter() - began)
    return [statistics.median(s) for s in spent]


def measure_scale(args: argparse.Namespace, spec: SideSpec, places: Places) -> dict[str, Any]:
    """The filtered search on a store of 10,000 items and on one of --items, both settled and
    timed in turns; the large store's fill rate and size."""
    small_users = list(range(max(1, min(SMALL_ITEMS, args.items) // PER_USER_AT_SCALE)))
    large_users = list(range(max(len(small_users), args.items // PER_USER_AT_SCALE)))
    small, large = spec.open(places, None), None
    try:
        fill(small.store, small_users, PER_USER_AT_SCALE, SEED)
        large = spec.open(places, None)
        args.progress(f"scale: {spec.name} filling to {len(large_users) * PER_USER_AT_SCALE}")
        payload, fill_s = fill_large(large.store, small_users, large_users)
        for side in (small, large):
            began = time.perf_counter()
            if side.indexed is not None:
                side.indexed()
            # The fill's rate counts the indexing it left: it is the fill's work.
            fill_s += (time.perf_counter() - began) if side is large else 0.0
        args.progress(f"scale: {spec.name} settling both stores, then searching them in turns")
        for side in (small, large):
            if side.settle is not None:
                side.settle()
        pairs = [(small.store, small_users), (large.store, large_users)]
        small_s, large_s = time_searches(pairs, args.searches)
    finally:
        for opened in (small, large):
            if opened is not None:
                opened.close()
    return scale_row(small_s, large_s, large, payload, fill_s, len(small_users), len(large_users))


def fill_large(store: Any, small: Sequence[int], large: Sequence[int]) -> tuple[int, float]:
    """The large store: the small store's items, then the rest (payload bytes, seconds)."""
    payload, seconds = fill(store, small, PER_USER_AT_SCALE, SEED)
    more, more_s = fill(store, large[len(small) :], PER_USER_AT_SCALE, SEED + len(small))
    return payload + more, seconds + more_s


def scale_row(
    small_s: float, large_s: float, large: Side, payload: int, fill_s: float, small: int, big: int
) -> dict[str, Any]:
    """A side's scale row; the large store is closed, so it can be sized."""
    size = large.size() if large.size is not None else None
    return {
        "small_items": small * PER_USER_AT_SCALE,
        "large_items": big * PER_USER_AT_SCALE,
        "small_ms": small_s * 1e3,
        "large_ms": large_s * 1e3,
        "ratio": large_s / small_s,
        "settled": large.settle is not None,
        "fill_items_per_s": big * PER_USER_AT_SCALE / fill_s,
        "size_bytes": size,
        "payload_bytes": payload,
        "size_vs_payload": size / payload if size is not None else None,
    }


def measure_vectors(args: argparse.Namespace, chosen: Sequence[SideSpec], places: Places) -> Any:
    """Per query cost of semantic search per side at each --vectors size, beside the ceiling."""
    embeddings = FakeEmbeddings(args.dims)
    found: dict[str, Any] = {"sizes": {}, "skipped": {}}
    for size in args.vectors:
        queries = [f"query {n} " + " ".join(random.Random(n).sample(KINDS, 2)) for n in range(20)]
        count = 20 if size <= 20_000 else 5
        users = list(range(max(1, size // PER_USER_AT_SCALE)))
        texts = [value["text"] for _, _, value in items(users, PER_USER_AT_SCALE, SEED)]
        vectors = [embeddings.vector(text).tolist() for text in texts]
        ceiling, how = exact_ceiling(
            vectors, [embeddings.vector(q).tolist() for q in queries[:count]]
        )
        del vectors
        row: dict[str, Any] = {"ceiling_ms": ceiling * 1e3, "ceiling_by": how, "sides": {}}
        index = {"dims": args.dims, "embed": embeddings, "fields": ["text"]}
        for spec in chosen:
            args.progress(f"vectors: {spec.name} at {size}")
            row["sides"][spec.name] = _vector_side(spec, places, index, users, queries[:count])
        found["sizes"][str(size)] = row
    return found


def _vector_side(
    spec: SideSpec, places: Places, index: Any, users: Sequence[int], queries: Sequence[str]
) -> dict[str, Any]:
    try:
        side = spec.open(places, index)
        _, fill_s = fill(side.store, users, PER_USER_AT_SCALE, SEED)
    except Exception as error:  # no extension loading, no pgvector: a row, not a crash
        return {"why_missing": why(error)}
    spent = []
    for query in queries:
        began = time.perf_counter()
        side.store.search(("users",), query=query, limit=10)
        spent.append(time.perf_counter() - began)
    side.close()
    filled = len(users) * PER_USER_AT_SCALE
    return {"query_ms": statistics.median(spent) * 1e3, "fill_items_per_s": filled / fill_s}


# --- the run -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement on every chosen side; the results as one document."""
    started = time.perf_counter()
    pg_reason = "--no-postgres" if args.no_postgres else unavailable(args.postgres_url)
    chosen, skipped = choose(args.sides, pg_reason)
    scratch = Path(tempfile.mkdtemp(prefix="bench-memory-", dir=args.dir))
    database = ScratchDatabase(args.postgres_url) if pg_reason is None else None
    places = Places(scratch, database)
    try:
        mix = measure_mix(args, chosen, places)
        # Without words a store differs only in its puts: the mix is where that shows.
        chosen = [spec for spec in chosen if not spec.name.endswith("-words")]
        scale_skipped: dict[str, str] = {}
        scale = {}
        for spec in chosen:
            try:
                scale[spec.name] = measure_scale(args, spec, places)
            except Exception as error:
                scale_skipped[spec.name] = f"not available: {why(error)}"
        vectors = measure_vectors(args, chosen, places)
    finally:
        if database is not None:
            database.drop()
        shutil.rmtree(scratch, ignore_errors=True)
    doc = {
        "config": config(args, pg_reason),
        "environment": environment(args.postgres_url if database is not None else None),
        "labels": {spec.name: spec.label for spec in (*SIDES, *CEILINGS.values())},
        "peer_of": {**PEER_OF, **{spec.name: peer for peer, spec in CEILINGS.items()}},
        "skipped": skipped,
        "mix": mix,
        "ceilings": ceiling_rows(mix),
        "scale": {"sides": scale, "skipped": scale_skipped},
        "vectors": vectors,
    }
    doc["targets"] = targets(doc)
    doc["elapsed_s"] = time.perf_counter() - started
    return doc


def choose(names: Sequence[str], pg_reason: str | None) -> tuple[list[SideSpec], dict[str, str]]:
    """The sides asked for that can run, and why the others cannot."""
    known = {spec.name: spec for spec in SIDES}
    chosen, skipped = [], {}
    for name in names:
        spec = known[name]
        if spec.backend == "postgres" and pg_reason is not None:
            skipped[name] = f"no PostgreSQL: {pg_reason}"
        elif name.startswith("turnstore") and not _turnstore_store_importable():
            skipped[name] = "not available: turnstore.integrations.langgraph_store does not import"
        else:
            chosen.append(spec)
    return chosen, skipped


def _turnstore_store_importable() -> bool:
    try:
        from turnstore.integrations.langgraph_store import TurnstoreStore  # noqa: F401
    except ImportError:
        return False
    return True


def config(args: argparse.Namespace, pg_reason: str | None) -> dict[str, Any]:
    """The run's parameters, as the document records them."""
    keys = ("sides", "namespaces", "ops", "items", "vectors", "dims", "searches", "smoke")
    return {
        **{key: getattr(args, key) for key in keys},
        "seed": SEED,
        "postgres_skipped": pg_reason,
    }


# --- command line ------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] <= 0:
        raise argparse.ArgumentTypeError("sizes must be positive counts")
    return sizes


def _side_names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(names) - {spec.name for spec in SIDES})
    if unknown or not names:
        known = ", ".join(spec.name for spec in SIDES)
        raise argparse.ArgumentTypeError(f"unknown sides {unknown}; known: {known}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line: sizes, sides, where PostgreSQL is, where to write."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory",
        description="LangGraph memory stores (BaseStore) under one memory tool's load.",
    )
    parser.add_argument(
        "--sides",
        type=_side_names,
        default=[s.name for s in SIDES],
        help="comma-separated: " + ",".join(s.name for s in SIDES),
    )
    parser.add_argument("--namespaces", type=int, default=10_000, help="mix: namespaces")
    parser.add_argument("--ops", type=int, default=4_000, help="mix: operations per side")
    parser.add_argument(
        "--items",
        type=int,
        default=100_000,
        help="scale: the large store's items (the target: 1000000)",
    )
    parser.add_argument(
        "--vectors", type=_sizes, default=[10_000, 100_000], help="semantic search: store sizes"
    )
    parser.add_argument("--dims", type=int, default=128, help="embedding dimensions")
    parser.add_argument("--searches", type=int, default=SEARCHES, help="searches per scale")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL sides")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--dir", help="where the scratch SQLite stores go (default: temp dir)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks, not numbers")
    args = parser.parse_args(argv)
    if args.smoke:
        args.namespaces, args.ops, args.items, args.vectors = 20, 60, 300, [100, 200]
        args.dims, args.searches = 16, 3
    progress: Callable[[str], None] = (
        (lambda _: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    )
    args.progress = progress
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print it, write --json if asked."""
    args = parse_args(argv)
    doc = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
