"""Each async face and its blocking twin expose the same operations with the same signatures."""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import (
    BlockingRuntimeStore,
    BlockingStore,
    BlockingUpkeep,
    Checkpoint,
    RuntimeStore,
    Store,
    Upkeep,
)
from turnstore.faces.aio_langgraph import LangGraphTables
from turnstore.faces.aio_memory import MemoryTables
from turnstore.faces.blocking_langgraph import BlockingLangGraphTables
from turnstore.faces.blocking_memory import BlockingMemoryTables

SYNC_ON_BOTH = {"writer_stats", "runtime", "durability_tier", "session_id", "deferred_durability"}
"""Calls that touch no table: counters, handles, and the deferred-durability block (a
context manager on both faces; its end's one fsync blocks briefly)."""


def _operations(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "close"
    }


FACES = [
    (Store, BlockingStore),
    (Upkeep, BlockingUpkeep),
    (RuntimeStore, BlockingRuntimeStore),
    (LangGraphTables, BlockingLangGraphTables),
    (MemoryTables, BlockingMemoryTables),
]


@pytest.mark.parametrize(("async_face", "blocking_face"), FACES)
def test_both_faces_offer_the_same_operations(async_face: type, blocking_face: type) -> None:
    """Every public operation exists on both faces with identical parameters."""
    async_ops = _operations(async_face)
    blocking_ops = _operations(blocking_face)
    assert async_ops.keys() == blocking_ops.keys()
    for name, signature in async_ops.items():
        assert signature.parameters == blocking_ops[name].parameters, name


@pytest.mark.parametrize(("async_face", "blocking_face"), FACES)
def test_async_operations_are_coroutines_and_blocking_ones_are_not(
    async_face: type, blocking_face: type
) -> None:
    """The async face awaits every store call; the blocking face returns values directly."""
    for name in _operations(async_face):
        if name in SYNC_ON_BOTH:
            continue
        assert inspect.iscoroutinefunction(getattr(async_face, name)), name
        assert not inspect.iscoroutinefunction(getattr(blocking_face, name)), name


@pytest.mark.parametrize(
    "namespace",
    [turnstore, turnstore.records, turnstore.events, turnstore.errors],
    ids=lambda module: module.__name__,
)
def test_every_public_name_is_documented(namespace: Any) -> None:
    """Each public name of the package and its public namespaces has a docstring."""
    for name in namespace.__all__:
        value = getattr(namespace, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), name


def test_the_top_level_is_narrow_and_the_namespaces_do_not_overlap() -> None:
    """About 36 names at the top; records, events and errors each name a thing once."""
    assert len(turnstore.__all__) <= 40
    records, events = set(turnstore.records.__all__), set(turnstore.events.__all__)
    assert not records & events
    assert not (records | events) & set(turnstore.errors.__all__)
    for name in turnstore.__all__:
        homes = [
            module
            for module in (turnstore.records, turnstore.events, turnstore.errors)
            if name in module.__all__
        ]
        value = getattr(turnstore, name)
        assert all(getattr(module, name) is value for module in homes), name


@pytest.mark.parametrize(
    "url",
    [
        "mysql://x",
        "sqlite://",
        "sqlite:///:memory:",
        ":memory:",
        "",
        "postgresql://localhost/db?schema=Bad-Name",
        "postgresql://localhost/db?pool_max_size=many",
        "postgresql://localhost/db?pool_min_size=5&pool_max_size=2",
    ],
)
def test_unusable_urls_are_refused_with_a_config_error(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open() refuses URLs it cannot serve with a typed, explained error, and makes no file
    (`:memory:` is sqlite3's word for an in-memory database, not a file name)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(turnstore.ConfigError):
        turnstore.open_blocking(url)
    assert list(tmp_path.iterdir()) == []


async def test_a_closed_store_refuses_calls(tmp_path) -> None:
    """Calls on a closed store raise StoreClosed instead of touching the database."""
    store = turnstore.open(tmp_path / "closed.sqlite3")
    await store.close()
    with pytest.raises(turnstore.StoreClosed):
        await store.load("session")
    blocking = turnstore.open_blocking(tmp_path / "closed.sqlite3")
    blocking.close()
    with pytest.raises(turnstore.StoreClosed):
        blocking.load("session")


async def test_a_step_that_outlives_close_sees_a_closed_store(store_url):
    """A read or write step issued after close (an operation racing it) raises StoreClosed."""
    store = turnstore.open(store_url)
    await store.save(Checkpoint.empty("a"))
    await store.close()
    with pytest.raises(turnstore.StoreClosed):
        await store._driver._read(asyncio.get_running_loop(), lambda tx: None)
    with pytest.raises(turnstore.StoreClosed):
        store._driver.engine.write(lambda tx: None)


def test_an_unusable_path_raises_a_config_error(tmp_path) -> None:
    """A database path whose folder is a file fails with ConfigError, not OSError."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(turnstore.ConfigError, match="is not a folder"):
        turnstore.open_blocking(blocker / "store.sqlite3")
    with pytest.raises(turnstore.ConfigError, match="cannot create the folder"):
        turnstore.open_blocking(blocker / "sub" / "store.sqlite3", create_dirs=True)


def test_a_read_only_store_reads_and_refuses_writes(tmp_path) -> None:
    """read_only opens without creating or writing; every write raises ReadOnlyStore."""
    path = tmp_path / "ro.sqlite3"
    with pytest.raises(turnstore.StorageError, match="no database file"):
        turnstore.open_blocking(path, read_only=True)
    assert not path.exists()
    with turnstore.open_blocking(path) as writer:
        writer.save(turnstore.Checkpoint.empty("session"))
    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader.load("session") == turnstore.Checkpoint.empty("session")
        with pytest.raises(turnstore.errors.ReadOnlyStore):
            reader.save(turnstore.Checkpoint(session_id="session", sequence=1))
        with pytest.raises(turnstore.errors.ReadOnlyStore):
            reader.save_state("scope", "key", 1)
    with turnstore.open_blocking(path) as writer:
        assert writer.load("session") == turnstore.Checkpoint.empty("session")


def test_the_events_reference_lists_every_event_kind() -> None:
    """docs/reference/events.md names each event class with the kind the journal shows."""
    page = (Path(__file__).resolve().parents[2] / "docs/reference/events.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_]+)` \| `([A-Za-z]+)` \|", page, re.MULTILINE))
    variants = typing.get_args(turnstore.events.EventMsg)
    assert listed == {(kind.__struct_config__.tag, kind.__name__) for kind in variants}


def test_the_store_holds_the_agent_loops_operations_only() -> None:
    """The operators' calls are on `store.upkeep`, not on the store; `upkeep` names its face."""
    operators = set(_operations(Upkeep))
    assert operators == {
        "tree",
        "prune",
        "erase_owner",
        "stats",
        "gauges",
        "doctor",
        "vacuum",
        "backup",
        "export_trees",
        "import_trees",
        "gc_unreachable",
        "list_uncommitted_attachments",
        "reindex",
    }
    for store, upkeep in [(Store, Upkeep), (BlockingStore, BlockingUpkeep)]:
        assert not operators & set(_operations(store))
        hints = typing.get_type_hints(store.upkeep.fget)
        assert hints["return"] is upkeep
