"""LangGraph threads moved between savers: SqliteSaver and PostgresSaver into turnstore and back.

Every source is filled by LangGraph running real graphs (tests/frameworks/_langgraph_graph.py
and a graph with a subgraph here), never by hand-written rows. Each move is checked by
`verify_threads`, which reads both sides back through the savers' API.
"""

from __future__ import annotations

import hashlib
import operator
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from _langgraph_graph import build, build_fan_out, config, user

from conftest import POSTGRES_URL, postgres_connection, require_postgres
from sizes import pick

pytestmark = pytest.mark.peers

KILLS = pick(20, 3)
"""SIGKILLs of a copy in the kill test."""


class Outer(TypedDict):
    """The parent graph's state: what its subgraph added."""

    items: Annotated[list[str], operator.add]


def build_nested(saver: Any) -> Any:
    """A graph whose middle node is a subgraph: its checkpoints go to a namespace of their own."""
    from langgraph.graph import END, START, StateGraph

    inner = StateGraph(Outer)
    inner.add_node("a", lambda state: {"items": ["a"]})
    inner.add_node("b", lambda state: {"items": ["b"]})
    inner.add_edge(START, "a")
    inner.add_edge("a", "b")
    inner.add_edge("b", END)
    outer = StateGraph(Outer)
    outer.add_node("first", lambda state: {"items": ["first"]})
    outer.add_node("nested", inner.compile(checkpointer=True))
    outer.add_edge(START, "first")
    outer.add_edge("first", "nested")
    outer.add_edge("nested", END)
    return outer.compile(checkpointer=saver)


def fill(saver: Any, prefix: str = "", turns: int = 4) -> None:
    """Threads of every shape: add_messages, DeltaChannel, a subgraph, a failed fan-out."""
    for delta in (False, True):
        graph = build(saver, delta=delta)
        for thread in range(2):
            name = f"{prefix}{'delta' if delta else 'plain'}-{thread}"
            for turn in range(turns):
                graph.invoke(user(name, turn), config(name, owner_id="ada"))
    nested = build_nested(saver)
    nested.invoke({"items": []}, config(f"{prefix}nested", subgraphs=True))
    fan = build_fan_out(saver)
    with pytest.raises(RuntimeError):
        fan.invoke({"items": []}, config(f"{prefix}fan"))


def sqlite_saver(path: Path) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def read_only_saver(path: Path) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    uri = f"{path.as_uri()}?mode=ro"
    return SqliteSaver(sqlite3.connect(uri, uri=True, check_same_thread=False))


def digest(path: Path) -> tuple[str, str]:
    """The database file's bytes and its log's (none and empty alike: nothing logged).

    A reader of a WAL database may create an empty log and the shared-memory index beside
    it; neither holds data.
    """
    log = path.with_name(f"{path.name}-wal")
    logged = log.read_bytes() if log.exists() else b""
    return hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(logged).hexdigest()


@pytest.fixture
def source_path(tmp_path: Path) -> Path:
    """A SqliteSaver file filled by LangGraph, closed."""
    path = tmp_path / "langgraph.sqlite3"
    saver = sqlite_saver(path)
    fill(saver)
    saver.conn.close()
    return path


@pytest.fixture
def ours(store_url: str) -> Iterator[Any]:
    from turnstore.integrations.langgraph import TurnstoreSaver

    with TurnstoreSaver(store_url) as saver:
        yield saver


