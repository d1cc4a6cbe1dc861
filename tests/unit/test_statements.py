"""Statements as data: templates formatted once per dialect, rows read by name."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from turnstore.backends.sql.engine import Dialect, Query, Statements, select

DIALECT = Dialect(
    placeholder="%s",
    lock=" FOR UPDATE",
    key_share=" FOR KEY SHARE",
    now="NOW_S",
    now_ms="NOW_MS",
    in_ids="{column} = ANY(?)",
    id_list=list,
    children="tree JOIN t AS child ON child.parent = tree.id",
    blob_read_lock="",
    blob_write_lock="",
)


class Pair(NamedTuple):
    """A two-column row."""

    first: int
    second: str


class Base(Statements):
    """A table with one statement of each kind."""

    lock = "SELECT 1 FROM t WHERE id = ?{lock}"
    pair = select(Pair, "FROM t WHERE {ids:id}", second="UPPER(name)")
    kept = "SELECT {now}, {now_ms}"


class Child(Base):
    """A table overriding one statement with something that is not a statement."""

    kept = None  # type: ignore[assignment]


def test_a_table_is_formatted_for_its_dialect() -> None:
    """Placeholders, dialect words and `{ids:column}` are filled; queries keep their rows."""
    table = DIALECT.statements(Base)
    assert table.lock == "SELECT 1 FROM t WHERE id = %s FOR UPDATE"
    assert table.kept == "SELECT NOW_S, NOW_MS"
    assert isinstance(table.pair, Query)
    assert table.pair.sql == "SELECT first, UPPER(name) AS second FROM t WHERE id = ANY(%s)"
    assert table.pair.make((1, "x")) == Pair(first=1, second="x")
    assert DIALECT.statements(Base) is table


def test_a_subclass_wins_over_its_parent() -> None:
    """An attribute a subclass redefines as a non-statement is not formatted from the parent."""
    assert DIALECT.statements(Child).kept is None


def test_an_unknown_word_in_a_template_fails_at_class_creation() -> None:
    """A template naming anything but a dialect word is refused when its table is defined."""
    with pytest.raises(TypeError, match=r"Bad.broken names \['table'\]"):

        class Bad(Statements):
            broken = "SELECT * FROM {table}"


def test_select_refuses_an_expression_for_no_field() -> None:
    """An expression for a column the row type does not have is a mistake, not ignored."""
    with pytest.raises(TypeError, match="no fields"):
        select(Pair, "FROM t", third="x")
