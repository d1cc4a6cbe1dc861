"""Internal: the two databases: connections, dialects, DDL rendering, migrations, upkeep."""

__all__: list[str] = []
