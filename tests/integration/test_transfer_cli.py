"""`turnstore import --max-line-mib` and `turnstore doctor --deep`, on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import (
    Cli,
    assert_clean_error,
    cli,
    demo_url,
    pytest_generate_tests,
)

import turnstore
from turnstore import Checkpoint

__all__ = ["cli", "demo_url", "pytest_generate_tests"]  # fixtures and hooks used here


def test_import_refuses_a_line_over_max_line_mib(cli: Cli, store_url: str, tmp_path: Path) -> None:
    """A 2 MiB line: refused with one Error line under --max-line-mib 1, imported under 3."""
    with turnstore.open_blocking(tmp_path / "long.sqlite3") as long:
        checkpoint = Checkpoint.empty("long")
        checkpoint.context.append({"content": "x" * (2 << 20)})
        checkpoint.sequence += 1
        long.save(checkpoint)
    dump = tmp_path / "long.jsonl"
    exported = cli("export", str(tmp_path / "long.sqlite3"), "--all", "-o", str(dump))
    assert exported.exit_code == 0, exported.output
    refused = cli("import", store_url, str(dump), "--max-line-mib", "1")
    assert_clean_error(refused, "line 4 is longer than the 1,048,576-byte limit", "--max-line-mib")
    imported = cli("import", store_url, str(dump), "--max-line-mib", "3", "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["session_ids"] == ["long"]


def test_doctor_deep_names_an_undecodable_row(cli: Cli, demo_url: str, database: Any) -> None:
    """doctor says the rows were not decoded; doctor --deep names the damaged event, exits 1."""
    # The demo's first event is stored in its save's batch (schema 6).
    damaged = '[[1,1,{"msg":1},[]]]'
    database.query("UPDATE event_batches SET events_json = ? WHERE first_sequence = 1", (damaged,))
    shallow = cli("doctor", demo_url)
    assert shallow.exit_code == 0, shallow.output
    assert "not checked (--deep)" in shallow.stdout
    deep = cli("doctor", demo_url, "--deep")
    assert deep.exit_code == 1, deep.output
    assert "undecodable event_batches row (session_id 'demo-session', first_sequence 1)" in (
        deep.stdout
    )
    report = json.loads(cli("doctor", demo_url, "--deep", "--json").stdout)
    assert report["deep"] is True
    assert report["undecodable_row_count"] >= 1
