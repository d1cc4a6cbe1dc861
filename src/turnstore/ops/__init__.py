"""Internal: the operations of the three contracts, side by side, each written once as steps."""

__all__: list[str] = []
