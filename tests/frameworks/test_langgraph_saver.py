"""The LangGraph checkpointer on both backends: LangGraph's conformance suite, then ours.

`langgraph-checkpoint-conformance` (pinned in the `bench` extra) runs each of its eight
capability suites on a fresh database; the test asserts that every capability was detected
and passed, since the suite's overall level ignores a capability it did not detect. Our own
tests cover what it does not: a graph's whole history against `InMemorySaver`'s, across a
reopened store and a run resumed from an older checkpoint; the list channel stored as
appends; `task_path`; prune and copy keeping every kept checkpoint loadable; the catalog;
refused input; two processes writing one thread; the msgpack allowlist.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _langgraph_graph import Booking, build, build_fan_out, config, user

import turnstore
from conftest import POSTGRES_URL, postgres_connection, require_postgres, restore_fixture
from turnstore.errors import InvalidInput

pytestmark = pytest.mark.peers

WRITER = Path(__file__).with_name("_langgraph_writer.py")


@pytest.fixture
def saver(store_url: str) -> Iterator[Any]:
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver(store_url) as opened:
        yield opened


def history(graph: Any, thread_config: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every checkpoint of a thread as a graph sees it: values, next nodes, step, tasks.

    A task's id derives from its checkpoint's id, which differs from run to run; the rest of
    the task (name, path, error, interrupts, the writes it made) is compared.
    """
    return [
        (
            snapshot.values,
            snapshot.next,
            snapshot.metadata.get("step"),
            [(t.name, t.path, repr(t.error), t.interrupts, t.result) for t in snapshot.tasks],
        )
        for snapshot in graph.get_state_history(thread_config)
    ]


# --- LangGraph's conformance suite ------------------------------------------------------------


def _fresh_url(backend_name: str, tmp_path: Path, schemas: list[str]) -> str:
    if backend_name == "sqlite":
        return str(tmp_path / f"conformance-{uuid.uuid4().hex}.sqlite3")
    schema = f"lg_conformance_{uuid.uuid4().hex}"
    schemas.append(schema)
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}schema={schema}"


async def test_the_conformance_suite_passes_every_capability(backend_name, tmp_path):
    from langgraph.checkpoint.conformance import checkpointer_test, validate
    from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

    from turnstore.integrations.langgraph import TurnstoreSaver

    if backend_name == "postgres":
        require_postgres()
    schemas: list[str] = []
    urls: list[str] = []

    @checkpointer_test(name=f"turnstore-{backend_name}")
    async def factory() -> Any:
        urls.append(_fresh_url(backend_name, tmp_path, schemas))
        saver = TurnstoreSaver(urls[-1])
        yield saver
        await saver.aclose()

    try:
        report = await validate(factory)
    finally:
        for schema in schemas:
            with postgres_connection() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    results = report.results
    assert sorted(results) == sorted(capability.value for capability in ALL_CAPABILITIES)
    failures = {
        name: [failure for failure in result.failures]
        for name, result in results.items()
        if not (result.detected and result.passed)
    }
    assert not failures
    assert sum(result.tests_passed for result in results.values()) == 81
    assert len(set(urls)) == len(ALL_CAPABILITIES)  # a fresh database per capability


# --- a graph's whole history ------------------------------------------------------------------


@pytest.mark.parametrize("delta", [False, True], ids=["add_messages", "DeltaChannel"])
def test_a_graph_history_matches_the_in_memory_saver_across_a_reopen(store_url, delta):
    from langgraph.checkpoint.memory import InMemorySaver

    from turnstore.integrations.langgraph import TurnstoreSaver

    memory = build(InMemorySaver(), delta=delta)
    with TurnstoreSaver(store_url) as saver:
        graph = build(saver, delta=delta)
        for turn in range(12):
            memory.invoke(user("t", turn), config("t"))
            graph.invoke(user("t", turn), config("t"))
        assert history(graph, config("t")) == history(memory, config("t"))
    with TurnstoreSaver(store_url) as reopened:
        graph = build(reopened, delta=delta)
        assert history(graph, config("t")) == history(memory, config("t"))
        # Resume from a checkpoint in the middle: the thread branches.
        middle = list(graph.get_state_history(config("t")))[20].config
        middle_memory = list(memory.get_state_history(config("t")))[20].config
        graph.invoke(user("t", 99), middle)
        memory.invoke(user("t", 99), middle_memory)
        assert history(graph, config("t")) == history(memory, config("t"))


