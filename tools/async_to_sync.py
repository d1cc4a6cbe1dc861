#!/usr/bin/env python3
"""Generate each blocking face (`faces/blocking_X.py`) from its async source (`faces/aio_X.py`).

  tools/async_to_sync.py          write every twin (and remove a blocking_X with no aio_X)
  tools/async_to_sync.py --check  exit 1 naming each twin that differs, is missing or is orphaned

Each async file is parsed and rewritten on its syntax tree (psycopg's tool is the model):
`async def` becomes `def`, `await x` becomes `x`, `async with` / `async for` (comprehensions
too) become `with` / `for`, and names are renamed whole: every class defined at module level
in an aio file gets a `Blocking` prefix in every twin, `open` becomes `open_blocking`,
`AsyncDriver` becomes `BlockingDriver`, and imports of `turnstore.faces.aio_X` name
`turnstore.faces.blocking_X`. The tree is unparsed (comments do not survive: the twin's
docstrings say what it needs) and formatted by ruff, so it reads like code written by hand.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACES = ROOT / "src/turnstore/faces"
PACKAGE = "turnstore.faces"

NAMES = {
    "AsyncDriver": "BlockingDriver",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "open": "open_blocking",
}
"""Renames of every twin; each aio file's module-level classes are added with `Blocking`."""

UNSUPPORTED = frozenset({"asyncio", "anyio"})
"""Modules whose calls have no blocking equivalent: a face only forwards to operations."""

HEADER = "{summary}\n\nGenerated from `{source}` by `tools/async_to_sync.py`; do not edit.\n"


def twin_path(source: Path) -> Path:
    """The generated twin of `faces/aio_X.py`: `faces/blocking_X.py`."""
    return source.with_name("blocking_" + source.name.removeprefix("aio_"))


def sources() -> list[Path]:
    """Every async face source, sorted."""
    return sorted(FACES.glob("aio_*.py"))


def renames(paths: list[Path]) -> dict[str, str]:
    """`NAMES` plus a `Blocking` name for every module-level class of the async faces."""
    names = dict(NAMES)
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                names[node.name] = "Blocking" + node.name
    return names


def module_twin(module: str) -> str:
    """`turnstore.faces.aio_X` -> `turnstore.faces.blocking_X`; other modules unchanged."""
    prefix = PACKAGE + ".aio_"
    if not module.startswith(prefix):
        return module
    return PACKAGE + ".blocking_" + module.removeprefix(prefix)


class AsyncToBlocking(ast.NodeTransformer):
    """Rewrite one async face's tree into its blocking twin."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.FunctionDef:
        plain = ast.FunctionDef(**{field: getattr(node, field) for field in node._fields})
        return self.visit_FunctionDef(ast.copy_location(plain, node))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        self._rewrite_docstring(node)
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self.names.get(node.name, node.name)
        self._rewrite_docstring(node)
        self.generic_visit(node)
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        plain = ast.With(items=node.items, body=node.body, type_comment=node.type_comment)
        return self.generic_visit(ast.copy_location(plain, node))

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        fields = {field: getattr(node, field) for field in node._fields}
        return self.generic_visit(ast.copy_location(ast.For(**fields), node))

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        node.is_async = 0
        return self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        # Only the special methods: `os.open` or a record's field keeps its name.
        if node.attr.startswith("__a"):
            node.attr = self.names.get(node.attr, node.attr)
        return self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> ast.Import:
        for alias in node.names:
            _refuse_unsupported(alias.name)
            alias.name = module_twin(alias.name)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        _refuse_unsupported(node.module or "")
        node.module = module_twin(node.module or "")
        for alias in node.names:
            alias.name = self.names.get(alias.name, alias.name)
        return node

    def _rewrite_docstring(self, node: ast.FunctionDef | ast.ClassDef | ast.Module) -> None:
        docstring = ast.get_docstring(node, clean=False)
        if docstring is not None:
            expression = node.body[0]
            assert isinstance(expression, ast.Expr)
            expression.value = ast.Constant(self.prose(docstring))

    def prose(self, text: str) -> str:
        """A docstring's words for the twin: "async" says "blocking", quoted names renamed."""
        text = re.sub(r"`([\w.]+)`", lambda match: f"`{self._quoted(match.group(1))}`", text)
        text = re.sub(r"\basync\b", "blocking", text)
        return re.sub(r"\bAsync\b", "Blocking", text)

    def _quoted(self, name: str) -> str:
        head, dot, last = name.rpartition(".")
        return module_twin(name) if head.startswith(PACKAGE) else head + dot + self._rename(last)

    def _rename(self, name: str) -> str:
        return self.names.get(name, name)


def _refuse_unsupported(module: str) -> None:
    if module.split(".")[0] in UNSUPPORTED:
        sys.exit(f"an async face imports `{module}`, which has no blocking rename")


def generate(source: Path, names: dict[str, str] | None = None) -> str:
    """The blocking twin of one async face source, formatted."""
    tree = ast.parse(source.read_text(), filename=str(source))
    transformer = AsyncToBlocking(names if names is not None else renames(sources()))
    summary = (ast.get_docstring(tree) or "").split("\n\n")[0]
    module = f"{PACKAGE}.{source.stem}"
    header = HEADER.format(summary=transformer.prose(summary), source=module)
    if ast.get_docstring(tree) is not None:
        tree.body = tree.body[1:]
    tree = ast.fix_missing_locations(transformer.visit(tree))
    text = f'"""{header}"""\n\n' + ast.unparse(tree) + "\n"
    target = twin_path(source)
    text = _ruff(["format"], text, target)
    return _ruff(["check", "--fix-only", "--select", "I", "--quiet"], text, target)


def _ruff(arguments: list[str], text: str, target: Path) -> str:
    config = ["--config", str(ROOT / "pyproject.toml")]  # also for a twin outside the tree
    command = [sys.executable, "-m", "ruff", *arguments, *config, "--stdin-filename", str(target)]
    done = subprocess.run([*command, "-"], input=text, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"ruff {' '.join(arguments)} failed on {target.name}:\n{done.stderr}")
    return done.stdout


def stale() -> list[str]:
    """Why each twin is not what the generator writes: stale, missing, or with no source."""
    paths = sources()
    names = renames(paths)
    problems = []
    for source in paths:
        target = twin_path(source)
        if not target.exists():
            problems.append(f"{_shown(target)} is missing")
        elif target.read_text() != generate(source, names):
            problems.append(f"{_shown(target)} is stale")
    twins = {twin_path(source) for source in paths}
    for orphan in sorted(set(FACES.glob("blocking_*.py")) - twins):
        problems.append(f"{_shown(orphan)} has no {orphan.name.replace('blocking_', 'aio_', 1)}")
    return problems


def write() -> None:
    """Write every twin and remove each blocking file whose async source is gone."""
    paths = sources()
    names = renames(paths)
    for source in paths:
        twin_path(source).write_text(generate(source, names))
    for orphan in set(FACES.glob("blocking_*.py")) - {twin_path(source) for source in paths}:
        orphan.unlink()


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> None:
    """Write the blocking faces, or with `--check` only compare them."""
    if "--check" not in sys.argv[1:]:
        write()
        return
    problems = stale()
    if problems:
        sys.exit("\n".join(f"{problem}: run `./dev generate`" for problem in problems))


if __name__ == "__main__":
    main()
