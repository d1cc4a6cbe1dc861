"""`python -m turnstore.cli`: the `turnstore` command, where its script is not on PATH."""

from turnstore.cli.commands import main

if __name__ == "__main__":
    main(prog_name="turnstore")
