"""Opening the connection pool: the store's session settings, and a refusal told apart."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from turnstore.backends.postgres.errors import refusal, translated
from turnstore.backends.postgres.options import PostgresOptions
from turnstore.errors import StorageError


def _settings(options: PostgresOptions, *, read_only: bool) -> str:
    """The `options` every connection of the pool starts with."""
    # The store's statements are short index lookups; JIT compiling one costs more than
    # running it (13-200 ms, seen on tree walks whose cost estimate had no statistics).
    # First, so a URL that asks for `-c jit=on` still gets it.
    settings = "-c jit=off"
    # The store's own settings go after the URL's `options`, which they would replace.
    given = conninfo_to_dict(options.conninfo).get("options")
    if given:
        settings = f"{settings} {given}"
    settings += f" -c search_path={options.schema}"
    if read_only:
        settings += " -c default_transaction_read_only=on"
    return settings


PRELUDE = "SELECT set_config('search_path', %s, true), set_config('jit', 'off', true)"
"""Behind a transaction pooler, the settings each transaction begins with.

A pooler in transaction mode hands each transaction whichever server connection is free, so
settings that belong to a connection (`options` at start-up, which PgBouncer before 1.20
refuses outright, or `SET`) would reach some other client's transactions, or none of ours.
Set with `is_local`, they last exactly one transaction; sent in the same pipeline as BEGIN,
they cost no round trip."""


def prelude(options: PostgresOptions) -> tuple[str, tuple[str]] | None:
    """The statement every transaction starts with, or None when the connection keeps them."""
    return (PRELUDE, (options.schema,)) if options.transaction_pooler else None


def connection_kwargs(options: PostgresOptions, *, read_only: bool) -> dict[str, Any]:
    """What each of the pool's connections is opened with."""
    if options.transaction_pooler:
        # No named prepared statements: the pooler may run the next execution on a server
        # connection where the statement was never prepared (PgBouncer before 1.21).
        return {"autocommit": True, "prepare_threshold": None}
    return {"autocommit": True, "options": _settings(options, read_only=read_only)}


def open_pool(
    options: PostgresOptions, *, read_only: bool
) -> ConnectionPool[psycopg.Connection[Any]]:
    """Open a pool of autocommit connections on the store's schema, or say why not."""
    kwargs = connection_kwargs(options, read_only=read_only)

    def connect() -> ConnectionPool[psycopg.Connection[Any]]:
        # One direct connection first, so an unreachable server fails at once with the
        # server's own reason instead of a pool time-out.
        # With the pool's own settings: a pooler that refuses them refuses this one too.
        psycopg.connect(options.conninfo, connect_timeout=10, **kwargs).close()
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            options.conninfo,
            min_size=options.pool_min_size,
            max_size=options.pool_max_size,
            timeout=options.pool_timeout_s,
            kwargs=kwargs,
            name="turnstore",
            open=False,
        )
        pool.open(wait=options.pool_min_size > 0, timeout=options.pool_timeout_s)
        return pool

    try:
        return translated(options, connect)
    except StorageError as error:
        refused = refusal(error)
        if refused is None:
            raise
    # Raised outside the `except` block, so the retryable error is not its context.
    raise refused
