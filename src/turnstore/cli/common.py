"""Internal: what every command shares: the store URL, opening a store, output modes, confirmation.

Exit codes: 0 success, 1 an error the command reports on one `Error:` line (a missing
session, a refused import, a database failure) and `doctor` finding problems, 2 a usage
error (click's: a bad option or a missing argument, and a destructive command run off a
terminal without `--yes`).
"""

from __future__ import annotations

import gc
import logging
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

import turnstore
from turnstore import BlockingStore, ConfigError, StorageError, TurnstoreError

F = TypeVar("F", bound=Callable[..., Any])

URL_ENV = "TURNSTORE_URL"
"""The environment variable naming the store when a command's URL argument is left out."""

LOG_LEVEL_ENV = "TURNSTORE_LOG_LEVEL"
"""The environment variable that sends the library's log lines (`turnstore.*`) to stderr."""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""The levels `TURNSTORE_LOG_LEVEL` and `serve --log-level` take."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One log line: when, how bad, which part, what."""

_LOG_HANDLER = logging.StreamHandler()
_LOG_HANDLER.setFormatter(logging.Formatter(LOG_FORMAT))


def configure_logging(level: str | None = None) -> None:
    """Print the library's log lines at `level` (else `TURNSTORE_LOG_LEVEL`'s) to stderr.

    Without either the command prints none: a refused call is its one `Error:` line.
    """
    chosen = os.environ.get(LOG_LEVEL_ENV, "").strip().lower() or level
    if chosen is None:
        return
    if chosen not in LOG_LEVELS:
        raise click.UsageError(f"{LOG_LEVEL_ENV} must be one of {', '.join(LOG_LEVELS)}")
    logger = logging.getLogger("turnstore")
    logger.setLevel(chosen.upper())
    _LOG_HANDLER.stream = sys.stderr  # the stderr of now (a test runner swaps it)
    if _LOG_HANDLER not in logger.handlers:
        logger.addHandler(_LOG_HANDLER)


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)} | {
    0x09: "\\t",
    0x0A: "\\n",
    0x0D: "\\r",
}
_CONTROL.update({code: f"\\u{code:04x}" for code in range(0x80, 0xA0)})
_CONTROL.update({code: f"\\u{code:04x}" for code in (0x2028, 0x2029, 0x202E, 0x2066, 0x2069)})
"""Characters a terminal would act on or that reorder a line, as visible escapes."""


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""


def names_store(token: str) -> bool:
    """Whether a command-line token names a store: a URL with a scheme or a SQLite file.

    An existing file counts when it is empty or starts with the SQLite header, so that
    `turnstore import dump.jsonl` with `TURNSTORE_URL` set takes the dump as the file.
    """
    if "://" in token:
        return True
    path = Path(os.path.expanduser(token))
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError:
        return False
    return head in (b"", SQLITE_HEADER)


def _first_positional(command: click.Command, args: list[str]) -> int | None:
    """The index of the first positional argument, skipping options and their values."""
    valued = {
        name
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for name in param.opts
    }
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return index + 1 if index + 1 < len(args) else None
        if arg == "-" or not arg.startswith("-"):
            return index
        # `--owner X` spends the next token; `--owner=X` and `-oFILE` do not.
        index += 2 if arg in valued else 1
    return None


class StoreCommand(click.Command):
    """A command whose first argument is the store URL, which `TURNSTORE_URL` may supply.

    With `TURNSTORE_URL` set, a first positional argument that is neither a URL with a
    scheme nor an existing SQLite (or empty) file is taken as the command's own: the URL
    comes from the environment instead. Option values (`--owner X`) are not positional.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Insert the URL from the environment where the command line leaves it out."""
        from_env = os.environ.get(URL_ENV)
        if from_env and not any(arg in ctx.help_option_names for arg in args):
            first = _first_positional(self, args)
            if first is None:
                args = [from_env, *args]
            elif not names_store(args[first]):
                args = [*args[:first], from_env, *args[first:]]
        return super().parse_args(ctx, args)


URL_ARGUMENT = click.argument("url", metavar="URL")
"""The store URL: a SQLite path, `sqlite:///path` or `postgresql://…` (or `TURNSTORE_URL`)."""


@contextmanager
def open_store(
    url: str, *, read_only: bool = False, create_dirs: bool = False, existing: bool = False
) -> Iterator[BlockingStore]:
    """Open the store at `url`, turning any library error into one clean `Error:` line.

    `existing` refuses a SQLite file that is not there, as a read-only open does: a command
    that changes a store must not create an empty one at a mistyped path.
    """
    with reported(url, read_only=read_only):
        if existing:
            _refuse_absent(url)
        store = turnstore.open_blocking(url, read_only=read_only, create_dirs=create_dirs)
        with store:
            yield store


def _refuse_absent(url: str) -> None:
    """Raise what a read-only open says of a SQLite file that is not there (it creates none)."""
    path = sqlite_path(url)
    if path is not None and _absent(path):
        # The library names the mistake: a mistyped URL, a missing folder or file.
        turnstore.open_blocking(url, read_only=True).close()


def error_line(url: str, error: TurnstoreError, *, read_only: bool = False) -> click.ClickException:
    """A library error as the command's `Error:` line, then its notes (PEP 678), one a line."""
    lines = [f"{display_url(url)}: {_in_cli_words(url, error, read_only)}"]
    for note in getattr(error, "__notes__", ()):
        lines += [f"  {escape_text(line)}" for line in str(note).splitlines()]
    return click.ClickException("\n".join(lines))


