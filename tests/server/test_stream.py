"""The live tail: SSE replay after a cursor, live delivery, and Last-Event-ID across restarts."""

from __future__ import annotations

import time

from turnstore import BlockingStore, EventPageRequest

from .data import new_session, turn, warning
from .sse import Tail

STREAM = "/api/sessions/{}/events/stream"


def texts(frames: list[tuple[int, dict]]) -> list[str]:
    """The warning texts of `frames`."""
    return [event["event"]["msg"]["message"] for _, event in frames]


def test_the_tail_replays_after_the_cursor_then_follows(serve, writer: BlockingStore) -> None:
    """`?after=0` sends every stored event in order, then each new one as it commits."""
    checkpoint = new_session(writer, "s")
    stored = turn(writer, checkpoint, "t1")
    server = serve()
    tail = Tail(server.base + STREAM.format("s") + "?after=0")
    try:
        assert tail.response.headers["content-type"].startswith("text/event-stream")
        replay = tail.take(3)
        assert [sequence for sequence, _ in replay] == stored == [1, 2, 3]
        assert [event["sequence"] for _, event in replay] == stored
        assert tail.retry_ms == 1000
        assert [warning(writer, "s", f"live {i}") for i in range(3)] == [4, 5, 6]
        live = tail.take(3)
        assert [sequence for sequence, _ in live] == [4, 5, 6]
        assert texts(live) == ["live 0", "live 1", "live 2"]
        assert tail.quiet(0.5)
    finally:
        tail.close()


def test_without_a_cursor_the_tail_starts_at_the_newest_event(serve, writer) -> None:
    """A first connection with no cursor gets only events stored after it connected."""
    new_session(writer, "s")
    warning(writer, "s", "old")
    server = serve()
    tail = Tail(server.base + STREAM.format("s"))
    try:
        assert tail.quiet(0.5)
        warning(writer, "s", "new")
        assert texts([tail.next()]) == ["new"]
    finally:
        tail.close()


def test_a_reconnect_after_a_restart_gets_exactly_the_missed_events(serve, writer) -> None:
    """Last-Event-ID after a server restart: every event stored meanwhile, once, in order."""
    new_session(writer, "s")
    for index in range(3):
        warning(writer, "s", f"before {index}")
    first = serve()
    tail = Tail(first.base + STREAM.format("s") + "?after=0")
    seen = tail.take(3)
    last_id = seen[-1][0]
    tail.close()
    first.stop()
    # Written while no server runs: the tail must catch up on these.
    for index in range(5):
        warning(writer, "s", f"missed {index}")
    second = serve()
    resumed = Tail(second.base + STREAM.format("s"), headers={"last-event-id": str(last_id)})
    try:
        caught_up = resumed.take(5)
        assert [sequence for sequence, _ in caught_up] == [4, 5, 6, 7, 8]
        assert texts(caught_up) == [f"missed {i}" for i in range(5)]
        warning(writer, "s", "after restart")
        assert texts([resumed.next()]) == ["after restart"]
        assert resumed.quiet(0.5)
    finally:
        resumed.close()
    every = writer.event_page("s", EventPageRequest(limit=100)).events
    assert [e.sequence for e in reversed(every)] == [*[s for s, _ in seen], 4, 5, 6, 7, 8, 9]


def test_last_event_id_wins_over_after_and_bad_ids_are_refused(serve, writer) -> None:
    """The header a reconnecting EventSource sends takes precedence; junk is a 400."""
    new_session(writer, "s")
    for index in range(4):
        warning(writer, "s", f"e{index}")
    server = serve()
    tail = Tail(server.base + STREAM.format("s") + "?after=0", headers={"last-event-id": "2"})
    try:
        assert [sequence for sequence, _ in tail.take(2)] == [3, 4]
    finally:
        tail.close()
    for bad in ["x", "-1"]:
        refused = server.get(STREAM.format("s"), headers={"last-event-id": bad})
        assert refused.status_code == 400
        assert refused.json()["type"] == "InvalidInput"


def test_many_tails_each_receive_every_event_once(serve, writer: BlockingStore) -> None:
    """20 tails of one session and 5 of another all see their own session's events, once."""
    new_session(writer, "a")
    new_session(writer, "b")
    server = serve()
    tails_a = [Tail(server.base + STREAM.format("a") + "?after=0") for _ in range(20)]
    tails_b = [Tail(server.base + STREAM.format("b") + "?after=0") for _ in range(5)]
    try:
        for index in range(5):
            warning(writer, "a", f"a{index}")
            warning(writer, "b", f"b{index}")
        for tail in tails_a:
            assert texts(tail.take(5)) == [f"a{i}" for i in range(5)]
        for tail in tails_b:
            assert texts(tail.take(5)) == [f"b{i}" for i in range(5)]
        assert all(tail.quiet(0.05) for tail in tails_a + tails_b)
    finally:
        for tail in tails_a + tails_b:
            tail.close()


