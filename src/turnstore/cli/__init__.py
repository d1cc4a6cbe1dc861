"""The `turnstore` command line: a scripted demo and read-only session inspection."""

from turnstore.cli.commands import main

__all__ = ["main"]
