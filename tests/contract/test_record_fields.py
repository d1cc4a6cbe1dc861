"""A dict where a record is expected is refused on input, with its path; nothing is written.

msgspec would coerce such a dict into the record and drop its unknown keys without a word
(a misspelt `owner_id` would vanish). Stored rows still decode under the schema-version
rules: only what a caller hands the store is held to this.
"""

from __future__ import annotations

import pytest

from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    ExecutionRecord,
    SessionPageRequest,
    TimestampedEvent,
)
from turnstore.errors import InvalidInput
from turnstore.events import TurnStartedEvent


def _with(**fields: object) -> Checkpoint:
    checkpoint = Checkpoint.empty("typed")
    checkpoint.sequence = 1
    for name, value in fields.items():
        setattr(checkpoint, name, value)
    return checkpoint


CASES = {
    "unknown key": (
        {"session_context": {"owner_id": "me", "ownr": "typo"}},
        r"\$\.session_context is a dict where a SessionContext record is expected",
    ),
    "known keys only": (
        {"session_context": {"owner_id": "me"}},
        r"\$\.session_context is a dict where a SessionContext record is expected",
    ),
    "optional record": (
        {"last_usage": {"input_tokens": 1}},
        r"\$\.last_usage is a dict where a TokenUsage record is expected",
    ),
    "nested record": (
        {
            "active_execution": ActiveExecution(
                submission_id="s", turn_id="t", started_at_ms=1, usage={"input_tokens": 1}
            )
        },
        r"\$\.active_execution\.usage is a dict where a TokenUsage record is expected",
    ),
    "list of records": (
        {"pending_tools": [{"call_id": "c", "name": "n", "arguments": "{}"}]},
        r"\$\.pending_tools\[0\] is a dict where a ToolCall record is expected",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
async def test_a_dict_in_a_record_field_is_refused_with_its_path(store, case):
    """Refused on both faces and backends, and no session is created."""
    fields, message = CASES[case]
    with pytest.raises(InvalidInput, match=message):
        await store.save(_with(**fields), [])
    page = await store.list_sessions_page(SessionPageRequest(limit=10))
    assert page.sessions == []


async def test_a_dict_event_message_or_execution_usage_is_refused(store):
    """The same in an event's message and in an execution record; nothing is written."""
    checkpoint = _with()
    event = TimestampedEvent(recorded_at_ms=1, event=Event(msg={"type": "task_started"}))
    with pytest.raises(InvalidInput, match=r"\$\.event\.msg is a dict where a"):
        await store.save_with_events(checkpoint, [], None, [event])
    execution = ExecutionRecord(
        session_id="typed",
        submission_id="s",
        turn_id="t",
        started_at_ms=1,
        finished_at_ms=2,
        elapsed_ms=1,
        outcome="completed",
        usage={"input_tokens": 1},
    )
    with pytest.raises(InvalidInput, match=r"\$\.usage is a dict where a TokenUsage record"):
        await store.save_with_events(checkpoint, [], execution, [])
    assert await store.load("typed") is None
    good = TimestampedEvent(recorded_at_ms=1, event=Event(msg=TurnStartedEvent(turn_id="t")))
    await store.save_with_events(checkpoint, [], None, [good])
    assert (await store.load("typed")).sequence == 1
