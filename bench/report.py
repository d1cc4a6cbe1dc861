"""Rows of the results document, the targets judged from them, and the printed tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.measure import NoBytes, PgWal, Series
from bench.peers import Peer
from bench.phases import GROUPED, ConcurrencyRow

MB = 1_000_000
RSS_BUDGET = 20 * MB
"""The memory target: peak RSS at most this much above the start."""


def throughput_row(
    peer: Peer,
    saves: Series,
    loads: Series | None,
    pages: Series | None,
    payload: dict[str, Any],
) -> dict[str, Any]:
    """One peer's sequential results; its store must already be closed (for its size)."""
    measured = not isinstance(peer.meter, NoBytes)
    size = peer.size()
    return {
        "label": peer.label,
        "backend": peer.backend,
        "turns": len(saves.seconds),
        "turns_per_s": saves.rate(),
        "save_p50_ms": saves.median() * 1e3,
        "save_p99_ms": saves.percentile(0.99) * 1e3,
        "bytes_written_per_turn": saves.bytes_written / len(saves.seconds) if measured else None,
        "bytes_measured_as": _measured_as(peer) if measured else None,
        "load_latest_ms": None if loads is None or not loads.seconds else loads.median() * 1e3,
        "catalog_page_ms": None if pages is None or not pages.seconds else pages.median() * 1e3,
        "store_bytes": size,
        "store_vs_payload": size / payload["raw_bytes"],
    }


def _measured_as(peer: Peer) -> str:
    return "PostgreSQL WAL LSN delta" if isinstance(peer.meter, PgWal) else "/proc/self/io"


def concurrency_row(row: ConcurrencyRow) -> dict[str, Any]:
    """One concurrency run as JSON."""
    return {
        "mode": row.mode,
        "writers": row.writers,
        "turns": row.turns,
        "seconds": row.seconds,
        "turns_per_s": row.turns_per_s,
        "bytes_written_per_turn": row.bytes_written / row.turns,
        "transactions": row.transactions,
        "writes_per_transaction": row.turns / row.transactions if row.transactions else None,
    }


# --- targets ----------------------------------------------------------------------------------


def _get(doc: dict[str, Any], *path: Any) -> Any:
    value: Any = doc
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def _ratio(top: Any, bottom: Any) -> float | None:
    if top is None or bottom is None or bottom == 0:
        return None
    return float(top) / float(bottom)


def _target(
    name: str, measured: float | None, op: str, required: float, detail: str, **extra: Any
) -> dict[str, Any]:
    if measured is None:
        status = "n/a"
    elif op == ">=":
        status = "PASS" if measured >= required else "MISS"
    else:
        status = "PASS" if measured <= required else "MISS"
    return {
        "name": name,
        "measured": measured,
        "op": op,
        "required": required,
        "status": status,
        "detail": detail,
        **extra,
    }


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the issue, judged on this run's numbers."""
    return [
        *_sequential_targets(doc),
        *_second_round_targets(doc),
        *_cpu_targets(doc),
        *_hop_ceilings(doc),
        *_third_round_targets(doc),
        *_concurrency_targets(doc),
        *_scaling_targets(doc),
        *_memory_targets(doc),
    ]


SEQUENTIAL = (
    ("turnstore", "langgraph-sqlite-graph", 50.0),
    ("turnstore", "langgraph-async-sqlite-graph", 50.0),
    ("turnstore", "langgraph-sqlite-direct", 5.0),
    ("turnstore", "langgraph-async-sqlite-direct", 5.0),
    ("turnstore", "agents-sqlitesession", 2.0),
    ("turnstore+events", "agents-sqlitesession", 1.0),
    ("turnstore-pg", "langgraph-postgres-direct", 5.0),
)


