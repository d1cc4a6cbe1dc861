"""The maps of the code cannot drift from it (sqlite-utils' test_docs.py is the model).

- docs/architecture.md's code tree names every package and module under src/turnstore/, and
  nothing that is gone;
- every exception class of `turnstore.errors` is exported and on the errors reference page;
- every name the public namespaces export is on a reference page, in code or rendered by a
  `::: target` directive.

Each detector is also run where it must find something, so a check cannot pass by reading
nothing.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import turnstore
import turnstore.errors
import turnstore.events
import turnstore.records

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "turnstore"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
REFERENCE = ROOT / "docs" / "reference"
TREE_HEADING = "How the code is laid out"
EXCLUDED = ("server/static/",)
"""Folders of the package that hold no Python (the web viewer's files)."""

# --- (a) the code tree of docs/architecture.md ----------------------------------------------

_PATH = r"\w+(?:/\w+)*(?:/|\.py)"
_ENTRY = re.compile(rf"(?P<indent> +)(?P<paths>{_PATH}(?:, {_PATH})*)(?: |$)")
"""An entry line: its indentation, then one or more paths separated by `, `."""


def code_modules(source: Path = SOURCE) -> set[str]:
    """Every package (`name/`) and module (`name.py`) under `source`, relative to it."""
    found: set[str] = set()
    for path in source.rglob("*.py"):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts or relative.as_posix().startswith(EXCLUDED):
            continue
        if path.name != "__init__.py":
            found.add(relative.as_posix())
        elif relative.parent != Path():
            # A package is named by its folder; its `__init__.py` is not named on its own.
            found.add(f"{relative.parent.as_posix()}/")
    return found


def tree_block(markdown: str) -> list[str]:
    """The lines of the first fenced block after the heading `TREE_HEADING`."""
    heading = re.search(rf"^#+ {re.escape(TREE_HEADING)}\s*$", markdown, re.MULTILINE)
    assert heading, f"no heading {TREE_HEADING!r}"
    block = re.search(r"^```[^\n]*\n(.*?)^```", markdown[heading.end() :], re.S | re.M)
    assert block, f"no fenced block under {TREE_HEADING!r}"
    return block.group(1).splitlines()


def tree_paths(lines: list[str]) -> set[str]:
    """The paths a code tree names, relative to its first line `src/turnstore/`.

    An entry line is indented, then names one or more paths separated by `, ` (a package
    ends in `/`, a module in `.py`), then a space before its description. It is under the
    nearest entry line above it that is less indented, which must name packages; a line
    indented more than two spaces deeper than the entry line above it, or not starting
    with a path, continues that line's description. Every package on a named path is named.
    """
    assert lines, "the code tree is empty"
    assert lines[0] == "src/turnstore/", f"the code tree starts {lines[0]!r}"
    named: set[str] = set()
    parents: list[tuple[int, list[str]]] = [(0, [""])]
    previous = 0
    for number, line in enumerate(lines[1:], start=2):
        entry = _ENTRY.match(line)
        if entry is None or len(entry["indent"]) > previous + 2:
            continue  # a description's next line
        indent = len(entry["indent"])
        while parents[-1][0] >= indent:
            parents.pop()
        assert parents, f"tree line {number} is not indented: {line!r}"
        if indent > previous and parents[-1][0] != previous:
            raise AssertionError(f"tree line {number} is indented under a module: {line!r}")
        paths = [
            f"{parent}{path}" for parent in parents[-1][1] for path in entry["paths"].split(", ")
        ]
        named.update(paths)
        packages = [path for path in paths if path.endswith("/")]
        if packages:
            parents.append((indent, packages))
        previous = indent
    for path in list(named):
        # `backends/urls.py` names `backends/` too.
        parts = path.rstrip("/").split("/")
        named.update("/".join(parts[:end]) + "/" for end in range(1, len(parts)))
    return named


def tree_drift(modules: set[str], named: set[str], source: Path = SOURCE) -> list[str]:
    """What the tree misses (`missing x`) and what it names that is gone (`gone x`)."""
    missing = [f"missing {path}" for path in sorted(modules - named)]
    gone = [f"gone {path}" for path in sorted(named) if not (source / path).exists()]
    return missing + gone


SAMPLE_TREE = """\
src/turnstore/
  errors.py            the error hierarchy
  scripts/             the transaction scripts, one table or job each:
    checkpoints.py       save, load, fork; a description may run on
                         to lines indented to it (queue.py here is prose)
    watch.py, queue.py   several modules of one description
  backends/sqlite/, backends/postgres/  the same modules on both:
    schema.py            the shared DDL in the dialect's words
  backends/urls.py     which engine a URL names
"""
"""The tree format `tree_paths` reads, as the liveness test holds it."""


def test_the_tree_reader_reads_its_format() -> None:
    """Entries nest by indentation, share a parent across `, `, and skip prose lines."""
    assert tree_paths(SAMPLE_TREE.splitlines()) == {
        "errors.py",
        "scripts/",
        "scripts/checkpoints.py",
        "scripts/watch.py",
        "scripts/queue.py",
        "backends/",
        "backends/sqlite/",
        "backends/postgres/",
        "backends/sqlite/schema.py",
        "backends/postgres/schema.py",
        "backends/urls.py",
    }


def test_the_tree_check_finds_what_is_missing_and_gone() -> None:
    """The check fails a tree that leaves a module out or names one that is not there."""
    named = tree_paths([*SAMPLE_TREE.splitlines(), "  nowhere.py           not in the package"])
    drift = tree_drift({"errors.py", "scripts/", "scripts/search.py"}, named)
    assert "missing scripts/search.py" in drift
    assert "gone nowhere.py" in drift
    assert not [line for line in drift if "errors.py" in line or "scripts/queue.py" in line]
    assert tree_drift({"errors.py"}, {"errors.py"}) == []


def test_the_detectors_see_the_package_and_the_tree() -> None:
    """Modules and packages are found (no `__init__`, no static files); the tree is read."""
    modules = code_modules()
    assert {"errors.py", "faces/", "faces/aio_store.py", "schema/ddl.py"} <= modules
    assert not any(path.endswith("__init__.py") or "static" in path for path in modules)
    named = tree_paths(tree_block(ARCHITECTURE.read_text()))
    assert {"errors.py", "faces/aio_store.py"} <= named


def test_the_architecture_tree_names_every_module() -> None:
    """docs/architecture.md's code tree names each package and module, and none that is gone."""
    named = tree_paths(tree_block(ARCHITECTURE.read_text()))
    assert tree_drift(code_modules(), named) == []


# --- (b), (c) the reference pages -----------------------------------------------------------

NAMESPACES = (turnstore, turnstore.records, turnstore.events, turnstore.errors)
"""The public namespaces whose exports the reference pages cover."""


@dataclass
class Page:
    """A reference page: its code spans, and the names its `:::` directives render."""

    code: str
    rendered: set[tuple[str, str]] = field(default_factory=set)
    """(module, name) pairs, as mkdocstrings renders them."""

    def names(self, name: str, value: object) -> bool:
        """Whether the page names `name` in code, or renders the object `value` as `name`."""
        if re.search(rf"(?<!\w){re.escape(name)}\b", self.code):
            return True
        return any(
            rendered == name and getattr(importlib.import_module(module), name, None) is value
            for module, rendered in self.rendered
        )


_DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*(?:\n|$)((?:[ \t]+\S.*(?:\n|$)|[ \t]*\n)*)", re.M)
_CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.MULTILINE | re.DOTALL)


