#!/usr/bin/env python3
"""Check that an sdist carries what it takes to test and document turnstore, not only install it.

tools/check_sdist.py dist/turnstore-X.tar.gz
"""

from __future__ import annotations

import sys
import tarfile

REQUIRED = (
    "LICENSE",
    "CHANGELOG.md",
    "README.md",
    "mkdocs.yml",
    "constraints.txt",
    "docs/index.md",
    "tests/fixtures/schema_v2.sqlite3",
)
REQUIRED_FOLDERS = ("src/turnstore/", "tests/unit/", "tests/contract/", "docs/", "examples/")


def main(path: str) -> None:
    """Exit 1 naming every required file or folder the sdist at `path` lacks."""
    with tarfile.open(path) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    missing = [name for name in REQUIRED if name not in names]
    missing += [
        folder for folder in REQUIRED_FOLDERS if not any(n.startswith(folder) for n in names)
    ]
    if missing:
        sys.exit(f"{path} lacks {', '.join(missing)}")
    print(f"{path}: {len(names)} files, tests, docs and changelog included")


if __name__ == "__main__":
    main(sys.argv[1])
