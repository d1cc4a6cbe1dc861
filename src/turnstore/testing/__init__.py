"""Test suites any implementation of a contract turnstore meets can run against itself."""
