"""What telemetry costs a save: plain saves with it off, by default, and with the SDK.

python -m bench.telemetry [--saves 100] [--rounds 60] [--backends sqlite,postgres]
    [--faces blocking,async] [--span-processor simple|batch]
    [--postgres-url URL | --no-postgres] [--dir DIR] [--json PATH] [--smoke]

The targets (issue 33), per backend and face, from one run: the default row takes at most
1.03x the time of the off row, the SDK row at most 1.10x.

The three rows, each a store opened once and kept for the whole run:

* off: `TURNSTORE_TELEMETRY=off` in the environment when the store opens, so its driver
  and its SQLite writer take their plain paths and call nothing of OpenTelemetry (the
  same path as when `opentelemetry-api` is not installed, or `OTEL_SDK_DISABLED=true`).
* default: `opentelemetry-api` installed and no SDK configured, which is what an
  application with the `otel` extra and no exporter gets: each operation starts a span
  on the API's proxy tracer (a no-op) and records its duration on a proxy histogram.
* sdk: OpenTelemetry's SDK, the store's spans going through a `SimpleSpanProcessor` to an
  `InMemorySpanExporter` (exported as each span ends) and its metrics aggregated for an
  `InMemoryMetricReader`, handed to the store with `turnstore.telemetry.override` (an
  application sets them globally instead, which adds one proxy call per span). The
  exporter is emptied after each round; the row reports the spans it received.
  `--span-processor batch` puts a `BatchSpanProcessor` (what production configures)
  in front of the exporter instead, for this row and the sampled one; each round then
  ends with `force_flush` before its clock stops, so the export of the round's spans is
  timed too (the processor's thread would export them later, competing for the GIL).
  Both processors pass every span to the exporter; the run's JSON names the one used.
* sampled (no target; what closes most of the sdk row's gap): as sdk, with the tracer
  provider sampling 1% of traces (`ParentBased(TraceIdRatioBased(0.01))`); every metric is
  still recorded.

A plain save is `store.save(checkpoint, transcript_delta=items)` of one agent turn
(`bench.workload.make_turn`: four transcript items of about 3 KB and the loop state),
awaited (async face) or returned (blocking face) before the next starts: one writer, so
each save pays its own commit (SQLite: WAL, synchronous=FULL, on the disk under --dir,
which must not be a tmpfs; PostgreSQL: synchronous_commit=on). Each round saves --saves
turns per row, in fresh sessions of 20 turns; the rows take turns within a round, in an
order rotated from round to round, after one warm-up round that is not counted. A row's
time is the median over rounds of the round's seconds per save; its ratio is the median
over rounds of its time over the off row's in the same round, so the machine's drift from
round to round (the disk's and the server's, often 10% and more) cancels out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import turnstore
from bench.peers import advance, first_checkpoint
from bench.postgres import DEFAULT_URL, ScratchDatabase, unavailable
from bench.workload import Turn, make_turn
from turnstore import Checkpoint, telemetry

SEED = 20_240_601
"""The workload's seed: every row saves the same bytes."""
TURNS_PER_SESSION = 20
"""A row starts a fresh session after this many saves."""
MODES = ("off", "default", "sdk", "sampled")
"""The rows, in the order of the first round."""
SAMPLED = 0.01
"""The sampled row keeps this share of traces (`ParentBased(TraceIdRatioBased(0.01))`)."""
TARGETS = {"default": 1.03, "sdk": 1.10}
"""Required: the row's seconds per save over the off row's, at most this."""


@dataclass
class Row:
    """One mode on one backend and face: its store, its seconds per save by round."""

    mode: str
    store: Any
    rounds: list[float] = field(default_factory=list)
    spans: int = 0

    @property
    def seconds(self) -> float:
        """The median over rounds of the seconds per save."""
        return statistics.median(self.rounds)


