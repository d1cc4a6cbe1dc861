"""The JSON API over a real `turnstore serve` process, on both backends, with httpx.

Every body is compared with what the public library returns for the same read, so the API
adds scope, caps and encoding and nothing else.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import msgspec
import pytest
from click.testing import CliRunner

from turnstore import (
    BlockingStore,
    Checkpoint,
    EventPageRequest,
    ExecutionPageRequest,
    SessionContext,
    SessionPageRequest,
    TranscriptPageRequest,
)
from turnstore.cli import main
from turnstore.server.api import ENDPOINTS
from turnstore.server.app import STREAM
from turnstore.server.memory_api import MEMORY_ENDPOINTS

from .data import new_session, runtime_graph, turn, warning

SESSION_PATHS = [e.path for e in (*ENDPOINTS, STREAM) if "{session_id}" in e.path]


def builtins(record: Any) -> Any:
    """A record as the JSON the server should send for it."""
    return msgspec.json.decode(msgspec.json.encode(record))


def at(path: str, session_id: str) -> str:
    """`path` with the session id percent-encoded into its segment.

    Dots are encoded too: a client would otherwise resolve an id of `..` as a path step.
    """
    return path.replace("{session_id}", quote(session_id, safe="").replace(".", "%2E"))


def catalog_ids(server: Any, **query: Any) -> list[str]:
    """Every session id the catalog lists, following `next_cursor` page by page."""
    ids: list[str] = []
    cursor = None
    while True:
        params = {**query, **({"cursor": cursor} if cursor else {})}
        body = server.get("/api/sessions", params=params).json()
        ids += [s["session_id"] for s in body["sessions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return ids


def test_the_catalog_pages_newest_first_by_cursor(serve, writer: BlockingStore) -> None:
    """Pages of 3 walk the whole catalog in the library's order, each session once."""
    for index in range(8):
        new_session(writer, f"s{index}", owner="alice" if index % 2 else "bob")
    server = serve()
    expected = [
        s.session_id for s in writer.list_sessions_page(SessionPageRequest(limit=100)).sessions
    ]
    assert catalog_ids(server, limit=3) == expected
    assert len(expected) == 8
    first = server.get("/api/sessions", params={"limit": 3}).json()
    assert first["sessions"] == builtins(
        writer.list_sessions_page(SessionPageRequest(limit=3)).sessions
    )


def test_the_catalog_filters_by_owner_and_id_prefix(serve, writer: BlockingStore) -> None:
    """`owner` and `prefix` narrow the catalog; the prefix is literal text."""
    for session_id, owner in [
        ("agent-1", "alice"),
        ("agent-2", "bob"),
        ("agent%3", "alice"),
        ("other", "alice"),
    ]:
        new_session(writer, session_id, owner=owner)
    server = serve()
    assert sorted(catalog_ids(server, owner="alice", limit=1)) == ["agent%3", "agent-1", "other"]
    assert sorted(catalog_ids(server, prefix="agent")) == ["agent%3", "agent-1", "agent-2"]
    assert catalog_ids(server, prefix="agent%") == ["agent%3"]
    assert catalog_ids(server, prefix="agent-", owner="bob") == ["agent-2"]


def test_session_endpoints_answer_what_the_library_reads(serve, writer: BlockingStore) -> None:
    """Summary, stats, transcript, events, turn, executions and forks equal the library's."""
    checkpoint = new_session(writer, "main")
    for index in range(3):
        turn(writer, checkpoint, f"t{index}", answer=f"answer {index}")
    writer.fork("main", 2, Checkpoint.empty("branch"))
    server = serve()
    summary = writer.session_summary("main")
    assert summary is not None
    assert server.get("/api/sessions/main").json() == builtins(summary)
    assert server.get("/api/sessions/main/stats").json() == builtins(summary.execution_stats)
    assert server.get("/api/sessions/main/transcript", params={"limit": 2}).json() == builtins(
        writer.transcript_page("main", TranscriptPageRequest(max_batches=2))
    )
    assert server.get(
        "/api/sessions/main/transcript", params={"limit": 2, "before": 3}
    ).json() == builtins(
        writer.transcript_page("main", TranscriptPageRequest(max_batches=2, before_sequence=3))
    )
    events = server.get("/api/sessions/main/events", params={"limit": 4}).json()
    assert events == builtins(writer.event_page("main", EventPageRequest(limit=4)))
    assert events["latest_sequence"] == 9
    assert server.get("/api/sessions/main/turn").json() == builtins(
        writer.event_turn_page("main", None)
    )
    assert server.get("/api/sessions/main/executions").json() == builtins(
        writer.execution_page("main", ExecutionPageRequest(limit=20))
    )
    forks = server.get("/api/sessions/branch/forks").json()
    assert forks == builtins(writer.fork_tree("branch"))
    assert [s["session_id"] for s in forks["sessions"]] == ["main", "branch"]
    recent = server.get("/api/executions/recent", params={"limit": 2}).json()
    assert recent == {"executions": builtins(writer.recent_executions(2))}


