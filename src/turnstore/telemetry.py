"""Internal: the store's OpenTelemetry spans and metrics, and its loggers' one convention.

Whether a store is instrumented is decided once, when its engine opens (`bind`): with
OpenTelemetry's API importable and neither `TURNSTORE_TELEMETRY=off` nor
`OTEL_SDK_DISABLED=true` set, the engine holds a `StoreTelemetry` bound to its backend, through
which its drivers wrap each operation in a span and time it and the engine counts commits,
retries and lease expiries; otherwise it holds None, and they take their plain paths and call
nothing here. No call after `bind` reads the environment or imports. Spans and instruments
come from OpenTelemetry's global providers (proxies until an application configures an SDK,
no-ops without one), or from the providers `override` names.

Logging: every logger is a child of `turnstore`, which gets a `NullHandler` and nothing
else; applications (and the `turnstore` command) configure handlers. A line names
operations, backends, ids and error types, never a stored value or a URL's secret.
docs/monitoring.md lists every span, metric and logger.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from turnstore.errors import (
    HeadRevisionConflict,
    QueuedWorkClaimExpired,
    RuntimeTurnCommitConflict,
    SequenceConflict,
    SessionExists,
    StorageError,
    TurnstoreError,
)

logging.getLogger("turnstore").addHandler(logging.NullHandler())

store_logger = logging.getLogger("turnstore.store")
"""Refused operations: one line each (conflicts at INFO, storage failures at WARNING)."""

SWITCH = "TURNSTORE_TELEMETRY"
"""`off` (or 0, false, no) opens stores uninstrumented, whatever OpenTelemetry is configured."""

CONFLICTS = (SequenceConflict, HeadRevisionConflict, RuntimeTurnCommitConflict, SessionExists)
"""Refusals counted as conflicts: another writer got there first."""

DURATION_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Bucket bounds (seconds) of `turnstore.operation.duration`: a commit takes 0.5 ms to 1 s."""

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
"""Bucket bounds (writes) of `turnstore.commit.batch_size`; 512 is the SQLite writer's most."""

LIVE_CHECK_S = 1.0
"""While no SDK is configured, how often a store looks again whether one has been since."""

_OFF = frozenset({"off", "0", "false", "no"})


def enabled() -> bool:
    """Whether a store opened now is instrumented: the API importable and not switched off
    (read when an engine opens, never per call)."""
    if os.environ.get(SWITCH, "").strip().lower() in _OFF:
        return False
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    try:
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401
    except Exception:  # not installed, or not importable here (an unreadable folder)
        return False
    return True


def _configured() -> bool:
    """Whether an application has set a global tracer or meter provider."""
    from opentelemetry import metrics, trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    # The API's stand-in until a meter provider is set; a name it no longer has reads as set,
    # which costs time, never a measurement.
    return type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"


def _version() -> str:
    """The package's version: the instrumentation scope's (read, not imported: the package
    imports this module)."""
    return str(getattr(sys.modules.get("turnstore"), "__version__", ""))


class Instruments:
    """The tracer and the metric instruments, from the global providers or given ones."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from opentelemetry import context, metrics, trace

        self.trace = trace
        self.context = context
        # Providers given are live; the global ones are the API's no-ops until an SDK is set.
        self._live = tracer_provider is not None or meter_provider is not None
        self._next_check = 0.0
        version = _version()
        self.tracer = trace.get_tracer("turnstore", version, tracer_provider)
        meter = metrics.get_meter("turnstore", version, meter_provider)
        self.duration = meter.create_histogram(
            "turnstore.operation.duration",
            unit="s",
            description="Time a store operation took, from the call to its result or error.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.batch_size = meter.create_histogram(
            "turnstore.commit.batch_size",
            unit="{write}",
            description="Writes one committed transaction carried (SQLite's group commit).",
            explicit_bucket_boundaries_advisory=list(BATCH_BUCKETS),
        )
        self.retries = meter.create_counter(
            "turnstore.retries", unit="{retry}", description="Work the store ran again."
        )
        self.conflicts = meter.create_counter(
            "turnstore.conflicts",
            unit="{conflict}",
            description="Writes refused because another writer moved the session first.",
        )
        self.lease_expiries = meter.create_counter(
            "turnstore.lease.expiries",
            unit="{lease}",
            description="Queued-work leases that ran out: re-leased, or refused to their holder.",
        )

    def live(self) -> bool:
        """Whether an SDK may be listening; while none is, looked at once a `LIVE_CHECK_S`,
        so an SDK configured after a store opened is used within a second."""
        if self._live:
            return True
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + LIVE_CHECK_S
        self._live = _configured()
        return self._live


class StoreTelemetry:
    """One store's instruments, bound to its backend when its engine opens: a span and a
    duration per operation, conflicts, and the engine's commits, retries and lease expiries."""

    __slots__ = (
        "_attributes",
        "_outcomes",
        "_reasons",
        "_system",
        "backend",
        "instruments",
        "system",
    )

    def __init__(self, instruments: Instruments, backend: str, system: str) -> None:
        self.instruments = instruments
        self.backend = backend
        self.system = system
        # Attributes are made once per store and value, not per measurement.
        self._system = {"db.system.name": self.system}
        self._attributes: dict[str, dict[str, str]] = {}
        self._reasons: dict[str, dict[str, str]] = {}
        self._outcomes: dict[str, dict[str, str]] = {}

    def committed(self, writes: int) -> None:
        """Record one committed transaction that carried `writes` writes."""
        if self.instruments.live():
            self.instruments.batch_size.record(writes, self._system)

    def retried(self, reason: str, count: int = 1) -> None:
        """Count `count` retries of `reason` (`transaction_aborted`, `file_changed`, ...)."""
        if not self.instruments.live():
            return
        found = self._reasons.get(reason)
        if found is None:
            found = {"db.system.name": self.system, "turnstore.retry.reason": reason}
            self._reasons[reason] = found
        self.instruments.retries.add(count, found)

    def leases_expired(self, outcome: str, count: int = 1) -> None:
        """Count `count` expired leases, `reclaimed` by a new claim or `refused` to a holder."""
        if not self.instruments.live():
            return
        found = self._outcomes.get(outcome)
        if found is None:
            found = {"db.system.name": self.system, "turnstore.lease.outcome": outcome}
            self._outcomes[outcome] = found
        self.instruments.lease_expiries.add(count, found)

    def attributes(self, operation: str) -> dict[str, str]:
        """An operation's metric attributes, made once per store and operation."""
        found = self._attributes.get(operation)
        if found is None:
            found = {"db.system.name": self.system, "db.operation.name": operation}
            self._attributes[operation] = found
        return found

    def operation(self, name: str, session_id: object) -> Operation:
        """A context manager around one operation: its span, current while it runs (a driver
        asks only while `instruments.live()`)."""
        return Operation(self, name, session_id)


