"""Contract: a framework session's figures are derived from the items it holds.

The indexer reads what each session gains and adds the figures its kind's items carry (ADK
events' invocations, timestamps, token counts and tool calls; OpenAI Agents SDK items' user
messages and tool calls; LangGraph's, through its saver, in the frameworks' tests). A figure
a kind does not record is left out of `measured`; nothing is counted twice by a rebuild, an
import or a damaged value.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import turnstore
from turnstore.records import SearchRequest, SessionPageRequest
from turnstore.records.base import U64_MAX
from turnstore.records.checkpoint import ExecutionStats, SessionSummary
from turnstore.records.figures import FIGURES
from turnstore.records.protocol import TokenUsage


def _event(invocation: str, author: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"invocation_id": invocation, "author": author, "timestamp": at, **fields}


def _model(invocation: str, at: float, prompt: Any, output: Any, **fields: Any) -> dict[str, Any]:
    usage = {"prompt_token_count": prompt, "candidates_token_count": output}
    content = {"role": "model", "parts": [{"text": "an answer"}]}
    return _event(invocation, "agent", at, content=content, usage_metadata=usage, **fields)


def _summaries(store: Any) -> dict[str, SessionSummary]:
    store.search(SearchRequest(query="anything"))  # a search catches the indexer up
    page = store.list_sessions_page(SessionPageRequest(limit=50))
    return {summary.session_id: summary for summary in page.sessions}


def test_adk_figures_span_appends_and_a_kind_names_what_it_records(store_url):
    """An invocation is a run whose time runs from its first event to its last, even when
    its events arrive in separate appends (the indexer reads the event before them)."""
    call = {"function_call": {"id": "f", "name": "lookup", "args": {}}}
    failed = {"function_response": {"id": "f", "name": "lookup", "response": {"error": "no"}}}
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("a", [_event("i1", "user", 10.0)], kind="adk")
        _summaries(store)
        store.append_context(
            "a",
            [
                _event("i1", "agent", 10.25, content={"role": "model", "parts": [call]}),
                _event("i1", "agent", 10.5, content={"role": "user", "parts": [failed]}),
            ],
            kind="adk",
        )
        _summaries(store)
        store.append_context("a", [_model("i1", 11.0, 7, 3)], kind="adk")
        store.append_context(
            "a",
            [_event("i2", "user", 20.0), _event("i2", "agent", 20.5, error_code="X")],
            kind="adk",
        )
        store.append_context("o", [{"role": "user", "content": "hi"}], kind="openai-agents")
        store.append_context(
            "o",
            [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "web_search_call", "id": "w", "status": "completed"},
                {"type": "function_call_output", "call_id": "c", "output": "4"},
                {"role": "user", "content": "again"},
            ],
            kind="openai-agents",
        )
        store.append_context("i", [{"role": "user", "content": "plain"}])
        found = _summaries(store)
    assert found["a"].execution_stats == ExecutionStats(
        run_count=2,
        failed_run_count=1,
        model_calls=2,
        tool_calls=1,
        failed_tool_calls=1,
        elapsed_ms=1500,
        usage=TokenUsage(input_tokens=7, output_tokens=3),
    )
    assert found["a"].measured == list(FIGURES)
    assert found["o"].execution_stats == ExecutionStats(run_count=2, tool_calls=2)
    assert found["o"].measured == ["runs", "tool_calls"]
    assert found["i"].execution_stats == ExecutionStats()
    assert found["i"].measured == []
    assert all(summary.waiting == [] for summary in found.values())


def test_tokens_are_unrecorded_until_an_item_carries_them(store_url):
    """An ADK session whose events hold no usage records every figure but its tokens."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("a", [_event("i1", "user", 1.0)], kind="adk")
        assert "tokens" not in _summaries(store)["a"].measured
        store.append_context("a", [_model("i1", 2.0, 5, 5)], kind="adk")
        assert _summaries(store)["a"].measured == list(FIGURES)


