"""The catalog's id-prefix range: exactly the ids that start with the prefix, in byte order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstore import InvalidInput
from turnstore.rules.pages import MAX_FORK_TREE_LIMIT, fork_tree_limit, id_prefix_range

TOP = "\U0010ffff"
# Id text (no surrogates, no NUL), weighted to the code points where a successor is special.
CHARACTERS = st.one_of(
    st.sampled_from(["a", "b", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010fffe", TOP]),
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
)
IDS = st.text(CHARACTERS, max_size=5)


def in_range(session_id: str, bounds: tuple[str, str]) -> bool:
    """Whether an id is in `[low, high)` as both backends compare ids: by their UTF-8 bytes."""
    low, high = (bound.encode() for bound in bounds)
    return low <= session_id.encode() < high


@given(prefix=IDS.filter(bool), session_id=IDS)
def test_the_range_holds_exactly_the_ids_starting_with_the_prefix(
    prefix: str, session_id: str
) -> None:
    """An id is in the prefix's range if and only if it starts with the prefix."""
    bounds = id_prefix_range(prefix)
    assert bounds is not None
    for candidate in (session_id, prefix + session_id, session_id + prefix):
        assert in_range(candidate, bounds) == candidate.startswith(prefix), candidate


@pytest.mark.parametrize(
    ("prefix", "bounds"),
    [
        ("ab", ("ab", "ac")),
        ("a" + TOP, ("a" + TOP, "b")),
        ("\ud7ff", ("\ud7ff", "\ue000")),
        ("a%_\\", ("a%_\\", "a%_]")),
    ],
)
def test_the_upper_bound_is_the_next_text_after_the_prefix(prefix: str, bounds: Any) -> None:
    """The bound increments the last character that is not U+10FFFF, skipping surrogates."""
    assert id_prefix_range(prefix) == bounds


def test_a_prefix_of_only_the_greatest_code_point_is_bounded_above_every_id() -> None:
    """The longest id of U+10FFFF characters still falls below the bound."""
    low, high = id_prefix_range(TOP) or ("", "")
    assert low == TOP
    assert in_range(TOP * 256, (low, high))
    assert len((TOP * 256).encode()) == 1024


def test_no_prefix_and_the_empty_prefix_filter_nothing() -> None:
    """None and "" (which every id starts with) mean no filter."""
    assert id_prefix_range(None) is None
    assert id_prefix_range("") is None


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("a\x00", "id_prefix cannot contain NUL"),
        ("a\ud800", "id_prefix is not UTF-8 text"),
        ("x" * 1025, "id_prefix is too long"),
        (1, "id_prefix must be a string"),
    ],
)
def test_a_bad_prefix_is_refused(prefix: Any, message: str) -> None:
    """A prefix is text as an id is: no NUL, UTF-8, at most 1024 bytes."""
    with pytest.raises(InvalidInput, match=message):
        id_prefix_range(prefix)


@pytest.mark.parametrize("limit", [0, -1, MAX_FORK_TREE_LIMIT + 1, True, 2.0, "3", None])
def test_a_fork_tree_limit_is_1_to_the_cap(limit: Any) -> None:
    """A fork tree limit is an int from 1 to the cap."""
    with pytest.raises(InvalidInput):
        fork_tree_limit(limit)
    assert fork_tree_limit(1) == 1
    assert fork_tree_limit(MAX_FORK_TREE_LIMIT) == MAX_FORK_TREE_LIMIT
