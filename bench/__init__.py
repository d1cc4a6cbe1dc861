"""The agent-loop benchmark: turnstore and the stores people would otherwise use, one process."""
