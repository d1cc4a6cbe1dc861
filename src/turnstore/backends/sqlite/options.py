"""Where the database file lives: path checks, file creation and the busy timeout."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from turnstore.errors import ConfigError, StorageError

BUSY_TIMEOUT_S = 5.0
"""How long a connection waits for another process's lock before failing."""
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


def may_access(path: Path, mode: int) -> bool:
    """Whether this process may access `path` in `mode` (effective ids where supported)."""
    return os.access(path, mode, effective_ids=_EFFECTIVE_IDS)


def _stat(path: Path) -> os.stat_result | None:
    """The status of `path`, None when it does not exist; unreachable is a ConfigError."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise ConfigError(f"cannot reach {path}: permission denied") from None


def check_name(path: str | Path) -> None:
    """Refuse a path SQLite cannot name, before anything is created: NUL, or not UTF-8."""
    text = os.fspath(path)
    if "\0" in text:
        raise ConfigError(f"the database path {text!r} contains a NUL character")
    try:
        # SQLite takes file names as UTF-8; a lone surrogate (an undecodable byte the file
        # system handed back, or a stray escape) has no UTF-8 spelling.
        text.encode()
    except UnicodeEncodeError as error:
        raise ConfigError(
            f"the database path {text!r} is not valid Unicode text (a lone surrogate at "
            f"position {error.start}); SQLite needs a file name it can spell in UTF-8"
        ) from None


def _make_folders(folder: Path) -> None:
    """Create `folder` and its missing parents, each readable by its owner only.

    0700 whatever the umask, like the database file's 0600: what the store creates is private.
    A folder another process creates meanwhile is left as that process made it.
    """
    missing: list[Path] = []
    while _stat(folder) is None:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
        except FileExistsError:
            continue
        # mkdir's mode passes through the umask; chmod does not.
        os.chmod(made, 0o700)


def _check_folder(path: Path, *, create_dirs: bool) -> None:
    """Refuse a database whose folder is missing, unless told to create it."""
    folder = path.parent
    found = _stat(folder)
    if found is None:
        if not create_dirs:
            # A misspelt folder must not become a new, empty store beside the real one.
            raise ConfigError(
                f"the folder {folder} does not exist; create it, or pass create_dirs=True "
                "to open() to have it created"
            )
        try:
            _make_folders(folder)
        except OSError as error:
            raise ConfigError(
                f"cannot create the folder {folder}: {error.strerror or error}"
            ) from None
    elif not stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{folder} is not a folder, so it cannot hold the database {path.name}")


def _check_file(path: Path) -> os.stat_result | None:
    """The status of the database file, None when missing; a folder there is a ConfigError."""
    found = _stat(path)
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{path} is a folder; name a database file inside it")
    return found


def prepare_path(path: Path, *, create_dirs: bool = False) -> None:
    """Check the folder, and create the database file if missing, readable by its owner only.

    A file or folder this process cannot write is a `ConfigError` that says to open the store
    read-only: SQLite writes the file and keeps its `-wal` and `-shm` files beside it.
    """
    check_name(path)
    _check_folder(path, create_dirs=create_dirs)
    found = _check_file(path)
    if found is not None and not may_access(path, os.R_OK):
        raise ConfigError(f"the database file {path} is not readable by this process")
    if found is not None and not may_access(path, os.W_OK):
        raise ConfigError(
            f"the database file {path} is not writable by this process; "
            "open it with read_only=True to read it"
        )
    if not may_access(path.parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the folder {path.parent} is not writable by this process, and a writer keeps "
            "its -wal and -shm files beside the database; open it with read_only=True to read it"
        )
    try:
        if found is None:
            # Never open and close an existing database file here: closing any descriptor of
            # a file drops every POSIX lock this process holds on it, including the locks of
            # other SQLite connections (another store) in this process, which can corrupt the
            # database. Only a file that did not exist, which nobody can have locked, is
            # created and closed.
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        else:
            mode = stat.S_IMODE(found.st_mode)
            # chmod opens nothing, so it drops no lock; it tightens a file made elsewhere, and
            # only a file this process owns (another owner's choice of mode is theirs).
            if mode & 0o077 and found.st_uid == os.geteuid():
                os.chmod(path, mode & 0o700)
    except OSError as error:
        raise StorageError(
            f"cannot create the database file {path}: {error.strerror or error}"
        ) from None


def check_readable(path: Path) -> None:
    """Check that `path` is a database file this process can read, creating nothing."""
    check_name(path)
    _check_folder(path, create_dirs=False)
    if _check_file(path) is None:
        raise StorageError(f"no database file at {path}")
    if not may_access(path, os.R_OK):
        raise ConfigError(f"the database file {path} is not readable by this process")
