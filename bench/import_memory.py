"""Export and import in constant memory: peak RSS of a tiny, a 100 MB and a 1 GB export.

python -m bench.import_memory [--sizes 100,1000] [--big-share 0.15] [--item-kb 64]
    [--long-line-mb 200] [--into sqlite,postgres] [--postgres-url URL] [--json PATH]
    [--dir DIR] [--smoke]

The target (issue 13): importing a 1 GB export runs in constant memory. Constant means the
peak does not grow with the file, nor with its largest tree, so the same measurement is
taken on files of several sizes and compared with a tiny one.

How each number is obtained:

* the source: a SQLite store (WAL, synchronous=FULL) grown with ordinary `save` calls to
  each --sizes step in turn (MB of export file, approximately): one big session holding
  --big-share of the step's bytes (0.15: about 150 MB of the 1 GB file, so one tree is
  larger than 100 MB and the import must stream within a tree too), the rest in sessions
  of about 1 MB; every save adds 8 transcript items of --item-kb KB of random base64 text
  to the checkpoint's context and the transcript. The store grows from step to step, so
  the 1 GB file holds the 100 MB file's trees too (but a larger big session).
* each measurement runs in a fresh child process (`python -m bench.import_memory --child
  ...`), which imports turnstore and opens the store, reads its RSS (`start`), then runs
  `export_trees` into a file (or `import_trees` from it, into a new empty store, with
  on_conflict="fail") and reads its peak RSS, `VmHWM` of /proc/self/status (the kernel's
  high-water mark of the resident set: no sampling gap). `growth` is peak - start.
* the tiny row: one session of one turn, exported and imported the same way: what the
  child costs with nothing to carry. The verdict compares each step's growth with the
  tiny row's: constant memory means the 1 GB row's peak is within --budget-mb of the
  100 MB row's (default 64 MB) while the file is 10x larger.
* files and stores are removed as soon as a step is measured; at most the source store,
  one export file and one imported store exist at a time.
* the long line (issue 30): memory cannot be constant in the length of one line, since a
  line is decoded, and a row handed to the database, whole. A store of one session whose one
  save appended a --long-line-mb item is exported (one line of that size), then imported
  with no limit (`max_line_bytes=None`: the peak against the line's size is the multiple
  the docs state) and with the default limit (64 MiB: a longer line is refused, and the
  peak shows that the refusal did not read it whole).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.measure import current_rss_bytes, max_rss_bytes
from bench.postgres import DEFAULT_URL, unavailable, with_database

MB = 1_000_000
SEED = 20_240_601
ITEMS_PER_SAVE = 8
"""Transcript items each save appends."""
SMALL_SESSION_BYTES = 1 * MB
"""About how many item bytes each ordinary session holds."""
SCHEMA = "bench_import"
"""The PostgreSQL schema imports go to (dropped before and after)."""
EXPORT_PER_ITEM_BYTE = 1.05
"""First guess of export bytes per item byte; corrected from each step's measured file."""


# --- the source store -------------------------------------------------------------------------