async def test_the_async_path_matches_the_in_memory_saver(store_url):
    from langgraph.checkpoint.memory import InMemorySaver

    from turnstore.integrations.langgraph import TurnstoreSaver

    memory = build(InMemorySaver())
    async with TurnstoreSaver(store_url) as saver:
        graph = build(saver)
        for turn in range(6):
            await memory.ainvoke(user("a", turn), config("a"))
            await graph.ainvoke(user("a", turn), config("a"), durability="sync")
        ours = [s async for s in graph.aget_state_history(config("a"))]
        theirs = [s async for s in memory.aget_state_history(config("a"))]
        assert [(s.values, s.next) for s in ours] == [(s.values, s.next) for s in theirs]


def test_the_message_list_is_stored_as_appends(store_url, database):
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver(store_url) as saver:
        graph = build(saver)
        for turn in range(20):
            graph.invoke(user("grow", turn), config("grow"))
    # Each of the 80 messages is stored once, in one lineage, however many versions name it.
    assert database.count("lg_items") == 80
    assert database.count("lg_lineages") == 1
    versions = database.query(
        "SELECT length FROM lg_blobs WHERE channel = 'messages' ORDER BY length"
    )
    assert [row[0] for row in versions] == list(range(1, 81))


def test_a_branch_shares_the_prefix_and_stays_exact(saver, database):
    graph = build(saver)
    for turn in range(5):
        graph.invoke(user("b", turn), config("b"))
    states = list(graph.get_state_history(config("b")))
    fork_at = states[8]
    before = len(fork_at.values["messages"])
    graph.invoke(user("b", 50), fork_at.config)
    branched = graph.get_state(config("b")).values["messages"]
    assert branched[:before] == fork_at.values["messages"]
    assert next(m.id for m in branched[before:]) == "user-b-50"
    # The branch wrote only its own messages, in a second lineage based on the first.
    assert database.count("lg_items") == 20 + 4
    assert database.count("lg_lineages") == 2
    # The first branch still loads whole.
    assert graph.get_state(states[0].config).values == states[0].values


def test_a_deep_chain_of_branches_is_flattened_and_exact(saver, database):
    from turnstore.scripts.langgraph import MAX_DEPTH

    graph = build(saver)
    graph.invoke(user("d", 0), config("d"))
    expected = []
    for turn in range(1, MAX_DEPTH + 4):
        # Each turn resumes from the previous turn's final checkpoint after a branch.
        head = graph.get_state(config("d"))
        previous = list(graph.get_state_history(config("d")))[1]
        graph.invoke(user("d", turn), previous.config)
        graph.invoke(user("d", 100 + turn), head.config)
        expected.append(graph.get_state(config("d")).values)
    for snapshot in graph.get_state_history(config("d")):
        assert graph.get_state(snapshot.config).values == snapshot.values
    depth = database.query("SELECT MAX(depth) FROM lg_lineages")[0][0]
    assert depth <= MAX_DEPTH


def test_task_path_reaches_the_saver_and_orders_the_writes(saver, database):
    graph = build_fan_out(saver)
    with pytest.raises(RuntimeError):
        graph.invoke({"items": []}, config("fan"), durability="sync")
    head = saver.get_tuple(config("fan"))
    checkpoint_id = head.config["configurable"]["checkpoint_id"]
    stored = database.query(
        "SELECT task_path, task_id, idx FROM lg_writes WHERE checkpoint_id = ?"
        if database.backend == "sqlite"
        else "SELECT task_path, task_id, idx FROM lg_writes WHERE checkpoint_id = %s",
        (checkpoint_id,),
    )
    # LangGraph passes task_path only to a parameter of that name: each Send task has its
    # own, and a's and c's writes were saved before b failed.
    pushed = [row[0] for row in stored if row[0].startswith("~__pregel_push")]
    assert len(pushed) >= 2
    assert len(set(pushed)) == len(pushed)
    # Replay order is LangGraph's writes_sort_key: (task_path, task_id, idx).
    assert [write[0] for write in head.pending_writes] == [row[1] for row in sorted(stored)]


