"""Internal: storage backends; each holds only SQL, connections and transactions."""

__all__: list[str] = []