def _sequential_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    ceiling = _get(doc, "throughput", "disk-ceiling", "turns_per_s")
    for ours, theirs, required in SEQUENTIAL:
        top = _get(doc, "throughput", ours, "turns_per_s")
        bottom = _get(doc, "throughput", theirs, "turns_per_s")
        # What one fsync (on PostgreSQL one autocommitted INSERT) per turn and nothing else
        # would reach against the same peer.
        lone = _get(doc, "concurrency", "postgres", "lone_commits_per_s")
        bound = _ratio(lone if ours.startswith("turnstore-pg") else ceiling, bottom)
        out.append(
            _target(
                f"sequential turns/s: {ours} / {theirs}",
                _ratio(top, bottom),
                ">=",
                required,
                f"{_num(top)} vs {_num(bottom)} turns/s",
                ceiling_bound=bound,
            )
        )
    return out


SECOND_ROUND = (
    # (ours, theirs, op, required, measure): the performance issue's second round.
    ("turnstore+events", "turnstore", ">=", 0.8, "turns_per_s"),
    ("turnstore+events", "agents-sqlitesession", ">=", 1.5, "turns_per_s"),
    ("turnstore", "sqlite3-plain", ">=", 0.9, "turns_per_s"),
    ("turnstore", "sqlite3-plain", "<=", 1.3, "bytes_written_per_turn"),
    ("turnstore-pg+events", "turnstore-pg", ">=", 0.7, "turns_per_s"),
)


def _second_round_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ours, theirs, op, required, measure in SECOND_ROUND:
        top = _get(doc, "throughput", ours, measure)
        bottom = _get(doc, "throughput", theirs, measure)
        show = _bytes if measure == "bytes_written_per_turn" else _num
        unit = "/turn written" if measure == "bytes_written_per_turn" else " turns/s"
        out.append(
            _target(
                f"sequential {measure.replace('_', ' ')}: {ours} / {theirs}",
                _ratio(top, bottom),
                op,
                required,
                f"{show(top)} vs {show(bottom)}{unit}",
            )
        )
    return out


CPU = (
    # (ours, the same-work row it is held to, required ratio to sqlite3-plain), all on tmpfs.
    # An async face may run no transaction on the event loop's thread, so the same work for
    # it includes the one thread hop: the async rows are held to the `-async` same-work rows.
    ("turnstore-blocking", "same-work", 0.6),
    ("turnstore", "same-work-async", 0.5),
    ("turnstore-blocking+events", "same-work+events", 0.35),
    ("turnstore+events", "same-work-async+events", 0.3),
)
SAME_WORK_SHARE = 0.85
"""Where the same-work row is below a CPU ratio, ours must reach this share of its rate."""
TMPFS = "@tmpfs"


def _cpu_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Turns/s on tmpfs against `sqlite3-plain`, or against the same-work row it falls below.

    The contract writes more rows than `sqlite3-plain`: their SQL is not held against us, only
    our Python above it.
    """
    out = []
    plain = _get(doc, "throughput", f"sqlite3-plain{TMPFS}", "turns_per_s")
    for ours, same, required in CPU:
        top = _get(doc, "throughput", f"{ours}{TMPFS}", "turns_per_s")
        reference = _get(doc, "throughput", f"{same}{TMPFS}", "turns_per_s")
        same_ratio = _ratio(reference, plain)
        name = f"tmpfs turns/s: {ours} / sqlite3-plain"
        detail = f"{_num(top)} vs {_num(plain)} turns/s; {same} {_num(reference)}"
        if same_ratio is not None and same_ratio < required:
            name = f"tmpfs turns/s: {ours} / {same} (itself {same_ratio:.2f}x sqlite3-plain)"
            out.append(_target(name, _ratio(top, reference), ">=", SAME_WORK_SHARE, detail))
        else:
            out.append(_target(name, _ratio(top, plain), ">=", required, detail))
    return out


HOP_CEILING = (
    # (ours, the ceiling row, theirs, required): targets an async face must meet with a hop.
    ("turnstore", "same-work-async", "agents-sqlitesession", 1.5),
)


def _hop_ceilings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The async tmpfs target beside what turnstore's SQL plus one thread hop reaches."""
    out = []
    for ours, ceiling, theirs, required in HOP_CEILING:
        top = _get(doc, "throughput", f"{ours}{TMPFS}", "turns_per_s")
        bound = _get(doc, "throughput", f"{ceiling}{TMPFS}", "turns_per_s")
        bottom = _get(doc, "throughput", f"{theirs}{TMPFS}", "turns_per_s")
        out.append(
            _target(
                f"tmpfs turns/s: {ours} / {theirs}",
                _ratio(top, bottom),
                ">=",
                required,
                f"{_num(top)} vs {_num(bottom)} turns/s; {ceiling} {_num(bound)}",
                # The same ratio for turnstore's rows sent by stdlib sqlite3 through one hop.
                ceiling_bound=_ratio(bound, bottom),
            )
        )
    return out