# --- prune, copy, delete ------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [False, True], ids=["add_messages", "DeltaChannel"])
def test_prune_keeps_the_latest_state_loadable(saver, database, delta):
    graph = build(saver, delta=delta)
    for turn in range(7):
        graph.invoke(user("p", turn), config("p"))
    before = graph.get_state(config("p")).values
    saver.prune(["p"], strategy="keep_latest")
    assert graph.get_state(config("p")).values == before
    kept = list(graph.get_state_history(config("p")))
    for snapshot in kept:
        assert graph.get_state(snapshot.config).values == snapshot.values
    if delta:
        assert 1 < len(kept) <= 4  # back to the last snapshot (every third update)
    else:
        assert len(kept) == 1
        # What is left is what the kept checkpoint names: its versions, its 28 messages.
        (named,) = database.query("SELECT versions_json FROM lg_checkpoints")
        versions = set(json.loads(named[0]).items())
        blobs = set(database.query("SELECT channel, version FROM lg_blobs"))
        assert blobs
        assert blobs <= versions
        assert database.count("lg_items") == 28
    graph.invoke(user("p", 7), config("p"))
    assert len(graph.get_state(config("p")).values["messages"]) == 32


def test_a_copy_is_independent_of_its_source(saver):
    graph = build(saver)
    for turn in range(3):
        graph.invoke(user("src", turn), config("src"))
    saver.copy_thread("src", "dst")
    assert history(graph, config("dst")) == [
        (values, nxt, step, tasks) for values, nxt, step, tasks in history(graph, config("src"))
    ]
    expected = history(graph, config("src"))
    saver.delete_thread("src")
    assert saver.get_tuple(config("src")) is None
    assert history(graph, config("dst")) == expected
    graph.invoke(user("dst", 3), config("dst"))
    assert len(graph.get_state(config("dst")).values["messages"]) == 16


def test_a_thread_is_a_session_of_the_catalog(saver, store_url, database):
    graph = build(saver)
    graph.invoke(user("cat", 0), config("cat", owner_id="ada"))
    with turnstore.open_blocking(store_url) as store:
        page = store.list_sessions_page(turnstore.SessionPageRequest(limit=10, owner_id="ada"))
        assert [summary.session_id for summary in page.sessions] == ["langgraph/cat"]
        assert store.delete_sessions(["langgraph/cat"])
    for table in ("lg_checkpoints", "lg_blobs", "lg_items", "lg_lineages", "lg_writes"):
        assert database.count(table) == 0, table
    assert saver.get_tuple(config("cat")) is None


def _checkpoint(checkpoint_id: str, messages: list[Any], step: int) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": _version(step)}
    return checkpoint


def _version(step: int) -> str:
    return f"{step:010}"


def test_a_list_whose_lineage_is_gone_is_stored_whole(saver, store_url):
    """The saver sends a list as the new items of a lineage it remembers; when another hand
    deleted the thread meanwhile, the store's put sends the request again with it whole."""
    from langchain_core.messages import HumanMessage

    first = [HumanMessage(content=f"m{n}", id=f"m{n}") for n in range(3)]
    stored = saver.put(config("gone"), _checkpoint("c1", first, 1), {}, {"messages": _version(1)})
    remembered = saver.get_tuple(stored).checkpoint["channel_values"]["messages"]
    with turnstore.open_blocking(store_url) as store:
        assert store.delete_sessions(["langgraph/gone"])
    grown = [*remembered, HumanMessage(content="m3", id="m3")]
    again = saver.put(stored, _checkpoint("c2", grown, 2), {}, {"messages": _version(2)})
    loaded = saver.get_tuple(again)
    assert [m.id for m in loaded.checkpoint["channel_values"]["messages"]] == [
        "m0",
        "m1",
        "m2",
        "m3",
    ]