def test_the_graph_endpoint_returns_the_active_path_root_first(serve, writer) -> None:
    """The runtime graph's active path, root to leaf, without the side branch."""
    new_session(writer, "rt")
    runtime_graph(writer, "rt", ["question", "answer", "follow-up"])
    new_session(writer, "plain")
    server = serve()
    body = server.get("/api/sessions/rt/graph").json()
    assert [n["node_id"] for n in body["nodes"]] == ["n0", "n1", "n2"]
    assert body["nodes"][2]["payload"]["parts"][0]["content"] == "follow-up"
    assert body["head_revision"] == 1
    plain = server.get("/api/sessions/plain/graph").json()
    assert (plain["head_revision"], plain["nodes"]) == (None, [])
    assert server.get("/api/sessions/rt/queue").json() == {"batches": []}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit must be between 1 and"),
        ({"limit": "100000"}, "limit must be between 1 and"),
        ({"limit": "ten"}, "limit must be an integer"),
        ({"before": "-1"}, "before must be between 0 and"),
    ],
)
def test_bad_parameters_are_400_with_a_typed_error(serve, writer, query, message) -> None:
    """Out-of-range or malformed parameters get a clear 400, not a page or a crash."""
    new_session(writer, "s")
    server = serve()
    for path in ["/api/sessions/s/events", "/api/sessions/s/transcript"]:
        response = server.get(path, params=query)
        assert response.status_code == 400
        assert response.json()["type"] == "InvalidInput"
        assert message in response.json()["error"]
    bad_cursor = server.get("/api/sessions", params={"cursor": "not-a-cursor"})
    assert (bad_cursor.status_code, bad_cursor.json()["type"]) == (400, "InvalidInput")


def test_page_sizes_are_capped(serve, writer: BlockingStore) -> None:
    """No endpoint returns more than the server's cap, whatever `limit` asks for."""
    checkpoint = new_session(writer, "big")
    for index in range(3):
        turn(writer, checkpoint, f"t{index}")
    server = serve()
    assert server.get("/api/sessions", params={"limit": 201}).status_code == 400
    assert server.get("/api/sessions/big/events", params={"limit": 501}).status_code == 400
    assert len(server.get("/api/sessions/big/events", params={"limit": 500}).json()["events"]) == 9


def test_unknown_sessions_are_404_on_every_session_endpoint(serve, writer) -> None:
    """Each per-session endpoint, the stream included, answers 404 SessionNotFound."""
    new_session(writer, "known")
    server = serve()
    for path in SESSION_PATHS:
        response = server.get(at(path, "unknown"))
        assert response.status_code == 404, path
        assert response.json()["type"] == "SessionNotFound", path


@pytest.mark.parametrize(
    "session_id", ["a/b", "100%", "sp ace", "x\x01y\x1bz", "q?x=1#f", "émoji-🙂", "..", "%2F"]
)
def test_session_ids_of_any_characters_round_trip_in_the_path(serve, writer, session_id):
    """A percent-encoded id reaches the store intact, `/`, `%`, `?` and controls included."""
    new_session(writer, session_id)
    turn(writer, writer.load(session_id) or Checkpoint.empty(session_id), "t")
    server = serve()
    for path in SESSION_PATHS:
        if path.endswith("/stream"):
            continue
        response = server.get(at(path, session_id))
        assert response.status_code == 200, (path, response.text)
    assert server.get(at("/api/sessions/{session_id}", session_id)).json()["session_id"] == (
        session_id
    )