@pytest.fixture
def postgres_saver() -> Iterator[Any]:
    """A PostgresSaver on a schema of its own, dropped after."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    require_postgres()
    schema = f"lg_move_{uuid.uuid4().hex}"
    with postgres_connection() as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    conn = psycopg.connect(
        POSTGRES_URL,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    saver = PostgresSaver(conn)
    saver.setup()
    try:
        yield saver
    finally:
        conn.close()
        with postgres_connection() as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_sqlite_saver_into_turnstore_and_back_out(source_path, ours, tmp_path):
    """Every thread, namespace, checkpoint and write goes in and out; the source is untouched."""
    from turnstore.integrations.langgraph_move import copy_threads, survey, verify_threads

    before = digest(source_path)
    source = read_only_saver(source_path)
    planned = survey(source)
    report = copy_threads(source, ours)
    assert report.conflicts == []
    assert report.skipped == []
    assert (report.thread_count, report.checkpoint_count) == (
        planned.thread_count,
        planned.checkpoint_count,
    )
    assert report.write_count > 0
    namespaces = {ns for ns, _ in _ids(ours, "nested")}
    assert len(namespaces) == 2  # the subgraph's checkpoints have a namespace of their own
    assert verify_threads(source, ours).difference is None
    back = sqlite_saver(tmp_path / "back.sqlite3")
    out = copy_threads(ours, back)
    assert out.checkpoint_count == report.checkpoint_count
    assert verify_threads(ours, back).difference is None
    assert verify_threads(source, back).difference is None
    source.conn.close()
    assert digest(source_path) == before


def test_a_connection_bound_to_its_thread_serves_both_directions(source_path, ours, tmp_path):
    """The copy calls its savers from the caller's thread only: a connection made with
    `check_same_thread` on works as source and as target."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    source = SqliteSaver(sqlite3.connect(source_path))
    report = copy_threads(source, ours)
    assert report.checkpoint_count > 0
    back = SqliteSaver(sqlite3.connect(tmp_path / "bound.sqlite3"))
    assert copy_threads(ours, back).checkpoint_count == report.checkpoint_count
    assert verify_threads(source, back).difference is None


def test_a_failing_target_stops_the_copy_and_a_rerun_completes_it(source_path, ours, monkeypatch):
    """A write that raises stops `copy_threads` with its error, after the checkpoints before
    it were written; a re-run completes the copy."""
    from turnstore.integrations.langgraph import TurnstoreSaver
    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    source = read_only_saver(source_path)
    # The call a copy into turnstore makes: a checkpoint with its writes, one commit.
    put, calls = TurnstoreSaver.put_with_writes, []

    def failing(self: Any, *args: Any) -> Any:
        calls.append(1)
        if len(calls) == 5:
            raise OSError("disk gone")
        return put(self, *args)

    monkeypatch.setattr(TurnstoreSaver, "put_with_writes", failing)
    with pytest.raises(OSError, match="disk gone"):
        copy_threads(source, ours)
    monkeypatch.setattr(TurnstoreSaver, "put_with_writes", put)
    report = copy_threads(source, ours)
    assert report.present_count == 4
    assert verify_threads(source, ours).difference is None


def _ids(saver: Any, thread_id: str) -> list[tuple[str, str]]:
    from turnstore.integrations.langgraph_move import tables_of

    return list(tables_of(saver).checkpoint_ids(thread_id))


def test_the_pending_writes_keep_their_task_paths(source_path, ours):
    """The failed fan-out's writes come back in LangGraph's replay order, task paths kept."""
    from turnstore.integrations.langgraph_move import Place, copy_threads, tables_of

    source = read_only_saver(source_path)
    copy_threads(source, ours)
    latest = source.get_tuple(config("fan"))
    assert latest.pending_writes
    assert ours.get_tuple(config("fan")).pending_writes == latest.pending_writes
    where = Place(*(latest.config["configurable"][k] for k in Place._fields))
    paths = tables_of(source).task_paths(where)
    assert paths
    assert all(paths.values())
    assert ours.task_paths(latest.config) == paths


def test_task_paths_after_a_read_are_that_reads_and_follow_the_savers_own_writes(
    source_path, ours, store_url
):
    """Right after `get_tuple`, `task_paths` of that checkpoint answers from what the read
    loaded, as a fresh load would; a write of this saver since is seen, and another
    checkpoint's read is never taken for it."""
    from turnstore.integrations.langgraph import TurnstoreSaver
    from turnstore.integrations.langgraph_move import copy_threads

    copy_threads(read_only_saver(source_path), ours)
    latest = ours.get_tuple(config("fan"))
    with TurnstoreSaver(store_url) as fresh:  # never read: each answer is a load
        assert ours.task_paths(latest.config) == fresh.task_paths(latest.config)
        loaded = fresh.task_paths(latest.config)
        assert loaded
        earlier = ours.get_tuple(latest.parent_config)
        assert ours.task_paths(latest.config) == loaded  # not the parent's writes
        assert ours.task_paths(earlier.config) == fresh.task_paths(earlier.config) != loaded
    ours.get_tuple(latest.config)
    ours.put_writes(latest.config, [("late", 1)], "late-task", "~late/path")
    assert ours.task_paths(latest.config) == {**loaded, "late-task": "~late/path"}