class Source:
    """The SQLite store the exports are taken from, grown to each size in turn."""

    def __init__(self, path: Path, item_bytes: int) -> None:
        import turnstore

        self.path = path
        self.url = f"sqlite:///{path}"
        self.store = turnstore.open_blocking(self.url)
        self.item_bytes = item_bytes
        self.rng = random.Random(SEED)
        self.sessions = 0
        self.item_total = 0
        self.big: Any = None
        self.big_items = 0
        self.largest_session_items = 0

    def _items(self, session: str, sequence: int) -> list[dict[str, Any]]:
        raw = self.item_bytes * 3 // 4
        items = []
        for number in range(ITEMS_PER_SAVE):
            text = base64.b64encode(self.rng.randbytes(raw)).decode("ascii")
            role = "user" if number % 2 == 0 else "assistant"
            item_id = f"{session}-{sequence}-{number}"
            items.append({"id": item_id, "role": role, "content": text})
        return items

    def _save(self, checkpoint: Any) -> int:
        checkpoint.sequence += 1
        items = self._items(checkpoint.session_id, checkpoint.sequence)
        checkpoint.context.extend(items)
        self.store.save(checkpoint, items)
        added = sum(len(item["content"]) for item in items)
        self.item_total += added
        return added

    def grow(self, item_target: int, big_share: float) -> None:
        """Add sessions until the items total `item_target` bytes, the big one its share."""
        from turnstore import Checkpoint, SessionContext

        if self.big is None:
            context = SessionContext(owner_id="bench", origin_label="bench")
            self.big = Checkpoint(session_id="big-0", session_context=context)
            self.sessions += 1
        big_target = int(item_target * big_share)
        while self.big_items < big_target:
            self.big_items += self._save(self.big)
        while self.item_total < item_target:
            self.sessions += 1
            context = SessionContext(owner_id="bench", origin_label="bench")
            checkpoint = Checkpoint(
                session_id=f"small-{self.sessions:06d}", session_context=context
            )
            held = 0
            while held < SMALL_SESSION_BYTES and self.item_total < item_target:
                held += self._save(checkpoint)
        self.largest_session_items = self.big_items

    def close(self) -> None:
        self.store.close()


def tiny_source(path: Path) -> str:
    """A store of one session of one turn; its URL."""
    import turnstore
    from turnstore import Checkpoint

    url = f"sqlite:///{path}"
    with turnstore.open_blocking(url) as store:
        checkpoint = Checkpoint.empty("tiny-0")
        items = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
        checkpoint.context += items
        checkpoint.sequence += 1
        store.save(checkpoint, items)
    return url