def test_an_owner_scope_holds_on_every_endpoint(serve, writer: BlockingStore) -> None:
    """`--owner alice` shows alice's sessions only: bob's are 404 everywhere and never listed."""
    alice = new_session(writer, "alice-1", owner="alice")
    bob = new_session(writer, "bob-1", owner="bob")
    turn(writer, alice, "ta")
    turn(writer, bob, "tb")
    # A fork of alice's session that bob owns must not show in her tree either.
    child = Checkpoint.empty("bob-fork")
    child.session_context = SessionContext(owner_id="bob")
    writer.fork("alice-1", 1, child)
    server = serve("--owner", "alice")
    for path in SESSION_PATHS:
        assert server.get(at(path, "bob-1")).status_code == 404, path
        assert server.get(at(path, "bob-fork")).status_code == 404, path
    assert catalog_ids(server) == ["alice-1"]
    assert catalog_ids(server, owner="bob") == []
    assert catalog_ids(server, owner="alice") == ["alice-1"]
    recent = server.get("/api/executions/recent").json()["executions"]
    assert [e["session_id"] for e in recent] == ["alice-1"]
    tree = server.get("/api/sessions/alice-1/forks").json()
    assert [s["session_id"] for s in tree["sessions"]] == ["alice-1"]
    # Scoped to bob, alice's root is neither listed nor named.
    bobs = serve("--owner", "bob").get("/api/sessions/bob-fork/forks").json()
    assert [s["session_id"] for s in bobs["sessions"]] == ["bob-fork"]
    assert bobs["root_session_id"] == "bob-fork"
    assert server.get("/api/health").json()["owner_scope"] == "alice"


def test_a_token_is_required_on_every_request_when_set(serve, writer: BlockingStore) -> None:
    """Without the bearer token every path is 401; with it, or its cookie, each answers."""
    new_session(writer, "s")
    server = serve("--token", "s3cret")
    paths = [
        "/",
        "/static/app.js",
        "/api/openapi.json",
        "/api/health",
        "/api/sessions",
        "/api/executions/recent",
        *[at(p, "s") for p in SESSION_PATHS if "stream" not in p],
    ]
    for path in paths:
        refused = server.get(path)
        assert refused.status_code == 401, path
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert server.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
    for path in paths:
        allowed = server.get(path, headers={"authorization": "Bearer s3cret"})
        assert allowed.status_code == 200, path
    assert server.get("/", params={"token": "wrong"}).status_code == 401
    login = server.get("/", params={"token": "s3cret"})
    assert login.status_code == 303
    assert login.headers["location"] == "/"
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    with httpx.Client(base_url=server.base, cookies=login.cookies) as browser:
        assert browser.get("/api/sessions").status_code == 200


def test_a_browser_without_the_token_gets_a_page_that_says_how_to_sign_in(
    serve, writer: BlockingStore
) -> None:
    """A page, not raw JSON, for a browser; programs still get JSON; a wrong token says so."""
    server = serve("--token", "s3cret")
    html = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = server.get("/", headers=html)
    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert "/?token=TOKEN" in page.text
    assert "Authorization: Bearer TOKEN" in page.text
    assert "A bearer token is required." in page.text
    wrong = server.get("/", params={"token": "nope"}, headers=html)
    assert wrong.status_code == 401
    assert "The token given is wrong." in wrong.text
    assert "nope" not in wrong.text
    program = server.get("/api/sessions")
    assert program.json() == {"error": "a bearer token is required", "type": "Unauthorized"}
    assert server.get("/", params={"token": "nope"}).json()["error"] == "the token given is wrong"


HOSTILE_HOSTS = ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "[2001:db8::1]"]
"""Host headers a rebinding page (or any other name) would send."""


