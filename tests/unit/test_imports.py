"""What importing the library costs: the command's dependencies stay out of `import turnstore`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LIBRARY = ["turnstore", "turnstore.records", "turnstore.events", "turnstore.errors"]


@pytest.mark.parametrize("module", LIBRARY)
def test_the_library_imports_neither_click_nor_rich(module: str) -> None:
    """click and rich are the `turnstore` command's; importing the library loads neither."""
    probe = (
        f"import json, sys; import {module}; "
        "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules})))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(found))
    assert module.partition(".")[0] in loaded
    assert not loaded & {"click", "rich"}, f"`import {module}` loads {loaded & {'click', 'rich'}}"


def test_the_command_does_load_them() -> None:
    """The probe sees what it looks for: the command's module does import click and rich."""
    probe = (
        "import sys, turnstore.cli.commands; print('click' in sys.modules, 'rich' in sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.split() == ["True", "True"]
