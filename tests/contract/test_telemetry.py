"""Spans, metrics and log lines of a scripted workload, read through OpenTelemetry's SDK.

Every store here is opened inside `telemetry.override` with an in-memory span exporter and
an in-memory metric reader, on both backends and both faces: the names, attributes and
values docs/monitoring.md lists are the ones an exporter receives.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from runtime_helpers import make_commit, runtime, seed_session

import turnstore
from turnstore import Checkpoint, telemetry
from turnstore.backends.sqlite.pool import ReaderPool, _FileChanged
from turnstore.backends.sqlite.writer import GroupCommitWriter
from turnstore.records import QueuedWorkBatchDraft
from turnstore.seam import borrow

SYSTEMS = {"sqlite": "sqlite", "postgres": "postgresql"}
SECRET = "hunter2-stored-value"
"""A stored value no span attribute or log line may carry."""


class Captured:
    """What the in-memory exporter and reader hold: finished spans and metric points."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, oldest first."""
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        """Every data point of the metric `name` (none when it was never recorded)."""
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def by_attributes(self, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
        """The points of `name`, keyed by their attributes."""
        return {frozenset(point.attributes.items()): point for point in self.points(name)}


@pytest.fixture(autouse=True)
def otel() -> Iterator[Captured]:
    """Stores opened during the test report to in-memory SDK providers."""
    captured = Captured()
    with telemetry.override(captured.tracer_provider, captured.meter_provider):
        yield captured
    captured.tracer_provider.shutdown()
    captured.meter_provider.shutdown()


def checkpoint(session_id: str, sequence: int) -> Checkpoint:
    """A checkpoint at `sequence` whose context holds the stored value."""
    found = Checkpoint.empty(session_id)
    found.sequence = sequence
    found.context = [{"role": "user", "content": SECRET}]
    return found


def attrs(backend: str, operation: str, **more: str) -> frozenset[tuple[str, Any]]:
    """The attributes of a metric point of `operation` on `backend`."""
    found = {"db.system.name": SYSTEMS[backend], "db.operation.name": operation, **more}
    return frozenset(found.items())


async def test_each_operation_is_a_span_carrying_its_session_and_backend(
    store: Any, backend_name: str, otel: Captured
) -> None:
    """save, save, load: three spans named after the operations, with the session id, the
    backend and the operation as attributes, and three durations recorded."""
    await store.save(checkpoint("chat-1", 1), transcript_delta=[{"role": "user"}])
    await store.save(checkpoint("chat-1", 2))
    assert (await store.load("chat-1")) is not None
    spans = otel.spans()
    assert [span.name for span in spans] == [
        "turnstore.save_with_events",
        "turnstore.save_with_events",
        "turnstore.load",
    ]
    for span, operation in zip(
        spans, ["save_with_events", "save_with_events", "load"], strict=True
    ):
        assert dict(span.attributes or {}) == {
            "db.system.name": SYSTEMS[backend_name],
            "db.operation.name": operation,
            "turnstore.session.id": "chat-1",
        }
        assert span.status.status_code is StatusCode.UNSET
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "turnstore"
    durations = otel.by_attributes("turnstore.operation.duration")
    assert set(durations) == {
        attrs(backend_name, "save_with_events"),
        attrs(backend_name, "load"),
    }
    assert durations[attrs(backend_name, "save_with_events")].count == 2
    assert durations[attrs(backend_name, "load")].count == 1
    assert all(point.sum > 0 for point in durations.values())
    assert otel.points("turnstore.conflicts") == []


async def test_a_refused_save_is_an_error_span_and_one_conflict(
    store: Any, backend_name: str, otel: Captured
) -> None:
    """A save that does not advance the sequence: its span has ERROR status and the error's
    type, its duration carries `error.type`, and `turnstore.conflicts` counts it once."""
    await store.save(checkpoint("chat-2", 1))
    with pytest.raises(turnstore.SequenceConflict):
        await store.save(checkpoint("chat-2", 1))
    refused = otel.spans()[-1]
    assert refused.status.status_code is StatusCode.ERROR
    assert (refused.attributes or {})["error.type"] == "SequenceConflict"
    assert not any(SECRET in str(value) for value in (refused.attributes or {}).values())
    conflict = attrs(backend_name, "save_with_events", **{"error.type": "SequenceConflict"})
    assert {
        key: point.value for key, point in otel.by_attributes("turnstore.conflicts").items()
    } == {conflict: 1}
    durations = otel.by_attributes("turnstore.operation.duration")
    assert durations[conflict].count == 1
    assert durations[attrs(backend_name, "save_with_events")].count == 1


async def test_a_head_revision_conflict_is_counted(
    store: Any, backend_name: str, otel: Captured
) -> None:
    """A runtime commit from a stale head revision counts one `HeadRevisionConflict`."""
    rt = await runtime(store, "graph-1")
    revision = await seed_session(rt, "a", "b")
    await rt.commit_runtime_state(make_commit("graph-1", revision))
    with pytest.raises(turnstore.HeadRevisionConflict):
        await rt.commit_runtime_state(make_commit("graph-1", revision))
    conflicts = otel.by_attributes("turnstore.conflicts")
    key = attrs(backend_name, "commit_runtime_state", **{"error.type": "HeadRevisionConflict"})
    assert {k: point.value for k, point in conflicts.items()} == {key: 1}
    span = otel.spans()[-1]
    assert span.name == "turnstore.commit_runtime_state"
    assert (span.attributes or {})["turnstore.session.id"] == "graph-1"


async def test_lease_expiries_are_counted_when_reclaimed_and_when_refused(
    store: Any, backend_name: str, otel: Captured, caplog: pytest.LogCaptureFixture
) -> None:
    """A lease that ran out: the claim that takes its batch over counts `reclaimed` and logs
    one line; the old holder's renewal, refused, counts `refused`."""
    rt = await runtime(store, "queue-1")
    await rt.enqueue_queued_work(QueuedWorkBatchDraft(boundary="turn", items=[SECRET]))
    first = await rt.claim_ready_queued_work("worker-a", "turn", 1, 1)
    assert first is not None
    await asyncio.sleep(0.05)
    with caplog.at_level(logging.INFO, logger="turnstore"):
        second = await rt.claim_ready_queued_work("worker-b", "turn", 60_000, 1)
        assert second is not None
        with pytest.raises(turnstore.QueuedWorkClaimExpired):
            await rt.renew_queued_work_claim(first, 60_000)
    expiries = otel.by_attributes("turnstore.lease.expiries")
    system = SYSTEMS[backend_name]
    assert {key: point.value for key, point in expiries.items()} == {
        frozenset({("db.system.name", system), ("turnstore.lease.outcome", "reclaimed")}): 1,
        frozenset({("db.system.name", system), ("turnstore.lease.outcome", "refused")}): 1,
    }
    assert otel.points("turnstore.conflicts") == []
    lines = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        (
            "turnstore.runtime",
            "INFO",
            "session 'queue-1': 1 expired lease(s) re-leased to owner 'worker-b'",
        ),
        (
            "turnstore.store",
            "INFO",
            f"renew_queued_work_claim refused on {backend_name} for session 'queue-1':"
            " QueuedWorkClaimExpired",
        ),
    ]


