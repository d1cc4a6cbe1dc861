"""The memory benchmark's results as text (one table per measurement, then the targets), its
verdict on each of issue 46's targets, and the machine they were measured on."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
from pathlib import Path
from typing import Any


def _num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def render(doc: dict[str, Any]) -> str:
    """The results as text tables and PASS/MISS lines."""
    config = doc["config"]
    smoke = " [SMOKE: tiny sizes, the numbers mean nothing]" if config["smoke"] else ""
    env = doc["environment"]
    lines = [
        f"LangGraph memory stores (BaseStore), one thread, sync API{smoke}",
        f"machine: {env['cpu']} x{env['cpus']}, {env['platform']}; Python {env['python']},"
        f" SQLite {env['sqlite']}, PostgreSQL {env['postgres'] or '-'}",
        "durability: SqliteStore WAL + synchronous=FULL; PostgresStore autocommit at"
        " synchronous_commit=on; TurnstoreStore at its defaults (WAL + synchronous=FULL,"
        " synchronous_commit on)",
        "",
        *_mix_lines(doc),
        "",
        *_ceiling_lines(doc),
        "",
        *_scale_lines(doc),
        "",
        *_vector_lines(doc),
        "",
        *_target_lines(doc),
        f"\nelapsed {doc['elapsed_s']:.0f}s",
    ]
    return "\n".join(lines)


def _label(doc: dict[str, Any], name: str) -> str:
    return str(doc["labels"].get(name, name))


def _skipped(doc: dict[str, Any], *more: dict[str, str]) -> list[str]:
    found = {**doc["skipped"]}
    for extra in more:
        found.update(extra)
    return [f"{_label(doc, name):<{WIDTH}} {why}" for name, why in found.items()]


KINDS = ("put", "get", "search", "list", "delete")
"""The mix's operations, in the order their medians are printed."""
WIDTH = 42
"""The side column's width: the longest label fits."""


def _mix_lines(doc: dict[str, Any]) -> list[str]:
    config, mix = doc["config"], doc["mix"]
    rows = mix["sides"]
    memory = rows.get("memory", {}).get("ops_per_s")
    lines = [
        f"Mix: {config['ops']} ops (30% put, 30% get, 30% filtered search, 5% list_namespaces,"
        f" 5% delete) over {config['namespaces']} namespaces, blocks of 100 in rotated order;"
        " x peer = over the LangGraph store on the same backend; then each operation's median",
        f"{'side':<{WIDTH}} {'ops/s':>9} {'x memory':>9} {'x peer':>7}"
        + "".join(f" {kind + ' µs':>10}" for kind in KINDS),
    ]
    for name, row in rows.items():
        peer = rows.get(doc["peer_of"].get(name, ""), {}).get("ops_per_s")
        over_peer = row["ops_per_s"] / peer if peer else None
        over_memory = row["ops_per_s"] / memory if memory else None
        lines.append(
            f"{_label(doc, name):<{WIDTH}} {_num(row['ops_per_s']):>9}"
            f" {_num(over_memory, 2, 'x'):>9} {_num(over_peer, 2, 'x'):>7}"
            + "".join(f" {_num(row['median_us'][kind]):>10}" for kind in KINDS)
        )
    return lines + _skipped(doc, mix["skipped"])


def _ceiling_lines(doc: dict[str, Any]) -> list[str]:
    floor = doc["mix"]["api_floor_us"]
    reads = ", ".join(f"{kind} {_num(floor[kind])} µs" for kind in ("get", "search", "list"))
    lines = [
        "Ceiling: the same mix in plain SQL in this run (one table (namespace, key) -> JSON,"
        " each write one commit, the filter in SQL, no BaseStore layer) over the LangGraph"
        " store; + API floor: the ceiling's time per op plus the API floor per read",
        "API floor (BaseStore API: InMemoryStore holding one namespace's 3 memories, median"
        f" of 1000 calls): {reads}",
        f"{'backend':<12} {'ceiling/s':>10} {'LangGraph/s':>12} {'ceiling/LG':>11}"
        f" {'+ API floor':>12} {'target':>7}",
    ]
    for row in doc["ceilings"]:
        lines.append(
            f"{row['peer']:<12} {_num(row['ceiling_ops_per_s']):>10}"
            f" {_num(row['peer_ops_per_s']):>12} {_num(row['ratio'], 2, 'x'):>11}"
            f" {_num(row['with_floor_ratio'], 2, 'x'):>12} {_num(row['target'], 1, 'x'):>7}"
        )
    return lines