def read_page(text: str) -> Page:
    """A page's code spans (fenced and inline) and what its directives render."""
    page = Page(code="\n".join(match.group(0) for match in _CODE.finditer(text)))
    for directive in _DIRECTIVE.finditer(text):
        target, options = directive.group(1), directive.group(2)
        module, name = _resolve(target)
        if name is not None:
            page.rendered.add((module, name))
            continue
        listed = _members(options)
        if listed is not None:
            page.rendered.update((module, member) for member in listed)
            continue
        undocumented = re.search(r"^\s+show_if_no_docstring:\s*true\s*$", options, re.MULTILINE)
        page.rendered.update(
            (module, defined)
            for defined, documented in _definitions(module).items()
            if not defined.startswith("_") and (documented or undocumented)
        )
    return page


def _members(options: str) -> set[str] | None:
    """The names a directive's `members` option lists (flow or block YAML); None: not given."""
    given = re.search(r"^([ \t]+)members:[ \t]*(.*)$", options, re.MULTILINE)
    if given is None:
        return None
    value = given.group(2).strip()
    if value in ("false", "no", "[]"):
        return set()
    if value.startswith("["):
        return {word.strip() for word in value.strip("[]").split(",")}
    if value:
        raise AssertionError(f"members: {value} is not read here; list the members")
    block = re.match(r"(?:[ \t]+- *(\w+)[ \t]*\n?)*", options[given.end() + 1 :])
    assert block is not None
    return set(re.findall(r"- *(\w+)", block.group(0)))


