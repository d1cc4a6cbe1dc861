"""`turnstore import-from langgraph` and `export-to langgraph`: the commands a person runs.

The library underneath is tested in test_langgraph_move.py; here the commands' options,
output, exit statuses and refusals, on a SqliteSaver file LangGraph filled.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_langgraph_move import digest, postgres_saver, source_path

from turnstore.cli import main

pytestmark = pytest.mark.peers
__all__ = ["postgres_saver", "source_path"]  # fixtures, shared with the library's tests


def run(*args: object) -> Any:
    """The CLI through click's runner, as a plain pipe would see it."""
    runner = CliRunner(env={"COLUMNS": "200", "TURNSTORE_URL": None})
    result = runner.invoke(main, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _checkpoints(path: Path) -> int:
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0])


def test_in_with_verify_then_again_then_out(source_path, store_url, tmp_path):
    before = digest(source_path)
    total = _checkpoints(source_path)
    planned = run("import-from", "langgraph", source_path, store_url, "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["checkpoint_count"] == total

    moved = run("import-from", "langgraph", source_path, store_url, "--verify", "--json")
    assert moved.exit_code == 0, moved.output
    body = json.loads(moved.stdout)
    assert (body["checkpoint_count"], body["present_count"]) == (total, 0)
    assert body["verify"]["difference"] is None
    assert body["source_bytes"] > 0
    assert body["turnstore_bytes"] is None or body["turnstore_bytes"] > 0

    again = run("import-from", "langgraph", source_path, store_url)
    assert again.exit_code == 0, again.output
    assert f"0 checkpoints, 0 writes, {total:,} already there" in again.stdout

    back = tmp_path / "back.sqlite3"
    out = run("export-to", "langgraph", store_url, back, "--verify")
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("Moved out 6 threads")
    assert "no difference" in out.stdout
    assert _checkpoints(back) == total
    assert digest(source_path) == before


def test_threads_picks_some_and_owner_owns_them(source_path, store_url):
    import turnstore
    from turnstore import SessionPageRequest

    moved = run(
        "import-from", "langgraph", source_path, store_url,
        "--threads", "plain-0", "--threads", "fan", "--owner", "grace", "--json",
    )  # fmt: skip
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout)["thread_count"] == 2
    with turnstore.open_blocking(store_url) as store:
        page = store.list_sessions_page(SessionPageRequest(limit=100))
    owners = {summary.session_id: summary.session_context.owner_id for summary in page.sessions}
    assert owners == {"langgraph/plain-0": "grace", "langgraph/fan": "grace"}


def _spoil_one_checkpoint(path: Path) -> str:
    """Make one checkpoint of thread plain-1 undecodable; its id."""
    with sqlite3.connect(path) as conn:
        (checkpoint_id,) = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'plain-1'"
            " ORDER BY checkpoint_id LIMIT 1 OFFSET 2"
        ).fetchone()
        # 0xc1 is the one byte MessagePack never uses.
        conn.execute(
            "UPDATE checkpoints SET checkpoint = x'c1' WHERE checkpoint_id = ?", (checkpoint_id,)
        )
    return str(checkpoint_id)


def test_an_unreadable_checkpoint_stops_the_move_unless_skip_bad(source_path, store_url):
    spoiled = _spoil_one_checkpoint(source_path)
    stopped = run("import-from", "langgraph", source_path, store_url)
    assert stopped.exit_code == 1
    error = [line for line in stopped.stderr.splitlines() if line.startswith("Error")]
    assert len(error) == 1, stopped.stderr
    assert error[0].startswith(f"Error: {source_path}: thread 'plain-1' checkpoint {spoiled}")
    assert error[0].endswith("--skip-bad skips such checkpoints and reports them")
    assert "Traceback" not in stopped.output

    skipped = run("import-from", "langgraph", source_path, store_url, "--skip-bad")
    assert skipped.exit_code == 0, skipped.output
    assert "1 unreadable, skipped" in skipped.stdout
    assert f"skipped: thread 'plain-1' checkpoint {spoiled}: cannot be read" in skipped.stdout
    # Verify reads the source through LangGraph too: the spoiled checkpoint cannot be read.
    checked = run("import-from", "langgraph", source_path, store_url, "--skip-bad", "--verify")
    assert checked.exit_code == 1
    assert "first difference at thread 'plain-1'" in checked.stdout


def test_a_missing_saver_package_is_one_line_saying_what_to_install(
    source_path, store_url, monkeypatch
):
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)
    result = run("import-from", "langgraph", source_path, store_url)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "pip install langgraph-checkpoint-sqlite" in result.stderr


def test_a_missing_source_file_is_refused_and_not_created(store_url, tmp_path):
    missing = tmp_path / "nowhere.sqlite3"
    result = run("import-from", "langgraph", missing, store_url)
    assert result.exit_code == 1
    assert "no SqliteSaver database there" in result.stderr
    assert not missing.exists()


def test_a_postgres_saver_url_keeps_its_own_options(postgres_saver, store_url):
    from urllib.parse import quote

    from test_langgraph_move import fill

    from conftest import POSTGRES_URL

    fill(postgres_saver, turns=2)
    schema = postgres_saver.conn.execute("SELECT current_schema() AS s").fetchone()["s"]
    source = f"{POSTGRES_URL}?options={quote(f'-c search_path={schema}')}"
    moved = run("import-from", "langgraph", source, store_url, "--verify", "--json")
    assert moved.exit_code == 0, moved.output
    body = json.loads(moved.stdout)
    assert body["thread_count"] == 6
    assert body["verify"]["difference"] is None
