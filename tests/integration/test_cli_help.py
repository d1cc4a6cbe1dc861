"""docs/how-to/cli.md cannot drift from the code: each command's section matches its --help.

For every command and subcommand of the `turnstore` group, the page has a section headed
with its full name whose usage block is the usage `--help` prints, which holds the first
line of its help and names every one of its options; and the page has no section for a
command that does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from test_cli import run, walk

from turnstore.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "cli.md"
HEADING = re.compile(r"^### `(turnstore[^`]*)`$", re.MULTILINE)
COMMANDS = dict(walk(main))
HELP_OPTIONS = {"-h", "--help"}
"""Every command has them; the page documents them once, above the sections."""


def sections() -> dict[str, str]:
    """The page's command sections, by the command named in their heading."""
    text = PAGE.read_text()
    found = list(HEADING.finditer(text))
    ends = [match.start() for match in found[1:]] + [len(text)]
    return {match[1]: text[match.end() : end] for match, end in zip(found, ends, strict=True)}


def help_text(name: str) -> str:
    """What `NAME --help` prints."""
    result = run(*name.split()[1:], "--help")
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_page_has_a_section_for_each_command_and_no_other() -> None:
    """One section per command of the group, none for a command that is gone."""
    assert sorted(sections()) == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_section_shows_the_usage_help_prints(name: str) -> None:
    """The section's usage block is the `Usage:` line of --help."""
    usage = help_text(name).splitlines()[0].removeprefix("Usage: ")
    assert f"```text\n{usage}\n```" in sections()[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_section_holds_the_first_line_of_the_help(name: str) -> None:
    """The first line of the command's help text is in its section, word for word."""
    first = (COMMANDS[name].help or "").strip().splitlines()[0]
    assert first in help_text(name)
    assert first in sections()[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_section_names_every_option(name: str) -> None:
    """Every option name of the command (but -h/--help) appears in its section in backticks."""
    command = COMMANDS[name]
    options = [
        opt
        for param in command.get_params(click.Context(command, info_name=name))
        if isinstance(param, click.Option)
        for opt in param.opts + param.secondary_opts
        if opt not in HELP_OPTIONS
    ]
    section = sections()[name]
    missing = [opt for opt in options if not re.search(rf"`{re.escape(opt)}[ `]", section)]
    assert missing == []


def test_the_page_documents_the_exit_codes_and_help() -> None:
    """The exit-code table and the shared -h/--help are on the page."""
    text = PAGE.read_text()
    for row in ("| 0 | Success.", "| 1 | An error", "| 2 | A usage error"):
        assert row in text
    assert "`-h` / `--help`" in text
