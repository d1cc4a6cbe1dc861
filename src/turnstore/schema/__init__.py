"""Internal: the schema, written once for every backend: the ordered migrations, their indexes."""

__all__: list[str] = []
