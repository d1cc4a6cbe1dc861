"""A store's public constructor exposes nothing internal: stores are opened, not built."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import turnstore


@pytest.mark.parametrize("face", [turnstore.Store, turnstore.BlockingStore])
def test_a_store_is_opened_not_constructed(face: type) -> None:
    """`Store()` and `BlockingStore()` take no parameters and name the call that opens one."""
    assert list(inspect.signature(face).parameters) == []
    with pytest.raises(TypeError, match=r"turnstore\.open\(url\)"):
        face()


def test_an_opened_store_works(tmp_path: Path) -> None:
    """`open_blocking` still builds a working store, with its upkeep and LangGraph faces."""
    with turnstore.open_blocking(tmp_path / "s.sqlite3") as store:
        assert isinstance(store, turnstore.BlockingStore)
        assert store.load("nobody") is None
        assert store.upkeep.doctor().problems == []
        assert store.langgraph is store.langgraph
