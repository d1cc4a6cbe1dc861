"""PostgreSQL schemas the frameworks' own suites reuse: emptied row by row, not created again.

Creating and migrating a schema costs the server about ten times what emptying one does; the
plugins that run LangGraph's and the OpenAI Agents SDK's suites hand a used schema, emptied,
to the next saver or session.
"""

from __future__ import annotations

from typing import Any


def empty(connection: Any, schema: str) -> None:
    """Delete every row of `schema` but its version row (the next open finds it migrated)."""
    tables = [
        table
        for (table,) in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        )
        if table != "turnstore_schema"
    ]
    # The tables that reference sessions go first, then sessions (its rows refer to each other).
    tables.sort(key=lambda table: table == "sessions")
    with connection.transaction():
        for table in tables:
            connection.execute(f'DELETE FROM {schema}."{table}"')
