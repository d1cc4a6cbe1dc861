"""Unit: the shared argument and value checks of `turnstore.rules.values`."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import msgspec
import pytest

from turnstore import Checkpoint, InvalidInput
from turnstore.rules.values import (
    MAX_DEPTH,
    check_value,
    collection,
    encoded_items,
    json_value,
    nonblank_list,
    text,
)


class Color(StrEnum):
    RED = "red"


def nested(levels: int) -> Any:
    """`levels` lists, one inside the other."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_text_takes_utf8_strings_and_gives_plain_str():
    """A str subclass comes back as a plain str, so it binds and compares as text."""
    assert text("é\x00🙂", "name") == "é\x00🙂"
    plain = text(Color.RED, "name")
    assert type(plain) is str
    assert plain == "red"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (5, "name must be a string, not int"),
        (b"x", "name must be a string, not bytes"),
        (None, "name must be a string, not NoneType"),
        ("a\ud800", "name is not UTF-8 text"),
    ],
)
def test_text_refuses_what_no_text_column_holds(value, message):
    with pytest.raises(InvalidInput, match=message):
        text(value, "name")


@pytest.mark.parametrize(
    "values",
    [["a", "b"], ("a", "b"), {"a": None, "b": None}.keys(), iter(["a", "b"])],
    ids=["list", "tuple", "keys-view", "iterator"],
)
def test_collection_takes_any_iterable_of_separate_values(values):
    assert sorted(collection(values, "ids")) == ["a", "b"]


def test_collection_takes_sets_unless_order_matters():
    assert collection({"a"}, "ids") == ["a"]
    with pytest.raises(InvalidInput, match="ids must be a list, not set"):
        collection({"a"}, "ids", ordered=True)
    with pytest.raises(InvalidInput, match="not frozenset"):
        collection(frozenset({"a"}), "ids", ordered=True)


@pytest.mark.parametrize(
    "values",
    ["ab", b"ab", bytearray(b"ab"), memoryview(b"ab"), {"a": 1}, 5, None],
    ids=["str", "bytes", "bytearray", "memoryview", "dict", "int", "none"],
)
def test_collection_refuses_text_bytes_mappings_and_scalars(values):
    """Python iterates a string or a dict, but never into what a caller meant."""
    with pytest.raises(InvalidInput, match="ids must be a list, tuple or set"):
        collection(values, "ids")


def test_nonblank_list_refuses_blank_non_text_and_surrogates():
    assert nonblank_list(("a", Color.RED), "ids") == ["a", "red"]
    for bad in (["a", ""], ["a", " "], ["a", 1], {"a": 1}, "a"):
        with pytest.raises(InvalidInput):
            nonblank_list(bad, "ids")
    with pytest.raises(InvalidInput, match="not UTF-8 text"):
        nonblank_list(["\udfff"], "ids")


def test_json_value_refuses_a_record_at_the_top():
    """A record where any JSON value is meant would come back as a dict."""
    assert json_value({"a": 1}, "state") == {"a": 1}
    with pytest.raises(InvalidInput, match=r"state: \$ is of type Checkpoint"):
        json_value(Checkpoint.empty("s"), "state")


def test_check_value_refuses_a_circular_value_by_its_depth():
    """A value that contains itself nests without end, so the depth limit refuses it."""
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(InvalidInput, match=f"nests deeper than {MAX_DEPTH} levels"):
        check_value(looped, "value")
    keyed: dict[str, Any] = {}
    keyed["self"] = keyed
    with pytest.raises(InvalidInput, match=r"value: \$\.self\.self"):
        check_value(keyed, "value")


def test_check_value_allows_exactly_max_depth_levels():
    check_value(nested(MAX_DEPTH), "value")
    with pytest.raises(InvalidInput, match="nests deeper"):
        check_value(nested(MAX_DEPTH + 1), "value")


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, b"x", {1}, 2**64, -(2**63) - 1, "\ud800", {1: 2}, 1j]
)
def test_check_value_refuses_what_json_would_change(value):
    with pytest.raises(InvalidInput):
        check_value({"a": [value]}, "value")


def test_encoded_items_checks_each_item_on_its_own():
    """Each item may nest the full depth; the error names the item and the path in it."""
    deepest = nested(MAX_DEPTH)
    assert msgspec.json.decode(encoded_items(["a", deepest], "delta")) == ["a", deepest]
    with pytest.raises(InvalidInput, match=r"delta\[1\]: \$\.k is not a finite number"):
        encoded_items(["a", {"k": math.inf}], "delta")
    with pytest.raises(InvalidInput, match=r"delta\[0\]: \$ is of type Checkpoint"):
        encoded_items([Checkpoint.empty("s")], "delta")


# --- the typed round trip: msgspec's C code first, the walk only to name what fails --------


def _execution(**changes: Any) -> Any:
    from turnstore import ExecutionRecord

    fields: dict[str, Any] = {
        "session_id": "s",
        "submission_id": "sub",
        "turn_id": "t",
        "started_at_ms": 1,
        "finished_at_ms": 2,
        "elapsed_ms": 1,
        "outcome": "completed",
    }
    return ExecutionRecord(**{**fields, **changes})


def test_typed_record_knows_records_without_free_json():
    """A record whose fields hold no free JSON at any depth is typed; one with `Any` is not."""
    from turnstore import Event, ExecutionRecord
    from turnstore.events import AgentMessageContentDeltaEvent, ToolCallBeginEvent
    from turnstore.rules.values import typed_record

    assert typed_record(ExecutionRecord)
    assert typed_record(AgentMessageContentDeltaEvent)
    assert typed_record(ToolCallBeginEvent)
    assert not typed_record(Checkpoint)  # metadata is free JSON
    assert not typed_record(Event)  # some event messages hold free JSON
    assert not typed_record(dict)


def test_the_typed_round_trip_gives_what_the_walk_gives():
    """A good record comes back equal, with the same JSON, with or without the walk."""
    from turnstore.rules.values import revalidated

    record = _execution(usage=msgspec.structs.replace(_execution().usage, input_tokens=3))
    assert revalidated(record, free=()) == revalidated(record)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"turn_id": "a\ud800"}, r"ExecutionRecord: \$\.turn_id is not UTF-8 text"),
        ({"usage": {"input_tokens": 1}}, r"\$\.usage is a dict where a TokenUsage record"),
        ({"elapsed_ms": 2**64}, r"\$\.elapsed_ms is an integer outside 64 bits"),
        ({"elapsed_ms": math.nan}, r"\$\.elapsed_ms is not a finite number"),
    ],
    ids=["surrogate", "dict-for-record", "huge-int", "nan"],
)
def test_the_typed_round_trip_refuses_with_the_walks_path(changes, message):
    """What the round trip does not take equal, the walk refuses and names by its path."""
    from turnstore.rules.values import revalidated

    with pytest.raises(InvalidInput, match=message):
        revalidated(_execution(**changes), free=())
