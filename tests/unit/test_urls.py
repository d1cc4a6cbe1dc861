"""Store URLs and SQLite paths: typos are ConfigErrors with a hint, never a new empty store.

A mistyped URL, an unexpanded `~` or a misspelt folder used to create a folder and an empty
database beside the user's data; each is now refused before anything is created, on both
faces. `create_dirs=True` is the explicit way to have missing folders created.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint, ConfigError


def open_async(url: Any, **options: Any) -> turnstore.Store:
    """The async face's open."""
    return turnstore.open(url, **options)


def open_blocking(url: Any, **options: Any) -> turnstore.BlockingStore:
    """The blocking face's open."""
    return turnstore.open_blocking(url, **options)


OPENERS = [open_async, open_blocking]
Opener = Callable[..., Any]


async def close(store: Any) -> None:
    """Close a store of either face."""
    if isinstance(store, turnstore.Store):
        await store.close()
    else:
        store.close()


async def save_and_load(store: Any) -> Checkpoint | None:
    """Save an empty session "s" and load it back, on either face."""
    if isinstance(store, turnstore.Store):
        await store.save(Checkpoint.empty("s"))
        return await store.load("s")
    store.save(Checkpoint.empty("s"))
    return store.load("s")


def everything_under(folder: Path) -> list[str]:
    """Every file and folder under `folder`, relative and sorted."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder the test runs in."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("sqlite:/x.db", "did you mean sqlite:///x.db (x.db in the working folder) or "),
        ("sqlite:x.db", "sqlite:////x.db (/x.db)?"),
        ("SQLite:/data/x.db", "sqlite:///data/x.db"),
        ("sqlite://x.db", "did you mean sqlite:///x.db?"),
        ("sqlite:///x.db?mode=ro", "sqlite URLs take no parameters (got ?mode=ro)"),
        ("postgresql:/db.internal/agents", "did you mean postgresql://db.internal/agents?"),
        ("postgres:db.internal", "did you mean postgres://db.internal?"),
        ("file:x.db", "file: URLs are not supported"),
    ],
)
def test_a_mistyped_url_is_a_config_error_with_a_hint_and_creates_nothing(
    workdir: Path, opener: Opener, url: str, hint: str
) -> None:
    """A URL missing slashes, or with parameters SQLite does not take, is refused with a hint;
    no folder named after the scheme is created."""
    with pytest.raises(ConfigError) as refused:
        opener(url)
    assert hint in str(refused.value)
    with pytest.raises(ConfigError):
        opener(url, read_only=True)
    assert everything_under(workdir) == []


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
@pytest.mark.parametrize("url", ["~/x.db", "sqlite:///~/x.db"])
async def test_a_leading_tilde_is_the_home_folder(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, opener: Opener, url: str
) -> None:
    """`~` names the home folder; no folder named `~` appears in the working folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    store = opener(url)
    try:
        assert await save_and_load(store) == Checkpoint.empty("s")
    finally:
        await close(store)
    assert everything_under(workdir) == []
    assert "x.db" in everything_under(home)
    reader = opener(url, read_only=True)
    await close(reader)


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
def test_an_unknown_users_home_is_a_config_error(workdir: Path, opener: Opener) -> None:
    """`~name` of a user that does not exist is refused, not taken as a folder name."""
    with pytest.raises(ConfigError, match="cannot expand ~no-such-user-xyz"):
        opener("~no-such-user-xyz/x.db")
    assert everything_under(workdir) == []


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
def test_a_missing_folder_is_a_config_error_naming_it(
    tmp_path: Path, opener: Opener, read_only: bool
) -> None:
    """A database path whose folder does not exist (a misspelt folder) is refused, naming the
    folder, instead of creating it and an empty store."""
    missing = tmp_path / "data" / "sesions"
    with pytest.raises(ConfigError) as refused:
        opener(missing / "store.sqlite3", read_only=read_only)
    assert f"the folder {missing} does not exist" in str(refused.value)
    assert "create_dirs=True" in str(refused.value)
    with pytest.raises(ConfigError):
        opener(f"sqlite:///{missing}/store.sqlite3", read_only=read_only)
    assert everything_under(tmp_path) == []


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
async def test_create_dirs_creates_the_missing_folders(tmp_path: Path, opener: Opener) -> None:
    """create_dirs=True creates the missing folders, then the database."""
    path = tmp_path / "a" / "b" / "store.sqlite3"
    store = opener(path, create_dirs=True)
    try:
        assert await save_and_load(store) == Checkpoint.empty("s")
    finally:
        await close(store)
    assert path.is_file()


@pytest.mark.parametrize("opener", OPENERS, ids=["async", "blocking"])
def test_a_folder_is_not_a_database_file(tmp_path: Path, opener: Opener) -> None:
    """A path naming a folder is a ConfigError, read-only or not."""
    for read_only in (False, True):
        with pytest.raises(ConfigError, match="is a folder; name a database file inside it"):
            opener(tmp_path, read_only=read_only)
    assert everything_under(tmp_path) == []


async def test_a_file_name_with_uri_characters_opens_that_file(tmp_path: Path) -> None:
    """`?`, `#` and `%` in a file name are part of the name, not of a SQLite URI."""
    path = tmp_path / "a?b#c%20d.sqlite3"
    store = turnstore.open(path)
    try:
        assert await save_and_load(store) == Checkpoint.empty("s")
    finally:
        await store.close()
    assert everything_under(tmp_path) == ["a?b#c%20d.sqlite3"]
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT session_id FROM sessions").fetchall() == [("s",)]
    finally:
        connection.close()
    with turnstore.open_blocking(path, read_only=True) as reader:
        assert reader.load("s") == Checkpoint.empty("s")


def test_a_relative_path_keeps_naming_the_same_file_after_a_change_of_folder(
    tmp_path: Path, workdir: Path
) -> None:
    """A relative path is resolved when the store opens, so changing the working folder later
    does not point the store's new connections at another file."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with turnstore.open_blocking("sqlite:///store.sqlite3") as store:
        os.chdir(elsewhere)
        store.save(Checkpoint.empty("s"))
        assert store.load("s") == Checkpoint.empty("s")
    assert everything_under(workdir) == ["store.sqlite3"]
    assert everything_under(elsewhere) == []
