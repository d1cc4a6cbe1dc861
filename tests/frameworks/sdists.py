"""A framework's source distribution, downloaded with pip at test time and unpacked once.

Other projects' test files are never committed here: the tests that run them take them from
the pinned release's sdist, which pip downloads into a cache outside the repository
(`TURNSTORE_SDIST_CACHE`, default `~/.cache/turnstore-test-sdists`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

CACHE = Path(
    os.environ.get("TURNSTORE_SDIST_CACHE", Path.home() / ".cache" / "turnstore-test-sdists")
)


def unpacked(distribution: str) -> Path:
    """The unpacked sdist of the installed version of `distribution` (pip's name)."""
    pinned = version(distribution)
    target = CACHE / f"{distribution}-{pinned}"
    if not (target / ".complete").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        # Test processes running side by side take the same sdist: one downloads it while
        # the others wait, and none replaces a copy another may be running tests from.
        with (CACHE / f"{distribution}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (target / ".complete").exists():
                _download(distribution, pinned, target)
    return next(path for path in target.iterdir() if path.is_dir())


def _download(distribution: str, pinned: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        downloads = Path(scratch) / "downloads"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{distribution}=={pinned}",
                "--dest",
                str(downloads),
            ],
            check=True,
        )
        (archive,) = downloads.glob("*.tar.gz")
        staged = Path(scratch) / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(staged, filter="data")
        (staged / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
