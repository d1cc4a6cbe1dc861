"""Running a program as a user would: in its own folder, with the installed turnstore."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_program(program: Path, *arguments: str, env: dict[str, str], times: int = 2) -> list[str]:
    """Run `program` `times` times in its folder; return the outputs, or fail with them."""
    outputs = []
    for attempt in range(1, times + 1):
        done = subprocess.run(
            [sys.executable, program.name, *arguments],
            cwd=program.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"run {attempt} of {program.name}:\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    return outputs