def test_a_rebuild_derives_the_figures_once(store_url):
    """Reindexing from the start derives anew from every item: never twice."""
    events = [_event("i1", "user", 1.0), _model("i1", 1.5, 100, 20)]
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("a", events, kind="adk")
        before = _summaries(store)["a"]
        assert before.execution_stats.usage.input_tokens == 100
        store.upkeep.reindex(restart=True)
        after = _summaries(store)["a"]
    assert after.execution_stats == before.execution_stats
    assert after.measured == before.measured == list(FIGURES)


def test_an_import_keeps_the_kind_and_derives_the_figures_once(store_url, tmp_path):
    """An export carries a session's kind (`session_kind`), so an SDK session imports as one
    and its figures are derived from its items; an export without the kind (made before it
    was carried) still imports, its kind named from what the session holds."""
    items = [{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c"}]
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("o", items, kind="openai-agents")
        before = _summaries(store)["o"]
        exported = io.BytesIO()
        store.upkeep.export_trees(exported, session_ids=["o"])
    lines = exported.getvalue().splitlines()
    assert sum(b'"session_kind":"openai-agents"' in line for line in lines) == 1
    with turnstore.open_blocking(tmp_path / "copy.sqlite3", index_in_background=False) as copy:
        copy.upkeep.import_trees(io.BytesIO(exported.getvalue()))
        copied = _summaries(copy)["o"]
    assert (copied.kind, copied.execution_stats, copied.measured) == (
        "openai-agents",
        before.execution_stats,
        ["runs", "tool_calls"],
    )
    assert before.execution_stats == ExecutionStats(run_count=1, tool_calls=1)
    # As an earlier build wrote it: no `session_kind`, and the tree's digest over that.
    older = [line.replace(b',"session_kind":"openai-agents"', b"") for line in lines]
    header = json.loads(older[1])
    rows = older[2:-1]
    header["digest"] = hashlib.sha256(b"".join(row + b"\n" for row in rows)).hexdigest()
    older[1] = json.dumps(header, separators=(",", ":")).encode()
    with turnstore.open_blocking(tmp_path / "old.sqlite3", index_in_background=False) as old:
        old.upkeep.import_trees(io.BytesIO(b"\n".join(older) + b"\n"))
        assert _summaries(old)["o"].kind == "items"  # an SDK session holds nothing to say so


def test_damaged_or_foreign_counts_count_nothing_and_a_sum_past_2_64_stops_growing(store_url):
    """A negative, fractional, boolean or text count is 0, an unreadable event nothing; a
    batch whose sum would pass 2**64 adds nothing, and the session is still indexed."""
    wrapped = {
        "invocation_id": "i1",
        "author": "agent",
        "timestamp": 3.0,
        "content": {"role": "model"},
        "usage_metadata": {"prompt_token_count": 4},
    }
    odd = [
        _model("i1", 1.0, -5, 2.5),
        _model("i1", 2.0, True, "9"),
        {"adk-json": json.dumps(wrapped)},
        {"adk-json": "not json"},
        "a string",
        _event("i1", "agent", 4.0, content=[1, 2]),
    ]
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.append_context("a", odd, kind="adk")
        stats = _summaries(store)["a"].execution_stats
        assert (stats.model_calls, stats.usage.input_tokens, stats.usage.output_tokens) == (3, 4, 0)
        assert stats.elapsed_ms == 3000
        store.append_context("a", [_model("i1", 5.0, U64_MAX, 0)], kind="adk")
        assert _summaries(store)["a"].execution_stats == stats
        last = _model("i1", 6.0, 1, 0)
        last["content"]["parts"] = [{"text": "zebu"}]
        store.append_context("a", [last], kind="adk")
        stats = _summaries(store)["a"].execution_stats
        assert (stats.model_calls, stats.usage.input_tokens, stats.elapsed_ms) == (4, 5, 4000)
        hits = store.search(SearchRequest(query="zebu")).hits
        assert [(hit.session_id, hit.item) for hit in hits] == [("a", 7)]
