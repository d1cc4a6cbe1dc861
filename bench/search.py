"""Search: what indexing costs a save, how soon a write is searchable, how a search's first
page scales with the store, and what the index takes on disk beside a bare one.

    python -m bench.search [--json OUT] [--small N] [--large N] [--backends sqlite,postgres]

1. Saves (SQLite on tmpfs and on disk, PostgreSQL): the benchmark's turns, saved through the
   blocking store with the background indexer off and on, alternating, median of 3 rounds.
   The ratio is the cost the indexer's thread adds to a save. While it runs, a read-only
   store (which cannot index) polls for a word every 25th save carries: the time from the
   save's return to the word's first hit is the lag.
2. Scale: N sessions of 10 items each, bulk-loaded into turnstore's search tables, a term in
   1% of the items. The newest-first first page through `store.search` (read-only, so it is
   the query alone) at 1,000 and at 100,000 sessions; best first beside it; and the ceiling:
   the same query on a bare FTS5 table (SQLite) or a bare table with a GIN index (PostgreSQL)
   holding the same text with the same tokenizer, in the same run.
3. Space: the search tables and their indexes beside that bare index.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import turnstore
from bench.workload import SEED, make_turn
from turnstore import Checkpoint, SessionContext
from turnstore.records import SearchRequest
from turnstore.rules.search_text import index_text

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
ROUNDS = 3
SESSIONS, TURNS = 10, 40
PROBE_EVERY = 25
ITEMS_PER_SESSION = 10
TERM = "tern"
"""The term 1% of the loaded items hold."""
QUERY_REPEATS = 30
_VOCABULARY = [f"w{n:04d}" for n in range(3000)]


# --- 1. saves -----------------------------------------------------------------------------------


class _Probe:
    """A read-only store polling for the probe words a writer saved; the lag of each."""

    def __init__(self, url: str) -> None:
        self.reader = turnstore.open_blocking(url, read_only=True)
        self.pending: list[tuple[str, float]] = []
        self.lags: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def saved(self, word: str) -> None:
        with self._lock:
            self.pending.append((word, time.perf_counter()))

    def _run(self) -> None:
        while not self._stop.is_set() or self.pending:
            with self._lock:
                head = self.pending[0] if self.pending else None
            if head is None:
                time.sleep(0.002)
                continue
            if self.reader.search(SearchRequest(query=head[0], limit=1)).hits:
                self.lags.append(time.perf_counter() - head[1])
                with self._lock:
                    self.pending.pop(0)
            else:
                time.sleep(0.002)

    def finish(self, timeout: float = 30) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self.reader.close()


def _save_round(url: str, indexing: bool, probe: bool) -> dict[str, Any]:
    store = turnstore.open_blocking(url, index_in_background=indexing)
    # A search builds nothing yet; it leaves the store with its index marked caught up.
    store.search(SearchRequest(query="warmup"))
    prober = _Probe(url) if probe else None
    checkpoints: dict[str, Checkpoint] = {}
    began = time.perf_counter()
    saves = 0
    for turn in range(TURNS):
        for number in range(SESSIONS):
            session = f"s{number:03d}"
            made = make_turn(SEED, session, turn)
            items = [dict(item) for item in made.items]
            word = None
            if prober is not None and saves % PROBE_EVERY == 0:
                word = f"probe{uuid.uuid4().hex[:12]}"
                items[0] = {"role": "user", "content": f"{word} {made.user_text[:200]}"}
            checkpoint = checkpoints.get(session)
            if checkpoint is None:
                checkpoint = checkpoints[session] = Checkpoint(
                    session_id=session, session_context=SessionContext(owner_id="bench")
                )
            checkpoint.sequence += 1
            checkpoint.context.extend(items)
            checkpoint.metadata = {"loop_state": made.state}
            store.save(checkpoint, items)
            saves += 1
            if prober is not None and word is not None:
                prober.saved(word)
    saving = time.perf_counter() - began
    store.search(SearchRequest(query=TERM))  # the backlog the thread left, indexed now
    total = time.perf_counter() - began
    if prober is not None:
        prober.finish()
    store.close()
    found = {"us_per_save": saving / saves * 1e6, "us_per_save_indexed": total / saves * 1e6}
    if prober is not None:
        found["lags_ms"] = [lag * 1000 for lag in prober.lags]
    return found


@contextmanager
def _places(backend: str, where: str) -> Iterator[Callable[[], str]]:
    """Fresh store URLs of one place: a SQLite file on tmpfs or disk, or a PostgreSQL schema."""
    made: list[str] = []
    if backend == "postgres":
        import psycopg

        def fresh_schema() -> str:
            name = f"bench_search_{uuid.uuid4().hex[:10]}"
            made.append(name)
            return f"{POSTGRES}?schema={name}"

        try:
            yield fresh_schema
        finally:
            with psycopg.connect(POSTGRES, autocommit=True) as connection:
                for name in made:
                    connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        return
    root = Path(
        tempfile.mkdtemp(prefix="bench-search-", dir="/dev/shm" if where == "tmpfs" else None)
    )

    def fresh_file() -> str:
        return str(root / f"{uuid.uuid4().hex[:10]}.sqlite3")

    try:
        yield fresh_file
    finally:
        for path in root.glob("*"):
            path.unlink()
        root.rmdir()


def save_rows(backends: list[str]) -> list[dict[str, Any]]:
    """Each place's save cost with the indexer off and on, and the lag while it is on."""
    rows = []
    places = [("sqlite", "tmpfs"), ("sqlite", "disk")] if "sqlite" in backends else []
    places += [("postgres", "server")] if "postgres" in backends else []
    for backend, where in places:
        runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        with _places(backend, where) as fresh:
            for _ in range(ROUNDS):
                for indexing in (False, True):
                    runs[indexing].append(_save_round(fresh(), indexing, probe=indexing))
        off = statistics.median(run["us_per_save"] for run in runs[False])
        on = statistics.median(run["us_per_save"] for run in runs[True])
        on_indexed = statistics.median(run["us_per_save_indexed"] for run in runs[True])
        lags = sorted(lag for run in runs[True] for lag in run["lags_ms"])
        rows.append(
            {
                "place": f"{backend} ({where})",
                "us_per_save_off": round(off, 1),
                "us_per_save_on": round(on, 1),
                "ratio": round(on / off, 3),
                "ratio_with_backlog": round(on_indexed / off, 3),
                "lag_ms_p50": round(statistics.median(lags), 1) if lags else None,
                "lag_ms_p99": round(lags[int(len(lags) * 0.99)], 1) if lags else None,
                "lag_ms_max": round(lags[-1], 1) if lags else None,
                "lag_samples": len(lags),
            }
        )
    return rows