def test_the_owner_comes_from_the_metadata(source_path, ours, store_url):
    """A thread run with `owner_id` is owned by it in the catalog; --owner overrides."""
    import turnstore
    from turnstore.integrations.langgraph_move import copy_threads
    from turnstore.records import SessionPageRequest

    source = read_only_saver(source_path)
    copy_threads(source, ours, thread_ids=["plain-0"])
    copy_threads(source, ours, thread_ids=["nested"], owner_id="grace")
    with turnstore.open_blocking(store_url) as store:
        owners = {
            s.session_id: s.session_context.owner_id
            for s in store.list_sessions_page(SessionPageRequest(limit=10)).sessions
        }
    assert owners == {"langgraph/plain-0": "ada", "langgraph/nested": "grace"}


def test_an_interrupted_graph_resumes_on_the_target(tmp_path, ours):
    """Stopped before its tools on the source, it finishes on turnstore as on the source."""
    from turnstore.integrations.langgraph_move import copy_threads

    saver = sqlite_saver(tmp_path / "interrupted.sqlite3")
    for graph_saver in (saver,):
        graph = build(graph_saver)
        graph.invoke(user("stopped", 0), config("stopped"), interrupt_before=["tools"])
    assert build(saver).get_state(config("stopped")).next == ("tools",)
    copy_threads(saver, ours)
    on_target = build(ours)
    assert on_target.get_state(config("stopped")).next == ("tools",)
    on_target.invoke(None, config("stopped"))
    on_source = build(saver)
    on_source.invoke(None, config("stopped"))
    assert (
        on_target.get_state(config("stopped")).values
        == on_source.get_state(config("stopped")).values
    )
    assert on_target.get_state(config("stopped")).next == ()


def test_a_second_run_copies_nothing_and_a_grown_source_only_the_new(tmp_path, ours):
    """Run again: nothing; after the source grew: only its new checkpoints and threads."""
    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    saver = sqlite_saver(tmp_path / "growing.sqlite3")
    fill(saver, turns=2)
    first = copy_threads(saver, ours)
    again = copy_threads(saver, ours)
    assert (again.checkpoint_count, again.write_count) == (0, 0)
    assert again.present_count == first.checkpoint_count
    graph = build(saver)
    graph.invoke(user("plain-0", 9), config("plain-0", owner_id="ada"))
    graph.invoke(user("newcomer", 0), config("newcomer"))
    grown = copy_threads(saver, ours)
    assert grown.checkpoint_count == 2 * len(list(saver.list(config("newcomer"))))
    assert grown.present_count == first.checkpoint_count
    assert verify_threads(saver, ours).difference is None


def test_a_target_checkpoint_that_differs_is_a_conflict_left_alone(source_path, ours):
    """A checkpoint already on the target with other metadata is reported, not overwritten."""
    from turnstore.integrations.langgraph_move import Place, copy_threads

    source = read_only_saver(source_path)
    oldest = list(source.list(config("plain-1")))[-1]
    planted = {**oldest.metadata, "step": 99}
    ours.put(config("plain-1", checkpoint_ns=""), oldest.checkpoint, planted, {})
    report = copy_threads(source, ours)
    assert [p.place for p in report.conflicts] == [Place("plain-1", "", oldest.checkpoint["id"])]
    assert "metadata" in report.conflicts[0].reason
    assert ours.get_tuple(oldest.config).metadata["step"] == 99


def test_verify_names_a_planted_difference(source_path, ours):
    """A write added on the target after the copy is the first difference, at its checkpoint."""
    from turnstore.integrations.langgraph_move import Place, copy_threads, verify_threads

    source = read_only_saver(source_path)
    copy_threads(source, ours)
    middle = list(source.list(config("delta-1")))[5]
    ours.put_writes(middle.config, [("turns", 7)], "planted-task")
    found = verify_threads(source, ours).difference
    assert found is not None
    assert found.place == Place("delta-1", "", middle.checkpoint["id"])
    assert "pending_writes" in found.reason


def test_postgres_saver_into_turnstore(postgres_saver, ours):
    """PostgresSaver's threads go in, on both of turnstore's backends, and verify equal."""
    from turnstore.integrations.langgraph_move import copy_threads, survey, verify_threads

    fill(postgres_saver)
    planned = survey(postgres_saver)
    assert planned.source_bytes
    report = copy_threads(postgres_saver, ours)
    assert report.checkpoint_count == planned.checkpoint_count
    assert not report.conflicts
    assert verify_threads(postgres_saver, ours).difference is None
    again = copy_threads(postgres_saver, ours)
    assert again.checkpoint_count == 0


