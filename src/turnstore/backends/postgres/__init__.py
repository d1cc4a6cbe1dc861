"""The PostgreSQL backend, for many writers on many hosts (`pip install turnstore[postgres]`)."""