# --- 2 and 3. scale and space -------------------------------------------------------------------


def _text(rng: random.Random, number: int) -> str:
    words = rng.choices(_VOCABULARY, k=12)
    if number % 100 == 0:
        words[rng.randrange(len(words))] = TERM
    return " ".join(words)


def _rows(sessions: int) -> Iterator[tuple[str, int, str]]:
    """(session id, item index, text) of every loaded item, oldest first."""
    rng = random.Random(SEED)
    number = 0
    for session in range(sessions):
        for item in range(ITEMS_PER_SESSION):
            yield f"sess-{session:07d}", item, _text(rng, number)
            number += 1


def _chunks(sessions: int) -> Iterator[tuple[str, int, str]]:
    """(session id, 0, items JSON) of each loaded session's one context chunk: its items as
    the store keeps them, where a hit's snippet is read from."""
    rows = _rows(sessions)
    for session in range(sessions):
        texts = [next(rows)[2] for _ in range(ITEMS_PER_SESSION)]
        items = [{"role": "user", "content": text} for text in texts]
        yield f"sess-{session:07d}", 0, json.dumps(items, ensure_ascii=False)


def _load_sqlite(path: Path, sessions: int) -> None:
    import sqlite3

    turnstore.open_blocking(str(path), index_in_background=False).close()
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO sessions (session_id, latest_sequence, checkpoint_state_json, context_epoch,"
        " context_length, session_context_json, owner_id, execution_stats_json, catalog_visible,"
        " kind, created_at, updated_at) VALUES (?, 1, '{}', 0, 10, '{}', ?, '{}', 1,"
        " 'items', 0, 0)",
        ((f"sess-{n:07d}", f"owner-{n % 50}") for n in range(sessions)),
    )
    connection.executemany(
        "INSERT INTO context_chunks (session_id, start, items_json) VALUES (?, ?, ?)",
        _chunks(sessions),
    )
    # search_items keeps no words: FTS5 (without content) is handed them by row id.
    numbered = list(enumerate(_rows(sessions), start=1))
    connection.executemany(
        "INSERT INTO search_items (item_id, session_id, sequence, item, in_context,"
        " written_at_ms) VALUES (?, ?, NULL, ?, 1, 0)",
        ((item_id, session, item) for item_id, (session, item, _) in numbered),
    )
    connection.executemany(
        "INSERT INTO search_fts (rowid, body) VALUES (?, ?)",
        ((item_id, index_text(text)) for item_id, (_, _, text) in numbered),
    )
    connection.execute("INSERT INTO search_marks SELECT session_id, 1, 10 FROM sessions")
    connection.execute("UPDATE search_index_state SET built = 1, caught_up_to = 4102444800")
    connection.execute(
        "CREATE VIRTUAL TABLE bare USING fts5(body, tokenize='unicode61 remove_diacritics 2')"
    )
    connection.executemany(
        "INSERT INTO bare (body) VALUES (?)", ((text,) for _, _, text in _rows(sessions))
    )
    connection.execute("COMMIT")
    connection.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
    connection.execute("INSERT INTO bare (bare) VALUES ('optimize')")
    connection.close()