async def test_each_commit_records_the_writes_it_carried(
    store: Any, backend_name: str, otel: Captured
) -> None:
    """`turnstore.commit.batch_size`: one point per committed transaction, summing to the
    writes committed (SQLite's group commit carries many; PostgreSQL's one each)."""
    saves = 12
    await asyncio.gather(*(store.save(checkpoint(f"batch-{i}", 1)) for i in range(saves)))
    # SQLite's writer records a commit once it has answered the saves (writer.py `_commit`):
    # the last record may land just after the gather returns.
    for _ in range(500):
        points = otel.by_attributes("turnstore.commit.batch_size").values()
        if sum(point.sum for point in points) >= saves:
            break
        await asyncio.sleep(0.01)
    (point,) = otel.by_attributes("turnstore.commit.batch_size").values()
    assert point.sum == saves
    assert 1 <= point.count <= saves
    assert dict(point.attributes) == {"db.system.name": SYSTEMS[backend_name]}


async def test_a_store_span_joins_the_callers_trace(store: Any, otel: Captured) -> None:
    """A store call inside an application's span is that span's child, on both faces."""
    tracer = otel.tracer_provider.get_tracer("the-agent")
    with tracer.start_as_current_span("agent turn") as parent:
        await store.save(checkpoint("chat-3", 1))
    save, turn = otel.spans()
    assert turn.name == "agent turn"
    assert save.parent is not None
    assert save.parent.span_id == parent.get_span_context().span_id
    assert save.context is not None
    assert save.context.trace_id == parent.get_span_context().trace_id


