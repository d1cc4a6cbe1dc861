"""A database written by an earlier build opens, migrates and reads back what it held.

The fixtures in `tests/fixtures/` were written by the builds before schema 3, 4, 5, 6, 7, 8,
9, 10, 11 and 12 (how: see `tests/fixtures/make_schema_v2.py`, run by the first two,
`make_schema_v4.py`, run by the next two, which adds a model step left streaming,
`make_schema_v6.py`, which adds a session of items with a popped item, `make_schema_v7.py`,
which adds a session of each framework, `make_schema_v8.py`, which adds two indexed sessions
sharing words, run again by `make_schema_v9.py`, `make_schema_v10.py`, which adds memory
items, and `make_schema_v11.py`, which adds memory items indexed by their words): a SQLite
file and a PostgreSQL schema dumped as SQL per version.
`test_search.py` searches the migrated ones once reindexed. Every test runs on both.
They are kept as files, so that no later change to this code can change what they hold.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

import turnstore
from conftest import fts5_terms, restore_fixture
from turnstore import (
    Event,
    EventPageRequest,
    ExecutionPageRequest,
    SessionPageRequest,
    TimestampedEvent,
    TranscriptPageRequest,
)
from turnstore.backends.postgres import schema as postgres_schema
from turnstore.backends.sqlite import schema as sqlite_schema
from turnstore.errors import SearchIndexNotBuilt
from turnstore.events import ModelStepCompleted, ModelStepCompletedEvent, WarningEvent
from turnstore.records import AttachmentIntent, StreamMetrics
from turnstore.records.checkpoint import ExecutionStats
from turnstore.records.figures import FIGURES
from turnstore.records.memory import (
    MemoryCall,
    MemoryDelete,
    MemoryGet,
    MemoryPut,
    MemorySearch,
)
from turnstore.records.protocol import TokenUsage
from turnstore.records.search import SearchRequest


@pytest.fixture(
    params=[2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    ids=[f"schema-{version}" for version in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)],
)
def fixture_version(request: pytest.FixtureRequest) -> int:
    """The schema version of the fixture under test."""
    return int(request.param)


def _warning(at_ms: int) -> TimestampedEvent:
    return TimestampedEvent(recorded_at_ms=at_ms, event=Event(msg=WarningEvent(message="after")))


def _schema_version(backend_name: str, database: Any) -> int:
    if backend_name == "sqlite":
        return int(database.query("PRAGMA user_version")[0][0])
    return int(database.query("SELECT max(version) FROM turnstore_schema")[0][0])


def test_the_fixture_is_at_its_schema_version(backend_name, database, pg_schema, fixture_version):
    """The fixture is what the earlier build wrote, not a database of the current one."""
    restore_fixture(backend_name, database, pg_schema, fixture_version)
    assert _schema_version(backend_name, database) == fixture_version


def test_an_earlier_database_opens_migrated_with_everything_it_held(
    backend_name, database, pg_schema, store_url, fixture_version
):
    """Checkpoints, context, journals, fork, state, runtime head and manifest read back."""
    restore_fixture(backend_name, database, pg_schema, fixture_version)
    with turnstore.open_blocking(store_url) as store:
        chat = store.load("chat")
        assert chat is not None
        assert chat.sequence == 3
        assert chat.metadata == {"title": "fixture", "nul": "a\x00b", "n": 2**63 - 1, "f": -0.5}
        assert chat.context[4] == {"role": "user", "content": "question 3 \u00e9\u4e2d"}
        assert chat.context[5] == {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "answer 3"}],
        }
        assert len(chat.context) == 6
        events = store.event_page("chat", EventPageRequest(limit=50)).events
        assert [(event.sequence, type(event.event.msg).__name__) for event in events] == [
            (6, "WarningEvent"),
            (5, "TurnStartedEvent"),
            (4, "WarningEvent"),
            (3, "TurnStartedEvent"),
            (2, "WarningEvent"),
            (1, "TurnStartedEvent"),
        ]
        page = store.transcript_page("chat", TranscriptPageRequest(max_batches=10))
        assert [item for _, item in page.into_positioned_items_chronological()] == list(
            chat.context
        )
        executions = store.execution_page("chat", ExecutionPageRequest(limit=10)).executions
        assert [execution.turn_id for execution in executions] == ["t3", "t2", "t1"]
        fork = store.load("chat-fork")
        assert fork is not None
        assert list(fork.context) == list(chat.context[:4])
        sessions = store.list_sessions_page(SessionPageRequest(limit=10)).sessions
        streaming = ["stream"] if fixture_version >= 4 else []
        held = ["items"] if fixture_version >= 6 else []
        if fixture_version >= 7:
            held += ["adk/fixture-app/fixture-user/s1", "fixture", "langgraph/fixture-thread"]
        if fixture_version >= 8:
            held += ["journal", "shared"]
        # Events stored a row each before schema 6 read back beside the batches after it.
        chat.sequence += 1
        store.save_with_events(chat, [], None, [_warning(7)])
        newest = store.event_page("chat", EventPageRequest(limit=3)).events
        assert [event.sequence for event in newest] == [7, 6, 5]
        assert sorted(summary.session_id for summary in sessions) == sorted(
            ["chat", "chat-fork", *held, "rt", *streaming]
        )
        assert store.load_state("global", "k") == {"v": [1, 2, 3]}
        rt = store.runtime("rt")
        head = rt.load_session()
        assert head is not None
        assert (head.head_revision, head.graph.leaf_node_id) == (1, "n1")
        assert [entry.attachment_id for entry in rt.list_uncommitted(2**62)] == ["rt-orphan"]
        # Long-term memory (schema 10) is there beside what the store held.
        item = MemoryPut(("olive", "prefs"), "color", '{"v": "teal"}', None, "olive")
        store.memory.run(MemoryCall(writes=(item,)))
        found = store.memory.run(MemoryCall(gets=(MemoryGet(("olive", "prefs"), "color"),)))
        assert [row and row.value_json for row in found.gets] == ['{"v": "teal"}']
    assert _schema_version(backend_name, database) == len(sqlite_schema.MIGRATIONS) == 12
    assert len(postgres_schema.MIGRATIONS) == 12


def test_a_migrated_earlier_database_takes_new_writes_under_the_new_rules(
    backend_name, database, pg_schema, store_url, fixture_version
):
    """The next save appends to the stored context; a URI the fixture's entry names is taken."""
    restore_fixture(backend_name, database, pg_schema, fixture_version)
    with turnstore.open_blocking(store_url) as store:
        chat = store.load("chat")
        assert chat is not None
        chat.sequence += 1
        chat.context.append({"role": "user", "content": "question 4"})
        store.save(chat, [chat.context[-1]])
        reloaded = store.load("chat")
        assert reloaded is not None
        assert list(reloaded.context) == list(chat.context)
        assert store.runtime("x").canonical_uri_in_use("/files/rt/doc")
        intent = AttachmentIntent(
            attachment_id="x-doc",
            session_id="x",
            canonical_uri="/files/rt/doc",
            intent_at_epoch_ms=1,
        )
        with pytest.raises(turnstore.InvalidInput):
            store.runtime("x").record_intent(intent)


