"""The search index's size for a CJK workload, beside a bare index of the same tokens.

    python -m bench.search_cjk [--sessions N] [--items N] [--backends sqlite,postgres]

Sessions of items whose text is Japanese and Chinese without spaces (random runs of common
kanji, kana and punctuation, about 120 characters an item) are indexed by the store as a user
opens it (the catch-up a search runs first). turnstore's search tables and their indexes
(SQLite: `search_items`, its index and FTS5's shadow tables; PostgreSQL: `search_items` with
its indexes and TOAST) are then set beside a bare index of the very tokens turnstore indexed
(`rules.search_text.index_text`, CJK pairs included), built in the same database: an FTS5
table without content, or a table of `(id, tsvector)` under a GIN index. The issue's
target: turnstore's at most 1.5x the bare one.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import uuid
from pathlib import Path

import turnstore
from turnstore.records import SearchRequest
from turnstore.rules.search_text import index_text

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
_KANJI = "日本語東京天気今明雨雪風空海山川田中大小人口手目耳心気分時間年月週朝昼夜春夏秋冬"
_KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
)
_PUNCT = "、。「」"


def _text(rng: random.Random, chars: int) -> str:
    """A run of CJK text with the odd punctuation mark, as a chat message might read."""
    pool = _KANJI + _KANA
    out = []
    for _ in range(chars):
        out.append(rng.choice(_PUNCT) if rng.random() < 0.06 else rng.choice(pool))
    return "".join(out)


def _items(sessions: int, items: int) -> dict[str, list[dict[str, str]]]:
    rng = random.Random(42)
    return {
        f"cjk-{n:04d}": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": _text(rng, 120)}
            for i in range(items)
        ]
        for n in range(sessions)
    }


def _index(url: str, corpus: dict[str, list[dict[str, str]]]) -> None:
    with turnstore.open_blocking(url, index_in_background=False) as store:
        for session_id, items in corpus.items():
            store.append_context(session_id, items)
        store.search(SearchRequest(query="天気"))  # the catch-up indexes every session


def _tokens(corpus: dict[str, list[dict[str, str]]]) -> list[str]:
    return [index_text(item["content"]) for items in corpus.values() for item in items]


def sqlite_sizes(corpus: dict[str, list[dict[str, str]]]) -> tuple[int, int]:
    """turnstore's search tables and a bare contentless FTS5 table of the same tokens."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "cjk.sqlite3"
        _index(str(path), corpus)
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("CREATE VIRTUAL TABLE bare USING fts5(body, content='')")
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO bare (body) VALUES (?)", ((words,) for words in _tokens(corpus))
        )
        connection.execute("COMMIT")
        for table in ("search_fts", "bare"):
            connection.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        ours = connection.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'search_fts%'"
            " OR name IN ('search_items', 'search_items_session_idx')"
        ).fetchone()[0]
        bare = connection.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'bare%'"
        ).fetchone()[0]
        connection.close()
    return int(ours), int(bare)


def postgres_sizes(corpus: dict[str, list[dict[str, str]]]) -> tuple[int, int]:
    """turnstore's `search_items` (with its indexes) and a bare GIN-indexed tsvector table."""
    import psycopg

    schema = f"bench_cjk_{uuid.uuid4().hex[:8]}"
    try:
        _index(f"{POSTGRES}?schema={schema}", corpus)
        with psycopg.connect(POSTGRES, autocommit=True) as connection:
            connection.execute(f"SET search_path TO {schema}")
            connection.execute("CREATE TABLE bare (id BIGINT PRIMARY KEY, words tsvector)")
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO bare VALUES (%s, to_tsvector('simple', %s))",
                    list(enumerate(_tokens(corpus))),
                )
            connection.execute("CREATE INDEX bare_idx ON bare USING GIN (words)")
            connection.execute("VACUUM ANALYZE search_items")
            connection.execute("VACUUM ANALYZE bare")
            sizes = [
                connection.execute(
                    "SELECT pg_total_relation_size(%s)", (f"{schema}.{table}",)
                ).fetchone()
                for table in ("search_items", "bare")
            ]
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    ours, bare = (int(size[0]) if size else 0 for size in sizes)
    return ours, bare


def main() -> None:
    """Print each backend's index size beside the bare index of the same tokens."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    corpus = _items(args.sessions, args.items)
    chars = sum(len(item["content"]) for items in corpus.values() for item in items)
    print(f"{args.sessions} sessions x {args.items} items, {chars:,} CJK characters")
    measure = {"sqlite": sqlite_sizes, "postgres": postgres_sizes}
    for backend in args.backends.split(","):
        ours, bare = measure[backend](corpus)
        sizes = f"turnstore {ours / 1e6:6.2f} MB  bare {bare / 1e6:6.2f} MB"
        print(f"{backend:9} {sizes}  {ours / bare:.2f}x")


if __name__ == "__main__":
    main()