@pytest.mark.parametrize(
    ("variable", "value"), [("TURNSTORE_TELEMETRY", "off"), ("OTEL_SDK_DISABLED", "true")]
)
def test_a_switched_off_store_records_nothing(
    store_url: str,
    otel: Captured,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Opened with telemetry switched off, a store takes its plain path: no span, no metric;
    its refusals are still logged."""
    monkeypatch.setenv(variable, value)
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        store.save(checkpoint("off-1", 1))
        with (
            caplog.at_level(logging.INFO, logger="turnstore"),
            pytest.raises(turnstore.SequenceConflict),
        ):
            store.save(checkpoint("off-1", 1))
    assert otel.spans() == []
    assert otel.reader.get_metrics_data() is None or not otel.points("turnstore.operation.duration")
    assert len(caplog.records) == 1


def test_a_refusal_is_one_log_line_without_a_stored_value(
    blocking_store: Any, backend_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A conflict logs one INFO line on `turnstore.store`: operation, backend, session and
    error type; neither the stored value nor the error's message."""
    blocking_store.save(checkpoint("chat-4", 1))
    with (
        caplog.at_level(logging.DEBUG, logger="turnstore"),
        pytest.raises(turnstore.SequenceConflict),
    ):
        blocking_store.save(checkpoint("chat-4", 1))
    (record,) = caplog.records
    assert (record.name, record.levelname) == ("turnstore.store", "INFO")
    assert record.getMessage() == (
        f"save_with_events refused on {backend_name} for session 'chat-4': SequenceConflict"
    )
    assert SECRET not in caplog.text


def test_the_library_configures_no_handler_but_a_null_one() -> None:
    """`turnstore` gets one `NullHandler` and no level: applications decide what is shown."""
    logger = logging.getLogger("turnstore")
    assert [type(handler) for handler in logger.handlers] == [logging.NullHandler]
    assert logger.level == logging.NOTSET


def test_a_rerun_of_a_group_commit_is_one_retry_and_one_log_line(
    tmp_path: Path, otel: Captured, caplog: pytest.LogCaptureFixture
) -> None:
    """A write whose error aborts the whole transaction fails alone; the writes queued with it
    run again: one WARNING line on `turnstore.sqlite`, and `turnstore.retries` counts them."""

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(tmp_path / "w.sqlite3", isolation_level=None)
        connection.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
        return connection

    def aborting(connection: sqlite3.Connection) -> None:
        connection.execute("ROLLBACK")
        raise RuntimeError("aborted the transaction")

    started, release = threading.Event(), threading.Event()
    writer = GroupCommitWriter(connect, telemetry=telemetry.bind("sqlite", "sqlite"))
    try:
        held = writer.submit(lambda _: (started.set(), release.wait(10)))
        assert started.wait(10)
        queued = [
            writer.submit(lambda c: c.execute("INSERT INTO t VALUES (1)")),
            writer.submit(aborting),
            writer.submit(lambda c: c.execute("INSERT INTO t VALUES (2)")),
        ]
        with caplog.at_level(logging.INFO, logger="turnstore"):
            release.set()
            held.result(timeout=10)
            queued[0].result(timeout=10)
            with pytest.raises(RuntimeError):
                queued[1].result(timeout=10)
            queued[2].result(timeout=10)
    finally:
        writer.close()
    assert [(r.name, r.levelname) for r in caplog.records] == [("turnstore.sqlite", "WARNING")]
    assert "2 other write(s) run again" in caplog.records[0].getMessage()
    (retries,) = otel.points("turnstore.retries")
    assert retries.value == 2
    assert dict(retries.attributes) == {
        "db.system.name": "sqlite",
        "turnstore.retry.reason": "transaction_aborted",
    }


def test_global_providers_are_looked_at_until_an_sdk_is_set(
    otel: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the API's global no-ops a store takes the plain path, looking again once a second;
    once an application sets a tracer provider, the next look makes it live for good."""
    from opentelemetry import trace

    found = telemetry.Instruments()
    assert not found.live()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: otel.tracer_provider)
    assert not found.live(), "looked again before LIVE_CHECK_S passed"
    monkeypatch.setattr(found, "_next_check", 0.0)
    assert found.live()
    monkeypatch.undo()
    assert found.live()


def test_a_store_is_instrumented_as_it_was_opened_and_so_is_a_part_borrowing_it(
    store_url: str, backend_name: str, otel: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch is read when the store opens, not per call: set afterwards it changes
    nothing, and a part borrowing the store's engine reports as the store does."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        monkeypatch.setenv("TURNSTORE_TELEMETRY", "off")
        store.save(checkpoint("opened-1", 1))
        with borrow(store) as part:
            part.blocking.save(checkpoint("opened-2", 1))
    assert [
        (span.name, (span.attributes or {})["turnstore.session.id"]) for span in otel.spans()
    ] == [
        ("turnstore.save_with_events", "opened-1"),
        ("turnstore.save_with_events", "opened-2"),
    ]
    (point,) = otel.by_attributes("turnstore.commit.batch_size").values()
    assert point.sum == 2
    assert dict(point.attributes) == {"db.system.name": SYSTEMS[backend_name]}


def test_a_read_only_read_run_again_is_one_file_changed_retry(
    tmp_path: Path,
    otel: Captured,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A read-only reader whose read a writer changed the file under reads again: one DEBUG
    line on `turnstore.sqlite`, and `turnstore.retries` counts `file_changed` once."""
    path = tmp_path / "r.sqlite3"
    turnstore.open_blocking(path).close()
    frozen = ReaderPool._read_frozen
    changed: list[bool] = []

    def once_changed(pool: ReaderPool, work: Any) -> Any:
        if not changed:
            changed.append(True)
            raise _FileChanged
        return frozen(pool, work)

    monkeypatch.setattr(ReaderPool, "_read_frozen", once_changed)
    pool = ReaderPool(path, 5.0, read_only=True, telemetry=telemetry.bind("sqlite", "sqlite"))
    try:
        with caplog.at_level(logging.DEBUG, logger="turnstore"):
            assert pool.read(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
    finally:
        pool.close()
    assert [(r.name, r.levelname) for r in caplog.records] == [("turnstore.sqlite", "DEBUG")]
    (retries,) = otel.points("turnstore.retries")
    assert retries.value == 1
    assert dict(retries.attributes) == {
        "db.system.name": "sqlite",
        "turnstore.retry.reason": "file_changed",
    }
