"""`records.base.json_loads`, which decodes the OpenAI Agents SDK's rows for a move and
LangGraph memory values as `json.loads` does, though msgspec decodes nearly all of them: the
same value, of the same types, or the same refusal, for any text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstore.records.base import json_loads as loads

# What only Python's `json` takes, beside what both take: NaN, infinities, integers beyond
# 64 bits, lone surrogates (escaped, or raw when not ensure_ascii).
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**200)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ud800", "a\udfff", "\ud83d\ude00", "\x00", "é"])
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same type at every place (1 and 1.0 and True differ; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _outcome(decode: Any, text: Any) -> tuple[str, Any]:
    try:
        return "value", decode(text)
    except (json.JSONDecodeError, TypeError) as error:
        return "refused", type(error)


@given(_VALUES, st.booleans())
def test_any_value_the_sdk_stored_reads_back_as_json_loads_reads_it(
    value: Any, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    found, expected = _outcome(loads, text), _outcome(json.loads, text)
    assert found[0] == expected[0]
    assert _same(found[1], expected[1])


@given(st.text(alphabet='{}[]:,"\\ 0123456789.eE+-truefalsnNIinfy\ud800é', max_size=30))
def test_any_text_decodes_or_is_refused_as_json_loads_decodes_or_refuses_it(text: str) -> None:
    found, expected = _outcome(loads, text), _outcome(json.loads, text)
    assert found[0] == expected[0]
    if found[0] == "value":
        assert _same(found[1], expected[1])


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": 2}', "NaN", "-Infinity", "1e400", '"\\ud800"', "18446744073709551616", " [1] "],
)
def test_the_texts_msgspec_and_json_disagree_on_are_read_as_json_reads_them(text: str) -> None:
    assert _same(loads(text), json.loads(text))


def test_what_is_not_text_is_refused_as_json_refuses_it() -> None:
    for bad in (None, 3):
        with pytest.raises(TypeError):
            loads(bad)
    assert _same(loads(json.dumps({"x": [1.5]}).encode("utf-16")), {"x": [1.5]})
