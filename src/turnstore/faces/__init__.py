"""The store's two faces: `aio` (written by hand) and `blocking` (generated from it)."""