def test_a_write_through_one_store_reaches_tails_on_two_other_servers(serve, writer) -> None:
    """Two servers on one database, neither of them the writer: both tails get each event.

    On PostgreSQL the wake is the writer's NOTIFY (the servers could be on other hosts); on
    SQLite it is the servers' poll of the high-water mark.
    """
    new_session(writer, "s")
    one, two = serve(), serve()
    tails = [Tail(server.base + STREAM.format("s")) for server in (one, two)]
    try:
        time.sleep(0.3)
        latencies = []
        for index in range(5):
            started = time.monotonic()
            warning(writer, "s", f"n{index}")
            for tail in tails:
                assert texts([tail.next(timeout=5)]) == [f"n{index}"]
            latencies.append(time.monotonic() - started)
        # A liveness bound, not a speed claim: bench/serve.py measures the latency.
        assert sorted(latencies)[2] < 2, latencies
    finally:
        for tail in tails:
            tail.close()


def test_with_wait_the_tail_of_a_session_not_saved_yet_follows_its_first_save(
    serve, writer: BlockingStore
) -> None:
    """`?wait=1` on an absent session: 200, a waiting comment, then `session`, then its events."""
    server = serve()
    tail = Tail(server.base + STREAM.format("later%2F1") + "?wait=1")
    try:
        assert tail.response.status_code == 200
        assert tail.quiet(0.5)
        assert "waiting for the session" in tail.comments
        # A first save without events: the tail must notice the session all the same.
        checkpoint = new_session(writer, "later/1")
        kind, summary = tail.next()
        assert (kind, summary["session_id"], summary["sequence"]) == ("session", "later/1", 1)
        stored = turn(writer, checkpoint, "t1")
        assert [sequence for sequence, _ in tail.take(3)] == stored == [1, 2, 3]
        assert tail.quiet(0.3)
    finally:
        tail.close()


def test_with_wait_an_existing_session_is_announced_then_tailed_as_usual(serve, writer) -> None:
    """`?wait=1` on a session that exists sends `session` at once, then tails from the cursor."""
    new_session(writer, "s")
    warning(writer, "s", "old")
    server = serve()
    tail = Tail(server.base + STREAM.format("s") + "?wait=true")
    try:
        kind, summary = tail.next()
        assert (kind, summary["session_id"]) == ("session", "s")
        assert tail.quiet(0.5), "no cursor: the tail starts at the newest event"
        warning(writer, "s", "new")
        assert texts([tail.next()]) == ["new"]
    finally:
        tail.close()


def test_without_wait_an_absent_session_is_still_a_404(serve) -> None:
    """Waiting is asked for: a tail of a mistyped id answers 404 at once; a bad flag is a 400."""
    server = serve()
    for query in ["", "?wait=0", "?wait=false"]:
        absent = server.get(STREAM.format("nobody") + query)
        assert (absent.status_code, absent.json()["type"]) == (404, "SessionNotFound")
    refused = server.get(STREAM.format("nobody") + "?wait=soon")
    assert (refused.status_code, refused.json()["type"]) == (400, "InvalidInput")


def test_a_scoped_tail_waits_alike_for_absent_and_other_owners_sessions(serve, writer) -> None:
    """Under `--owner alice`, bob's session looks absent: it waits, and is never announced."""
    new_session(writer, "bobs", owner="bob")
    server = serve("--owner", "alice")
    bobs = Tail(server.base + STREAM.format("bobs") + "?wait=1")
    later = Tail(server.base + STREAM.format("alices") + "?wait=1")
    try:
        warning(writer, "bobs", "private")
        new_session(writer, "alices", owner="alice")
        kind, summary = later.next()
        assert (kind, summary["session_id"]) == ("session", "alices")
        assert bobs.quiet(1.0)
        assert bobs.comments == later.comments[: len(bobs.comments)] == ["waiting for the session"]
    finally:
        bobs.close()
        later.close()


def test_the_openapi_document_lists_the_tails_parameters(serve) -> None:
    """The live tail's `after` and `wait` are in the OpenAPI document with the JSON endpoints'."""
    document = serve().get("/api/openapi.json").json()
    parameters = document["paths"][STREAM.format("{session_id}")]["get"]["parameters"]
    assert [(p["name"], p["in"]) for p in parameters] == [
        ("session_id", "path"),
        ("after", "query"),
        ("wait", "query"),
    ]
