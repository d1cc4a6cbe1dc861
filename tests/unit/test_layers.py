"""The house's layering: records, rules and errors import nothing above them; no cycles."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

from turnstore.records.kinds import SessionKind, kinds

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


# --- boundaries -----------------------------------------------------------------------------

KINDS = "turnstore.records.kinds"
"""The registry of kinds of session; each kind is one module of it."""
KIND_MODULES = tuple(
    sorted(f"{KINDS}.{path.stem}" for path in (PACKAGE / "records" / "kinds").glob("[!_]*.py"))
)
"""Each kind's module, where its name and stored names are declared (found, not listed)."""

PUBLIC = (
    "turnstore",
    "turnstore.records",
    "turnstore.events",
    "turnstore.errors",
    "turnstore.transfer",
    "turnstore.seam",
    "turnstore.records.langgraph",
    "turnstore.records.memory",
    KINDS,
    *KIND_MODULES,
)
"""The namespaces the parts built on the store (cli/, server/, integrations/) may import."""

BUILT_ON = {
    "turnstore.cli": ("turnstore.cli", "turnstore.server"),  # `turnstore serve`, imported lazily
    "turnstore.server": ("turnstore.server",),
    "turnstore.integrations": ("turnstore.integrations",),
}
"""Each part built on the store, and what beyond `PUBLIC` it may import: its own modules."""

ENTRY_POINTS = (
    "turnstore.__main__",
    "turnstore.cli",
    "turnstore.cli.__main__",
    "turnstore.server",
    "turnstore.integrations",
    "turnstore.testing",
    "turnstore.testing.langgraph_store",
)
"""Public modules besides `PUBLIC`: `python -m` targets and the packages of parts built on top."""

INTEGRATIONS = tuple(sorted(path.stem for path in (PACKAGE / "integrations").glob("[!_]*.py")))
"""The framework adapters, each a public module of `turnstore.integrations` (found, not
listed: a new integration adds its files and edits no list)."""

ALLOWED_PRIVATE_ATTRIBUTES = {
    ("turnstore.integrations.adk", "_storage_update_marker"): (
        "ADK's Session keeps its optimistic-concurrency marker there; ADK's own session services"
        " set it the same way, and there is no public door"
    ),
}
"""Private attributes of other packages' objects a module may reach, each with its reason."""

NAMED_TUPLE_API = frozenset({"_fields", "_make", "_replace", "_asdict", "_field_defaults"})
"""A named tuple's public methods, underscored only so they cannot clash with a field."""

SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|WITH)\s+\S")
"""A string that starts like a SQL statement (the keywords as statements write them)."""


@functools.cache
def _trees() -> dict[str, ast.Module]:
    return {_module(path): ast.parse(path.read_text()) for path in PACKAGE.rglob("*.py")}


def _breaches(found: list[str]) -> str:
    """What is found, one per line."""
    return "\n".join(sorted(found))


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.Module) -> list[str]:
    """Every string constant of a module but its docstrings, and each f-string's text parts."""
    skip = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


SQL_HOMES = ("turnstore.engine", "turnstore.scripts", "turnstore.schema", "turnstore.backends")
"""Where SQL lives: the engine protocol's statement builders, the transaction scripts and the
schema (written once), and each database's own statements in its backend."""


FOREIGN_SQL = {
    "turnstore.integrations._langgraph_tables": (
        "reads LangGraph's own savers' tables (SqliteSaver's, PostgresSaver's): their threads"
        " and task paths, which no saver API gives; never turnstore's tables"
    ),
    "turnstore.integrations._agents_tables": (
        "reads the OpenAI Agents SDK's own session tables (SQLiteSession's, SQLAlchemySession's):"
        " their sessions, which the Session protocol cannot list, read-only; never turnstore's"
    ),
    "turnstore.integrations._memory_tables": (
        "reads LangGraph's SqliteStore and PostgresStore tables and ADK's SqliteMemoryService"
        " table: every item and memory, which their APIs cannot list whole, read-only"
    ),
    "turnstore.integrations._adk_tables": (
        "reads Google ADK's DatabaseSessionService tables: their apps and users, which ADK's API"
        " cannot list, and their size on PostgreSQL, read-only; never turnstore's"
    ),
}
"""Modules that hold SQL of another program's database, each with its reason."""


def _sql_outside_its_homes() -> list[str]:
    return [
        f"SQL in {module}: {text.strip()[:60]!r}"
        for module, tree in _trees().items()
        if not module.startswith(SQL_HOMES) and module not in FOREIGN_SQL
        for text in _strings(tree)
        if SQL.match(text)
    ]