async def test_a_listing_pages_through_limits_and_filters(saver, monkeypatch):
    """`list` and `alist` read page by page (a page of 3 here): every checkpoint newest
    first, a limit cut across pages, a metadata filter applied before the limit."""
    import turnstore.integrations.langgraph as module

    monkeypatch.setattr(module, "PAGE", 3)
    parent = config("pages")
    for step in range(10):
        checkpoint = _checkpoint(f"c{step:02}", [step], step)
        metadata = {"step": step, "source": "loop" if step % 2 else "input"}
        parent = saver.put(parent, checkpoint, metadata, {"messages": _version(step)})

    def ids(items: list[Any]) -> list[str]:
        return [item.config["configurable"]["checkpoint_id"] for item in items]

    newest = [f"c{step:02}" for step in reversed(range(10))]
    odd = [f"c{step:02}" for step in reversed(range(10)) if step % 2]
    cases = [({}, newest), ({"limit": 7}, newest[:7]), ({"filter": {"source": "loop"}}, odd)]
    cases += [({"filter": {"source": "loop"}, "limit": 4}, odd[:4]), ({"limit": 0}, [])]
    for options, expected in cases:
        assert ids(list(saver.list(config("pages"), **options))) == expected, options
        assert ids([item async for item in saver.alist(config("pages"), **options)]) == expected
    assert ids(list(saver.list(None, limit=5))) == newest[:5]


# --- refusals -----------------------------------------------------------------------------------


def test_bad_input_is_refused_and_writes_nothing(saver, database):
    from langgraph.checkpoint.base import empty_checkpoint

    with pytest.raises(InvalidInput):
        saver.put({"configurable": {}}, empty_checkpoint(), {}, {})
    with pytest.raises(InvalidInput):
        saver.put(config("nul\x00"), empty_checkpoint(), {}, {})
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"bad\x00channel": [1]}
    checkpoint["channel_versions"] = {"bad\x00channel": "1"}
    with pytest.raises(InvalidInput):
        saver.put(config("ok"), checkpoint, {}, {"bad\x00channel": "1"})
    with pytest.raises(InvalidInput):
        saver.put(config("ok", checkpoint_ns="ns\x00"), empty_checkpoint(), {}, {})
    with pytest.raises(InvalidInput):
        saver.put_writes(config("ok"), [("ch", 1)], "task")  # no checkpoint_id
    with pytest.raises(InvalidInput):
        saver.put_writes(config("ok", checkpoint_id="c1"), [("ch", 1)], "task\x00")
    with pytest.raises(InvalidInput):
        saver.put_writes(config("ok", checkpoint_id="c1"), [("ch", 1)], "task", "path\x00")
    with pytest.raises(InvalidInput):
        saver.prune(["ok"], strategy="sometimes")
    assert database.count("sessions") == 0
    assert database.count("lg_checkpoints") == 0


def test_a_type_outside_the_allowlist_is_not_rebuilt(store_url):
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from turnstore.integrations.langgraph import TurnstoreSaver

    value = [Booking(seat="12A")]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"bookings": value}
    checkpoint["channel_versions"] = {"bookings": "1"}
    with TurnstoreSaver(store_url) as writer:
        stored = writer.put(config("x"), checkpoint, {}, {"bookings": "1"})
        assert writer.get_tuple(stored).checkpoint["channel_values"]["bookings"] == value
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    with TurnstoreSaver(store_url, serde=strict) as reader:
        loaded = reader.get_tuple(stored).checkpoint["channel_values"]["bookings"]
        assert not any(isinstance(item, Booking) for item in loaded)
        allowed = reader.with_allowlist([(Booking.__module__, "Booking")])
        assert allowed.get_tuple(stored).checkpoint["channel_values"]["bookings"] == value


# --- two processes ------------------------------------------------------------------------------