THIRD_ROUND = (
    # (ours, theirs, required, ceiling row): turns/s ratios of the third round beside the CPU
    # ones. The ceiling row is the same ratio for turnstore's rows sent by stdlib sqlite3
    # through the one thread hop an async face must make.
    ("turnstore", "agents-sqlitesession", 1.2, "same-work-async"),
    ("turnstore+events", "turnstore", 0.75, None),
    ("turnstore-blocking+events", "turnstore-blocking", 0.75, None),
    ("turnstore-pg+events", "turnstore-pg", 0.7, None),
)


def _third_round_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ours, theirs, required, ceiling in THIRD_ROUND:
        top = _get(doc, "throughput", ours, "turns_per_s")
        bottom = _get(doc, "throughput", theirs, "turns_per_s")
        bound = None if ceiling is None else _get(doc, "throughput", ceiling, "turns_per_s")
        detail = f"{_num(top)} vs {_num(bottom)} turns/s"
        out.append(
            _target(
                f"turns/s: {ours} / {theirs}",
                _ratio(top, bottom),
                ">=",
                required,
                detail if bound is None else f"{detail}; {ceiling} {_num(bound)}",
                ceiling_bound=_ratio(bound, bottom),
            )
        )
    return out


def _concurrency_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    modes = _get(doc, "concurrency", "sqlite", "modes") or {}
    # turnstore's rows from one thread, one commit a round: what group commit could reach.
    grouped = modes.get(GROUPED, {}).get("vs_ceiling")
    for mode, summary in modes.items():
        if summary["writers"] == 1 or mode == GROUPED:
            continue
        out.append(
            _target(
                f"{summary['writers']} concurrent sessions ({mode}) / disk ceiling",
                summary["vs_ceiling"],
                ">=",
                # The second round's figure; the first round asked 3x, out of reach on 2 cores.
                2.0,
                f"{_num(summary['turns_per_s'])} turns/s vs"
                f" {_num(summary['ceiling_commits_per_s'])} commits/s",
                ceiling_bound=grouped,
            )
        )
    pg = _get(doc, "concurrency", "postgres")
    if pg:
        many, one = pg["many_writers_turns_per_s"], pg["one_writer_turns_per_s"]
        out.append(
            _target(
                f"PostgreSQL: {pg['writers']} concurrent writers / 1 writer",
                _ratio(many, one),
                ">=",
                3.0,
                f"{_num(many)} vs {_num(one)} turns/s",
            )
        )
        ceiling = pg.get("server_commits_per_s")
        out.append(
            _target(
                f"PostgreSQL: {pg['writers']} concurrent writers / {pg['writers']} plain clients'"
                " one-row commits",
                _ratio(many, ceiling),
                ">=",
                0.5,
                f"{_num(many)} turns/s vs {_num(ceiling)} commits/s",
            )
        )
    return out