def test_only_the_sql_homes_hold_sql() -> None:
    """No string outside engine/, scripts/, schema/ and backends/ reads like a SQL statement."""
    # The detector is live: it does see the statements where they belong.
    sessions = _strings(_trees()["turnstore.scripts.sessions"])
    assert any(SQL.match(text) for text in sessions)
    breaches = _breaches(_sql_outside_its_homes())
    assert not breaches, breaches


def _crossings(graph: dict[str, set[str]], low: str, high: str) -> list[str]:
    """Imports between two packages that must not know each other, either way."""
    return [
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if (_within(module, low) and _within(target, high))
        or (_within(module, high) and _within(target, low))
    ]


LAYERS = (
    ("turnstore.errors", "turnstore.records", "turnstore.rules", "turnstore.events"),
    ("turnstore.telemetry",),
    ("turnstore.engine", "turnstore.schema"),
    ("turnstore.scripts", "turnstore.backends"),
    ("turnstore.drivers",),
    ("turnstore.ops",),
    ("turnstore.faces",),
    ("turnstore", "turnstore.attachments", "turnstore.transfer", "turnstore.seam"),
    ("turnstore.integrations", "turnstore.cli", "turnstore.server", "turnstore.__main__"),
    ("turnstore.testing",),  # suites a store of any origin runs; nothing of turnstore's in them
)
"""The house from the floor up (docs/architecture.md): a module imports its own layer and the
layers below it, never one above; every package of turnstore has a layer."""


def _layer(module: str) -> int | None:
    found = [
        (len(home), index)
        for index, homes in enumerate(LAYERS)
        for home in homes
        if _within(module, home) and (home != "turnstore" or module == "turnstore")
    ]
    return max(found)[1] if found else None


def test_each_layer_imports_only_its_own_and_those_below() -> None:
    """No arrow points up the house, and no module stands outside it."""
    graph = _imports()
    layers = {module: _layer(module) for module in graph}
    unplaced = [f"{module} has no layer" for module, layer in layers.items() if layer is None]
    upward = [
        f"{module} (layer {layers[module]}) imports {target} (layer {layers[target]})"
        for module, targets in graph.items()
        for target in targets
        if (layers[module] or 0) < (layers.get(target) or 0)
    ]
    assert _layer("turnstore.scripts.sessions") == 3  # the detector sees the layers
    breaches = _breaches(unplaced + upward)
    assert not breaches, breaches


def test_scripts_and_backends_do_not_import_each_other() -> None:
    """The transaction scripts are written once for every database, and a database knows no
    script: both stand on the engine protocol (`engine/`), so a third database adds files."""
    breaches = _breaches(_crossings(_imports(), "turnstore.scripts", "turnstore.backends"))
    assert not breaches, breaches


def _imported(module: str, tree: ast.Module, modules: set[str]) -> list[tuple[str, str]]:
    """(module imported, name taken from it) for every turnstore import, lazy ones too."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((sub, "") if sub in modules else (node.module, alias.name))
    return [(target, name) for target, name in found if target.split(".")[0] == "turnstore"]


CLI_INTEGRATIONS = tuple(f"turnstore.integrations.{name}" for name in INTEGRATIONS)
"""The public adapters `cli/` may import too (`import-from langgraph`), never a private one."""


def _allowed(part: str, target: str) -> bool:
    if part == "turnstore.cli" and target in CLI_INTEGRATIONS:
        return True
    return target in PUBLIC or any(_within(target, space) for space in BUILT_ON[part])


def _private_imports() -> list[str]:
    trees = _trees()
    found = []
    for module, tree in trees.items():
        part = next((part for part in BUILT_ON if _within(module, part)), None)
        if part is None:
            continue
        for target, name in _imported(module, tree, set(trees)):
            if not _allowed(part, target):
                found.append(f"import {target} from {module}")
            elif name.startswith("_") and not _within(target, part):
                found.append(f"import {target}.{name} from {module}")
    return found


def test_parts_built_on_the_store_import_only_public_names() -> None:
    """cli/, server/ and integrations/ import the public namespaces and the seam, nothing else,
    and no underscored name of another turnstore package."""
    breaches = _breaches(_private_imports())
    assert not breaches, breaches


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _own_attributes(tree: ast.Module) -> set[str]:
    """The names a module gives its own objects: attributes set on `self`/`cls`, class members,
    `__slots__`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            names.update(_members(node))
    return names


def _members(node: ast.ClassDef) -> set[str]:
    names = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
        elif isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                names.update(_slots(item.value))
    return names


