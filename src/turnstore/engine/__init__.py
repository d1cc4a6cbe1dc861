"""Internal: what every engine shares: the engine protocol and the hub of event waiters."""

__all__: list[str] = []