def _sqlite_space(path: Path) -> tuple[int, int]:
    import sqlite3

    connection = sqlite3.connect(path)
    ours = connection.execute(
        "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'search_fts%' OR name = 'search_items'"
        " OR name = 'search_items_session_idx'"
    ).fetchone()[0]
    bare = connection.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'bare%'").fetchone()[
        0
    ]
    connection.close()
    return int(ours), int(bare)


def _sqlite_bare(path: Path) -> Callable[[], int]:
    import sqlite3

    connection = sqlite3.connect(path, check_same_thread=False)
    query = (
        "SELECT rowid, snippet(bare, 0, char(57344), char(57345), '…', 24) FROM bare"
        " WHERE bare MATCH ? ORDER BY rowid DESC LIMIT 21"
    )
    return lambda: len(connection.execute(query, (f'"{TERM}"',)).fetchall())


def _load_postgres(url: str, schema: str, sessions: int) -> None:
    import psycopg

    turnstore.open_blocking(url, index_in_background=False).close()
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f"SET search_path TO {schema}")
        connection.execute("DROP INDEX search_items_words_idx")
        with connection.cursor().copy(
            "COPY sessions (session_id, latest_sequence, checkpoint_state_json, context_epoch,"
            " context_length, session_context_json, owner_id, execution_stats_json,"
            " catalog_visible, kind, created_at, updated_at) FROM STDIN"
        ) as copy:
            for n in range(sessions):
                copy.write_row(
                    (
                        f"sess-{n:07d}",
                        1,
                        "{}",
                        0,
                        10,
                        "{}",
                        f"owner-{n % 50}",
                        "{}",
                        True,
                        "items",
                        0,
                        0,
                    )
                )
        with connection.cursor().copy(
            "COPY context_chunks (session_id, start, items_json) FROM STDIN"
        ) as copy:
            for chunk in _chunks(sessions):
                copy.write_row(chunk)
        # search_items keeps a vector of the words, not the words: staged, then computed.
        connection.execute(
            "CREATE TEMP TABLE staged (n BIGINT, session_id TEXT, item BIGINT, words TEXT)"
        )
        with connection.cursor().copy("COPY staged FROM STDIN") as copy:
            for n, (session, item, text) in enumerate(_rows(sessions), start=1):
                copy.write_row((n, session, item, index_text(text)))
        connection.execute(
            "INSERT INTO search_items (session_id, sequence, item, in_context, written_at_ms,"
            " words) SELECT session_id, NULL, item, TRUE, 0, to_tsvector('simple', words)"
            " FROM staged ORDER BY n"
        )
        connection.execute(
            "CREATE INDEX search_items_words_idx ON search_items USING GIN (words)"
            " WITH (gin_pending_list_limit = 256)"
        )
        connection.execute("INSERT INTO search_marks SELECT session_id, 1, 10 FROM sessions")
        connection.execute("UPDATE search_index_state SET built = TRUE, caught_up_to = 4102444800")
        connection.execute(
            "CREATE TABLE bare (id BIGINT PRIMARY KEY, body TEXT NOT NULL, body_vector tsvector"
            " GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED)"
        )
        connection.execute("INSERT INTO bare (id, body) SELECT n, words FROM staged")
        connection.execute("CREATE INDEX bare_idx ON bare USING GIN (body_vector)")
        connection.execute("VACUUM ANALYZE search_items")
        connection.execute("VACUUM ANALYZE sessions")
        connection.execute("VACUUM ANALYZE bare")


