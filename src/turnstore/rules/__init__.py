"""Internal: pure rules of the contracts: validation, the event journal, the context rule."""

__all__: list[str] = []
