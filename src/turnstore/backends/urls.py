"""Which engine a store URL names: `sqlite:///relative.db`, `postgresql://…`, or a path."""

from __future__ import annotations

import os
import re
from pathlib import Path

from turnstore.backends.sqlite.options import check_name
from turnstore.engine.protocol import Engine
from turnstore.errors import ConfigError, SchemaError
from turnstore.records.upkeep import MigrationReport, MigrationStep
from turnstore.schema.ddl import MIGRATIONS

_POSTGRES_SCHEMES = ("postgresql", "postgres")
_MISTYPED_URL = re.compile(
    r"(sqlite|postgresql|postgres|file):(?!//)(.*)", re.IGNORECASE | re.DOTALL
)
"""A path that is really a URL missing slashes (`sqlite:/x.db`), not a file to create."""


def open_engine(
    url: str | os.PathLike[str],
    *,
    read_only: bool = False,
    create_dirs: bool = False,
    any_version: bool = False,
) -> Engine:
    """Open the engine a URL names; the PostgreSQL driver is imported only when named.

    A SQLite path starts with `~` for the home folder; its folder must exist unless
    `create_dirs` (ignored on PostgreSQL) asks to create it. `any_version` (read-only
    only) opens a database at another schema version, for `migrate` to look at.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str) or not url:
        raise ConfigError("store URL must be a non-empty string or path")
    scheme, separator, rest = url.partition("://")
    if not separator:
        if url == ":memory:":
            # sqlite3's word for an in-memory database: as a path it would make a file of
            # that name in the working folder, which is never what was meant.
            raise ConfigError("in-memory SQLite is unsupported: the store needs a database file")
        mistyped = _MISTYPED_URL.fullmatch(url)
        if mistyped:
            raise ConfigError(_mistyped(mistyped[1].lower(), mistyped[2].lstrip("/")))
        return _sqlite(_local_path(url), read_only, create_dirs, any_version)
    if scheme == "sqlite":
        # As SQLAlchemy: three slashes start a relative path, four an absolute one.
        if rest and not rest.startswith("/"):
            raise ConfigError(
                f"a sqlite URL has three slashes before a relative path; did you mean "
                f"sqlite:///{rest}?"
            )
        path, _, query = rest[1:].partition("?")
        if query:
            raise ConfigError(
                f"sqlite URLs take no parameters (got ?{query}); pass read_only=True or "
                "create_dirs=True to open() instead"
            )
        if not path or path == ":memory:":
            raise ConfigError("a sqlite URL needs a database file path (in-memory is unsupported)")
        return _sqlite(_local_path(path), read_only, create_dirs, any_version)
    if scheme in _POSTGRES_SCHEMES:
        return _postgres(url, read_only, any_version)
    raise ConfigError(f"unsupported store URL scheme {scheme!r}; expected sqlite or postgresql")


def _local_path(text: str) -> Path:
    """The absolute path a SQLite URL or path names, with `~` expanded."""
    check_name(text)  # before `~user` is looked up, which a NUL would break
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        user = expanded.split("/", 1)[0]
        raise ConfigError(f"cannot expand {user} in {text}: no such user or home folder")
    # Absolute once, so a later change of working folder cannot point readers elsewhere.
    return Path(expanded).absolute()


def _mistyped(scheme: str, rest: str) -> str:
    if scheme == "sqlite":
        return (
            f"a sqlite URL starts with sqlite:/// (three slashes); did you mean "
            f"sqlite:///{rest} ({rest} in the working folder) or sqlite:////{rest} (/{rest})?"
        )
    if scheme == "file":
        return f"file: URLs are not supported; pass the path itself or sqlite:///{rest}"
    return f"a PostgreSQL URL starts with {scheme}://; did you mean {scheme}://{rest}?"


def _sqlite(path: Path, read_only: bool, create_dirs: bool, any_version: bool) -> Engine:
    from turnstore.backends.sqlite.engine import SqliteEngine

    return SqliteEngine(path, read_only=read_only, create_dirs=create_dirs, any_version=any_version)


def _postgres(url: str, read_only: bool, any_version: bool) -> Engine:
    try:
        from turnstore.backends.postgres.engine import PostgresEngine
    except ImportError:
        raise ConfigError(
            "PostgreSQL URLs need the driver: pip install 'turnstore[postgres]'"
        ) from None
    return PostgresEngine(url, read_only=read_only, any_version=any_version)


def migrate(url: str | os.PathLike[str], *, dry_run: bool = False) -> MigrationReport:
    """Bring the database at `url` to this build's schema version, or list the steps."""
    engine = open_engine(url, read_only=True, any_version=True)
    try:
        current = engine.upkeep().schema_version()
        target = engine.upkeep().supported_version
    finally:
        engine.close()
    if current > target:
        raise SchemaError(
            f"the database is at schema version {current}; this build supports {target} "
            "(upgrade turnstore)"
        )
    steps = [
        MigrationStep(version=number, summary=MIGRATIONS[number - 1].summary)
        for number in range(current + 1, target + 1)
    ]
    if steps and not dry_run:
        open_engine(url).close()
    return MigrationReport(from_version=current, to_version=target, steps=steps, dry_run=dry_run)
