"""A scratch PostgreSQL database for the run, one schema per peer, dropped at the end."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from bench.measure import PgWal

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""Where the benchmark looks for a server when neither flag nor environment names one."""


def unavailable(url: str) -> str | None:
    """Why no PostgreSQL rows can run against `url`, or None when they can."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'turnstore[postgres]')"
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as connection:
            setting = connection.execute("SHOW synchronous_commit").fetchone()
    except psycopg.Error as error:
        return f"no PostgreSQL server answers ({str(error).strip().splitlines()[0]})"
    if setting is None or setting[0] != "on":
        return f"synchronous_commit is {setting}, not on: rows would not be durable"
    return None


def with_database(url: str, database: str, **query: str) -> str:
    """`url` pointing at another database, with extra query parameters."""
    parts = urlsplit(url)
    # quote, not quote_plus: libpq reads '+' literally, and `options` has spaces.
    merged = urlencode({**dict(parse_qsl(parts.query)), **query}, quote_via=quote)
    return urlunsplit(parts._replace(path=f"/{database}", query=merged))


class ScratchDatabase:
    """Creates `bench_<random>` on one server, a schema in it per peer; drops it at the end."""

    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg import sql

        self.name = f"bench_{secrets.token_hex(4)}"
        self.admin: Any = psycopg.connect(url, autocommit=True)
        self.admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        self.url = with_database(url, self.name)
        self.wal = PgWal(self.admin)

    def schema(self, peer: str) -> str:
        """A fresh empty schema for `peer`; returns its name."""
        import psycopg
        from psycopg import sql

        name = peer.replace("-", "_").replace("+", "_")[:63]
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return name

    def turnstore_url(self, schema: str, **query: str) -> str:
        """A turnstore URL for `schema` (turnstore sets its own search_path)."""
        return with_database(self.url, self.name, schema=schema, **query)

    def libpq_url(self, schema: str) -> str:
        """A plain libpq URL whose sessions see `schema` first, for libraries without a schema."""
        return with_database(self.url, self.name, options=f"-c search_path={schema}")

    def size(self, schema: str) -> int:
        """Bytes of every table of `schema`, with its indexes and TOAST."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            row = connection.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind IN ('r', 'p') AND n.nspname = %s",
                (schema,),
            ).fetchone()
        return int(row[0]) if row else 0

    def drop(self) -> None:
        """Drop the database, closing any connection left on it."""
        from psycopg import sql

        self.admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
        )
        self.admin.close()


def commit_ceiling(url: str, clients: int, commits: int) -> float:
    """Commits per second of `clients` plain connections, each inserting one row per commit.

    What the server and its disk commit with that many clients and no library at all: the
    ceiling a store's concurrent writers are compared with, measured in the same run.
    """
    import psycopg

    table = f"ceiling_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {table} (client INTEGER, n INTEGER, body TEXT)")
        try:
            connections = [psycopg.connect(url, autocommit=True) for _ in range(clients)]
            barrier = threading.Barrier(clients + 1)

            def client(index: int) -> None:
                connection = connections[index]
                barrier.wait()
                for n in range(commits):
                    with connection.transaction():
                        connection.execute(
                            f"INSERT INTO {table} VALUES (%s, %s, %s)", (index, n, "x" * 100)
                        )

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            for thread in threads:
                thread.start()
            barrier.wait()
            started = time.perf_counter()
            for thread in threads:
                thread.join()
            seconds = time.perf_counter() - started
            for connection in connections:
                connection.close()
        finally:
            admin.execute(f"DROP TABLE {table}")
    return clients * commits / seconds


def lone_commit_ceiling(url: str, commits: int) -> float:
    """Durable commits per second of one connection sending one autocommitted INSERT each.

    One round trip and one commit per turn, with no library above the driver: no store that
    commits each turn on its own, one at a time, can save more turns per second.
    """
    import psycopg

    table = f"ceiling_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE TABLE {table} (n INTEGER, body TEXT)")
        try:
            insert = f"INSERT INTO {table} VALUES (%s, %s)"
            connection.execute(insert, (0, "x" * 100), prepare=True)
            started = time.perf_counter()
            for n in range(commits):
                connection.execute(insert, (n, "x" * 100), prepare=True)
            seconds = time.perf_counter() - started
        finally:
            connection.execute(f"DROP TABLE {table}")
    return commits / seconds
