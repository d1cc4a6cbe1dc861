"""Statements as data: templates formatted once per dialect, rows read by name."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from turnstore.backends.postgres.memory_text import TsvectorMemoryText
from turnstore.backends.postgres.search import TsvectorSearch
from turnstore.engine.protocol import (
    Dialect,
    Query,
    Statements,
    insert,
    matching,
    select,
    update,
)

DIALECT = Dialect(
    placeholder="%s",
    lock=" FOR UPDATE",
    lock_skip=" FOR UPDATE SKIP LOCKED",
    key_share=" FOR KEY SHARE",
    now="NOW_S",
    now_ms="NOW_MS",
    in_ids="{column} = ANY(?)",
    id_list=list,
    children="tree JOIN t AS child ON child.parent = tree.id",
    blob_read_lock="",
    blob_write_lock="",
    uri_lock="",
    text_search=TsvectorSearch(),
    memory_text=TsvectorMemoryText(),
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


class Lease(NamedTuple):
    """Two written columns, then the two that pick the row."""

    owner: str
    expires: int
    session_id: str
    batch_id: str


def test_writes_take_their_columns_from_the_row_type() -> None:
    """INSERT, UPDATE and keyed statements list a named row's fields in order: a row of that
    type is their parameters, so a value cannot land in another column."""
    assert insert(Pair, "t", " ON CONFLICT DO NOTHING", at="{now}") == (
        "INSERT INTO t (first, second, at) VALUES (?, ?, {now}) ON CONFLICT DO NOTHING"
    )
    assert update(Lease, "q", keys=2, also="touched = {now}", expires="max(expires, ?)") == (
        "UPDATE q SET owner = ?, expires = max(expires, ?), touched = {now}"
        " WHERE session_id = ? AND batch_id = ?"
    )
    assert matching(Pair, "DELETE FROM t") == "DELETE FROM t WHERE first = ? AND second = ?"


def test_update_refuses_an_expression_for_no_field_and_keys_that_leave_nothing() -> None:
    """A misspelt expression would silently become `= ?`; a key count must leave a field to
    set and one to pick."""
    with pytest.raises(TypeError, match="expirse"):
        update(Lease, "q", keys=2, expirse="max(expires, ?)")
    with pytest.raises(TypeError, match="session_id"):
        update(Lease, "q", keys=2, session_id="lower(?)")  # a key, not a field to set
    for keys in (0, 4):
        with pytest.raises(TypeError, match=f"keys={keys}"):
            update(Lease, "q", keys=keys)


def test_rows_spliced_from_records_line_up_with_the_insert() -> None:
    """The LangGraph writes spliced from its records' rows keep their fields in column order."""
    from turnstore.records.langgraph import BlobWrite, WriteRow
    from turnstore.scripts.langgraph import BlobInsert, WriteInsert

    assert WriteInsert._fields[3:] == WriteRow._fields
    assert BlobInsert._fields[2:6] == BlobWrite._fields
