"""Names no database can take: a NUL or a lone surrogate in a path or URL is a ConfigError.

Before, a NUL raised `ValueError` (and cut a PostgreSQL URL short, connecting to the database
named by what came before it), and a lone surrogate raised `UnicodeEncodeError` after the
SQLite file had been created. Each is now refused before anything is created or contacted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import ConfigError

OPENERS: list[Callable[..., Any]] = [turnstore.open, turnstore.open_blocking]
UNSPELLABLE = {"nul": "a\x00b", "surrogate": "a\udcffb"}


def everything_under(folder: Path) -> list[str]:
    """Every file and folder under `folder`, relative and sorted."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
@pytest.mark.parametrize("name", UNSPELLABLE.values(), ids=list(UNSPELLABLE))
@pytest.mark.parametrize("where", ["file", "folder", "home"])
@pytest.mark.parametrize("form", ["path", "url"])
def test_a_sqlite_path_sqlite_cannot_name_is_a_config_error_creating_nothing(
    tmp_path: Path, opener: Callable[..., Any], name: str, where: str, form: str
) -> None:
    """NUL or a lone surrogate in the file, a folder to create, or `~user`: ConfigError."""
    path = {
        "file": f"{tmp_path}/{name}.db",
        "folder": f"{tmp_path}/{name}/store.db",
        "home": f"~{name}/store.db",
    }[where]
    target = path if form == "path" else f"sqlite:///{path}"
    for read_only in (False, True):
        with pytest.raises(ConfigError) as refused:
            opener(target, create_dirs=not read_only, read_only=read_only)
        assert ("NUL" if "\x00" in name else "lone surrogate") in str(refused.value)
    assert everything_under(tmp_path) == []


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://postgres@127.0.0.1:1/test\x00other", "NUL"),
        ("postgresql://post\x00gres@127.0.0.1:1/test", "NUL"),
        ("postgresql://postgres@127.0.0.1:1/test?application_name=a\x00b", "NUL"),
        ("postgresql://postgres@127.0.0.1:1/te\udcffst", "lone surrogate"),
        ("postgresql://postgres:se\udcffcret@127.0.0.1:1/test", "lone surrogate"),
        ("postgresql://postgres@127.0.0.1:1/test?options=\udcff", "lone surrogate"),
        ("postgresql://postgres@127.0.0.1:1/te%FFst", "not UTF-8"),
    ],
    ids=["nul-database", "nul-user", "nul-query", "surrogate", "surrogate-secret", "query", "ff"],
)
def test_a_postgresql_url_libpq_cannot_take_is_a_config_error(
    opener: Callable[..., Any], url: str, named: str
) -> None:
    """Refused while parsing, before any connection (port 1 would refuse one anyway)."""
    pytest.importorskip("psycopg")
    with pytest.raises(ConfigError, match="malformed PostgreSQL URL") as refused:
        opener(url)
    assert named in str(refused.value)
    assert "cret" not in str(refused.value)
