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
            folder.mkdir(parents=True, exist_ok=True)
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
    _check_folder(path, create_dirs=False)
    if _check_file(path) is None:
        raise StorageError(f"no database file at {path}")
    if not may_access(path, os.R_OK):
        raise ConfigError(f"the database file {path} is not readable by this process")