def test_in_memory_saver_both_ways(ours):
    """InMemorySaver, another saver the copy knows, in and out."""
    from langgraph.checkpoint.memory import InMemorySaver

    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    memory = InMemorySaver()
    fill(memory, turns=2)
    copy_threads(memory, ours)
    assert verify_threads(memory, ours).difference is None
    back = InMemorySaver()
    copy_threads(ours, back)
    assert verify_threads(ours, back).difference is None


def test_a_saver_it_does_not_know_needs_thread_ids(ours):
    """A saver of another kind cannot list its threads: the caller names them."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from turnstore.errors import InvalidInput
    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    class Other(SqliteSaver):
        pass

    other = Other(sqlite3.connect(":memory:", check_same_thread=False))
    fill(other, turns=1)
    with pytest.raises(InvalidInput, match="thread_ids"):
        copy_threads(other, ours)
    copy_threads(other, ours, thread_ids=["plain-0", "fan"])
    assert verify_threads(other, ours, thread_ids=["plain-0"]).difference is None
    # Without its tables the copy cannot know the task paths: the same writes, which come
    # back in (task id, index) order instead of LangGraph's replay order.
    written = other.get_tuple(config("fan")).pending_writes
    assert sorted(map(repr, ours.get_tuple(config("fan")).pending_writes)) == sorted(
        map(repr, written)
    )


COPIER = """
import sqlite3
from pathlib import Path
from langgraph.checkpoint.sqlite import SqliteSaver
from turnstore.integrations.langgraph import TurnstoreSaver
from turnstore.integrations.langgraph_move import copy_threads
uri = Path({source!r}).as_uri() + "?mode=ro"
source = SqliteSaver(sqlite3.connect(uri, uri=True, check_same_thread=False))
with TurnstoreSaver({url!r}) as target:
    print("go", flush=True)
    copy_threads(source, target)
"""


def test_a_killed_copy_run_again_ends_as_an_uninterrupted_one(source_path, store_url, tmp_path):
    """SIGKILL a copy at random points; the run that follows ends equal to the source."""
    import random

    from turnstore.integrations.langgraph import TurnstoreSaver
    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    script = COPIER.format(url=store_url, source=str(source_path))
    rng = random.Random(44)
    for _ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert child.stdout is not None
        assert child.stdout.readline() == b"go\n"
        # A whole copy of this source takes a few tenths of a second: kill inside it.
        time.sleep(rng.uniform(0.0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    source = read_only_saver(source_path)
    with TurnstoreSaver(store_url) as target:
        finished = copy_threads(source, target)
        assert finished.conflicts == []
        assert verify_threads(source, target).difference is None
        total = sum(1 for _ in source.list(None))
        assert finished.checkpoint_count + finished.present_count == total


def test_shared_reads_return_what_fresh_reads_do_decoding_only_what_is_new(source_path, ours):
    """In `shared_reads` a thread's lists come back equal to fresh reads', their common items
    the same objects from one checkpoint to the next; outside it every read decodes anew."""
    from turnstore.integrations.langgraph_move import copy_threads

    copy_threads(read_only_saver(source_path), ours)
    ids = [cid for ns, cid in _ids(ours, "plain-0") if not ns]
    fresh = [ours.get_tuple(config("plain-0", checkpoint_id=cid)) for cid in ids]
    with ours.shared_reads():
        shared = [ours.get_tuple(config("plain-0", checkpoint_id=cid)) for cid in ids]
        newest_first = [ours.get_tuple(config("plain-0", checkpoint_id=cid)) for cid in ids[::-1]]
    for a, b, c in zip(fresh, shared, newest_first[::-1], strict=True):
        assert a.checkpoint["channel_values"] == b.checkpoint["channel_values"]
        assert c.checkpoint["channel_values"] == a.checkpoint["channel_values"]
    lists = [t.checkpoint["channel_values"].get("messages", []) for t in shared if t.checkpoint[
        "channel_values"].get("messages")]  # fmt: skip
    assert len(lists) > 2
    assert lists[-1][0] is lists[-2][0], "the items two reads share are one object"
    again = ours.get_tuple(config("plain-0", checkpoint_id=ids[-1]))
    assert again.checkpoint["channel_values"]["messages"][0] is not lists[-1][0]
