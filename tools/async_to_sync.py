#!/usr/bin/env python3
"""Generate the blocking faces (`faces/blocking.py`) from the async ones (`faces/aio.py`).

  tools/async_to_sync.py          write src/turnstore/faces/blocking.py
  tools/async_to_sync.py --check  exit 1 if that file differs from what would be written

The async file is the one source: every rename below is a whole word, applied in order, and
the result is formatted by ruff, so the twin reads like code written by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src/turnstore/faces/aio.py"
TARGET = ROOT / "src/turnstore/faces/blocking.py"

HEADER = '''"""The blocking faces: `BlockingStore` and `BlockingRuntimeStore`, for scripts.

Generated from `turnstore.faces.aio` by `tools/async_to_sync.py`; do not edit by hand.
"""
'''

RENAMES: list[tuple[str, str]] = [
    (r"\basync def __aenter__\b", "def __enter__"),
    (r"\basync def __aexit__\b", "def __exit__"),
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\bAsyncDriver\b", "BlockingDriver"),
    (r"\bturnstore\.faces\.aio_langgraph\b", "turnstore.faces.blocking_langgraph"),
    (r"\bLangGraphTables\b", "BlockingLangGraphTables"),
    (r"\bRuntimeStore\b", "BlockingRuntimeStore"),
    (r"\bStore\b", "BlockingStore"),
    (r"\bdef open\(", "def open_blocking("),
    (r"\bThe async\b", "The blocking"),
    (r"\bthe async\b", "the blocking"),
]


UNSUPPORTED = re.compile(r"\basyncio\b|\basync (with|for)\b")
"""Async code these renames cannot turn into blocking code; the faces must only forward."""


def generate() -> str:
    """The blocking faces' source, formatted."""
    text = SOURCE.read_text()
    unsupported = UNSUPPORTED.search(text)
    if unsupported:
        sys.exit(f"{SOURCE.name} uses `{unsupported.group()}`, which has no blocking rename")
    # Replace the module docstring: the twin says where it comes from.
    docstring_end = text.index('"""', 3) + 3
    text = HEADER + "\n" + text[docstring_end:].lstrip("\n")
    for pattern, replacement in RENAMES:
        text = re.sub(pattern, replacement, text)
    return _ruff(["check", "--fix-only", "--select", "I", "--quiet"], _ruff(["format"], text))


def _ruff(arguments: list[str], text: str) -> str:
    command = [sys.executable, "-m", "ruff", *arguments, "--stdin-filename", str(TARGET), "-"]
    done = subprocess.run(command, input=text, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"ruff {' '.join(arguments)} failed:\n{done.stderr}")
    return done.stdout


def main() -> None:
    """Write the blocking faces, or with `--check` only compare them."""
    generated = generate()
    if "--check" in sys.argv[1:]:
        if not TARGET.exists() or TARGET.read_text() != generated:
            sys.exit(f"{TARGET.relative_to(ROOT)} is stale: run `./dev generate`")
        return
    TARGET.write_text(generated)


if __name__ == "__main__":
    main()