def _step_index_definition(backend_name: str, database: Any, pg_schema: str) -> str:
    if backend_name == "sqlite":
        ((definition,),) = database.query(
            "SELECT sql FROM sqlite_schema WHERE name = 'event_journal_step_idx'"
        )
    else:
        # Other tests' schemas in the same database have an index of that name too.
        ((definition,),) = database.query(
            "SELECT indexdef FROM pg_indexes"
            " WHERE indexname = 'event_journal_step_idx' AND schemaname = ?",
            (pg_schema,),
        )
    return str(definition)


def test_a_step_left_streaming_before_schema_5_completes_from_its_stored_deltas(
    backend_name, database, pg_schema, store_url
):
    """Schema 5 rebuilds the step index over the stored deltas; completing reads and drops them."""
    restore_fixture(backend_name, database, pg_schema, 4)
    assert "agent_message_content_delta" not in _step_index_definition(
        backend_name, database, pg_schema
    )
    with turnstore.open_blocking(store_url) as store:
        checkpoint = store.load("stream")
        assert checkpoint is not None
        checkpoint.sequence += 1
        ids = {"session_id": "stream", "turn_id": "t1", "model_step_id": "t1-step-0"}
        completed = ModelStepCompletedEvent(
            **ids,
            step_index=0,
            started_at_ms=1_000,
            completed_at_ms=1_100,
            outcome=ModelStepCompleted(end_turn=True),
        )
        stamped = TimestampedEvent(recorded_at_ms=1_100, event=Event(msg=completed))
        store.save_with_events(checkpoint, [], None, [stamped])
        events = store.event_page("stream", EventPageRequest(limit=50)).events
    assert [(event.sequence, type(event.event.msg).__name__) for event in events] == [
        (5, "ModelStepCompletedEvent"),
        (2, "ModelStepStartedEvent"),
        (1, "TurnStartedEvent"),
    ]
    assert events[0].stream_metrics == [
        StreamMetrics(
            phase=phase,
            first_delta_at_ms=at,
            last_delta_at_ms=at,
            chunk_count=1,
            utf8_bytes=size,
            longest_gap_ms=0,
        )
        for phase, at, size in (("reasoning", 1_020, 8), ("final_answer", 1_030, 5))
    ]
    definition = _step_index_definition(backend_name, database, pg_schema)
    assert "agent_message_content_delta" in definition
    assert "agent_reasoning_content_delta" in definition


