"""The blocking faces are generated from the async ones, and the runtime handle is bound."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

from turnstore import (
    BlockingRuntimeStore,
    RuntimeStore,
)

TOOL = Path(__file__).resolve().parents[2] / "tools" / "async_to_sync.py"


def _tool():
    spec = importlib.util.spec_from_file_location("async_to_sync", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("async_to_sync", module)
    spec.loader.exec_module(module)
    return module


def test_the_blocking_faces_are_what_the_generator_writes() -> None:
    """faces/blocking.py equals tools/async_to_sync.py's output: nobody edited the twin."""
    tool = _tool()
    assert tool.TARGET.read_text() == tool.generate()


def test_the_runtime_handle_asks_for_no_session_id() -> None:
    """A handle bound to one session takes no session id in any operation."""
    for face in (RuntimeStore, BlockingRuntimeStore):
        for name, member in inspect.getmembers(face, inspect.isfunction):
            if name.startswith("_"):
                continue
            assert "session_id" not in inspect.signature(member).parameters, (face, name)
