"""The SQL of both contracts, written once: each module one idea, with its statements as data."""
