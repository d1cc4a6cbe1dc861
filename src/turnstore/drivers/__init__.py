"""Internal: the step protocol, the drivers that run it on either face, the search indexer."""

__all__: list[str] = []
