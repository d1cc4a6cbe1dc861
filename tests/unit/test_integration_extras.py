"""An integration imported without its framework says which extra to install.

Each case runs in a fresh interpreter whose import system refuses the framework (a meta-path
finder that raises as a missing package does), so it holds whether or not the framework is
installed here. The error stays a `ModuleNotFoundError`, and the extra it names exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
FRAMEWORK_MODULES = {
    "turnstore.integrations.langgraph": {"langgraph", "langchain_core"},
    "turnstore.integrations.openai_agents": {"agents", "openai"},
    "turnstore.integrations.adk": {"google"},
}
"""The top-level packages each integration imports from its framework."""

PROBE = """
import json, sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name == {blocked!r} or name.startswith({blocked!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
try:
    import {module}
except ImportError as error:
    print(json.dumps([type(error).__name__, str(error), error.name]))
else:
    print(json.dumps(None))
"""


def import_without(module: str, blocked: str) -> list[str] | None:
    """Import `module` in a fresh interpreter where `blocked` is missing: the error, or None."""
    probe = PROBE.format(module=module, blocked=blocked)
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    result: list[str] | None = json.loads(found)
    return result


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("turnstore.integrations.langgraph", "langgraph", "langgraph"),
        ("turnstore.integrations.langgraph", "langchain_core", "langgraph"),
        ("turnstore.integrations.openai_agents", "agents", "openai-agents"),
        ("turnstore.integrations.openai_agents", "openai", "openai-agents"),
        ("turnstore.integrations.adk", "google.adk", "adk"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(
    module: str, blocked: str, extra: str
) -> None:
    """`pip install 'turnstore[<extra>]'` is in the message; the extra is one pyproject has."""
    error = import_without(module, blocked)
    assert error is not None
    kind, message, name = error
    assert kind == "ModuleNotFoundError"
    assert message.startswith(f"{module} needs ")
    assert message.endswith(f"pip install 'turnstore[{extra}]'")
    # Without the framework installed here, the first of its modules imported is the one
    # reported, which need not be the blocked one.
    assert name.partition(".")[0] in FRAMEWORK_MODULES[module]
    assert blocked.partition(".")[0] in FRAMEWORK_MODULES[module]
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert extra in extras


def test_the_library_imports_without_any_framework() -> None:
    """`import turnstore` and the integrations package need no framework."""
    for blocked in ("langgraph", "agents", "google.adk"):
        assert import_without("turnstore, turnstore.integrations", blocked) is None