def _slots(value: ast.expr) -> set[str]:
    return {
        node.value
        for node in ast.walk(value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def _reached(tree: ast.Module) -> list[ast.Attribute]:
    """Every `x._name` of a module where `x` is not `self` or `cls` and `_name` no dunder."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not (node.attr.startswith("__") and node.attr.endswith("__"))
        and node.attr not in NAMED_TUPLE_API
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


def _package(module: str, trees: dict[str, ast.Module]) -> str:
    """The package a module belongs to (a package's `__init__` belongs to itself)."""
    is_package = any(other.startswith(f"{module}.") for other in trees)
    return module if is_package else module.rpartition(".")[0]


def _foreign_private_attributes() -> list[str]:
    trees = _trees()
    owned: dict[str, set[str]] = {}
    for module, tree in trees.items():
        owned.setdefault(_package(module, trees), set()).update(_own_attributes(tree))
    found = []
    for module, tree in trees.items():
        # Modules of one package share their private names (the seam's `store._driver` in
        # faces/); another package's are out of reach.
        own = owned[_package(module, trees)]
        for node in _reached(tree):
            allowed = (module, node.attr) in ALLOWED_PRIVATE_ATTRIBUTES
            if node.attr not in own and not allowed:
                found.append(f"{ast.unparse(node)} in {module}")
    return found


def test_no_module_reaches_a_private_attribute_it_does_not_own() -> None:
    """`x._name` only where the module's own package defines `_name` (or a named, reasoned
    exception): no reaching into another package's objects."""
    breaches = _breaches(_foreign_private_attributes())
    assert not breaches, breaches


def _public_modules() -> set[str]:
    return {*PUBLIC, *ENTRY_POINTS, *(f"turnstore.integrations.{name}" for name in INTEGRATIONS)}


def _marked(module: str, trees: dict[str, ast.Module]) -> bool:
    """Marked private: an underscored name on its path, or an `Internal:` docstring on it or
    on a package above it."""
    parts = module.split(".")
    if any(part.startswith("_") and not part.startswith("__") for part in parts):
        return True
    for end in range(len(parts), 1, -1):
        doc = ast.get_docstring(trees.get(".".join(parts[:end]), ast.Module(body=[])))
        if doc is not None and doc.startswith("Internal:"):
            return True
    return False


def _unmarked_modules() -> list[str]:
    trees = _trees()
    public = _public_modules()
    found = [
        f"unmarked {module}"
        for module in trees
        if module not in public and not _marked(module, trees)
    ]
    found += [f"public {m} marked Internal" for m in public & set(trees) if _marked(m, trees)]
    return found


def test_private_modules_are_marked() -> None:
    """A module that is not a public namespace says so: `Internal:` opens its docstring (or its
    package's), or its name starts with `_`; and no public namespace is marked private."""
    breaches = _breaches(_unmarked_modules())
    assert not breaches, breaches


HOMES = {
    "turnstore.records": ("turnstore.records",),
    "turnstore.events": ("turnstore.records.protocol",),
    "turnstore.errors": ("turnstore.errors",),
    "turnstore.transfer": ("turnstore.transfer", "turnstore.records"),
}
"""Where what each public namespace exports is defined: records and events in the floor's
`records/`, errors in `errors.py`; the transfer helpers in their module, their types in
`records/`. A class or function says it by `__module__`; anything else by identity."""

TOP_LEVEL_OWN = ("turnstore.faces", "turnstore.attachments")
"""Where the classes `turnstore` exports that no other namespace does live: the stores.
(Its functions, `open`, `migrate`, `new_queued_message`, are the top level's own.)"""


def _home(value: object, candidates: tuple[str, ...]) -> str | None:
    """The module under `candidates` that defines `value`, or None."""
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and _within(module, "turnstore"):
        return module
    for name in _trees():
        if any(_within(name, home) for home in candidates):
            found = vars(importlib.import_module(name)).values()
            if any(item is value for item in found):
                return name
    return None


def test_public_names_live_where_their_namespace_says() -> None:
    """Every name `turnstore.records`, `events`, `errors` and `transfer` export is defined
    where the docs say; every record, event and error class `turnstore` exports is also in its
    namespace, and its other classes are the stores."""
    wrong = []
    for space, homes in HOMES.items():
        namespace = importlib.import_module(space)
        for name in namespace.__all__:
            home = _home(getattr(namespace, name), homes)
            if home is None or not any(_within(home, h) for h in homes):
                wrong.append(f"{space}.{name} is defined in {home}")
    top = importlib.import_module("turnstore")
    exported = {id(getattr(importlib.import_module(s), n)) for s in HOMES for n in _all(s)}
    for name in top.__all__:
        value = getattr(top, name)
        home = getattr(value, "__module__", "")
        if (
            isinstance(value, type)
            and id(value) not in exported
            and not home.startswith(TOP_LEVEL_OWN)
        ):
            wrong.append(f"turnstore.{name} is in no public namespace (defined in {home})")
    assert not wrong, wrong


def _all(space: str) -> list[str]:
    return list(importlib.import_module(space).__all__)


# --- one home per kind of session -----------------------------------------------------------


def _framework_kinds() -> list[tuple[str, SessionKind]]:
    """(module, kind) of each kind module of `records/kinds` whose kind an integration writes;
    every module's kind is in the registry's list, and only those are."""
    declared = [(module, importlib.import_module(module).KIND) for module in KIND_MODULES]
    assert sorted(kind.name for _, kind in declared) == [kind.name for kind in kinds()]
    return [(module, kind) for module, kind in declared if kind.integration is not None]


def _kind_home(module: str, kind_module: str, integration: str) -> bool:
    """Whether `module` is a home of a framework's kind: its module of `records/kinds`, or a
    module of its integration (`integrations.X`, `integrations.X_…`, or a private
    `integrations._X…`)."""
    adapters = "turnstore.integrations."
    return (
        _within(module, kind_module)
        or _within(module, f"{adapters}{integration}")
        or module.startswith(f"{adapters}{integration}_")
        or module.startswith(f"{adapters}_{integration}")
    )


def _kind_names(at_home: bool) -> set[tuple[str, str, str]]:
    """(name, kind module, module) for each stored name of a framework kind that a module in
    its homes (`at_home`), or out of them, holds as a string constant."""
    trees = _trees()
    found = set()
    for kind_module, kind in _framework_kinds():
        assert kind.integration is not None
        names = set(kind.stored_names)
        for module, tree in trees.items():
            if _kind_home(module, kind_module, kind.integration) == at_home:
                found |= {(text, kind_module, module) for text in _strings(tree) if text in names}
    return found


def test_each_framework_kind_is_named_only_in_its_home() -> None:
    """A framework's kind of session, and the names it stores that the store recognises (a
    channel, a state key), are string constants only in the kind's module of `records/kinds`
    and its integration's modules: everything else asks the registry (`kind_of(name)`) or
    imports the declared constant, so a framework's names have one home."""
    framework = _framework_kinds()
    assert framework, "no kind of session belongs to an integration"
    # The detector is live: it finds every name of each kind where the kind declares it.
    at_home = _kind_names(True)
    for kind_module, kind in framework:
        for name in kind.stored_names:
            assert (name, kind_module, kind_module) in at_home, (name, kind_module)
    breaches = _breaches(
        [f"{name!r} of {home} in {module}" for name, home, module in _kind_names(False)]
    )
    assert not breaches, breaches


# --- scripts run SQL; rules decide ------------------------------------------------------------


def _making_raises(tree: ast.Module) -> list[int]:
    """The lines of each `raise` that makes an exception (`raise X(...)`, `raise X`): not a
    bare `raise`, nor the re-raise of the exception an enclosing `except … as name` caught."""
    caught: set[int] = set()
    for handler in ast.walk(tree):
        if isinstance(handler, ast.ExceptHandler) and handler.name is not None:
            for node in ast.walk(handler):
                if (
                    isinstance(node, ast.Raise)
                    and isinstance(node.exc, ast.Name)
                    and node.exc.id == handler.name
                ):
                    caught.add(id(node))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise) and node.exc is not None and id(node) not in caught
    )


def test_scripts_raise_nothing_of_their_own() -> None:
    """A transaction script runs SQL and returns rows: each refusal of what it read (a missing
    row, a conflict, a corrupt record) is a rule of `rules/` it calls with what it read, so no
    module of `turnstore.scripts` makes an exception."""
    sample = ast.parse(
        "try:\n    f()\nexcept E as error:\n    g()\n    raise error\nexcept F:\n    raise\n"
        "raise X\nraise X(1)\nraise errors.Y('y') from None\n"
    )
    assert _making_raises(sample) == [8, 9, 10]  # the detector tells making from re-raising
    trees = _trees()
    assert _making_raises(trees["turnstore.rules.saves"])  # it finds the rules' raises
    breaches = _breaches(
        [
            f"{module}:{line}"
            for module, tree in trees.items()
            if _within(module, "turnstore.scripts")
            for line in _making_raises(tree)
        ]
    )
    assert not breaches, breaches
