"""Internal: `/metrics`: the store's gauges in Prometheus' text format, read at each scrape.

The HTTP side comes from `HttpMetrics`, the outermost middleware: every request counted by
route template (`other` for a path no route serves), method and status, the guard's
refusals included, and its latency in a histogram, with prometheus-client's own types in the
app's registry.

Each scrape reads `store.upkeep.gauges()` (one read transaction and a stat of the files), so
the figures are as fresh as the scrape; the server process's own `process_*` and
`python_info` series come with them. The route sits behind the same guard as the API. On a
server scoped to one owner the counts are that owner's sessions' and the info series names
the owner; the database's sizes are the whole store's (one file or schema holds everyone).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import turnstore
from turnstore import Store
from turnstore.records import StoreGauges


class Scraped(Collector):
    """The figures of the scrape in progress, as metric families."""

    def __init__(self) -> None:
        self.gauges = StoreGauges()
        self.read_seconds = 0.0

    def collect(self) -> Iterator[Metric]:
        """Every `turnstore_*` family of the last read."""
        found = self.gauges
        yield InfoMetricFamily(
            "turnstore",
            "The store the server reads: backend, schema version, turnstore version.",
            value={
                "backend": found.backend,
                "schema_version": str(found.schema_version),
                "version": turnstore.__version__,
                "owner": found.owner_id or "",
            },
        )
        yield GaugeMetricFamily(
            "turnstore_sessions",
            "Sessions, forks included (of the server's owner scope, if it has one).",
            found.session_count,
        )
        yield _queue(found)
        age = (found.oldest_pending_age_ms or 0) / 1000
        yield GaugeMetricFamily(
            "turnstore_queue_oldest_pending_age_seconds",
            "How long the oldest queued batch no live lease holds has waited (0: none waits).",
            age,
        )
        yield GaugeMetricFamily(
            "turnstore_uncommitted_attachments",
            "Attachment intents no commit has referenced yet (in flight, or orphans to sweep).",
            found.uncommitted_attachment_count,
        )
        yield GaugeMetricFamily(
            "turnstore_database_bytes",
            "Bytes the whole database takes on disk (SQLite: file and WAL; PostgreSQL: the"
            " tables), whatever the owner scope.",
            found.database_bytes,
        )
        if found.wal_bytes is not None:
            yield GaugeMetricFamily(
                "turnstore_sqlite_wal_bytes",
                "The SQLite write-ahead log's size (a long-lived reader keeps it from shrinking).",
                found.wal_bytes,
            )
        yield GaugeMetricFamily(
            "turnstore_gauges_read_seconds",
            "How long this scrape's read of the store's figures took.",
            self.read_seconds,
        )


def _queue(found: StoreGauges) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "turnstore_queued_batches",
        "Queued-work batches not completed yet, by state: ready (never leased, or released),"
        " leased (a live lease holds it), expired (its lease ran out).",
        labels=["state"],
    )
    leased, expired = found.leased_batch_count, found.expired_lease_batch_count
    family.add_metric(["ready"], found.queued_batch_count - leased - expired)
    family.add_metric(["leased"], leased)
    family.add_metric(["expired"], expired)
    return family


class MetricsEndpoint:
    """The `/metrics` handler of one app: its registry, and the figures read per scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.scraped = Scraped()
        self.registry.register(self.scraped)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.requests = Counter(
            "turnstore_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "turnstore_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by route and method (a"
            " live tail's lasts as long as its client stays).",
            ["route", "method"],
            registry=self.registry,
        )

    async def handle(self, request: Request) -> Response:
        """Read the store's gauges, then render every family."""
        store: Store = request.app.state.store
        owner_id = request.app.state.settings.owner_id
        started = time.perf_counter()
        gauges = await store.upkeep.gauges(owner_id)
        # No await from here on: two concurrent scrapes cannot mix their figures.
        self.scraped.gauges = gauges
        self.scraped.read_seconds = time.perf_counter() - started
        body = generate_latest(self.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"cache-control": "no-store"})


class HttpMetrics:
    """ASGI middleware: count each HTTP request and time it, labelled by its route template."""

    def __init__(self, app: ASGIApp, endpoint: MetricsEndpoint, routes: list[BaseRoute]) -> None:
        self._app = app
        self._endpoint = endpoint
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, noting its status; count and time it once it is answered."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]  # an app that raised answered 500

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, noting)
        finally:
            route, method = self._route(scope), scope["method"]
            self._endpoint.requests.labels(route, method, str(status[0])).inc()
            self._endpoint.latency.labels(route, method).observe(time.perf_counter() - started)

    def _route(self, scope: Scope) -> str:
        # A template, never the path: one series per route whatever ids are asked for.
        raw = scope.get("raw_path")
        routed = {**scope, "path": raw.decode("latin-1")} if raw else scope
        for route in self._routes:
            match, _ = route.matches(routed)
            if match is Match.FULL:
                return str(getattr(route, "path", "other")) or "other"
        return "other"
