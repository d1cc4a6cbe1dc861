"""The README's Python examples run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
RUNNABLE = [block for block in BLOCKS if "db.internal" not in block]


def _program(block: str) -> str:
    if "async with" in block or "await " in block:
        # Top-level `async with` is how the README shows it; run it inside a coroutine.
        body = textwrap.indent(block, "    ")
        return (
            f"import asyncio\nimport turnstore\n\nasync def main():\n{body}\nasyncio.run(main())\n"
        )
    return f"import turnstore\n{block}"


def test_the_readme_has_examples() -> None:
    """The README shows at least the checkpoint and the runtime examples."""
    assert len(RUNNABLE) >= 2


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_a_readme_example_runs(block: str, tmp_path, monkeypatch) -> None:
    """Each runnable README example executes without error in a fresh folder."""
    monkeypatch.chdir(tmp_path)
    exec(compile(_program(block), "README.md", "exec"), {})
