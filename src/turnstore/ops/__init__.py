"""The operations of both contracts, side by side, each written once as steps."""
