"""Internal: the operations of both contracts, side by side, each written once as steps."""

__all__: list[str] = []
