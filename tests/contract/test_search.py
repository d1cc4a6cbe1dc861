"""Contract: the conversation search, on both backends and both faces.

A seeded corpus of three kinds of session (checkpoint saves, a session of OpenAI items, a
session of ADK events) is searched by words, phrases, prefixes, other scripts and
punctuation, scoped by owner, kind and time, and paged; bad queries are refused; and nothing
deleted, pruned, replaced, popped or cleared can be found afterwards.
"""

from __future__ import annotations

import io
import time
from typing import Any

import pytest

import turnstore
from turnstore import Checkpoint, InvalidInput, SessionContext
from turnstore.errors import SearchIndexNotBuilt
from turnstore.records import SearchRequest
from turnstore.rules.search import MAX_QUERY_CHARS, MAX_TERMS

NATIVE = [
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Where is the lighthouse keeper?"}],
    },
    {
        "type": "function_call",
        "call_id": "call-77",
        "name": "find_keeper",
        "arguments": '{"island": "Skerryvore"}',
    },
    {"type": "function_call_output", "call_id": "call-77", "output": "The keeper sleeps at noon."},
    {
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": "He sleeps; don't wake him. Ο φάρος είναι κλειστός."}
        ],
    },
]
OPENAI = [
    {"role": "user", "content": "Book the ferry to the lighthouse"},
    {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "The ferry timetable matters"}],
    },
    {
        "role": "assistant",
        "content": [{"type": "output_text", "text": "東京タワー tickets are sold out"}],
    },
]
ADK = [
    {
        "author": "user",
        "id": "e1",
        "invocation_id": "inv-1",
        "content": {"role": "user", "parts": [{"text": "Plan a trip to Lisbon"}]},
    },
    {
        "author": "planner",
        "id": "e2",
        "content": {
            "role": "model",
            "parts": [
                {"function_call": {"id": "fc1", "name": "lookup_trams", "args": {"city": "Lisbon"}}}
            ],
        },
        "actions": {"state_delta": {"secret_state": "tramway-state-only"}},
    },
]


def _ids(page: Any) -> list[tuple[str, int | None, int]]:
    return [(hit.session_id, hit.sequence, hit.item) for hit in page.hits]


async def _find(store: Any, query: str, **options: Any) -> list[tuple[str, int | None, int]]:
    return _ids(await store.search(SearchRequest(query=query, **options)))


async def _seed(store: Any) -> None:
    checkpoint = Checkpoint(
        session_id="native",
        sequence=1,
        context=list(NATIVE),
        session_context=SessionContext(owner_id="ann"),
        metadata={"note": "metadata-is-not-searched"},
    )
    await store.save(checkpoint, NATIVE)
    await store.append_context("openai", OPENAI, "bob", kind="openai-agents")
    await store.append_context("adk", ADK, "ann", kind="adk")


async def test_words_phrases_and_prefixes_find_the_items_that_hold_them(store):
    """Every word must match; a phrase in order; `word*` as a prefix; case does not matter."""
    await _seed(store)
    assert await _find(store, "lighthouse") == [("openai", None, 0), ("native", 1, 0)]
    assert await _find(store, "LIGHTHOUSE keeper") == [("native", 1, 0)]
    assert await _find(store, '"keeper sleeps"') == [("native", 1, 2)]
    assert await _find(store, '"sleeps keeper"') == []
    assert await _find(store, "light") == []
    assert await _find(store, "light*") == [("openai", None, 0), ("native", 1, 0)]
    assert await _find(store, '"ferry time"*') == [("openai", None, 1)]
    assert await _find(store, "ferry lighthouse") == [("openai", None, 0)]


async def test_tool_names_arguments_and_results_are_searched_and_ids_roles_and_state_are_not(
    store,
):
    """Message text, tool names, arguments and results; not ids, roles, types or state."""
    await _seed(store)
    assert await _find(store, "find_keeper") == [("native", 1, 1)]
    assert await _find(store, "Skerryvore") == [("native", 1, 1)]
    assert await _find(store, "lookup_trams") == [("adk", None, 1)]
    assert await _find(store, "Lisbon") == [("adk", None, 1), ("adk", None, 0)]
    for hidden in ("call-77", "function_call", "assistant", "planner", "inv-1", "tramway*"):
        assert await _find(store, hidden) == [], hidden
    assert await _find(store, "metadata*") == []