def _resolve(target: str) -> tuple[str, str | None]:
    """A directive's module, and the one object it renders (None: the whole module)."""
    try:
        importlib.import_module(target)
    except ImportError:
        module, _, name = target.rpartition(".")
        assert hasattr(importlib.import_module(module), name), f"::: {target} renders nothing"
        return module, name
    return target, None


def _definitions(module: str) -> dict[str, bool]:
    """The names a module defines at its top level, each with whether it has a docstring."""
    path = inspect.getsourcefile(importlib.import_module(module))
    assert path is not None
    body = ast.parse(Path(path).read_text()).body
    found: dict[str, bool] = {}
    for index, node in enumerate(body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = ast.get_docstring(node) is not None
            continue
        if isinstance(node, ast.Assign):
            targets = [target for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target]
        else:
            continue
        after = body[index + 1] if index + 1 < len(body) else None
        # An attribute's docstring is the string right below it, as griffe reads it.
        documented = (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        )
        found.update((target.id, documented) for target in targets)
    return found


def reference_pages() -> dict[str, Page]:
    """Every page of docs/reference/, read."""
    return {path.name: read_page(path.read_text()) for path in sorted(REFERENCE.glob("*.md"))}


def error_classes() -> set[str]:
    """Every exception class `turnstore.errors` defines."""
    return {
        name
        for name, value in vars(turnstore.errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == turnstore.errors.__name__
    }


def unnamed(namespace: ModuleType, pages: list[Page]) -> list[str]:
    """The names `namespace.__all__` exports that no page names or renders."""
    return [
        f"{namespace.__name__}.{name}"
        for name in namespace.__all__
        if not any(page.names(name, getattr(namespace, name)) for page in pages)
    ]


def test_the_page_reader_sees_code_and_directives() -> None:
    """Names in code count, prose does not; a directive renders what it targets."""
    page = read_page(
        "Call `store.load` before\nsave, then:\n\n```python\nfrom x import Checkpoint\n```\n\n"
        "::: turnstore.errors\n    options:\n      show_root_heading: false\n\n"
        "::: turnstore.faces.aio_store.open\n"
    )
    assert page.names("load", None)
    assert page.names("Checkpoint", None)
    assert not page.names("save", None)
    assert page.names("SearchIndexNotBuilt", turnstore.errors.SearchIndexNotBuilt)
    assert page.names("open", turnstore.open)
    assert not page.names("open_blocking", turnstore.open_blocking)
    listed = read_page("::: turnstore.records.context\n    options:\n      members: [freeze]\n")
    assert listed.rendered == {("turnstore.records.context", "freeze")}
    block = read_page(
        "::: turnstore.records.context\n    options:\n      members:\n        - freeze\n"
        "        - thaw\n      show_root_heading: false\n"
    )
    assert block.rendered == {("turnstore.records.context", m) for m in ("freeze", "thaw")}


def test_the_detectors_see_the_errors_and_the_pages() -> None:
    """The errors and the reference pages are read: known names are found, missing ones not."""
    assert {"TurnstoreError", "SearchIndexNotBuilt", "StoreClosed"} <= error_classes()
    pages = reference_pages()
    assert {"errors.md", "records.md", "stores.md"} <= set(pages)
    assert pages["stores.md"].names("Store", turnstore.Store)
    assert pages["errors.md"].names("SchemaError", turnstore.errors.SchemaError)
    assert unnamed(turnstore.errors, [pages["stores.md"]])  # no error is on the stores page


def test_every_error_class_is_exported_and_documented() -> None:
    """Each exception class of `turnstore.errors` is in its `__all__` and on errors.md."""
    classes = error_classes()
    assert sorted(classes - set(turnstore.errors.__all__)) == []
    page = reference_pages()["errors.md"]
    assert (
        sorted(name for name in classes if not page.names(name, getattr(turnstore.errors, name)))
        == []
    )


def test_every_public_name_is_on_a_reference_page() -> None:
    """What `turnstore`, `records`, `events` and `errors` export is on a reference page."""
    pages = list(reference_pages().values())
    assert [name for namespace in NAMESPACES for name in unnamed(namespace, pages)] == []