def long_line_source(path: Path, line_mb: int) -> str:
    """A store of one session whose one save appended one item of about `line_mb` MB: its
    export holds a line of that size (the context chunk). Its URL."""
    import turnstore
    from turnstore import Checkpoint

    url = f"sqlite:///{path}"
    text = base64.b64encode(random.Random(SEED).randbytes(line_mb * MB * 3 // 4)).decode()
    with turnstore.open_blocking(url) as store:
        checkpoint = Checkpoint.empty("long-line-0")
        checkpoint.context.append({"role": "user", "content": text})
        checkpoint.sequence += 1
        store.save(checkpoint, list(checkpoint.context))
    return url


def remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# --- the measured child -----------------------------------------------------------------------


def child_main(argv: Sequence[str]) -> int:
    """`--child export URL FILE` or `--child import FILE URL [MAX_LINE]`: one JSON line.

    MAX_LINE is the import's `max_line_bytes` (`none`: no limit; absent: the default). An
    import refused with `InvalidInput` reports the refusal and its peak, not a failure.
    """
    action, first, second, *limit = argv
    import turnstore
    from turnstore.records import TransferReport
    from turnstore.transfer import MAX_LINE_BYTES

    max_line = MAX_LINE_BYTES if not limit else None if limit[0] == "none" else int(limit[0])
    url = first if action == "export" else second
    refused = None
    with turnstore.open_blocking(url) as store:
        start = current_rss_bytes()
        started = time.perf_counter()
        if action == "export":
            with open(second, "wb") as out:
                report = store.upkeep.export_trees(out)
            size = os.path.getsize(second)
        else:
            with open(first, "rb") as source:
                try:
                    report = store.upkeep.import_trees(
                        source, on_conflict="fail", max_line_bytes=max_line
                    )
                except turnstore.InvalidInput as error:
                    report, refused = TransferReport(), str(error)
            size = os.path.getsize(first)
        seconds = time.perf_counter() - started
        peak = max_rss_bytes()
    figures = {
        "action": action,
        "file_bytes": size,
        "trees": report.tree_count,
        "rows": report.row_count,
        "seconds": seconds,
        "start_rss": start,
        "peak_rss": peak,
        "growth": peak - start,
        "refused": refused,
    }
    print(json.dumps(figures))
    return 0


def measure(action: str, first: str, second: str, *extra: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.import_memory", "--child", action, first, second]
    command += extra
    done = subprocess.run(
        command, cwd=Path(__file__).parent.parent, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {action} child failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --- the run ----------------------------------------------------------------------------------


class Targets:
    """Where imports go: a fresh SQLite file, a fresh PostgreSQL schema."""

    def __init__(self, directory: Path, postgres_url: str | None) -> None:
        self.directory = directory
        self.postgres_url = postgres_url
        self.admin: Any = None
        if postgres_url is not None:
            import psycopg

            self.admin = psycopg.connect(postgres_url, autocommit=True)
            self.drop_schema()

    def drop_schema(self) -> None:
        if self.admin is not None:
            self.admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    def fresh(self, backend: str) -> str:
        if backend == "sqlite":
            path = self.directory / "imported.sqlite3"
            remove_sqlite(path)
            return f"sqlite:///{path}"
        assert self.postgres_url is not None
        self.drop_schema()
        row = self.admin.execute("SELECT current_database()").fetchone()
        return with_database(self.postgres_url, str(row[0]), schema=SCHEMA)

    def clean(self, backend: str) -> None:
        if backend == "sqlite":
            remove_sqlite(self.directory / "imported.sqlite3")
        else:
            self.drop_schema()

    def close(self) -> None:
        if self.admin is not None:
            self.drop_schema()
            self.admin.close()


def one_step(
    label: str,
    source_url: str,
    export_file: Path,
    targets: Targets,
    into: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Export the source in a child, import the file into each target in a child."""
    progress(f"{label}: export")
    row: dict[str, Any] = {
        "label": label,
        "export": measure("export", source_url, str(export_file)),
    }
    row["file_bytes"] = row["export"]["file_bytes"]
    row["imports"] = {}
    for backend in into:
        progress(f"{label}: import into {backend} ({row['file_bytes'] / MB:,.0f} MB)")
        url = targets.fresh(backend)
        try:
            figures = measure("import", str(export_file), url)
        finally:
            targets.clean(backend)
        if figures["trees"] != row["export"]["trees"] or figures["rows"] != row["export"]["rows"]:
            raise RuntimeError(f"{label}: imported {figures}, exported {row['export']}")
        row["imports"][backend] = figures
    export_file.unlink(missing_ok=True)
    return row


def long_line_step(
    line_mb: int,
    scratch: Path,
    targets: Targets,
    into: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Export a file with one `line_mb` MB line; import it without a limit, then with the
    default limit (refused when the line is longer), into each target."""
    path = scratch / "long.sqlite3"
    export_file = scratch / "long.jsonl"
    progress(f"long line of {line_mb} MB: building and exporting")
    url = long_line_source(path, line_mb)
    row: dict[str, Any] = {
        "label": f"{line_mb} MB line",
        "export": measure("export", url, str(export_file)),
    }
    remove_sqlite(path)
    with open(export_file, "rb") as lines:
        row["line_bytes"] = max(len(line) for line in lines)
    row["imports"], row["limited"] = {}, {}
    for backend in into:
        for key, extra in (("imports", ("none",)), ("limited", ())):
            progress(f"long line: import into {backend} ({key})")
            target = targets.fresh(backend)
            try:
                row[key][backend] = measure("import", str(export_file), target, *extra)
            finally:
                targets.clean(backend)
    export_file.unlink(missing_ok=True)
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    progress = args.progress
    into = list(args.into)
    skipped: dict[str, str] = {}
    pg_url: str | None = None
    if "postgres" in into:
        reason = (
            "disabled with --no-postgres" if args.no_postgres else unavailable(args.postgres_url)
        )
        if reason is None:
            pg_url = args.postgres_url
        else:
            skipped["postgres"] = reason
            into.remove("postgres")
    scratch = Path(tempfile.mkdtemp(prefix="turnstore-bench-import-", dir=args.dir))
    targets = Targets(scratch, pg_url)
    rows: list[dict[str, Any]] = []
    long_lines: list[dict[str, Any]] = []
    per_item = EXPORT_PER_ITEM_BYTE
    try:
        tiny = scratch / "tiny.sqlite3"
        rows.append(
            one_step("tiny", tiny_source(tiny), scratch / "tiny.jsonl", targets, into, progress)
        )
        remove_sqlite(tiny)
        source = Source(scratch / "source.sqlite3", args.item_kb * 1000)
        try:
            for size in args.sizes:
                target_bytes = size * MB
                progress(f"{size} MB: growing the source store")
                built = time.perf_counter()
                source.grow(int(target_bytes / per_item), args.big_share)
                source.store.close()  # the child reads it; reopen to grow further
                build_s = time.perf_counter() - built
                row = one_step(
                    f"{size} MB", source.url, scratch / "export.jsonl", targets, into, progress
                )
                row["build_s"] = build_s
                row["sessions"] = source.sessions
                row["item_bytes"] = source.item_total
                row["largest_session_item_bytes"] = source.largest_session_items
                rows.append(row)
                per_item = row["file_bytes"] / source.item_total
                import turnstore

                source.store = turnstore.open_blocking(source.url)
        finally:
            source.close()
        if args.long_line_mb:
            long_lines.append(long_line_step(args.long_line_mb, scratch, targets, into, progress))
    finally:
        targets.close()
        shutil.rmtree(scratch, ignore_errors=True)
    doc = {
        "config": {
            "sizes_mb": args.sizes,
            "big_share": args.big_share,
            "item_kb": args.item_kb,
            "into": into,
            "budget_mb": args.budget_mb,
            "smoke": args.smoke,
            "long_line_mb": args.long_line_mb,
        },
        "environment": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
        },
        "rows": rows,
        "long_lines": long_lines,
        "skipped": skipped,
        "verdicts": verdicts(rows, into, args.budget_mb),
        "elapsed_s": time.perf_counter() - started,
    }
    return doc


def verdicts(
    rows: list[dict[str, Any]], into: Sequence[str], budget_mb: float
) -> list[dict[str, Any]]:
    """For export and each import: the largest file's peak against the smallest sized one's."""
    sized = [row for row in rows if row["label"] != "tiny"]
    if len(sized) < 2:
        return []
    small, large = sized[0], sized[-1]
    out = []
    kinds = [("export", lambda row: row["export"])]
    kinds += [(f"import into {b}", lambda row, b=b: row["imports"][b]) for b in into]
    for name, pick in kinds:
        low, high = pick(small), pick(large)
        extra = (high["peak_rss"] - low["peak_rss"]) / MB
        out.append(
            {
                "name": name,
                "small": small["label"],
                "large": large["label"],
                "small_peak_mb": low["peak_rss"] / MB,
                "large_peak_mb": high["peak_rss"] / MB,
                "extra_mb": extra,
                "budget_mb": budget_mb,
                "status": "PASS" if extra <= budget_mb else "MISS",
            }
        )
    return out


# --- printing ---------------------------------------------------------------------------------


def verdict_line(verdict: dict[str, Any]) -> str:
    """The line the target is judged on (the smoke test parses it)."""
    return (
        f"peak RSS {verdict['name']}: {verdict['large']} {verdict['large_peak_mb']:.1f} MB vs"
        f" {verdict['small']} {verdict['small_peak_mb']:.1f} MB = {verdict['extra_mb']:+.1f} MB"
        f" (<= {verdict['budget_mb']:g} MB) {verdict['status']}"
    )


def render(doc: dict[str, Any]) -> str:
    config, env = doc["config"], doc["environment"]
    lines = [
        "turnstore export/import memory benchmark: peak RSS of a child process exporting a"
        " SQLite store and importing the file into a new store"
        + (" [SMOKE: tiny sizes, numbers mean nothing]" if config["smoke"] else ""),
        f"Python {env['python']}, SQLite {env['sqlite']}, {env['cpus']} CPUs; items of"
        f" {config['item_kb']} KB, largest session {config['big_share']:.0%} of each file;"
        f" run took {doc['elapsed_s']:.0f} s",
        "",
    ]
    headers = ["file", "size", "trees", "rows", "largest tree", "step", "seconds", "MB/s"]
    headers += ["start RSS", "peak RSS", "growth"]
    table_rows = []
    for row in doc["rows"]:
        steps = [("export", row["export"])]
        steps += [(f"import {b}", figures) for b, figures in row["imports"].items()]
        for number, (name, figures) in enumerate(steps):
            first = number == 0
            table_rows.append(
                [
                    row["label"] if first else "",
                    f"{row['file_bytes'] / MB:,.1f} MB" if first else "",
                    f"{figures['trees']:,}" if first else "",
                    f"{figures['rows']:,}" if first else "",
                    _largest(row) if first else "",
                    name,
                    f"{figures['seconds']:.1f}",
                    f"{row['file_bytes'] / MB / figures['seconds']:.1f}"
                    if figures["seconds"]
                    else "-",
                    f"{figures['start_rss'] / MB:.1f} MB",
                    f"{figures['peak_rss'] / MB:.1f} MB",
                    f"{figures['growth'] / MB:+.1f} MB",
                ]
            )
    lines.append(_table(headers, table_rows))
    lines.append(
        "start RSS: the child after importing turnstore and opening the store; peak: VmHWM at"
        " the end; largest tree: its share of the file (its item bytes x file bytes per item byte)."
    )
    lines.append("")
    lines.extend(verdict_line(verdict) for verdict in doc["verdicts"])
    lines.extend(long_line_lines(doc["long_lines"]))
    for name, reason in doc["skipped"].items():
        lines.append(f"- import into {name}: skipped, {reason}")
    return "\n".join(lines)


def long_line_lines(long_lines: list[dict[str, Any]]) -> list[str]:
    """One line per step of the long-line file: its peak against the line's size."""
    out = []
    for row in long_lines:
        line_mb = row["line_bytes"] / MB
        steps = [("export", row["export"])]
        steps += [(f"import into {b} (no limit)", f) for b, f in row["imports"].items()]
        steps += [(f"import into {b} (default limit)", f) for b, f in row["limited"].items()]
        for name, figures in steps:
            growth = figures["growth"] / MB
            outcome = "refused" if figures.get("refused") else f"{figures['rows']} rows"
            out.append(
                f"long line {line_mb:.1f} MB, {name}: peak RSS {figures['peak_rss'] / MB:.1f} MB,"
                f" growth {growth:+.1f} MB = {growth / line_mb:.2f}x the line ({outcome})"
            )
    return out


def _largest(row: dict[str, Any]) -> str:
    largest = row.get("largest_session_item_bytes")
    if largest is None:
        return "-"
    return f"~{largest * row['file_bytes'] / row['item_bytes'] / MB:,.0f} MB"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if i in (0, 5) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *map(line, rows)])


# --- command line -----------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    values = sorted({int(part) for part in text.split(",") if part.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("expected positive sizes in MB, comma-separated")
    return values


def _into(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or any(name not in ("sqlite", "postgres") for name in names):
        raise argparse.ArgumentTypeError("expected sqlite, postgres or both")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.import_memory",
        description="peak RSS of export_trees and import_trees on files of growing size",
    )
    parser.add_argument("--sizes", type=_sizes, default=[100, 1000], help="file sizes, MB")
    parser.add_argument(
        "--big-share", type=float, default=0.15, help="share of each file in one session"
    )
    parser.add_argument("--item-kb", type=int, default=64, help="transcript item size, KB")
    parser.add_argument(
        "--into", type=_into, default=["sqlite"], help="import into sqlite, postgres or both"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TURNSTORE_BENCH_POSTGRES_URL",
            os.environ.get("TURNSTORE_TEST_POSTGRES_URL", DEFAULT_URL),
        ),
        help=f"the server and database; imports go to schema {SCHEMA} (dropped after)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL imports")
    parser.add_argument(
        "--budget-mb",
        type=float,
        default=64.0,
        help="most the largest file's peak may exceed the smallest's (default 64)",
    )
    parser.add_argument(
        "--long-line-mb",
        type=int,
        default=200,
        help="also export and import a file with one line this long, MB (0: skip; default 200)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--dir", help="where the stores and files go (default: the temp dir)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes (2 and 6 MB, 16 KB items): checks only"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.item_kb = [2, 6], 16
        args.long_line_mb = min(args.long_line_mb, 2)
    args.progress = (lambda _: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    args = parse_args(argv)
    doc = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