def _scaling_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    points = _get(doc, "scaling", "turnstore") or []
    if len(points) < 2:
        return []
    first, last = points[0], points[-1]
    span = f"{last['turns']} / {first['turns']} turns"
    theirs = _get(doc, "scaling", "agents-sqlitesession", -1, "load_s")
    return [
        _target(
            f"save latency at {span} (turnstore)",
            _ratio(last["save_s"], first["save_s"]),
            "<=",
            1.2,
            f"{_ms(last['save_s'])} vs {_ms(first['save_s'])}",
        ),
        _target(
            f"cumulative bytes written at {span} (turnstore)",
            _ratio(last["bytes_written"], first["bytes_written"]),
            "<=",
            20.0,
            f"{_bytes(last['bytes_written'])} vs {_bytes(first['bytes_written'])}",
        ),
        _target(
            f"load-latest at {last['turns']} turns: turnstore / SQLiteSession.get_items",
            _ratio(last["load_s"], theirs),
            "<=",
            0.5,
            f"{_ms(last['load_s'])} vs {_ms(theirs)}",
        ),
    ]


def _memory_targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    size = _get(doc, "throughput", "turnstore", "store_bytes")
    raw = _get(doc, "payload", "raw_bytes")
    out = [
        _target(
            "store size after the throughput phase / raw payload (turnstore)",
            _ratio(size, raw),
            "<=",
            2.0,
            f"{_bytes(size)} vs {_bytes(raw)}",
        )
    ]
    alone = _get(doc, "rss", "turnstore_only", "growth_bytes")
    whole = _get(doc, "rss", "growth_bytes")
    out.append(
        _target(
            "peak RSS above start, MB (turnstore phases alone, child process)",
            None if alone is None else alone / MB,
            "<=",
            RSS_BUDGET / MB,
            "the same phases, turnstore rows only",
        )
    )
    out.append(
        _target(
            "peak RSS above start, MB (whole run, every peer in this process)",
            None if whole is None else whole / MB,
            "<=",
            RSS_BUDGET / MB,
            "includes importing and running LangGraph, LangChain and the Agents SDK",
        )
    )
    return out


# --- printing ---------------------------------------------------------------------------------