def test_two_processes_writing_one_thread_stay_consistent(store_url, tmp_path):
    from turnstore.integrations.langgraph import TurnstoreSaver

    outputs = [tmp_path / f"writer-{n}.json" for n in range(2)]
    writers = [
        subprocess.Popen(
            [sys.executable, str(WRITER), store_url, "shared", f"w{n}", "15", str(out)],
            stderr=subprocess.PIPE,
        )
        for n, out in enumerate(outputs)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    expected: dict[str, list[str]] = {}
    for out in outputs:
        expected.update(json.loads(out.read_text()))
    with TurnstoreSaver(store_url) as saver:
        seen = 0
        for item in saver.list(config("shared")):
            checkpoint_id = item.config["configurable"]["checkpoint_id"]
            messages = item.checkpoint["channel_values"].get("messages", [])
            if checkpoint_id in expected:
                assert [m.id for m in messages] == expected[checkpoint_id]
                seen += 1
        assert seen == len(expected) > 0


# --- an earlier database ----------------------------------------------------------------------


def test_a_schema_3_database_takes_langgraph_threads(backend_name, database, pg_schema, store_url):
    """A database written before the LangGraph tables existed migrates and keeps its data."""
    from turnstore.integrations.langgraph import TurnstoreSaver

    restore_fixture(backend_name, database, pg_schema, 3)
    with TurnstoreSaver(store_url) as saver:
        graph = build(saver)
        graph.invoke(user("old", 0), config("old"))
        assert len(graph.get_state(config("old")).values["messages"]) == 4
    with turnstore.open_blocking(store_url) as store:
        chat = store.load("chat")
        assert chat is not None
        assert chat.sequence == 3
        ids = [
            s.session_id
            for s in store.list_sessions_page(turnstore.SessionPageRequest(limit=10)).sessions
        ]
        assert sorted(ids) == ["chat", "chat-fork", "langgraph/old", "rt"]


def test_large_values_are_stored_compressed_and_come_back_exact(saver, database):
    from langgraph.checkpoint.base import empty_checkpoint

    text = "the same sentence again; " * 400 + "\x00\u00e9\U0001f600"
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"doc": {"text": text, "blob": bytes(range(256)) * 8}}
    checkpoint["channel_versions"] = {"doc": "1"}
    stored = saver.put(config("z"), checkpoint, {}, {"doc": "1"})
    ((value_type, size),) = database.query("SELECT value_type, length(value) FROM lg_blobs")
    assert value_type.startswith("z:")
    assert size < len(text) // 4
    assert saver.get_tuple(stored).checkpoint["channel_values"]["doc"] == {
        "text": text,
        "blob": bytes(range(256)) * 8,
    }


# --- the benchmark ------------------------------------------------------------------------------


def test_the_langgraph_benchmark_runs(tmp_path):
    """`python -m bench.langgraph_saver --smoke` runs every saver it names, so it cannot rot."""
    out = tmp_path / "langgraph.json"
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bench.langgraph_saver", "--smoke", "--json", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert set(doc["savers"]) >= {"memory", "sqlite", "sqlite-delta", "lean", "turnstore"}
    lean = doc["savers"]["lean"]
    assert lean["messages"] == 4 * lean["size_turns"], "the ceiling saver keeps every message"
    for name in ("memory", "turnstore"):
        assert all(ms > 0 for ms in doc["savers"][name]["load_ms"].values())
        assert len(doc["savers"][name]["load_ms"]) == 2
    assert {"sqlite", "turnstore"} <= set(doc["open"])
    assert all(found["median_ms"] > 0 for found in doc["open"].values())
    for saver in doc["savers"].values():
        for points in saver["modes"].values():
            assert all(point["turns_per_s"] > 0 for point in points.values())
    round_robin = doc["round_robin"]["savers"]
    assert set(round_robin) >= {"memory", "sqlite", "lean", "turnstore"}
    assert all(saver["turns_per_s"] > 0 for saver in round_robin.values())
    judged = [target for target in doc["targets"] if target["passed"] is not None]
    assert len(judged) >= 10, doc["targets"]