async def test_other_scripts_and_punctuation(store):
    """Greek words match whole, accents or not; Japanese, written without spaces, is found by
    any run of its characters, one character included."""
    await _seed(store)
    assert await _find(store, "φάρος") == [("native", 1, 3)]
    assert await _find(store, "ΕΊΝΑΙ") == [("native", 1, 3)]
    assert await _find(store, "φαρος") == [("native", 1, 3)]
    assert await _find(store, "東京タワー") == [("openai", None, 2)]
    assert await _find(store, "東京*") == [("openai", None, 2)]
    # A run of Japanese is indexed as its pairs of characters: a word inside it is found.
    assert await _find(store, "東京") == [("openai", None, 2)]
    assert await _find(store, "タワー") == [("openai", None, 2)]
    assert await _find(store, "京タ") == [("openai", None, 2)]
    assert await _find(store, "ー") == [("openai", None, 2)]
    assert await _find(store, "京都") == []
    assert await _find(store, "don't") == [("native", 1, 3)]
    assert await _find(store, "sleeps; wake") == [("native", 1, 3)]


async def test_words_of_languages_written_without_spaces_are_found_with_their_place_marked(
    store,
):
    """Chinese, Japanese and Korean: a word of one or two characters inside a run, a phrase
    across scripts, full-width and halfwidth forms; the snippet marks the word itself."""
    items = [
        {"role": "user", "content": "東京の天気はどうですか"},
        {"role": "assistant", "content": "明天北京有雨，记得带伞。"},
        {"role": "user", "content": "서울 날씨는 맑습니다"},
        {"role": "user", "content": "ｶﾞｲﾄﾞ for the ＴＯＫＹＯ tower"},
        {"role": "user", "content": "Café au lait in 東京tower"},
    ]
    await store.append_context("cjk", items)
    assert await _find(store, "天気") == [("cjk", None, 0)]
    assert await _find(store, "天") == [("cjk", None, 1), ("cjk", None, 0)]  # 明天, 天気
    assert await _find(store, "か") == [("cjk", None, 0)]
    assert await _find(store, "北京") == [("cjk", None, 1)]
    assert await _find(store, "带伞") == [("cjk", None, 1)]
    assert await _find(store, "날씨") == [("cjk", None, 2)]
    assert await _find(store, "ガイド tokyo") == [("cjk", None, 3)]
    assert await _find(store, "cafe 東京tower") == [("cjk", None, 4)]
    assert await _find(store, '"京tower"') == [("cjk", None, 4)]
    assert await _find(store, "天京") == []
    (hit,) = (await store.search(SearchRequest(query="天気"))).hits
    assert hit.snippet == "東京の天気はどうですか"
    assert [hit.snippet[a:b] for a, b in hit.marks] == ["天気"]
    (hit,) = (await store.search(SearchRequest(query="CAFE"))).hits
    assert [hit.snippet[a:b] for a, b in hit.marks] == ["Café"]


async def test_a_nul_in_an_item_separates_words_in_the_index(store):
    """PostgreSQL text cannot hold NUL: the index keeps the words it separates; the item keeps
    its NUL."""
    await store.append_context("s", [{"role": "user", "content": "nul\x00inside words"}])
    (hit,) = (await store.search(SearchRequest(query="inside"))).hits
    assert hit.snippet[hit.marks[0][0] : hit.marks[0][1]] == "inside"
    # The index keeps words: the NUL (which PostgreSQL text cannot hold) separates two.
    assert (await store.search(SearchRequest(query='"nul inside words"'))).hits
    assert not (await store.search(SearchRequest(query="nulinside"))).hits
    assert await store.context_tail("s") == [{"role": "user", "content": "nul\x00inside words"}]


async def test_owner_kind_and_time_scope_a_search(store):
    """Filters narrow the hits to an owner's sessions, a kind, and a window of writing time."""
    before = int(time.time() * 1000) - 1
    await _seed(store)
    assert await _find(store, "lighthouse", owner_id="bob") == [("openai", None, 0)]
    assert await _find(store, "lighthouse", owner_id="ann") == [("native", 1, 0)]
    assert await _find(store, "lighthouse", owner_id="nobody") == []
    assert await _find(store, "lighthouse", kind="turnstore") == [("native", 1, 0)]
    assert await _find(store, "lisbon", kind="adk") == [("adk", None, 1), ("adk", None, 0)]
    assert await _find(store, "lighthouse", until_ms=before) == []
    assert len(await _find(store, "lighthouse", since_ms=before)) == 2
    summaries = [await store.session_summary(name) for name in ("native", "openai", "adk")]
    assert [summary.kind for summary in summaries] == ["turnstore", "openai-agents", "adk"]


