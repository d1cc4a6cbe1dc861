"""Internal: the transaction scripts: each operation's SQL, written once for every backend."""

__all__: list[str] = []
