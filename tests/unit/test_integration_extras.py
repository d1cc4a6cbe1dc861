"""An integration imported without its framework says which extra to install.

Each case runs in a fresh interpreter whose import system refuses the framework (a meta-path
finder that raises as a missing package does), so it holds whether or not the framework is
installed here. The error stays a `ModuleNotFoundError`, and the extra it names exists.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
INTEGRATIONS = Path(__file__).resolve().parents[2] / "src" / "turnstore" / "integrations"


def _guarded(path: Path) -> tuple[str, set[str]] | None:
    """The extra an adapter names in its `with requires_extra(...)` block, and the top-level
    packages imported inside it; None for a module without one."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.With):
            continue
        call = node.items[0].context_expr
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "requires_extra":
            extra = call.args[2]
            assert isinstance(extra, ast.Constant)
            packages = {
                name.partition(".")[0]
                for inner in node.body
                for name in (
                    [inner.module or ""]
                    if isinstance(inner, ast.ImportFrom)
                    else [alias.name for alias in getattr(inner, "names", [])]
                )
                if isinstance(inner, ast.Import | ast.ImportFrom)
            } - {"turnstore"}
            return str(extra.value), packages
    return None


FRAMEWORKS = {
    f"turnstore.integrations.{path.stem}": found
    for path in sorted(INTEGRATIONS.glob("[!_]*.py"))
    if (found := _guarded(path)) is not None
}
"""Each adapter's extra and the top-level packages it imports from its framework, read from
its `requires_extra` block (a new adapter is found, not listed)."""
FRAMEWORK_MODULES = {module: packages for module, (_, packages) in FRAMEWORKS.items()}
"""The top-level packages each integration imports from its framework."""
CASES = [
    (module, package, extra)
    for module, (extra, packages) in FRAMEWORKS.items()
    for package in sorted(packages)
]
"""Each adapter imported with one of its framework's packages missing, and its extra."""

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


def test_every_adapter_is_found_with_its_framework() -> None:
    """The cases below are read from the adapters: the reading sees the three there are."""
    assert FRAMEWORK_MODULES["turnstore.integrations.langgraph"] >= {"langgraph"}
    assert FRAMEWORK_MODULES["turnstore.integrations.adk"] == {"google"}
    assert ("turnstore.integrations.openai_agents", "agents", "openai-agents") in CASES


@pytest.mark.parametrize(("module", "blocked", "extra"), CASES)
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
    for packages in FRAMEWORK_MODULES.values():
        for blocked in packages:
            assert import_without("turnstore, turnstore.integrations", blocked) is None