def _num(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ms(seconds: Any) -> str:
    return "-" if seconds is None else f"{_num(float(seconds) * 1e3)} ms"


def _msv(ms: Any) -> str:
    return "-" if ms is None else _num(ms)


def _bytes(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value >= MB:
        return f"{value / MB:.2f} MB"
    if value >= 10_000:
        return f"{value / 1000:.1f} kB"
    return f"{value:,.0f} B"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], text_last: bool = False) -> str:
    """A plain aligned table: first column (and a text last column) left, the rest right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    left = {0, len(widths) - 1} if text_last else {0}

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(cell).ljust(width) if i in left else str(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def render(doc: dict[str, Any]) -> str:
    """The whole printed report."""
    sections = [
        _header(doc),
        _throughput_table(doc),
        _cpu_lines(doc),
        _scaling_table(doc),
        _concurrency_table(doc),
        _memory_lines(doc),
        _targets_table(doc),
        _notes(doc),
    ]
    return "\n\n".join(section for section in sections if section)


def _header(doc: dict[str, Any]) -> str:
    config, env, payload = doc["config"], doc["environment"], doc["payload"]
    pg = config["postgres"] or f"skipped ({config['postgres_skipped']})"
    return "\n".join(
        [
            f"turnstore agent-loop benchmark: {config['sessions']} sessions x {config['turns']}"
            f" turns, round-robin, every peer interleaved turn by turn in one process;"
            f" each @tmpfs row alone in a process of its own (median of its rounds)"
            + (" [SMOKE: tiny sizes, numbers mean nothing]" if config["smoke"] else ""),
            f"payload {_bytes(payload['bytes_per_turn'])}/turn (4 items) + {_bytes(500)} loop"
            f" state; raw total {_bytes(payload['raw_bytes'])}; durability: SQLite WAL +"
            f" synchronous=FULL, PostgreSQL synchronous_commit=on",
            f"Python {env['python']}, SQLite {env['sqlite']}, {env['cpus']} CPUs;"
            f" PostgreSQL: {pg}; run took {doc['elapsed_s']:.0f} s",
        ]
    )


def _cpu_lines(doc: dict[str, Any]) -> str:
    """Microseconds per save on tmpfs, and what turnstore adds to the same SQL."""
    rows = []
    for name, row in doc["throughput"].items():
        if name.endswith(TMPFS) and row["turns_per_s"]:
            rows.append([name, f"{1e6 / row['turns_per_s']:.0f}"])
    if not rows:
        return ""
    lines = ["CPU per save on tmpfs (µs per turn, 1e6 / turns/s)", table(["row", "µs"], rows)]
    for ours, same, _ in CPU:
        top = _get(doc, "throughput", f"{ours}{TMPFS}", "turns_per_s")
        reference = _get(doc, "throughput", f"{same}{TMPFS}", "turns_per_s")
        if top and reference:
            lines.append(f"{ours}: {1e6 / top - 1e6 / reference:.0f} µs per save above {same}")
    return "\n".join(lines)


def _throughput_table(doc: dict[str, Any]) -> str:
    rows = []
    for name, row in doc["throughput"].items():
        rows.append(
            [
                name,
                _num(row["turns_per_s"]),
                _msv(row["save_p50_ms"]),
                _msv(row["save_p99_ms"]),
                _msv(row["load_latest_ms"]),
                _msv(row["catalog_page_ms"]),
                _bytes(row["bytes_written_per_turn"]),
                _bytes(row["store_bytes"]),
                f"{row['store_vs_payload']:.2f}x",
            ]
        )
    headers = [
        "sequential (1 save at a time)",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "load ms",
        "catalog ms",
        "written/turn",
        "store",
        "/payload",
    ]
    return "Throughput phase\n" + table(headers, rows)


def _scaling_table(doc: dict[str, Any]) -> str:
    scaling = doc.get("scaling")
    if not scaling:
        return ""
    rows = []
    for name, points in scaling.items():
        before = (0, 0)
        for point in points:
            turns, written = point["turns"], point["bytes_written"]
            marginal = (written - before[1]) / (turns - before[0])
            before = (turns, written)
            rows.append(
                [
                    name,
                    str(turns),
                    _ms(point["save_s"]),
                    _ms(point["load_s"]),
                    _bytes(written),
                    _bytes(marginal),
                ]
            )
    headers = [
        "one growing session",
        "turns",
        "save (median)",
        "load-latest",
        "written so far",
        "per turn since last",
    ]
    legend = (
        "save and load: every length timed side by side in one interleaved round (the disk's"
        " speed drifts); written: one session grown alone to the longest length."
    )
    return "Scaling phase\n" + table(headers, rows) + "\n" + legend


def _concurrency_table(doc: dict[str, Any]) -> str:
    parts = []
    sqlite = _get(doc, "concurrency", "sqlite")
    columns = ["writers", "rounds", "turns/s", "÷ ceiling", "turns/txn", "written/turn"]
    if sqlite:
        rows = [
            [
                mode,
                str(m["writers"]),
                str(m["rounds"]),
                _num(m["turns_per_s"]),
                f"{m['vs_ceiling']:.2f}x",
                f"{m['writes_per_transaction']:.1f}",
                _bytes(m["bytes_written_per_turn"]),
            ]
            for mode, m in sqlite["modes"].items()
        ]
        ceiling = _num(sqlite["ceiling_commits_per_s"])
        blocks = str(len(sqlite["ceiling_blocks"]))
        rows.append(["disk ceiling (append+fdatasync)", "1", blocks, ceiling, "1.00x", "-", "-"])
        parts.append(table(["SQLite, turnstore (medians)", *columns], rows))
    pg = _get(doc, "concurrency", "postgres")
    if pg:
        rounds = pg["rounds"]
        rows = [_concurrency_cells(row) for kind in ("one", "many") for row in rounds[kind]]
        lone = pg.get("lone_commits_per_s")
        if lone is not None:
            rows.append(["one autocommitted INSERT a commit, 1 client", "1", _num(lone), "-", "-"])
        server = pg.get("server_commits_per_s")
        if server is not None:
            name = f"one-row commits, {pg['writers']} clients"
            rows.append([name, str(pg["writers"]), _num(server), "-", "-"])
        headers = ["PostgreSQL, turnstore", "writers", "turns/s", "turns/txn", "written/turn"]
        parts.append(table(headers, rows))
    return "Concurrency phase\n" + "\n\n".join(parts) if parts else ""


def _concurrency_cells(row: dict[str, Any]) -> list[str]:
    per_txn = row["writes_per_transaction"]
    return [
        row["mode"],
        str(row["writers"]),
        _num(row["turns_per_s"]),
        "-" if per_txn is None else f"{per_txn:.1f}",
        _bytes(row["bytes_written_per_turn"]),
    ]


def _memory_lines(doc: dict[str, Any]) -> str:
    rss = doc["rss"]
    lines = [
        f"Memory: whole run peak RSS {_bytes(rss['peak_bytes'])},"
        f" start {_bytes(rss['start_bytes'])}, growth {_bytes(rss['growth_bytes'])}"
        " (every peer's libraries and data in one process)"
    ]
    alone = rss.get("turnstore_only")
    if alone:
        lines.append(
            f"        turnstore phases alone (child process): peak {_bytes(alone['peak_bytes'])},"
            f" start {_bytes(alone['start_bytes'])}, growth {_bytes(alone['growth_bytes'])}"
        )
    return "\n".join(lines)


def _targets_table(doc: dict[str, Any]) -> str:
    rows = []
    for target in doc["targets"]:
        measured = target["measured"]
        bound = target.get("ceiling_bound")
        rows.append(
            [
                target["name"],
                "-" if measured is None else f"{measured:.2f}",
                f"{target['op']} {target['required']:g}",
                "-" if bound is None else f"{bound:.2f}",
                _verdict(target),
                target["detail"],
            ]
        )
    headers = ["target (ratios from this run)", "measured", "required", "ceiling", "", "values"]
    legend = (
        "MISS (Nx off): the measured ratio is N times worse than required. ceiling: the same"
        " ratio for a reference no store doing the same work can pass on this machine; a"
        " required ratio above it cannot be met. Sequential SQLite rows: one append+fdatasync"
        " per turn (the disk's single-commit ceiling); turnstore-pg: one autocommitted INSERT"
        " per turn on one connection; tmpfs and disk async against agents-sqlitesession:"
        " same-work-async (turnstore's rows by stdlib sqlite3 through one thread hop);"
        f" concurrent sessions: '{GROUPED}' (turnstore's rows by stdlib sqlite3, every"
        " writer's turn of a round in one commit)."
    )
    return "Targets\n" + table(headers, rows, text_last=True) + "\n" + legend


def _verdict(target: dict[str, Any]) -> str:
    """PASS, n/a, or MISS with how far off it is."""
    measured, required = target["measured"], target["required"]
    if target["status"] != "MISS" or not measured:
        return str(target["status"])
    off = required / measured if target["op"] == ">=" else measured / required
    return f"MISS ({off:.2f}x off)"


def _notes(doc: dict[str, Any]) -> str:
    lines = []
    for name, peer in doc["peers"].items():
        if peer["status"] == "skipped":
            lines.append(f"- {name}: skipped, {peer['reason']}")
        elif peer.get("note"):
            lines.append(f"- {name}: {peer['note']}")
    return "Notes\n" + "\n".join(lines) if lines else ""