class Operation:
    """One operation's span and timing; on error, the span's status and the counters."""

    __slots__ = ("attributes", "name", "session_id", "span", "started", "store", "token")

    def __init__(self, store: StoreTelemetry, name: str, session_id: object) -> None:
        self.store = store
        self.name = name
        self.session_id = session_id
        self.attributes = store.attributes(name)

    def __enter__(self) -> Operation:
        found = self.store.instruments
        attributes = self.attributes
        if isinstance(self.session_id, str):
            attributes = {**attributes, "turnstore.session.id": self.session_id}
        self.span = found.tracer.start_span(f"turnstore.{self.name}", attributes=attributes)
        self.token = found.context.attach(found.trace.set_span_in_context(self.span))
        self.started = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        seconds = time.perf_counter() - self.started
        found = self.store.instruments
        found.context.detach(self.token)
        attributes = self.attributes
        if error is not None:
            attributes = {**attributes, "error.type": type(error).__qualname__}
            self.span.set_attribute("error.type", type(error).__qualname__)
            self.span.set_status(found.trace.Status(found.trace.StatusCode.ERROR))
            self._count(error)
        self.span.end()
        found.duration.record(seconds, attributes)

    def _count(self, error: BaseException) -> None:
        found = self.store.instruments
        if isinstance(error, CONFLICTS):
            found.conflicts.add(
                1,
                {
                    **self.attributes,
                    "error.type": type(error).__qualname__,
                },
            )
        elif isinstance(error, QueuedWorkClaimExpired):
            self.store.leases_expired("refused")
        if isinstance(error, TurnstoreError):
            refused(self.name, self.store.backend, self.session_id, error)


def refused(operation: str, backend: str, session_id: object, error: TurnstoreError) -> None:
    """Log one line for an operation the store refused: what, where, and the error's type."""
    if isinstance(error, (*CONFLICTS, QueuedWorkClaimExpired)):
        level = logging.INFO
    elif isinstance(error, StorageError):
        level = logging.WARNING
    else:
        level = logging.DEBUG
    if not store_logger.isEnabledFor(level):
        return
    # The type, never the message: messages may quote the caller's input.
    retry = " (retryable)" if isinstance(error, StorageError) and error.retryable else ""
    store_logger.log(
        level,
        "%s refused on %s for session %s: %s%s",
        operation,
        backend,
        "-" if session_id is None else repr(session_id),
        type(error).__qualname__,
        retry,
    )


_default: Instruments | None = None
_override: Instruments | None = None


def bind(backend: str, system: str) -> StoreTelemetry | None:
    """The telemetry of a store opening now on `backend` (its name, `sqlite`), whose
    OpenTelemetry `db.system.name` is `system` (`postgresql`); None when off."""
    found = _instruments()
    return None if found is None else StoreTelemetry(found, backend, system)


def _instruments() -> Instruments | None:
    """The instruments a store opened now uses, or None when telemetry is off."""
    global _default
    if not enabled():
        return None
    if _override is not None:
        return _override
    if _default is None:
        try:
            _default = Instruments()
        except Exception as error:
            # Telemetry never keeps a store from opening (an API too old, say).
            store_logger.warning("OpenTelemetry is not usable, stores run without it: %r", error)
            return None
    return _default


@contextmanager
def override(tracer_provider: Any, meter_provider: Any) -> Iterator[Instruments]:
    """Stores opened inside use these providers instead of the global ones (tests, bench);
    the switches still turn telemetry off."""
    global _override
    before, _override = _override, Instruments(tracer_provider, meter_provider)
    try:
        yield _override
    finally:
        _override = before
