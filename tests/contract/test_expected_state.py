"""Writes conditional on middleware state values, on every backend and face.

- `append_context(..., expected_state=[(scope, key, value)])` and
  `save_state(..., expected_state=...)` write only when each named value is stored and equal
  to the expected one as JSON (any key order; `1`, `1.0` and `true` apart), checked under the
  write's lock; otherwise `StateConflict` (with `scope` and `key`) and nothing is written;
- a value that is deleted and written again equal is found equal: what the caller puts in the
  value (an incarnation id, a sequence) is what tells two of them apart;
- concurrent writers expecting the same value: exactly one wins, on both backends;
- a missing row is a conflict; an expected None, a malformed entry or a value JSON cannot hold
  is `InvalidInput` and changes nothing;
- property: for any two JSON values, the write lands exactly when they are equal as JSON.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import postgres_connection
from sizes import pick
from turnstore import InvalidInput, SequenceConflict
from turnstore.errors import StateConflict

SESSION = "expects"
RECORD = {"incarnation": "a1", "sequence": 1, "agents": {"x": {"newest": 0}}}


def item(number: int) -> dict[str, Any]:
    """A context item holding its number."""
    return {"type": "message", "role": "user", "n": number}


async def test_an_append_expecting_the_stored_value_lands_with_its_state(store):
    await store.append_context(SESSION, [], None, 0, [(SESSION, "record", RECORD)])
    following = {**RECORD, "sequence": 2}
    reordered = {"agents": {"x": {"newest": 0}}, "sequence": 1, "incarnation": "a1"}
    sequence = await store.append_context(
        SESSION,
        [item(1)],
        None,
        1,
        [(SESSION, "record", following)],
        expected_state=[(SESSION, "record", reordered)],
    )
    assert sequence == 2
    assert await store.load_state(SESSION, "record") == following
    assert await store.context_tail(SESSION) == [item(1)]


@pytest.mark.parametrize(
    "expected",
    [
        {**RECORD, "sequence": 2},
        {**RECORD, "sequence": 1.0},  # a float is not the integer it equals
        {**RECORD, "sequence": True},
        {**RECORD, "extra": None},
        {"incarnation": "a1"},
        [RECORD],
    ],
    ids=["other", "float", "bool", "extra-key", "fewer-keys", "list"],
)
async def test_an_append_expecting_another_value_is_refused_and_writes_nothing(
    store, database, expected
):
    await store.append_context(SESSION, [item(0)], None, None, [(SESSION, "record", RECORD)])
    before = database.query("SELECT start, items_json FROM context_chunks ORDER BY start")
    with pytest.raises(StateConflict) as refused:
        await store.append_context(
            SESSION,
            [item(1)],
            None,
            1,
            [(SESSION, "record", {"replaced": True}), ("other", "k", 1)],
            expected_state=[(SESSION, "record", expected)],
        )
    assert (refused.value.scope, refused.value.key) == (SESSION, "record")
    assert database.query("SELECT start, items_json FROM context_chunks ORDER BY start") == before
    assert await store.load_state(SESSION, "record") == RECORD
    assert await store.load_state("other", "k") is None
    assert (await store.session_summary(SESSION)).sequence == 1


async def test_a_missing_value_is_a_conflict_and_a_new_session_is_not_created(store):
    with pytest.raises(StateConflict):
        await store.append_context(
            SESSION, [item(1)], None, None, expected_state=[("nowhere", "k", 1)]
        )
    assert await store.session_summary(SESSION) is None
    with pytest.raises(StateConflict):
        await store.save_state("s", "k", 2, expected_state=[("s", "k", 1)])
    assert await store.load_state("s", "k") is None


async def test_the_sequence_is_checked_as_well_as_the_state(store):
    await store.append_context(SESSION, [item(0)], None, None, [(SESSION, "record", RECORD)])
    with pytest.raises(SequenceConflict):
        await store.append_context(
            SESSION, [item(1)], None, 5, expected_state=[(SESSION, "record", RECORD)]
        )
    assert await store.context_tail(SESSION) == [item(0)]


async def test_a_recreated_value_equal_to_the_old_one_is_found_equal(store):
    """An expectation compares values, not rows: a caller that must tell a deleted session's
    record from its successor's puts something that differs (an incarnation id) in it."""
    await store.append_context(SESSION, [], None, 0, [(SESSION, "record", RECORD)])
    assert await store.delete_sessions([SESSION]) is True
    await store.append_context(SESSION, [], None, 0, [(SESSION, "record", RECORD)])
    await store.append_context(
        SESSION, [item(1)], None, 1, expected_state=[(SESSION, "record", RECORD)]
    )
    successor = {**RECORD, "incarnation": "b2"}
    assert await store.delete_sessions([SESSION]) is True
    await store.append_context(SESSION, [], None, 0, [(SESSION, "record", successor)])
    with pytest.raises(StateConflict):
        await store.append_context(
            SESSION, [item(1)], None, 1, expected_state=[(SESSION, "record", RECORD)]
        )