@pytest.mark.parametrize("walk", [4_096, 2], ids=["walk-default", "walk-2"])
async def test_pages_follow_by_cursor_newest_first_and_best_first(store, monkeypatch, walk):
    """Every hit once, in order, whatever the page size; best first ranks denser items higher.

    With a walk of 2 items, PostgreSQL's pages cross from the walked run to the GIN index.
    """
    monkeypatch.setattr("turnstore.backends.postgres.search.WALK_ITEMS", walk)
    items = [{"role": "user", "content": f"ping number {n}" + " ping" * (n % 3)} for n in range(7)]
    for n, item in enumerate(items):
        await store.append_context(f"s{n}", [item], None)
    seen, cursor = [], None
    while True:
        page = await store.search(SearchRequest(query="ping", limit=3, cursor=cursor))
        seen += _ids(page)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [(f"s{n}", None, 0) for n in reversed(range(7))]
    best, cursor = [], None
    while True:
        page = await store.search(SearchRequest(query="ping", order="best", limit=2, cursor=cursor))
        best += [hit.session_id for hit in page.hits]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(best) == sorted(f"s{n}" for n in range(7))
    assert best[0] in ("s2", "s5")  # the items saying "ping" three times


async def test_a_snippet_marks_where_the_query_matched(store):
    """The snippet holds the matched words; each mark spans one of them."""
    await _seed(store)
    (hit,) = (await store.search(SearchRequest(query="keeper sleeps"))).hits
    marked = [hit.snippet[start:end].lower() for start, end in hit.marks]
    assert set(" ".join(marked).split()) == {"keeper", "sleeps"}
    assert "noon" in hit.snippet


async def test_a_snippet_cut_from_its_text_shows_an_ellipsis_where_it_was_cut(store):
    """Both backends mark a cut with `…`: at the start, the end, both, or neither; white
    space at a snippet's ends is left out."""
    words = [f"w{n}" for n in range(60)]
    texts = [
        " ".join([*words[:30], "beacon", *words[30:]]),
        " ".join(["beacon", *words]),
        " ".join([*words, "beacon"]),
        "a short beacon text.",
        # PostgreSQL's headline writes each HTML tag as a space.
        "<p>" + " ".join([*words[:30], "<b>beacon</b>", *words[30:]]) + "</p>",
        "\n  beacon between blank lines \n\n",
    ]
    await store.append_context("cut", [{"role": "user", "content": text} for text in texts])
    hits = (await store.search(SearchRequest(query="beacon"))).hits
    cut = {hit.item: (hit.snippet[:1] == "…", hit.snippet[-1:] == "…") for hit in hits}
    assert cut == {
        0: (True, True), 1: (False, True), 2: (True, False), 3: (False, False), 4: (True, True),
        5: (False, False),
    }  # fmt: skip
    for hit in hits:
        assert [hit.snippet[start:end] for start, end in hit.marks] == ["beacon"]
    assert hits[0].snippet == "beacon between blank lines"
    assert hits[2].snippet == "a short beacon text."


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        '"unclosed phrase',
        "-- ;;",
        '²* ❺ "½"*',
        "x" * (MAX_QUERY_CHARS + 1),
        " ".join(["word"] * (MAX_TERMS + 1)),
        "nul\x00byte",
        'NEAR(a b) OR "c"',  # engine syntax reads as plain words, not as an error
    ],
    ids=["empty", "blank", "unclosed", "punctuation", "no-digit", "long", "terms", "nul", "syntax"],
)
async def test_bad_queries_are_invalid_input(store, query):
    """A query the store cannot read is `InvalidInput`; engine syntax is only words."""
    await _seed(store)
    if query.startswith("NEAR"):
        assert await _find(store, query) == []
        return
    with pytest.raises(InvalidInput):
        await store.search(SearchRequest(query=query))


@pytest.mark.parametrize(
    "options",
    [
        {"limit": 0},
        {"limit": 101},
        {"cursor": "x12"},
        {"cursor": "b12"},
        {"order": "best", "cursor": "n3"},
        {"owner_id": "a\x00b"},
    ],
    ids=["limit-0", "limit-101", "cursor-garbage", "cursor-other-order", "cursor-best", "owner"],
)
async def test_bad_requests_are_invalid_input(store, options):
    """Limits, cursors and owners are checked before the database is asked."""
    with pytest.raises(InvalidInput):
        await store.search(SearchRequest(query="ok", **options))


