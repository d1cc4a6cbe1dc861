"""The index names a schema's migrations leave, read from their text."""

from __future__ import annotations

import re
from collections.abc import Iterable

_INDEX_STATEMENT = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<created>\w+)"
    r"|DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(?P<dropped>\w+)"
    r"|ALTER\s+INDEX\s+(?P<renamed>\w+)\s+RENAME\s+TO\s+(?P<to>\w+)",
    re.I,
)


def defined_indexes(migrations: Iterable[str]) -> set[str]:
    """Every index a list of migration scripts creates and does not drop or rename after."""
    names: set[str] = set()
    for script in migrations:
        for statement in _INDEX_STATEMENT.finditer(script):
            if statement["created"]:
                names.add(statement["created"])
            elif statement["dropped"]:
                names.discard(statement["dropped"])
            else:
                names.discard(statement["renamed"])
                names.add(statement["to"])
    return names