def test_framework_sessions_written_before_schema_8_show_the_figures_their_items_carry(
    backend_name, database, pg_schema, store_url
):
    """Schema 8 empties the search index, and the reindex that builds it again derives the
    framework sessions' figures: model and tool calls, tokens and times where the framework
    kept them, a thread's waiting node, and which figures each kind records; a session of
    items records none."""
    restore_fixture(backend_name, database, pg_schema, 7)
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        with pytest.raises(SearchIndexNotBuilt):
            store.search(SearchRequest(query="tide"))
        assert store.upkeep.reindex().built
        assert store.search(SearchRequest(query="tide")).hits
        found = {
            summary.session_id: summary
            for summary in store.list_sessions_page(SessionPageRequest(limit=20)).sessions
        }
    adk = found["adk/fixture-app/fixture-user/s1"]
    assert adk.execution_stats == ExecutionStats(
        run_count=2,
        model_calls=2,
        tool_calls=1,
        failed_tool_calls=1,
        elapsed_ms=1500,
        usage=TokenUsage(
            input_tokens=400,
            cached_input_tokens=100,
            output_tokens=80,
            reasoning_output_tokens=20,
            total_tokens=500,
        ),
    )
    assert adk.measured == list(FIGURES)
    thread = found["langgraph/fixture-thread"]
    assert thread.execution_stats == ExecutionStats(
        run_count=1,
        model_calls=1,
        tool_calls=1,
        usage=TokenUsage(input_tokens=120, output_tokens=30, total_tokens=150),
    )
    assert thread.measured == ["runs", "model_calls", "tool_calls", "failed_tool_calls", "tokens"]
    assert thread.waiting == ["tools"]
    openai = found["fixture"]
    assert (openai.execution_stats.run_count, openai.execution_stats.tool_calls) == (1, 1)
    assert openai.measured == ["runs", "tool_calls"]
    assert found["items"].measured == []
    assert found["chat"].measured == list(FIGURES)
    assert all(summary.waiting == [] for summary in found.values() if summary.kind != "langgraph")


def test_a_schema_8_index_is_kept_and_forgets_exactly_what_goes_after_the_migration(
    backend_name, database, pg_schema, store_url
):
    """Schema 9 drops the index's copy of the words and keeps the index (filled from that
    copy): the migrated store searches without a reindex, and a pop and a delete after it
    take out exactly the words of what they remove (SQLite's FTS5 is handed them)."""
    restore_fixture(backend_name, database, pg_schema, 8)
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        assert _hits(store, "lighthouse") == [
            ("items", None, 0),
            ("journal", 1, 0),
            ("shared", None, 0),
            ("shared", None, 1),
        ]
        assert _hits(store, "天気") == [("shared", None, 2)]
        assert _hits(store, "dinghy") == [("journal", 1, 1)]
        store.pop_context("shared")
        assert _hits(store, "天気") == []
        assert store.delete_sessions(["journal"])
        assert _hits(store, "dinghy") == []
        assert _hits(store, "lighthouse") == [
            ("items", None, 0),
            ("shared", None, 0),
            ("shared", None, 1),
        ]
        assert _hits(store, "keeper") == [
            ("items", None, 0),
            ("items", None, 1),
            ("shared", None, 1),
        ]
        assert store.upkeep.reindex().items_indexed == 0  # it was built: nothing to do
    if backend_name == "sqlite":
        # What FTS5 holds is what the items still indexed hold, term for term.
        connection = sqlite3.connect(database.path)
        try:
            connection.execute(
                "CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_fts, row)"
            )
            held = dict(
                connection.execute(
                    "SELECT term, doc FROM temp.terms WHERE term IN"
                    " ('lighthouse', 'dinghy', '天気', 'keeper')"
                )
            )
        finally:
            connection.close()
        assert held == {"lighthouse": 3, "keeper": 3}