def test_without_a_token_only_loopback_host_names_are_answered(
    serve, writer: BlockingStore
) -> None:
    """DNS rebinding: a page whose name points at 127.0.0.1 sends its own name as Host."""
    new_session(writer, "s")
    server = serve()
    for host in HOSTILE_HOSTS:
        refused = server.get("/api/sessions", headers={"host": host})
        assert refused.status_code == 400, host
        assert refused.json()["type"] == "HostNotAllowed"
        assert "evil" not in refused.text
        assert server.get("/", headers={"host": host}).status_code == 400
    port = server.port
    for host in [f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"]:
        answered = server.get("/api/sessions", headers={"host": host})
        assert answered.status_code == 200, host
        assert [s["session_id"] for s in answered.json()["sessions"]] == ["s"]
    allowing = serve("--allowed-host", "box.lan", "--allowed-host", "Other.Lan")
    for host in ["box.lan", f"box.lan:{port}", "other.lan"]:
        assert allowing.get("/api/sessions", headers={"host": host}).status_code == 200, host
    assert allowing.get("/api/sessions", headers={"host": "evil.example"}).status_code == 400
    # With a token the token guards every request, whatever name the client used.
    tokened = serve("--token", "s3cret")
    bearer = {"authorization": "Bearer s3cret", "host": "box.lan"}
    assert tokened.get("/api/sessions", headers=bearer).status_code == 200


def test_a_bare_framework_id_is_answered_with_the_stored_one(serve, writer: BlockingStore) -> None:
    """404 for `lg-tides`, naming `langgraph/lg-tides` (and the ADK form) when stored and
    in the server's scope; a scoped server suggests nothing it would not show."""
    new_session(writer, "langgraph/lg-tides", owner="bob")
    new_session(writer, "adk/app/u1/s1")
    server = serve()
    missing = server.get(at("/api/sessions/{session_id}", "lg-tides"))
    assert missing.status_code == 404
    body = missing.json()
    assert body["did_you_mean"] == ["langgraph/lg-tides"]
    assert body["notes"] == ["did you mean 'langgraph/lg-tides'?"]
    assert server.get(at("/api/sessions/{session_id}", "app/u1/s1")).json()["did_you_mean"] == [
        "adk/app/u1/s1"
    ]
    assert "did_you_mean" not in server.get(at("/api/sessions/{session_id}", "nothing")).json()
    scoped = serve("--owner", "alice")
    assert "did_you_mean" not in scoped.get(at("/api/sessions/{session_id}", "lg-tides")).json()


def test_a_non_loopback_bind_is_refused_without_a_token(store_url: str, writer) -> None:
    """`--host 0.0.0.0` without `--token` is a usage error, and nothing is served."""
    for host in ["0.0.0.0", "::", "192.0.2.1", "example.org"]:
        result = CliRunner().invoke(main, ["serve", store_url, "--host", host])
        assert result.exit_code == 2, result.output
        assert "without --token" in result.output
    empty = CliRunner().invoke(main, ["serve", store_url, "--token", " "])
    assert empty.exit_code == 2


def test_the_server_is_read_only(serve, writer: BlockingStore) -> None:
    """Every write method is refused (405) on every path, and the database is unchanged."""
    checkpoint = new_session(writer, "s")
    turn(writer, checkpoint, "t")
    before = (writer.upkeep.stats(), writer.event_page("s", EventPageRequest(limit=100)))
    server = serve()
    for path in ["/api/sessions", *[at(p, "s") for p in SESSION_PATHS]]:
        for method in ["POST", "PUT", "PATCH", "DELETE"]:
            response = httpx.request(method, f"{server.base}{path}", json={}, timeout=10)
            assert response.status_code == 405, (method, path)
    after = (writer.upkeep.stats(), writer.event_page("s", EventPageRequest(limit=100)))
    assert builtins(after[1]) == builtins(before[1])
    counts = [
        {k: v for k, v in builtins(s).items() if k != "database_bytes"}
        for s in (before[0], after[0])
    ]
    assert counts[0] == counts[1]


def test_the_openapi_document_lists_every_endpoint_with_resolvable_schemas(serve, writer):
    """Every route is in the document; every `$ref` names a component that exists."""
    server = serve()
    document = server.get("/api/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {e.path for e in (*ENDPOINTS, *MEMORY_ENDPOINTS, STREAM)}
    components = document["components"]["schemas"]
    refs: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "$ref" in value:
                refs.append(value["$ref"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document)
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.rpartition("/")[2] in components, ref
    assert "SessionSummary" in components
    assert "JournalEvent" in components


def test_hostile_content_is_served_as_json_with_safe_headers(serve, writer) -> None:
    """Markup in ids and values stays JSON text; every response forbids sniffing and scripts."""
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    checkpoint = new_session(writer, hostile, text=hostile)
    turn(writer, checkpoint, "t", answer=hostile)
    warning(writer, hostile, hostile)
    server = serve()
    for path in ["/api/sessions", at("/api/sessions/{session_id}/events", hostile)]:
        response = server.get(path)
        assert response.headers["content-type"] == "application/json"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert hostile in response.text or hostile.replace('"', '\\"') in response.text
    index = server.get("/")
    assert index.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in index.headers["content-security-policy"]
    missing = server.get("/api/nowhere")
    assert (missing.status_code, missing.json()["type"]) == (404, "NotFound")


async def test_an_errors_notes_are_in_its_answer(store_url: str, writer: BlockingStore) -> None:
    """A store error carrying notes (PEP 678) answers them in `notes`; one without, none."""
    from starlette.requests import Request

    import turnstore
    from turnstore.errors import InvalidInput
    from turnstore.server import create_app

    async def refuse(request: Request) -> None:
        error = InvalidInput("checkpoint sequence did not advance")
        if request.query_params.get("noted"):
            error.add_note("session 's', stored sequence 3, given 3")
            error.add_note("hint: checkpoint.sequence += 1")
        raise error

    async with turnstore.open(store_url, read_only=True) as store:
        app = create_app(store)
        # A route of the test's own, on the real app: no endpoint of the read-only API
        # raises an error with notes today, and the handler must pass on any error's.
        app.add_route("/api/refuse", refuse)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
        ):
            noted = await client.get("/api/refuse", params={"noted": "1"})
            plain = await client.get("/api/refuse")
    assert noted.status_code == 400
    assert noted.json() == {
        "error": "checkpoint sequence did not advance",
        "type": "InvalidInput",
        "notes": ["session 's', stored sequence 3, given 3", "hint: checkpoint.sequence += 1"],
    }
    assert plain.json() == {"error": "checkpoint sequence did not advance", "type": "InvalidInput"}


async def test_the_app_closes_a_store_handed_over_and_only_that(store_url: str, writer) -> None:
    """`close_store=True` closes the given store at shutdown; by default it stays open."""
    import turnstore
    from turnstore.errors import StoreClosed
    from turnstore.server import create_app

    kept = turnstore.open(store_url, read_only=True)
    handed = turnstore.open(store_url, read_only=True)
    for app in (create_app(kept), create_app(handed, close_store=True)):
        async with app.router.lifespan_context(app):
            pass
    assert await kept.load("s") is None
    await kept.close()
    with pytest.raises(StoreClosed):
        await handed.load("s")


def test_search_answers_as_the_library_does_within_the_owner_scope(
    serve, writer: BlockingStore
) -> None:
    """`/api/search` returns the library's page; a scoped server finds only its owner's items."""
    from turnstore.records import SearchRequest

    writer.append_context("a", [{"role": "user", "content": "ferry to the lighthouse"}], "alice")
    writer.append_context("b", [{"role": "user", "content": "lighthouse tours"}], "bob")
    # The writer's search indexes what it committed first; the read-only server cannot.
    expected = builtins(writer.search(SearchRequest(query="lighthouse")))
    server = serve()
    body = server.get("/api/search", params={"q": "lighthouse"}).json()
    assert body == expected
    assert [hit["session_id"] for hit in body["hits"]] == ["b", "a"]
    first = server.get("/api/search", params={"q": "lighthouse", "limit": 1}).json()
    rest = server.get(
        "/api/search", params={"q": "lighthouse", "limit": 1, "cursor": first["next_cursor"]}
    ).json()
    assert [h["session_id"] for h in first["hits"] + rest["hits"]] == ["b", "a"]
    refused = server.get("/api/search", params={"q": '"unclosed'})
    assert refused.status_code == 400
    assert refused.json()["type"] == "InvalidInput"
    assert server.get("/api/search", params={"q": "x", "order": "worst"}).status_code == 400
    scoped = serve("--owner", "alice")
    hits = scoped.get("/api/search", params={"q": "lighthouse"}).json()["hits"]
    assert [hit["session_id"] for hit in hits] == ["a"]
    other = scoped.get("/api/search", params={"q": "lighthouse", "owner": "bob"}).json()
    assert other["hits"] == []


def test_conversation_answers_as_the_library_does_within_the_owner_scope(
    serve, writer: BlockingStore
) -> None:
    """`/conversation` returns the library's page, pages by `before`, refuses bad parameters."""
    from turnstore.records import ConversationRequest

    items = [{"role": "user", "content": f"m{n}"} for n in range(5)]
    writer.append_context("a", items, "alice", kind="openai-agents")
    writer.append_context("b", ["x"], "bob")
    server = serve()
    body = server.get("/api/sessions/a/conversation", params={"limit": 2}).json()
    assert body == builtins(writer.conversation("a", ConversationRequest(limit=2)))
    assert [m["text"] for m in body["messages"]] == ["m3", "m4"]
    assert (body["kind"], body["total"], body["next_before"]) == ("openai-agents", 5, 3)
    older = server.get("/api/sessions/a/conversation", params={"before": 3, "limit": 10}).json()
    assert [m["index"] for m in older["messages"]] == [0, 1, 2]
    assert older["next_before"] is None
    for bad in ({"limit": 0}, {"before": -1}, {"limit": "x"}):
        refused = server.get("/api/sessions/a/conversation", params=bad)
        assert refused.status_code == 400, bad
    assert server.get("/api/sessions/nobody/conversation").status_code == 404
    scoped = serve("--owner", "alice")
    assert scoped.get("/api/sessions/a/conversation").status_code == 200
    assert scoped.get("/api/sessions/b/conversation").status_code == 404