async def test_save_state_expecting_values_writes_only_when_all_are_stored(store):
    await store.save_state("app", "a", {"n": 1})
    await store.save_state("app", "b", [1, 2])
    await store.save_state("app", "a", {"n": 2}, expected_state=[("app", "a", {"n": 1})])
    assert await store.load_state("app", "a") == {"n": 2}
    with pytest.raises(StateConflict) as refused:
        await store.save_state(
            "app", "a", {"n": 3}, expected_state=[("app", "a", {"n": 2}), ("app", "b", [2, 1])]
        )
    assert (refused.value.scope, refused.value.key) == ("app", "b")
    assert await store.load_state("app", "a") == {"n": 2}
    await store.save_state(
        "app", "c", "new", expected_state=[("app", "b", [1, 2]), ("app", "a", {"n": 2})]
    )
    assert await store.load_state_scope("app") == {"a": {"n": 2}, "b": [1, 2], "c": "new"}


async def test_concurrent_writers_expecting_one_value_let_exactly_one_win(store):
    await store.append_context(SESSION, [item(0)], None, None, [(SESSION, "record", 0)])

    async def append(number: int) -> int:
        return await store.append_context(
            SESSION,
            [item(number)],
            None,
            None,
            [(SESSION, "record", number)],
            expected_state=[(SESSION, "record", 0)],
        )

    async def save(number: int) -> None:
        await store.save_state(SESSION, "record", number, expected_state=[(SESSION, "record", 0)])

    writers = [append(n) for n in range(1, 5)] + [save(n) for n in range(5, 9)]
    results = await asyncio.gather(*writers, return_exceptions=True)
    won = [n for n, result in enumerate(results, 1) if not isinstance(result, BaseException)]
    assert all(
        isinstance(result, StateConflict) for result in results if isinstance(result, BaseException)
    ), results
    assert len(won) == 1
    assert await store.load_state(SESSION, "record") == won[0]
    appended = 1 if won[0] < 5 else 0
    assert len(await store.context_tail(SESSION)) == 1 + appended


async def test_a_value_changed_while_the_write_waits_is_read_after_the_change(store, database):
    """The expectation is read under the write's lock: a writer that changed the value first
    (uncommitted while ours waits) makes ours conflict, never overwritten by it."""
    await store.save_state("s", "k", 1)
    commit = uncommitted(database, "UPDATE middleware_state SET value_json = '2'")
    waiting = asyncio.ensure_future(store.save_state("s", "k", 3, expected_state=[("s", "k", 1)]))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # held by the other writer's transaction
    commit()
    with pytest.raises(StateConflict):
        await waiting
    assert await store.load_state("s", "k") == 2


def uncommitted(database: Any, statement: str) -> Any:
    """Run `statement` in a write transaction of another connection; return its commit."""
    if database.backend == "postgres":
        connection = postgres_connection(database.schema)
        connection.execute("BEGIN")
    else:
        connection = sqlite3.connect(database.path, isolation_level=None, check_same_thread=False)
        connection.execute("BEGIN IMMEDIATE")
    connection.execute(statement)

    def commit() -> None:
        connection.execute("COMMIT")
        connection.close()

    return commit


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        ([("s", "k", None)], "cannot be None"),
        ([("s", "k")], "(scope, key, value)"),
        (["sk1"], "(scope, key, value)"),
        ([("s", "k\x00", 1)], "key"),
        ([("s", "k", math.nan)], "expected middleware state"),
        ([("s", "k", {1, 2})], "expected middleware state"),
        ([("s", "k", 1), ("s", "k", 2)], "twice"),
        (("s", "k", 1), "(scope, key, value)"),
    ],
    ids=["none", "pair", "text", "nul-in-key", "nan", "set", "twice", "one-bare-triple"],
)
async def test_bad_expectations_are_refused_and_change_nothing(store, database, expected, message):
    await store.append_context(SESSION, [item(0)], None, None, [("s", "k", 1)])
    before = stored(database)
    with pytest.raises(InvalidInput, match=message):
        await store.append_context(SESSION, [item(1)], None, None, expected_state=expected)
    with pytest.raises(InvalidInput, match=message):
        await store.save_state("s", "k", 2, expected_state=expected)
    assert stored(database) == before


def stored(database: Any) -> list[Any]:
    """Every context chunk and state row, and each session's sequence."""
    return [
        database.query("SELECT session_id, start, items_json FROM context_chunks ORDER BY 1, 2"),
        database.query("SELECT scope, key, value_json FROM middleware_state ORDER BY 1, 2"),
        database.query("SELECT session_id, latest_sequence FROM sessions ORDER BY 1"),
    ]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
).filter(lambda value: value is not None)


def same_json(one: Any, other: Any) -> bool:
    """Equal as JSON: equal values of equal JSON types at every place, keys in any order."""
    if type(one) is not type(other):
        return False
    if isinstance(one, dict):
        return one.keys() == other.keys() and all(same_json(one[k], other[k]) for k in one)
    if isinstance(one, list):
        return len(one) == len(other) and all(map(same_json, one, other))
    if isinstance(one, float):
        return repr(one) == repr(other)  # as their JSON text: -0.0 is not 0.0
    return bool(one == other)


@settings(
    max_examples=pick(200, 40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(value=JSON, expected=JSON, same=st.booleans())
def test_a_write_lands_exactly_when_the_values_are_equal_as_json(
    blocking_store, value, expected, same
):
    if same:
        expected = json.loads(json.dumps(value))  # equal, decoded afresh
    blocking_store.save_state("prop", "k", value)
    try:
        blocking_store.save_state("prop", "k", "new", expected_state=[("prop", "k", expected)])
    except StateConflict:
        landed = False
    else:
        landed = True
    assert landed == same_json(value, expected)
    assert blocking_store.load_state("prop", "k") == ("new" if landed else value)
