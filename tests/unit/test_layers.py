"""The house's layering: records, rules and errors import nothing above them; no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "turnstore"
FLOOR = ("turnstore.records", "turnstore.rules", "turnstore.errors")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from package import submodule` imports the submodule, not the package's body.
                targets = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def test_the_floor_imports_nothing_above_it() -> None:
    """records/, rules/ and errors.py import only each other (and the package's own floor)."""
    for module, targets in _imports().items():
        if module.startswith(FLOOR):
            above = sorted(t for t in targets if not t.startswith(FLOOR))
            assert not above, f"{module} imports {above}"


def test_no_module_imports_itself_back() -> None:
    """The import graph of the package has no cycle."""
    graph = _imports()
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in done:
            return
        assert module not in visiting, " -> ".join([*path, module])
        visiting.add(module)
        for target in sorted(graph.get(module, ())):
            if target != "turnstore":
                visit(target, [*path, module])
        visiting.discard(module)
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
