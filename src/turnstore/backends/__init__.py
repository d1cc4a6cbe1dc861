"""Storage backends; each holds only SQL, connections and transactions."""