class Sdk:
    """The SDK's providers with in-memory export: what the sdk row's store reports to."""

    def __init__(self, sampled: float | None = None, processor: str = "simple") -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        self.exporter = InMemorySpanExporter()
        sampler = None if sampled is None else ParentBased(TraceIdRatioBased(sampled))
        self.tracer_provider = TracerProvider(sampler=sampler)
        kind = BatchSpanProcessor if processor == "batch" else SimpleSpanProcessor
        self.tracer_provider.add_span_processor(kind(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def flush(self) -> None:
        """Export what the span processor holds (nothing held by a simple one)."""
        self.tracer_provider.force_flush()

    def drain(self) -> int:
        """Empty the exporter and collect the metrics; the spans it held."""
        self.flush()
        spans = len(self.exporter.get_finished_spans())
        self.exporter.clear()
        self.reader.get_metrics_data()
        return spans

    def shutdown(self) -> None:
        """End both providers."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@contextmanager
def opened_as(mode: str, sdks: dict[str, Sdk]) -> Iterator[None]:
    """Open stores inside this to get `mode`'s telemetry."""
    if mode == "off":
        before = os.environ.get(telemetry.SWITCH)
        os.environ[telemetry.SWITCH] = "off"
        try:
            yield
        finally:
            if before is None:
                del os.environ[telemetry.SWITCH]
            else:
                os.environ[telemetry.SWITCH] = before
    elif mode in sdks:
        with telemetry.override(sdks[mode].tracer_provider, sdks[mode].meter_provider):
            yield
    else:
        yield


class Saver:
    """The checkpoints of one row's sessions, advanced a turn at a time."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.checkpoints: dict[str, Checkpoint] = {}

    def next(self, index: int, turn: Turn) -> tuple[Checkpoint, list[Any]]:
        """The checkpoint of save `index` (0-based in the round) and its transcript delta."""
        session = f"{self.prefix}-{index // TURNS_PER_SESSION}"
        checkpoint = self.checkpoints.get(session)
        if checkpoint is None:
            checkpoint = self.checkpoints[session] = first_checkpoint(session, turn)
        return advance(checkpoint, turn), turn.items


def turns(count: int) -> list[Turn]:
    """`count` turns, made before any clock runs."""
    return [make_turn(SEED, "bench", index) for index in range(count)]


def order(round_index: int) -> list[str]:
    """The rows' order in a round: rotated, so none is always first after a pause."""
    shift = round_index % len(MODES)
    return [*MODES[shift:], *MODES[:shift]]


def blocking_round(
    row: Row, prefix: str, work: list[Turn], flush: Callable[[], None] | None = None
) -> float:
    """Seconds per save of one round of blocking saves, `flush` (the span export a batch
    processor holds) included."""
    saver = Saver(prefix)
    started = time.perf_counter()
    for index, turn in enumerate(work):
        checkpoint, items = saver.next(index, turn)
        row.store.save(checkpoint, transcript_delta=items)
    if flush is not None:
        flush()
    return (time.perf_counter() - started) / len(work)


async def async_round(
    row: Row, prefix: str, work: list[Turn], flush: Callable[[], None] | None = None
) -> float:
    """Seconds per save of one round of awaited async saves, `flush` included."""
    saver = Saver(prefix)
    started = time.perf_counter()
    for index, turn in enumerate(work):
        checkpoint, items = saver.next(index, turn)
        await row.store.save(checkpoint, transcript_delta=items)
    if flush is not None:
        flush()
    return (time.perf_counter() - started) / len(work)


def open_rows(face: str, urls: dict[str, str], sdks: dict[str, Sdk]) -> dict[str, Row]:
    """One store per mode, each opened with its mode's telemetry."""
    rows = {}
    for mode in MODES:
        with opened_as(mode, sdks):
            opener = turnstore.open_blocking if face == "blocking" else turnstore.open
            rows[mode] = Row(mode, opener(urls[mode], index_in_background=False))
    return rows


async def run_face(face: str, urls: dict[str, str], args: argparse.Namespace) -> dict[str, Row]:
    """Every round of one backend and face; the rows with their rounds."""
    processor = args.span_processor
    sdks = {"sdk": Sdk(processor=processor), "sampled": Sdk(SAMPLED, processor)}
    rows = open_rows(face, urls, sdks)
    work = turns(args.saves)
    try:
        for round_index in range(-1, args.rounds):  # round -1 warms up
            for mode in order(max(round_index, 0)):
                row = rows[mode]
                prefix = f"{mode}-r{round_index + 1}"
                flush = sdks[mode].flush if mode in sdks and processor == "batch" else None
                if face == "blocking":
                    seconds = await asyncio.to_thread(blocking_round, row, prefix, work, flush)
                else:
                    seconds = await async_round(row, prefix, work, flush)
                spans = sdks[mode].drain() if mode in sdks else 0
                if round_index >= 0:
                    row.rounds.append(seconds)
                    row.spans += spans
    finally:
        for row in rows.values():
            result = row.store.close()
            if asyncio.iscoroutine(result):
                await result
        for sdk in sdks.values():
            sdk.shutdown()
    return rows


def filesystem(path: Path) -> str:
    """The type of the filesystem `path` is on, from /proc/mounts ('unknown' elsewhere)."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        point = parts[1]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if len(parts) > 2 and inside and len(point) > len(best):
            best, kind = point, parts[2]
    return kind


def sqlite_urls(folder: Path, face: str) -> dict[str, str]:
    """A database file per mode, in `folder`."""
    return {mode: str(folder / f"{face}-{mode}.sqlite3") for mode in MODES}


def postgres_urls(scratch: ScratchDatabase, face: str) -> dict[str, str]:
    """A schema per mode, in the scratch database."""
    return {mode: scratch.turnstore_url(scratch.schema(f"{face}_{mode}")) for mode in MODES}


def report_row(backend: str, face: str, rows: dict[str, Row]) -> dict[str, Any]:
    """One backend and face: each mode's ms per save, the ratios and the verdicts."""
    ratios = {
        mode: statistics.median(
            mine / base for mine, base in zip(rows[mode].rounds, rows["off"].rounds, strict=True)
        )
        for mode in MODES[1:]
    }
    return {
        "backend": backend,
        "face": face,
        "ms_per_save": {mode: rows[mode].seconds * 1e3 for mode in MODES},
        "rounds_ms": {mode: [s * 1e3 for s in rows[mode].rounds] for mode in MODES},
        "spans": {mode: rows[mode].spans for mode in MODES},
        "ratios": ratios,
        "targets": {
            mode: {
                "target": TARGETS[mode],
                "measured": ratios[mode],
                "passed": ratios[mode] <= TARGETS[mode],
            }
            for mode in TARGETS
        },
    }


def line(row: dict[str, Any]) -> str:
    """One row of the printed table."""
    ms = row["ms_per_save"]
    verdicts = "  ".join(
        f"{mode}/off {target['measured']:.3f} (<= {target['target']:.2f}: "
        f"{'pass' if target['passed'] else 'MISS'})"
        for mode, target in row["targets"].items()
    )
    times = " ".join(f"{ms[mode]:>8.3f}" for mode in MODES)
    return (
        f"{row['backend']:<9} {row['face']:<9} {times}   {verdicts}"
        f"  sampled/off {row['ratios']['sampled']:.3f}"
    )


async def measure(
    args: argparse.Namespace, folder: Path
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every backend and face asked for; the rows and why any backend was skipped."""
    found: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for backend in args.backends:
        scratch = None
        if backend == "postgres":
            why = "--no-postgres" if args.no_postgres else unavailable(args.postgres_url)
            if why is not None:
                skipped[backend] = why
                continue
            scratch = ScratchDatabase(args.postgres_url)
        try:
            for face in args.faces:
                urls = (
                    sqlite_urls(folder, face) if scratch is None else postgres_urls(scratch, face)
                )
                progress(
                    args, f"{backend} {face}: {args.rounds} rounds of {args.saves} saves per row"
                )
                found.append(report_row(backend, face, await run_face(face, urls, args)))
        finally:
            if scratch is not None:
                scratch.drop()
    return found, skipped


def progress(args: argparse.Namespace, text: str) -> None:
    """A progress line on stderr."""
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole run: its configuration, machine, rows and skips."""
    folder = Path(tempfile.mkdtemp(prefix="bench-telemetry-", dir=args.dir))
    try:
        rows, skipped = asyncio.run(measure(args, folder))
        kind = filesystem(folder)
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    return {
        "config": {
            "saves": args.saves,
            "rounds": args.rounds,
            "turns_per_session": TURNS_PER_SESSION,
            "smoke": args.smoke,
            "span_processor": args.span_processor,
            "targets": TARGETS,
        },
        "machine": {
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "sqlite_dir_filesystem": kind,
            "opentelemetry": _otel_version(),
        },
        "rows": rows,
        "skipped": skipped,
    }


def _otel_version() -> str:
    from importlib.metadata import version

    return version("opentelemetry-sdk")


def render(doc: dict[str, Any]) -> str:
    """The table a person reads."""
    machine = doc["machine"]
    head = [
        f"telemetry on the save path: {doc['config']['rounds']} rounds of"
        f" {doc['config']['saves']} plain saves per row, one writer"
        + (" [SMOKE: tiny sizes, numbers mean nothing]" if doc["config"]["smoke"] else ""),
        f"{machine['cores']} cores, Python {machine['python']}, OpenTelemetry SDK"
        f" {machine['opentelemetry']} ({doc['config']['span_processor']} span processor),"
        f" SQLite files on {machine['sqlite_dir_filesystem']}",
        "",
        f"{'backend':<9} {'face':<9}"
        + "".join(f" {mode + ' ms':>8}" for mode in ("off", "dflt", "sdk", "1% smpl"))
        + "   ratios of ms per save",
    ]
    body = [line(row) for row in doc["rows"]]
    skips = [f"skipped {name}: {why}" for name, why in doc["skipped"].items()]
    return "\n".join([*head, *body, *skips])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.telemetry", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--saves", type=int, default=100, help="saves per row per round")
    parser.add_argument("--rounds", type=int, default=60, help="counted rounds (one more warms up)")
    parser.add_argument(
        "--backends", type=_names(("sqlite", "postgres")), default=["sqlite", "postgres"]
    )
    parser.add_argument(
        "--faces", type=_names(("blocking", "async")), default=["blocking", "async"]
    )
    parser.add_argument(
        "--span-processor",
        choices=("simple", "batch"),
        default="simple",
        help="the SDK rows' span processor (simple: exported as each span ends)",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TURNSTORE_BENCH_POSTGRES_URL", DEFAULT_URL),
        help="a server to make a scratch database on",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--dir", help="where the SQLite files go (default: the temp dir; not a tmpfs)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes: checks the machinery only"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.smoke:
        args.saves, args.rounds = 6, 1
    return args


def _names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names or set(names) - set(allowed):
            raise argparse.ArgumentTypeError(f"expected some of {', '.join(allowed)}")
        return names

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print the table, write the JSON; 0 even when a target is missed (it is printed)."""
    args = parse_args(argv)
    doc = run(args)
    print(render(doc))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
