"""The embedded SQLite backend."""