def _scale_lines(doc: dict[str, Any]) -> list[str]:
    config, scale = doc["config"], doc["scale"]
    lines = [
        "Scale: search(('users', u), filter={'kind': 'fact'}, limit=10), 100 items per"
        " namespace. Two stores per side (the small, the large), each filled by batch, then"
        " settled (SQLite: ANALYZE, wal_checkpoint(TRUNCATE); PostgreSQL: VACUUM (ANALYZE) of"
        f" its table, CHECKPOINT), then {config['searches']} searches on each, in blocks of 10"
        " taking turns in rotated order; median. Store bytes (no vectors) against the payload",
        f"{'side':<{WIDTH}} {'items':>9} {'ms':>8} {'items':>9} {'ms':>8} {'ratio':>6}"
        f" {'fill/s':>9} {'store':>9} {'payload':>9} {'x payload':>9}",
    ]
    for name, row in scale["sides"].items():
        lines.append(
            f"{_label(doc, name):<{WIDTH}} {row['small_items']:>9} {_num(row['small_ms'], 2):>8}"
            f" {row['large_items']:>9} {_num(row['large_ms'], 2):>8} {_num(row['ratio'], 2):>6}"
            f" {_num(row['fill_items_per_s'], 0):>9} {_bytes(row['size_bytes']):>9}"
            f" {_bytes(row['payload_bytes']):>9} {_num(row['size_vs_payload'], 2):>9}"
        )
    return lines + _skipped(doc, scale["skipped"])


def _vector_lines(doc: dict[str, Any]) -> list[str]:
    config, vectors = doc["config"], doc["vectors"]
    lines = [
        f"Vectors: search(('users',), query=..., limit=10) over all items, {config['dims']}"
        " dims, a deterministic fake embedding; ms per query (median) beside the exact ceiling",
    ]
    for size, row in vectors["sizes"].items():
        lines.append(
            f"  {size} vectors: exact ceiling {_num(row['ceiling_ms'], 2)} ms ({row['ceiling_by']})"
        )
        for name, side in row["sides"].items():
            if "why_missing" in side:
                lines.append(f"    {_label(doc, name):<30} not available: {side['why_missing']}")
                continue
            over = side["query_ms"] / row["ceiling_ms"] if row["ceiling_ms"] else None
            lines.append(
                f"    {_label(doc, name):<30} {_num(side['query_ms'], 2):>9} ms"
                f" {_num(over, 2, 'x'):>8} ceiling  fill {_num(side['fill_items_per_s'], 0)}/s"
            )
    return lines


def _target_lines(doc: dict[str, Any]) -> list[str]:
    lines = ["Targets (issue 46)", f"{'target':<42} {'measured':>9} {'required':>8}  verdict"]
    for target in doc["targets"]:
        if target["passed"] is None:
            verdict, measured = "n/a", "-"
        else:
            verdict = "PASS" if target["passed"] else "MISS"
            measured = f"{target['measured']:.2f}"
        lines.append(f"{target['target']:<42} {measured:>9} {target['required']:>8}  {verdict}")
    return lines


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 46: measured, required, passed (None: not measured here)."""
    mix, scale = doc["mix"]["sides"], doc["scale"]["sides"]
    found: list[dict[str, Any]] = []

    def add(target: str, measured: float | None, op: str, bound: float) -> None:
        passed = (
            None if measured is None else (measured >= bound if op == ">=" else measured <= bound)
        )
        found.append(
            {"target": target, "measured": measured, "required": f"{op} {bound}", "passed": passed}
        )

    for ours, peer, bound in (
        ("turnstore", "sqlite", 1.5),
        ("turnstore-words", "sqlite", 1.5),
        ("turnstore-pg", "postgres", 2.0),
        ("turnstore-pg-words", "postgres", 2.0),
    ):
        ratio = None
        if ours in mix and peer in mix:
            ratio = mix[ours]["ops_per_s"] / mix[peer]["ops_per_s"]
        add(f"mix ops/s: {ours} / {peer}", ratio, ">=", bound)
    for ours in ("turnstore", "turnstore-pg"):
        row = scale.get(ours)
        big = row is not None and row["large_items"] >= 1_000_000
        add(f"search @1M / @10k: {ours}", row["ratio"] if big else None, "<=", 1.5)
        add(f"store / payload: {ours}", row["size_vs_payload"] if row else None, "<=", 2.0)
    return found


def environment(pg_url: str | None) -> dict[str, Any]:
    """The machine and the versions the numbers were measured on."""
    packages = {}
    for package in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "turnstore",
        "psycopg",
    ):
        try:
            packages[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            packages[package] = None
    server = None
    if pg_url is not None:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as connection:
            row = connection.execute("SHOW server_version").fetchone()
            server = row[0] if row else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "postgres": server,
        "packages": packages,
    }


def _cpu_model() -> str | None:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or None
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else None
