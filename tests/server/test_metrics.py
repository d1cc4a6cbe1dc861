"""`/metrics` of a real `turnstore serve` process, scraped with httpx on both backends.

The figures are read at each scrape, so what a writer does between two scrapes shows in the
second; the route is behind the same bearer token as the API.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import turnstore
from turnstore import BlockingStore, Checkpoint
from turnstore.records import QueuedWorkBatchDraft


def scrape(server: Any, **kwargs: Any) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of `/metrics`, by name, then by its labels."""
    response = server.get("/metrics", **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    """One sample's value."""
    return float(samples[name][tuple(sorted(labels.items()))])


def save(writer: BlockingStore, session_id: str) -> None:
    """A session at sequence 1."""
    found = Checkpoint.empty(session_id)
    found.sequence = 1
    writer.save(found)


def test_metrics_show_the_stores_figures_as_of_each_scrape(
    serve: Any, writer: BlockingStore, backend_name: str
) -> None:
    """Sessions, queued batches by state, the oldest waiting batch's age, the database's
    bytes (and the WAL's on SQLite), the store's info and the process's own series."""
    server = serve()
    empty = scrape(server)
    assert value(empty, "turnstore_sessions") == 0
    assert value(empty, "turnstore_queue_oldest_pending_age_seconds") == 0
    info = dict(next(iter(empty["turnstore_info"])))
    assert info["backend"] == backend_name
    assert info["version"] == turnstore.__version__
    assert int(info["schema_version"]) > 0
    for session_id in ("a", "b", "c"):
        save(writer, session_id)
    queue = writer.runtime("a")
    for item in range(4):
        queue.enqueue_queued_work(QueuedWorkBatchDraft(boundary="turn", items=[item]))
    assert queue.claim_ready_queued_work("worker-1", "turn", 1, 1) is not None  # runs out
    time.sleep(0.05)
    assert queue.claim_ready_queued_work("worker-2", "turn", 600_000, 1) is not None
    assert queue.claim_ready_queued_work("worker-3", "turn", 1, 1) is not None  # runs out
    time.sleep(0.05)
    samples = scrape(server)
    assert value(samples, "turnstore_sessions") == 3
    assert value(samples, "turnstore_queued_batches", state="leased") == 1
    assert value(samples, "turnstore_queued_batches", state="expired") == 1
    assert value(samples, "turnstore_queued_batches", state="ready") == 2
    assert value(samples, "turnstore_queue_oldest_pending_age_seconds") > 0
    assert value(samples, "turnstore_uncommitted_attachments") == 0
    assert value(samples, "turnstore_database_bytes") > 0
    assert value(samples, "turnstore_gauges_read_seconds") > 0
    if backend_name == "sqlite":
        assert value(samples, "turnstore_sqlite_wal_bytes") >= 0
    else:
        assert "turnstore_sqlite_wal_bytes" not in samples
    assert value(samples, "process_cpu_seconds_total") > 0


def test_an_owner_scoped_servers_metrics_count_that_owners_sessions(
    serve: Any, writer: BlockingStore
) -> None:
    """`--owner alice`: the counts are alice's (the catalog shows her 2 of 3 sessions), the
    info series names her; the database's bytes stay the whole store's."""
    for session_id, owner in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
        found = Checkpoint.empty(session_id)
        found.session_context.owner_id = owner
        found.sequence = 1
        writer.save(found)
    writer.runtime("b1").enqueue_queued_work(QueuedWorkBatchDraft(boundary="turn", items=[1]))
    scoped = serve("--owner", "alice")
    samples = scrape(scoped)
    assert value(samples, "turnstore_sessions") == 2
    assert len(scoped.get("/api/sessions").json()["sessions"]) == 2
    assert value(samples, "turnstore_queued_batches", state="ready") == 0
    assert dict(next(iter(samples["turnstore_info"])))["owner"] == "alice"
    whole = scrape(serve())
    assert value(whole, "turnstore_sessions") == 3
    assert value(whole, "turnstore_queued_batches", state="ready") == 1
    assert dict(next(iter(whole["turnstore_info"])))["owner"] == ""
    assert value(samples, "turnstore_database_bytes") > 0


def test_metrics_count_and_time_each_request_by_route_and_status(
    serve: Any, writer: BlockingStore
) -> None:
    """Requests by route template (never the ids in the path), method and status, and a
    latency histogram per route; a path no route serves is `other`."""
    save(writer, "a")
    server = serve()
    for _ in range(3):
        assert server.get("/api/sessions").status_code == 200
    assert server.get("/api/sessions/a").status_code == 200
    assert server.get("/api/sessions/missing-1").status_code == 404
    assert server.get("/api/sessions/missing-2").status_code == 404
    assert server.get("/api/sessions", params={"limit": "x"}).status_code == 400
    assert server.get("/nowhere").status_code == 404
    samples = scrape(server)
    count = "turnstore_http_requests_total"
    assert value(samples, count, route="/api/sessions", method="GET", status="200") == 3
    assert value(samples, count, route="/api/sessions", method="GET", status="400") == 1
    one = "/api/sessions/{session_id}"
    assert value(samples, count, route=one, method="GET", status="200") == 1
    assert value(samples, count, route=one, method="GET", status="404") == 2
    assert value(samples, count, route="other", method="GET", status="404") == 1
    assert not [labels for labels in samples[count] if "missing" in str(labels)]
    histogram = "turnstore_http_request_duration_seconds"
    assert value(samples, f"{histogram}_count", route="/api/sessions", method="GET") == 4
    assert value(samples, f"{histogram}_sum", route="/api/sessions", method="GET") > 0
    buckets = samples[f"{histogram}_bucket"]
    assert any(dict(labels)["le"] == "+Inf" for labels in buckets)
    # The guard's refusals are counted too.
    tokened = serve("--token", "s3cret")
    assert tokened.get("/api/sessions").status_code == 401
    counted = scrape(tokened, headers={"authorization": "Bearer s3cret"})
    assert value(counted, count, route="/api/sessions", method="GET", status="401") == 1


def test_metrics_need_the_token_when_one_is_set(
    serve: Any, writer: BlockingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `--token`, `/metrics` answers 401 without it and the figures with it; the refusal
    is one line of `turnstore.server` (at INFO: TURNSTORE_LOG_LEVEL beats `--log-level`)."""
    monkeypatch.setenv("TURNSTORE_LOG_LEVEL", "info")
    server = serve("--token", "s3cret")
    refused = server.get("/metrics")
    assert refused.status_code == 401
    assert "turnstore_sessions" not in refused.text
    samples = scrape(server, headers={"authorization": "Bearer s3cret"})
    assert value(samples, "turnstore_sessions") == 0
    log = server.log.read_text()
    (line,) = [line for line in log.splitlines() if "/metrics" in line]
    assert line.endswith("INFO turnstore.server: refused GET /metrics: no valid bearer token")
    assert "s3cret" not in log
