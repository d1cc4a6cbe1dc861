"""SQLite's errors in the public hierarchy."""

from __future__ import annotations

import sqlite3

from turnstore.errors import StorageError

_RETRYABLE = ("database is locked", "database is busy", "database table is locked")


def storage_error(error: sqlite3.Error) -> StorageError:
    """Wrap a driver error in the public hierarchy; lock timeouts are retryable."""
    text = str(error)
    return StorageError(f"SQLite error: {text}", retryable=any(m in text for m in _RETRYABLE))
