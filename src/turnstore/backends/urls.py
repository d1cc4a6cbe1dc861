"""Which engine a store URL names: `sqlite:///relative.db`, `postgresql://…`, or a path."""

from __future__ import annotations

import os
from pathlib import Path

from turnstore.backends.sql.engine import Engine
from turnstore.errors import ConfigError


def open_engine(url: str | os.PathLike[str], *, read_only: bool = False) -> Engine:
    """Open the engine a URL names; the PostgreSQL driver is imported only when named."""
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str) or not url:
        raise ConfigError("store URL must be a non-empty string or path")
    scheme, separator, rest = url.partition("://")
    if not separator:
        return _sqlite(Path(url), read_only)
    if scheme == "sqlite":
        # As SQLAlchemy: three slashes start a relative path, four an absolute one.
        path = rest[1:] if rest.startswith("/") else rest
        path = path.split("?", 1)[0]
        if not path or path == ":memory:":
            raise ConfigError("a sqlite URL needs a database file path (in-memory is unsupported)")
        return _sqlite(Path(path), read_only)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url, read_only)
    raise ConfigError(f"unsupported store URL scheme {scheme!r}; expected sqlite or postgresql")


def _sqlite(path: Path, read_only: bool) -> Engine:
    from turnstore.backends.sqlite.engine import SqliteEngine

    return SqliteEngine(path, read_only=read_only)


def _postgres(url: str, read_only: bool) -> Engine:
    try:
        from turnstore.backends.postgres.engine import PostgresEngine
    except ImportError:
        raise ConfigError(
            "PostgreSQL URLs need the driver: pip install 'turnstore[postgres]'"
        ) from None
    return PostgresEngine(url, read_only=read_only)
