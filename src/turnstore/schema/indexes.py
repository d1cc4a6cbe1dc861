"""The index names a schema's migrations create, read from their text."""

from __future__ import annotations

import re
from collections.abc import Iterable

_CREATE_INDEX = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)


def defined_indexes(migrations: Iterable[str]) -> set[str]:
    """Every index a list of migration scripts creates."""
    return {name for script in migrations for name in _CREATE_INDEX.findall(script)}