def _in_cli_words(url: str, error: TurnstoreError, read_only: bool) -> str:
    """The error's message; a missing SQLite file or folder is said without `open()`'s words."""
    path = sqlite_path(url)
    message = str(error)
    if path is None or not _absent(path):
        return message
    folder = path.parent
    if isinstance(error, ConfigError) and _absent(folder) and str(folder) in message:
        if read_only:
            return f"the folder {folder} does not exist; check the path"
        create = f"mkdir -p {shlex.quote(str(folder))}"
        return f"the folder {folder} does not exist; create it first ({create}) or check the path"
    if isinstance(error, StorageError) and f"no database file at {path}" in message:
        return f"no database file at {path}; check the path"
    return message


def sqlite_path(url: str) -> Path | None:
    """The absolute path a SQLite `url` (a path or `sqlite:///…`) names; None for others."""
    scheme, separator, rest = url.partition("://")
    if separator and (scheme != "sqlite" or not rest.startswith("/")):
        return None
    return Path(os.path.expanduser(rest[1:].partition("?")[0] if separator else url)).absolute()


def _absent(path: Path) -> bool:
    """Whether nothing is at `path` (an unreadable or unnameable path is not absent)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, ValueError):
        return False
    return False


def display_url(url: str) -> str:
    """`url` with any password replaced by `***`, fit for messages."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


JSON_OPTION = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (lists: one object per line) instead of a table.",
)
"""The shared `--json` flag."""

YES_OPTION = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
"""The shared `--yes` flag of destructive commands."""

DRY_RUN_OPTION = click.option(
    "--dry-run", is_flag=True, help="Report what would be done and change nothing."
)
"""The shared `--dry-run` flag of destructive commands."""


def json_bytes(value: Any) -> bytes:
    """Compact JSON of records and plain values, with their stored field names."""
    return msgspec.json.encode(value)


def echo_json(value: Any, *, err: bool = False) -> None:
    """Print `value` as indented JSON (on standard error with `err`)."""
    click.echo(msgspec.json.format(json_bytes(value), indent=2).decode(), err=err)


def echo_ndjson(values: Iterable[Any]) -> None:
    """Print each value as one line of compact JSON."""
    for value in values:
        click.echo(json_bytes(value).decode())


def escape_text(text: str) -> str:
    """`text` with control and bidirectional characters shown as escapes, safe on a terminal."""
    return text.translate(_CONTROL)


PIPED_MOST = 10_000
"""The most characters of one value printed when output goes to a file or a pipe, where a
terminal's cuts would make ids unusable; `--json` holds every value whole."""


def on_terminal(stderr: bool = False) -> bool:
    """Whether the command's output (or its error stream, where progress bars are drawn) is
    a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    return stream.isatty()


def cut(text: str, most: int = 200) -> str:
    """`text` escaped and cut to `most` characters with an ellipsis on a terminal (to
    `PIPED_MOST` off one); full values are in --json."""
    if not on_terminal():
        most = max(most, PIPED_MOST)
    # Cut before escaping too: escaping a 50 MB value only to drop all but a line is slow.
    head = text[: most + 1]
    shown = escape_text(head)
    if len(text) > most or len(shown) > most:
        return shown[: most - 1] + "…"
    return shown


def confirm(action: str, *, yes: bool) -> None:
    """Ask before a destructive action on a terminal; off one, refuse unless `--yes`."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{action}: pass --yes to confirm (no terminal to ask on)")
    click.confirm(f"{action}?", abort=True, err=True)


_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class Duration(click.ParamType[int]):
    """A length of time such as `30d`, `12h`, `90m`, `45s`, `2w` or `1d12h`, in seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Parse `value` into a positive number of seconds."""
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            self.fail(f"{value!r} is not a duration like 30d, 12h, 90m, 45s or 2w", param, ctx)
        seconds = sum(int(number) * _UNIT_SECONDS[unit] for number, unit in parts)
        if seconds <= 0:
            self.fail(f"{value!r} must be longer than nothing", param, ctx)
        return seconds


DURATION = Duration()
"""The `--older-than` type: a duration in seconds."""


def seconds_ago(seconds: int) -> int:
    """The Unix time `seconds` before now."""
    return int(time.time()) - seconds


def command_name() -> str:
    """How to call this command again: `turnstore` when that is on PATH, else its full path."""
    running = Path(sys.argv[0]).resolve()
    if running == Path(__file__).resolve().with_name("__main__.py"):
        return f"{shlex.quote(sys.executable)} -m turnstore.cli"
    found = shutil.which("turnstore")
    if running.name == "turnstore" and (found is None or Path(found).resolve() != running):
        return shlex.quote(str(running))
    return "turnstore"


def again(command: str, url: str, *args: object) -> str:
    """The exact shell command running `command` (`sessions list`) on `url` with `args`.

    The URL is left out when it came from `TURNSTORE_URL`; a password in it is shown as
    `***`, so such a command needs the password put back (or `TURNSTORE_URL` set).
    """
    where = [] if url == os.environ.get(URL_ENV) else [display_url(url)]
    words = [shlex.quote(str(arg)) for arg in (*where, *args)]
    return " ".join([command_name(), command, *words])


@contextmanager
def reported(url: str, *, read_only: bool = False) -> Iterator[None]:
    """Turn a library error raised in the block into one clean `Error:` line (`error_line`)."""
    try:
        yield
    except TurnstoreError as error:
        raise error_line(url, error, read_only=read_only) from None


def now_ms() -> int:
    """The Unix time now, in milliseconds."""
    return time.time_ns() // 1_000_000


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Within: the objects alive on entry left out of the garbage collector's collections.

    A move decodes and frees millions of containers, and each full collection that churn
    sets off walks every object alive, most of them the frameworks' modules imported for
    it: a tenth of a copy's CPU. `gc.freeze` sets them aside until the move ends
    (`gc.unfreeze`, which also releases whatever the process itself had frozen).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
