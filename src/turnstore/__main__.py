"""`python -m turnstore`: the `turnstore` command."""

from turnstore.cli import main

main(prog_name="turnstore")