async def test_nothing_deleted_can_be_found(store):
    """Delete, pop, clear and replace take text out of the index in the same commit."""
    await _seed(store)
    child = Checkpoint(session_id="native-fork", context=list(NATIVE[:1]))
    await store.fork("native", 1, child)
    assert len(await _find(store, "keeper")) == 4  # find_keeper is two words
    await store.delete_sessions(["native"])
    assert await _find(store, "keeper") == []
    await store.pop_context("openai")
    assert await _find(store, "東京タワー") == []
    assert await _find(store, "ferry") == [("openai", None, 1), ("openai", None, 0)]
    sequence = (await store.session_summary("openai")).sequence
    replaced = await store.replace_context(
        "openai", sequence, 1, [{"role": "assistant", "content": "Boats are cancelled"}], 1
    )
    assert replaced
    assert await _find(store, "ferry") == []
    assert await _find(store, "boats") == [("openai", None, 0)]
    await store.clear_context("openai")
    assert await _find(store, "boats") == []
    await store.append_context("openai", [{"role": "user", "content": "boats again"}])
    assert await _find(store, "boats") == [("openai", None, 0)]


async def test_pruned_sessions_cannot_be_found(store):
    """Prune deletes whole trees, and their text with them."""
    await _seed(store)
    report = await store.upkeep.prune(int(time.time()) + 60)
    assert sorted(report.session_ids) == ["adk", "native", "openai"]
    assert await _find(store, "lighthouse") == []


def test_an_import_is_indexed_and_a_replacing_import_leaves_no_stale_text(store_url, tmp_path):
    """The index is derived: an import rebuilds it for what it wrote."""
    source = str(tmp_path / "source.sqlite3")
    with turnstore.open_blocking(source) as origin:
        origin.append_context("openai", OPENAI[:1], "bob", kind="openai-agents")
        origin.append_context("openai", OPENAI[2:])
        origin.pop_context("openai")
        exported = io.BytesIO()
        origin.upkeep.export_trees(exported)
    with turnstore.open_blocking(store_url) as target:
        target.append_context("openai", [{"role": "user", "content": "stale words"}])
        target.upkeep.import_trees(io.BytesIO(exported.getvalue()), on_conflict="replace")
        assert _ids(target.search(SearchRequest(query="ferry"))) == [("openai", None, 0)]
        assert _ids(target.search(SearchRequest(query="stale"))) == []
        assert _ids(target.search(SearchRequest(query="tickets"))) == []
        # The export carries the kind (`session_kind`).
        assert target.session_summary("openai").kind == "openai-agents"


def test_the_sqlite_newest_first_plan_walks_the_text_index_in_order(tmp_path):
    """Newest first reads the FTS5 index backwards by row id: no sort of all the matches."""
    path = tmp_path / "plan.sqlite3"
    with turnstore.open_blocking(str(path)) as opened:
        opened.append_context("s", [{"role": "user", "content": "hello"}])
    import sqlite3

    from turnstore.backends.sqlite.engine import SQLITE
    from turnstore.rules.search import search_query

    class Recorder:
        dialect = SQLITE
        sent: tuple[str, Any] = ("", ())

        def sql(self, table: Any) -> Any:
            return SQLITE.statements(table)

        def rows(self, query: Any, params: Any) -> list[Any]:
            self.sent = (query.sql, params)
            return []

    recorder = Recorder()
    query = search_query(SearchRequest(query="hello"))
    SQLITE.text_search.hits(recorder, query)  # type: ignore[arg-type]
    sql, params = recorder.sent
    connection = sqlite3.connect(path)
    plan = " | ".join(row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql, params))
    connection.close()
    assert plan.startswith("SCAN search_fts VIRTUAL TABLE"), plan
    assert "TEMP B-TREE" not in plan, plan


