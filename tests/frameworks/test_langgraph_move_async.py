"""LangGraph threads moved from and to the async savers: AsyncSqliteSaver, AsyncPostgresSaver.

The sources are filled by LangGraph running the graphs of test_langgraph_move.py through
`ainvoke`; `acopy_threads` and `averify_threads` run on the same event loop as the savers.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _langgraph_graph import build, build_fan_out, config, user
from test_langgraph_move import build_nested, read_only_saver

from conftest import POSTGRES_URL, postgres_connection, require_postgres

pytestmark = pytest.mark.peers


async def afill(saver: Any, turns: int = 3) -> None:
    """Threads of every shape, each turn one `ainvoke`: add_messages, DeltaChannel, a
    subgraph, a failed fan-out."""
    for delta in (False, True):
        graph = build(saver, delta=delta)
        for turn in range(turns):
            name = f"{'delta' if delta else 'plain'}-async"
            await graph.ainvoke(user(name, turn), config(name, owner_id="ada"))
    await build_nested(saver).ainvoke({"items": []}, config("nested", subgraphs=True))
    with pytest.raises(RuntimeError):
        await build_fan_out(saver).ainvoke({"items": []}, config("fan"))


@pytest.fixture
async def async_sqlite(tmp_path: Path) -> AsyncIterator[Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.sqlite3")) as saver:
        yield saver


@pytest.fixture
async def async_postgres() -> AsyncIterator[Any]:
    """An AsyncPostgresSaver on a schema of its own, dropped after."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    require_postgres()
    schema = f"lg_amove_{uuid.uuid4().hex}"
    with postgres_connection() as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    conn = await AsyncConnection.connect(
        POSTGRES_URL,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    saver = AsyncPostgresSaver(conn)
    await saver.setup()
    try:
        yield saver
    finally:
        await conn.close()
        with postgres_connection() as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


async def _in_and_back(source: Any, back: Any, store_url: str) -> None:
    from turnstore.integrations.langgraph import TurnstoreSaver
    from turnstore.integrations.langgraph_move import acopy_threads, averify_threads

    await afill(source)
    with TurnstoreSaver(store_url) as ours:
        report = await acopy_threads(source, ours)
        assert report.conflicts == []
        assert report.checkpoint_count > 0
        assert report.write_count > 0
        assert (await averify_threads(source, ours)).difference is None
        out = await acopy_threads(ours, back)
        assert out.checkpoint_count == report.checkpoint_count
        assert (await averify_threads(ours, back)).difference is None
        again = await acopy_threads(source, ours)
        assert (again.checkpoint_count, again.present_count) == (0, report.checkpoint_count)


async def test_async_sqlite_saver_into_turnstore_and_back(async_sqlite, store_url, tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "back.sqlite3")) as back:
        await _in_and_back(async_sqlite, back, store_url)
    # What went out is readable by the blocking saver as well.
    from turnstore.integrations.langgraph_move import verify_threads

    assert (
        verify_threads(
            read_only_saver(tmp_path / "async.sqlite3"), read_only_saver(tmp_path / "back.sqlite3")
        ).difference
        is None
    )


async def test_async_postgres_saver_into_turnstore_and_back(async_postgres, store_url, tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "back.sqlite3")) as back:
        await _in_and_back(async_postgres, back, store_url)


async def test_the_async_savers_tables_list_threads_and_task_paths(async_sqlite):
    from turnstore.integrations.langgraph_move import tables_of

    await afill(async_sqlite, turns=1)
    tables = tables_of(async_sqlite)
    # Read from a worker thread, as the copy does: the saver's loop is this one.
    import asyncio

    threads = await asyncio.to_thread(lambda: list(tables.thread_ids()))
    assert threads == ["delta-async", "fan", "nested", "plain-async"]
    ids = await asyncio.to_thread(lambda: list(tables.checkpoint_ids("fan")))
    assert ids
    paths = await asyncio.to_thread(
        lambda: [tables.task_paths(_place("fan", *pair)) for pair in ids]
    )
    assert any(paths), "the failed fan-out's writes keep their task paths"


def _place(thread_id: str, ns: str, checkpoint_id: str) -> Any:
    from turnstore.integrations.langgraph_move import Place

    return Place(thread_id, ns, checkpoint_id)
