"""The blocking faces are generated from the async ones, and the runtime handle is bound."""

from __future__ import annotations

import importlib.util
import inspect
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from turnstore import (
    BlockingRuntimeStore,
    RuntimeStore,
)

TOOL = Path(__file__).resolve().parents[2] / "tools" / "async_to_sync.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("async_to_sync", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def faces_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, Path]:
    """The generator pointed at a copy of `src/turnstore/faces`, which a test may spoil."""
    tool = _tool()
    copy = tmp_path / "faces"
    shutil.copytree(tool.FACES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(tool, "FACES", copy)
    return tool, copy


def test_every_async_face_has_its_generated_twin_and_no_other() -> None:
    """Each faces/aio_X.py has a blocking_X.py equal to the generator's output, and no more."""
    tool = _tool()
    sources = tool.sources()
    assert {source.name for source in sources} >= {
        "aio_store.py",
        "aio_upkeep.py",
        "aio_runtime.py",
    }
    names = tool.renames(sources)
    for source in sources:
        assert tool.twin_path(source).read_text() == tool.generate(source, names), source.name
    assert tool.stale() == []


def test_a_stale_twin_fails_the_check(
    faces_copy: tuple[ModuleType, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edited twin, a missing one and an orphaned one are each named by `--check`."""
    tool, faces = faces_copy
    store = faces / "blocking_store.py"
    store.write_text(store.read_text() + "\n# edited by hand\n")
    (faces / "blocking_runtime.py").unlink()
    (faces / "blocking_gone.py").write_text('"""A twin whose source was removed."""\n')
    problems = tool.stale()
    assert any(p.endswith("blocking_store.py is stale") for p in problems), problems
    assert any(p.endswith("blocking_runtime.py is missing") for p in problems), problems
    assert any(p.endswith("blocking_gone.py has no aio_gone.py") for p in problems), problems
    assert len(problems) == 3
    monkeypatch.setattr(sys, "argv", ["async_to_sync.py", "--check"])
    with pytest.raises(SystemExit) as exited:
        tool.main()
    assert "blocking_store.py is stale: run `./dev generate`" in str(exited.value.code)


def test_a_new_async_face_is_picked_up_without_editing_the_tool(
    faces_copy: tuple[ModuleType, Path],
) -> None:
    """A new aio_X.py gets its blocking_X.py; its classes get `Blocking` in every twin."""
    tool, faces = faces_copy
    (faces / "aio_extra.py").write_text(
        '"""The async extra face, `Extra`."""\n\n'
        "from turnstore.faces.aio_store import Store\n"
        "from turnstore.drivers.steps import AsyncDriver\n\n\n"
        "class Extra:\n"
        '    """The async extra."""\n\n'
        "    def __init__(self, store: Store, driver: AsyncDriver) -> None:\n"
        "        self._driver = driver\n\n"
        "    async def __aenter__(self) -> Extra:\n"
        "        return self\n\n"
        "    async def rows(self) -> list[int]:\n"
        '        """Every row of `Extra`."""\n'
        "        async with self._driver.lock:\n"
        "            return [row async for row in await self._driver.rows()]\n"
    )
    tool.write()
    twin = (faces / "blocking_extra.py").read_text()
    assert "Generated from `turnstore.faces.aio_extra`" in twin
    assert "from turnstore.faces.blocking_store import BlockingStore" in twin
    assert "class BlockingExtra:" in twin
    assert "def __init__(self, store: BlockingStore, driver: BlockingDriver)" in twin
    assert "def __enter__(self) -> BlockingExtra:" in twin
    assert "with self._driver.lock:" in twin
    assert "[row for row in self._driver.rows()]" in twin
    assert '"""Every row of `BlockingExtra`."""' in twin
    assert "async" not in twin.replace("async_to_sync", "")
    assert "await" not in twin
    assert tool.stale() == []


def test_the_runtime_handle_asks_for_no_session_id() -> None:
    """A handle bound to one session takes no session id in any operation."""
    for face in (RuntimeStore, BlockingRuntimeStore):
        for name, member in inspect.getmembers(face, inspect.isfunction):
            if name.startswith("_"):
                continue
            assert "session_id" not in inspect.signature(member).parameters, (face, name)
