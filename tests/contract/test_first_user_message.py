"""Contract: the catalog's first user message is filled in when the caller leaves it empty.

The rule (docs/concepts.md): the caller's `first_user_message` when it is not blank, else the
first user message of the save's transcript delta, then of its context (the first 64 items of
each, text cut to 1,024 characters). A session keeps the first one it gets. The checkpoint
itself is stored and loaded exactly as given.
"""

from __future__ import annotations

import pytest

from turnstore import Checkpoint

RESPONSES_USER = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "What's the weather?"}],
}
CHAT_USER = {"role": "user", "content": "Book a table for two"}
PARTS_USER = {"role": "user", "parts": [{"kind": "text", "content": "Summarise this"}]}
ADK_USER = {"author": "user", "content": {"role": "user", "parts": [{"text": "Plan a trip"}]}}
ASSISTANT = {"role": "assistant", "content": "Sure."}


@pytest.mark.parametrize(
    ("item", "text"),
    [
        (RESPONSES_USER, "What's the weather?"),
        (CHAT_USER, "Book a table for two"),
        (PARTS_USER, "Summarise this"),
        (ADK_USER, "Plan a trip"),
    ],
    ids=["responses", "chat", "parts", "adk"],
)
async def test_an_empty_first_user_message_comes_from_the_context(store, item, text):
    """A save without first_user_message shows its context's first user message in the catalog."""
    checkpoint = Checkpoint(session_id="s", sequence=1, context=[ASSISTANT, item])
    await store.save(checkpoint)
    summary = await store.session_summary("s")
    assert summary is not None
    assert summary.first_user_message == text
    loaded = await store.load("s")
    assert loaded == checkpoint
    assert loaded.first_user_message is None


async def test_the_transcript_delta_comes_before_the_context(store):
    """With no explicit value, the transcript delta's user message wins over the context's."""
    checkpoint = Checkpoint(session_id="s", sequence=1, context=[CHAT_USER])
    await store.save(checkpoint, [RESPONSES_USER])
    summary = await store.session_summary("s")
    assert summary.first_user_message == "What's the weather?"


async def test_an_explicit_first_user_message_wins_and_the_first_one_stays(store):
    """A caller's non-blank value is used; later saves never replace the session's first one."""
    await store.save(Checkpoint(session_id="s", sequence=1, first_user_message="hello"))
    checkpoint = Checkpoint(session_id="s", sequence=2, context=[CHAT_USER])
    await store.save(checkpoint, [CHAT_USER])
    assert (await store.session_summary("s")).first_user_message == "hello"


async def test_a_session_without_user_messages_shows_none_until_one_arrives(store):
    """Blank or missing values and assistant-only items leave it empty; the first user fills it."""
    await store.save(Checkpoint(session_id="s", sequence=1, first_user_message="  "))
    assert (await store.session_summary("s")).first_user_message is None
    await store.save(Checkpoint(session_id="s", sequence=2, context=[ASSISTANT]), [ASSISTANT])
    assert (await store.session_summary("s")).first_user_message is None
    later = Checkpoint(session_id="s", sequence=3, context=[ASSISTANT, CHAT_USER])
    await store.save(later, [CHAT_USER])
    assert (await store.session_summary("s")).first_user_message == "Book a table for two"


async def test_a_derived_first_user_message_is_cut_to_a_catalog_line(store):
    """A long first user message is kept as its first 1,024 characters in the catalog."""
    long_text = "x" * 5_000
    checkpoint = Checkpoint(
        session_id="s", sequence=1, context=[{"role": "user", "content": long_text}]
    )
    await store.save(checkpoint)
    assert (await store.session_summary("s")).first_user_message == "x" * 1_024
    assert (await store.load("s")).context[0]["content"] == long_text


async def test_a_fork_shows_its_own_first_user_message(store):
    """A fork's catalog entry takes the first user message of the context it starts with."""
    await store.save(Checkpoint(session_id="parent", sequence=1, first_user_message="parent"))
    child = Checkpoint(session_id="child", context=[CHAT_USER])
    summary = await store.fork("parent", 1, child)
    assert summary.first_user_message == "Book a table for two"