def _hits(store: Any, query: str) -> list[tuple[str, int | None, int]]:
    found = store.search(SearchRequest(query=query, limit=50)).hits
    return sorted((hit.session_id, hit.sequence, hit.item) for hit in found)


def test_schema_10_memory_keeps_its_items_and_is_searched_by_text_once_written_again(
    backend_name, database, pg_schema, store_url
):
    """Schema 11 rebuilds SQLite's `memory_items` around a row id and adds the text index:
    items, vectors, owners and times stay; an item is found by its words once put again,
    and no longer once deleted (SQLite's FTS5 is handed exactly its words)."""
    restore_fixture(backend_name, database, pg_schema, 10)
    with turnstore.open_blocking(store_url) as store:

        def found(query: str | None = None) -> list[tuple[str, str, int, int | None]]:
            search = MemorySearch(("olive",), limit=None, vectors=True, query=query)
            (rows,) = store.memory.run(MemoryCall(searches=(search,))).searches
            return [(r.row.namespace, r.row.key, len(r.vectors), r.row.ttl_ms) for r in rows]

        assert sorted(found()) == [
            ("olive.memories", "m1", 1, None),
            ("olive.prefs", "color", 0, 86_400_000),
        ]
        assert found("lighthouse") == []  # written before the index: not in it
        again = MemoryPut(
            ("olive", "memories"),
            "m1",
            '{"text": "likes the lighthouse tour"}',
            None,
            "olive",
            text=True,
        )
        store.memory.run(MemoryCall(writes=(again,)))
        assert found("lighthouse") == [("olive.memories", "m1", 1, None)]
        assert found("orange") == []
        store.memory.run(MemoryCall(writes=(MemoryDelete(("olive", "memories"), "m1"),)))
        assert found("lighthouse") == []
    if backend_name == "sqlite":
        assert fts5_terms(database.path) == {}


def test_schema_11_memory_indexed_by_its_words_keeps_them_and_forgets_them_exactly(
    backend_name, database, pg_schema, store_url
):
    """Schema 12 keeps the words of the items schema 11 indexed, and the items it did not
    index unsearched: each is found by its words, a replaced item by its last ones only; put
    again and deleted before the indexer ran (SQLite), an item leaves no word behind."""
    restore_fixture(backend_name, database, pg_schema, 11)
    with turnstore.open_blocking(store_url, index_in_background=False) as store:

        def found(query: str) -> list[tuple[str, str]]:
            search = MemorySearch((), limit=None, query=query)
            (rows,) = store.memory.run(MemoryCall(searches=(search,))).searches
            return sorted((one.row.namespace, one.row.key) for one in rows)

        assert found("kayaks") == [("pablo.notes", "n1")]
        assert found("almonds") == [("pablo.notes", "n2")]
        assert found("walnuts") == []
        assert found("lighthouse") == found("teal") == []  # never indexed
        where = ("pablo", "notes")
        for key in ("n1", "n2"):
            again = MemoryPut(where, key, '{"text": "gone"}', None, "pablo", text=True)
            store.memory.run(MemoryCall(writes=(again,)))
            store.memory.run(MemoryCall(writes=(MemoryDelete(where, key),)))
        assert found("kayaks") == found("almonds") == found("gone") == []
        olive = MemoryPut(
            ("olive", "prefs"), "color", '{"text": "teal, never orange"}', None, "olive", text=True
        )
        store.memory.run(MemoryCall(writes=(olive,)))
        assert found("teal") == [("olive.prefs", "color")]
    if backend_name == "sqlite":
        assert fts5_terms(database.path) == {"teal": 1, "never": 1, "orange": 1}