@pytest.mark.parametrize("version", [2, 6])
def test_a_migrated_store_is_searchable_once_reindexed(
    backend_name, database, pg_schema, store_url, version
):
    """Until `reindex`, a search says how to build the index; after it, kinds are named and
    the popped item of the fixture's session of items stays unfindable."""
    from conftest import restore_fixture

    restore_fixture(backend_name, database, pg_schema, version)
    with turnstore.open_blocking(store_url) as migrated:
        with pytest.raises(SearchIndexNotBuilt, match="turnstore reindex"):
            migrated.search(SearchRequest(query="answer"))
        # A write before the build is kept in step like any other.
        migrated.append_context("new", [{"role": "user", "content": "fresh answer"}])
        calls: list[tuple[int, int]] = []

        def stop_after_two(done: int, total: int) -> None:
            calls.append((done, total))
            if len(calls) == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            migrated.upkeep.reindex(batch_sessions=1, progress=stop_after_two)
        with pytest.raises(SearchIndexNotBuilt):
            migrated.search(SearchRequest(query="answer"))
        done = migrated.upkeep.reindex(batch_sessions=2, progress=lambda *a: calls.append(a))
        assert done.built
        assert calls[2][0] > calls[1][0] == 2  # it went on where it stopped
        assert done.sessions_done == done.sessions_total
        hits = _ids(migrated.search(SearchRequest(query="answer", limit=100)))
        assert ("new", None, 0) in hits
        assert sorted(hit for hit in hits if hit[0] == "chat") == [
            ("chat", sequence, 1) for sequence in (1, 2, 3)
        ]
        assert migrated.session_summary("chat").kind == "turnstore"
        if version == 6:
            assert _ids(migrated.search(SearchRequest(query="lighthouse"))) == [("items", None, 0)]
            assert _ids(migrated.search(SearchRequest(query="zeppelin"))) == []
            assert migrated.session_summary("items").kind == "items"
        again = migrated.upkeep.reindex()
        assert again.built
        assert again.items_indexed == 0
        rebuilt = migrated.upkeep.reindex(restart=True)
        assert rebuilt.built
        assert rebuilt.items_indexed >= len(hits)
        assert _ids(migrated.search(SearchRequest(query="answer", limit=100))) == hits


def test_the_postgres_plans_walk_a_bounded_run_of_the_newest_items_then_read_the_index():
    """Newest first: the newest WALK_ITEMS items are tested by key, backwards (a common term
    fills its page there); the rest is read through the GIN index (a rare or missing term's
    few hits), never by a walk of every item."""
    import uuid

    from conftest import postgres_connection, postgres_store_url, require_postgres
    from turnstore.backends.postgres.engine import POSTGRES
    from turnstore.backends.postgres.search import WALK_ITEMS
    from turnstore.rules.search import search_query

    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    # Big enough that no plan reads the whole table: the common term in one item of 13, the
    # rare one in the oldest item, below the walked run.
    items = [
        {"role": "user", "content": f"filler {n}" + (" common" if n % 13 == 0 else "")}
        for n in range(4 * WALK_ITEMS)
    ]
    items[7]["content"] += " rarity"
    try:
        url = postgres_store_url(schema)
        with turnstore.open_blocking(url, index_in_background=False) as store:
            store.append_context("s", items)
            assert _ids(store.search(SearchRequest(query="rarity"))) == [("s", None, 7)]
            assert len(_ids(store.search(SearchRequest(query="common")))) == 20
        with postgres_connection(schema) as connection:
            connection.execute("ANALYZE")

            class PlanTx:
                """Runs the hook's statements, and keeps the plan of each page query."""

                dialect = POSTGRES

                def __init__(self) -> None:
                    self.plans: list[str] = []

                def sql(self, table: Any) -> Any:
                    return POSTGRES.statements(table)

                def run(self, sql: str, params: Any = ()) -> None:
                    connection.execute(sql, params)

                def value(self, sql: str, params: Any = ()) -> Any:
                    return connection.execute(sql, params).fetchone()[0]

                def rows(self, query: Any, params: Any) -> list[Any]:
                    plan = connection.execute("EXPLAIN " + query.sql, params).fetchall()
                    self.plans.append("\n".join(row[0] for row in plan))
                    return [query.make(row) for row in connection.execute(query.sql, params)]

            plans = {}
            for term in ("common", "rarity", "missing"):
                tx = PlanTx()
                with connection.transaction():
                    query = search_query(SearchRequest(query=term))
                    POSTGRES.text_search.hits(tx, query)  # type: ignore[arg-type]
                plans[term] = tx.plans
    finally:
        with postgres_connection() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    (walk,) = plans["common"]  # the page is full within the walk
    assert "Index Scan Backward using search_items_pkey" in walk, walk
    assert "search_items_words_idx" not in walk, walk
    for rare in ("rarity", "missing"):
        bounded, rest = plans[rare]
        assert "Index Scan Backward using search_items_pkey" in bounded, bounded
        assert "(item_id > " in bounded, bounded
        assert "Bitmap Index Scan on search_items_words_idx" in rest, rest
        assert "Index Scan Backward" not in rest, rest
