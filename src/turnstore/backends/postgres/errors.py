"""PostgreSQL's errors in the public hierarchy, with no secret of the URL in them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import errors
from psycopg_pool import PoolClosed, PoolTimeout

from turnstore.backends.postgres.options import PostgresOptions
from turnstore.errors import ConfigError, StorageError, StoreClosed, TurnstoreError

T = TypeVar("T")

_REFUSED = re.compile(
    r'role ".*" does not exist|database ".*" does not exist|authentication failed'
    r"|no pg_hba\.conf entry|pg_hba\.conf rejects|no password supplied"
    r"|is not permitted to log in|permission denied for database",
    re.DOTALL,
)
"""What the server answers a connection whose URL names a wrong role, password or database.

libpq gives no SQLSTATE for a failed connection, so its (English) message is all there is."""


def translated(options: PostgresOptions, call: Callable[[], T]) -> T:
    """Run `call`, turning driver errors into `StorageError` with no trace of the original.

    The new error is raised outside the `except` block so it carries no `__context__`: the
    driver's own error can quote connection details that must not reach logs.
    """
    try:
        return call()
    except PoolClosed:
        failure: TurnstoreError = StoreClosed("the store is closed")
    except (psycopg.Error, PoolTimeout) as error:
        failure = storage_error(error, options)
    raise failure


def storage_error(error: BaseException, options: PostgresOptions) -> StorageError:
    """Wrap a driver error in the public hierarchy; connection loss and lock races retry."""
    retryable = isinstance(
        error,
        psycopg.OperationalError
        | PoolTimeout
        | errors.DeadlockDetected
        | errors.SerializationFailure,
    )
    sqlstate = getattr(error, "sqlstate", None)
    diagnostic = getattr(error, "diag", None)
    detail = diagnostic.message_detail if diagnostic is not None else None
    return StorageError(
        f"PostgreSQL error: {options.redact(str(error))}",
        retryable=retryable,
        sqlstate=sqlstate,
        detail=None if detail is None else options.redact(detail),
    )


def refusal(error: StorageError) -> ConfigError | None:
    """The error of a connection refused for its role, password or database, or by a pooler."""
    if "unsupported startup parameter" in error.message:
        # PgBouncer before 1.20 refuses the `options` a direct connection starts with.
        return ConfigError(
            error.message.replace("PostgreSQL error:", "the server refused the connection:", 1)
            + " (behind PgBouncer or another pooler in transaction mode, add "
            "pooler=transaction to the URL: docs/how-to/postgresql.md)"
        )
    if not _REFUSED.search(error.message):
        return None
    # A wrong role, password or database fails every retry alike: not retryable.
    return ConfigError(
        error.message.replace("PostgreSQL error:", "PostgreSQL refused the connection:", 1)
        + " (check the user, password and database the URL names)"
    )
