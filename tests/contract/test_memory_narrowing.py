"""A memory search's `equals`: rows the database skips before `keep` are rows `keep` refuses.

`MemorySearch.equals` names (top-level field, text) pairs every kept item holds; SQLite tests
them in SQL (`Dialect.json_equals`) and reads only the rows that can pass, PostgreSQL reads
all (its JSON types refuse the NaN a value may hold). Either way the answer is the one `keep`
alone gives: a property over values of every JSON shape, and the values where JSON and Python
could part (numbers and booleans against their text, escapes, NaN, nesting, a missing field,
names a path must quote).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizes import pick
from turnstore import InvalidInput
from turnstore.records.memory import MemoryCall, MemoryPut, MemoryRow, MemorySearch

NS = ("olive", "notes")
FIELDS = ["kind", "my-kind", "1st", "Kind"]
TEXTS = ["fact", "Fact", "1", "true", "", "é", "fa ct"]


def exact(equals: dict[str, str]) -> Any:
    """The exact test: each field of the decoded value equals its text (Python's `==`)."""

    def keep(row: MemoryRow) -> bool:
        value = json.loads(row.value_json)
        return isinstance(value, dict) and all(value.get(k) == v for k, v in equals.items())

    return keep


async def found(store: Any, equals: dict[str, str], **options: Any) -> list[str]:
    search = MemorySearch(NS, exact(equals), equals=tuple(equals.items()), **options)
    answer = await store.memory.run(MemoryCall(searches=(search,)))
    return [one.row.key for one in answer.searches[0]]


async def unnarrowed(store: Any, equals: dict[str, str], **options: Any) -> list[str]:
    search = MemorySearch(NS, exact(equals), **options)
    answer = await store.memory.run(MemoryCall(searches=(search,)))
    return [one.row.key for one in answer.searches[0]]


TRICKY = {
    "text": '{"kind": "fact"}',
    "escaped": '{"kind": "f\\u0061ct", "my-kind": "\\u00e9"}',
    "number": '{"kind": 1, "1st": 1}',
    "text-number": '{"kind": "1", "1st": "1"}',
    "boolean": '{"kind": true}',
    "text-boolean": '{"kind": "true"}',
    "nan": '{"kind": "fact", "score": NaN}',
    "nan-other": '{"kind": "event", "score": NaN}',
    "nested": '{"kind": {"fact": 1}}',
    "missing": '{"other": "fact"}',
    "null": '{"kind": null}',
    "list": '{"kind": ["fact"]}',
    "hyphen": '{"my-kind": "fact", "kind": "x"}',
    "digit": '{"1st": "fact"}',
    "case": '{"Kind": "fact", "kind": "Fact"}',
    "empty": '{"kind": ""}',
    "spaced": '{"kind": "fa ct"}',
}


@pytest.mark.parametrize(
    "equals",
    [
        {"kind": "fact"},
        {"kind": "1"},
        {"kind": "true"},
        {"kind": ""},
        {"kind": "Fact"},
        {"my-kind": "é"},
        {"my-kind": "fact"},
        {"1st": "fact"},
        {"1st": "1"},
        {"Kind": "fact", "kind": "Fact"},
        {"kind": "fact", "score": "x"},
    ],
)
async def test_narrowing_keeps_what_the_exact_test_keeps_on_values_json_and_python_read_apart(
    store, equals
):
    await store.memory.run(
        MemoryCall(
            writes=tuple(MemoryPut(NS, key, value, None, "olive") for key, value in TRICKY.items())
        )
    )
    expected = await unnarrowed(store, equals, limit=None)
    assert await found(store, equals, limit=None) == expected
    for limit in (1, 2):  # pages as small as what is wanted, then the next ones
        for offset in (0, 1):
            assert (
                await found(store, equals, offset=offset, limit=limit)
                == expected[offset : offset + limit]
            )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(TEXTS),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(FIELDS), inner),
    max_leaves=4,
)


@settings(
    max_examples=pick(150, 25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    values=st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES), max_size=8),
    equals=st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(TEXTS), min_size=1),
    limit=st.integers(0, 4),
)
async def test_a_narrowed_search_answers_as_the_exact_test_alone(store, values, equals, limit):
    await store.memory.run(
        MemoryCall(
            writes=tuple(
                MemoryPut(NS, f"k{at}", json.dumps(value), None, "olive")
                for at, value in enumerate(values)
            )
            + tuple(MemoryPut(NS, f"k{at}", "{}", None, "olive") for at in range(len(values), 8))
        )
    )
    assert await found(store, equals, limit=limit) == await unnarrowed(store, equals, limit=limit)


@pytest.mark.parametrize(
    "equals",
    [(("a.b", "x"),), (('a"b', "x"),), (("", "x"),), (("kind", "nul\x00"),), (("kind", 3),)],
)
async def test_a_bad_equal_is_refused(store, equals):
    with pytest.raises(InvalidInput):
        await store.memory.run(MemoryCall(searches=(MemorySearch(NS, equals=equals),)))