def _postgres_space(schema: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        ours = connection.execute(
            "SELECT pg_total_relation_size(%s)", (f"{schema}.search_items",)
        ).fetchone()
        bare = connection.execute(
            "SELECT pg_total_relation_size(%s)", (f"{schema}.bare",)
        ).fetchone()
    assert ours is not None
    assert bare is not None
    return int(ours[0]), int(bare[0])


def _postgres_bare(schema: str) -> Callable[[], int]:
    import psycopg

    connection = psycopg.connect(POSTGRES, autocommit=True)
    connection.execute(f"SET search_path TO {schema}")
    query = (
        "WITH hits AS (SELECT id, body FROM bare"
        " WHERE body_vector @@ phraseto_tsquery('simple', %s)"
        " ORDER BY id DESC LIMIT 21) SELECT id, ts_headline('simple', body,"
        " phraseto_tsquery('simple', %s)) FROM hits ORDER BY id DESC"
    )
    return lambda: len(connection.execute(query, (TERM, TERM)).fetchall())


def _median_ms(call: Callable[[], object]) -> float:
    call()
    times = []
    for _ in range(QUERY_REPEATS):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def scale_rows(backends: list[str], sizes: list[int]) -> list[dict[str, Any]]:
    """First-page times at each size, ours and the bare ceiling's, and the space of each."""
    rows = []
    for backend in backends:
        for sessions in sizes:
            with _places(backend, "disk") as fresh:
                url = fresh()
                if backend == "postgres":
                    schema = url.rsplit("schema=", 1)[1]
                    _load_postgres(url, schema, sessions)
                    bare = _postgres_bare(schema)
                    ours_bytes, bare_bytes = _postgres_space(schema)
                else:
                    _load_sqlite(Path(url), sessions)
                    bare = _sqlite_bare(Path(url))
                    ours_bytes, bare_bytes = _sqlite_space(Path(url))
                with turnstore.open_blocking(url, read_only=True) as reader:
                    newest = partial(reader.search, SearchRequest(query=TERM, limit=20))
                    best = partial(reader.search, SearchRequest(query=TERM, limit=20, order="best"))
                    assert len(newest().hits) == min(20, sessions * ITEMS_PER_SESSION // 100)
                    rows.append(
                        {
                            "backend": backend,
                            "sessions": sessions,
                            "items": sessions * ITEMS_PER_SESSION,
                            "newest_ms": round(_median_ms(newest), 3),
                            "best_ms": round(_median_ms(best), 3),
                            "bare_ms": round(_median_ms(bare), 3),
                            "index_bytes": ours_bytes,
                            "bare_bytes": bare_bytes,
                            "space_ratio": round(ours_bytes / bare_bytes, 3),
                        }
                    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="Write the figures here as JSON.")
    parser.add_argument("--small", type=int, default=1_000, help="Sessions of the small store.")
    parser.add_argument("--large", type=int, default=100_000, help="Sessions of the large store.")
    parser.add_argument("--backends", default="sqlite,postgres", help="Which backends to run.")
    parser.add_argument("--no-saves", action="store_true", help="Skip the save rows.")
    parser.add_argument(
        "--smoke", action="store_true", help="Tiny sizes in seconds: the numbers mean nothing."
    )
    args = parser.parse_args()
    if args.smoke:
        global ROUNDS, SESSIONS, TURNS, QUERY_REPEATS
        ROUNDS, SESSIONS, TURNS, QUERY_REPEATS = 1, 2, 13, 3
        args.small, args.large = 20, 40
    backends = args.backends.split(",")
    saves = [] if args.no_saves else save_rows(backends)
    for row in saves:
        print(
            f"{row['place']:<20} save µs off {row['us_per_save_off']:>7} on"
            f" {row['us_per_save_on']:>7}  ratio {row['ratio']:.3f}"
            f" (with backlog {row['ratio_with_backlog']:.3f})  lag ms p50 {row['lag_ms_p50']}"
            f" p99 {row['lag_ms_p99']} max {row['lag_ms_max']} (n={row['lag_samples']})"
        )
    scale = scale_rows(backends, [args.small, args.large])
    for row in scale:
        print(
            f"{row['backend']:<9} {row['sessions']:>7} sessions {row['items']:>8} items:"
            f" newest {row['newest_ms']} ms, best {row['best_ms']} ms, bare {row['bare_ms']} ms;"
            f" index {row['index_bytes']} B, bare {row['bare_bytes']} B"
            f" ({row['space_ratio']:.2f}x)"
        )
    for backend in backends:
        found = {row["sessions"]: row for row in scale if row["backend"] == backend}
        small, large = found[args.small], found[args.large]
        print(
            f"{backend}: first page at {args.large} / at {args.small} sessions:"
            f" newest {large['newest_ms'] / small['newest_ms']:.2f}x (target <= 1.5),"
            f" best {large['best_ms'] / small['best_ms']:.2f}x,"
            f" bare ceiling {large['bare_ms'] / small['bare_ms']:.2f}x"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"saves": saves, "scale": scale}, indent=2))


if __name__ == "__main__":
    main()
