"""The operator commands on both backends, through click's runner and a real process.

Prune, export, import, copy, backup, gc, vacuum, sweep, migrate, doctor and stats; the
terminal behaviours (asking, progress bars, refusing to print an export) on a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_cli import (
    Cli,
    Outcome,
    assert_clean_error,
    catalog,
    cli,
    demo_url,
    pytest_generate_tests,
    run,
    run_process,
    save_session,
    write_demo,
)

import turnstore
from conftest import restore_fixture
from contract.runtime_helpers import chain, make_commit, replace
from turnstore import Checkpoint, FileAttachmentStore, HydratedSessionCheckpoint
from turnstore.records.memory import MemoryCall, MemoryPut

# Fixtures shared with test_cli.py, and its hook that says which tests run as a process too.
__all__ = ["cli", "demo_url", "pytest_generate_tests"]

DAY = 86_400


def age(database: Any, days: int, *session_ids: str) -> None:
    """Set the sessions' last update `days` ago, as waiting would."""
    when = int(time.time()) - days * DAY
    for session_id in session_ids:
        database.query(
            "UPDATE sessions SET updated_at = ? WHERE session_id = ?", (when, session_id)
        )


def on_terminal(*args: object, answer: bytes = b"", cwd: Path | None = None) -> tuple[int, str]:
    """Run `python -m turnstore.cli ARGS` with a pseudo-terminal as stdin, stdout and stderr."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "TURNSTORE_URL"}
    env.update({"COLUMNS": "80", "TERM": "xterm"})
    child = subprocess.Popen(
        [sys.executable, "-m", "turnstore.cli", *map(str, args)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        cwd=cwd,
    )
    os.close(follower)
    os.write(leader, answer)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return child.wait(timeout=120), b"".join(chunks).decode(errors="replace")


def export_bytes(cli: Cli, url: str, *args: object) -> bytes:
    """An export of `url` written to standard output."""
    result = cli("export", url, *args)
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


# --- prune -----------------------------------------------------------------------------------


def test_prune_removes_old_trees_and_reports_them(cli: Cli, store_url: str, database: Any) -> None:
    """prune --older-than 30d removes the sessions aged 40 days and names each; others stay."""
    for name in ("old-a", "old-b", "new"):
        save_session(store_url, name, name, [])
    age(database, 40, "old-a", "old-b")
    result = cli("prune", store_url, "--older-than", "30d", "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["session_ids"] == ["old-a", "old-b"]
    assert report["tree_count"] == 2
    assert catalog(store_url) == ["new"]


def test_prune_dry_run_changes_nothing(cli: Cli, store_url: str, database: Any) -> None:
    """prune --dry-run lists what would go and deletes nothing."""
    save_session(store_url, "old", "old", [])
    age(database, 40, "old")
    result = cli("prune", store_url, "--older-than", "2w", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Would prune (dry run, nothing deleted) 1 session(s) in 1 tree(s)" in result.stdout
    assert "  old" in result.stdout
    assert catalog(store_url) == ["old"]


def test_prune_by_owner_and_off_a_terminal(cli: Cli, demo_url: str, database: Any) -> None:
    """prune asks for --yes off a terminal; --owner restricts it to that owner's trees."""
    age(database, 40, "demo-session", "demo-fork")
    refused = cli("prune", demo_url, "--older-than", "30d")
    assert_clean_error(refused, "--yes", code=2)
    assert "demo-fork" in refused.stderr
    other = cli("prune", demo_url, "--older-than", "30d", "--owner", "nobody", "--yes")
    assert "Pruned 0 session(s)" in other.stdout
    mine = cli("prune", demo_url, "--older-than", "30d", "--owner", "demo-user", "--yes")
    assert "Pruned 2 session(s) in 1 tree(s)" in mine.stdout
    assert catalog(demo_url) == []


def test_prune_sweeps_expired_memory_items_and_counts_them(
    cli: Cli, store_url: str, database: Any
) -> None:
    """prune deletes expired memory items and says how many: asks first, counts on a dry run."""
    expiring = [MemoryPut(("olive",), f"brief-{n}", "{}", 50, "olive") for n in range(2)]
    with turnstore.open_blocking(store_url) as store:
        store.memory.run(
            MemoryCall(writes=(*expiring, MemoryPut(("olive",), "kept", "{}", None, "olive")))
        )
    time.sleep(0.2)  # both brief items expire
    dry = cli("prune", store_url, "--older-than", "30d", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Would delete 2 expired memory item(s)." in dry.stdout
    refused = cli("prune", store_url, "--older-than", "30d")
    assert_clean_error(refused, "Delete 2 expired memory item(s)", "--yes", code=2)
    assert database.count("memory_items") == 3
    result = cli("prune", store_url, "--older-than", "30d", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["expired_memory_item_count"] == 2
    assert database.count("memory_items") == 1
    again = cli("prune", store_url, "--older-than", "30d", "--yes")
    assert "Pruned 0 session(s)" in again.stdout
    assert "memory" not in again.stdout


def test_erase_deletes_an_owners_sessions_and_memory(
    cli: Cli, demo_url: str, database: Any
) -> None:
    """erase asks for --yes off a terminal, lists on a dry run, then deletes every session and
    memory item of the owner and reports them; another owner's item stays."""
    with turnstore.open_blocking(demo_url) as store:
        store.memory.run(
            MemoryCall(
                writes=(
                    MemoryPut(("demo-user",), "likes", '{"text": "tea"}', None, "demo-user"),
                    MemoryPut(("other",), "likes", '{"text": "coffee"}', None, "other"),
                )
            )
        )
    refused = cli("erase", demo_url, "demo-user")
    assert_clean_error(refused, "--yes", code=2)
    assert "demo-fork" in refused.stderr
    dry = cli("erase", demo_url, "demo-user", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Would delete (dry run, nothing deleted) 2 session(s) in 1 tree(s)" in dry.stdout
    assert "Would delete (dry run, nothing deleted) 1 memory item(s)" in dry.stdout
    assert catalog(demo_url) != []
    result = cli("erase", demo_url, "demo-user", "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["session_ids"] == ["demo-fork", "demo-session"]
    assert (report["tree_count"], report["memory_item_count"]) == (1, 1)
    assert catalog(demo_url) == []
    assert database.count("memory_items") == 1
    assert_clean_error(cli("erase", demo_url, "", "--yes"), "owner_id", code=1)


@pytest.mark.parametrize("duration", ["30", "3y", "-1d", "0s", "1h30"])
def test_prune_refuses_a_bad_duration(duration: str, tmp_path: Path) -> None:
    """A duration that is not a positive count of s, m, h, d or w is a usage error."""
    result = run("prune", tmp_path / "x.sqlite3", "--older-than", duration, "--dry-run")
    assert_clean_error(result, "--older-than", code=2)


def test_durations_add_up() -> None:
    """1d12h is a day and a half; every unit parses."""
    from turnstore.cli.common import DURATION

    assert DURATION.convert("1d12h", None, None) == 129_600
    assert [DURATION.convert(f"2{u}", None, None) for u in "smhdw"] == [
        2,
        120,
        7200,
        172_800,
        1_209_600,
    ]


# --- export and import -----------------------------------------------------------------------


def test_export_import_export_is_identical_across_backends(
    cli: Cli, demo_url: str, tmp_path: Path
) -> None:
    """Export, import from standard input into a SQLite file, export again: the same bytes."""
    exported = export_bytes(cli, demo_url, "--all")
    assert json.loads(exported.splitlines()[0])["kind"] == "turnstore_export"
    target = tmp_path / "copy.sqlite3"
    imported = cli("import", target, "-", "--json", input=exported)
    assert imported.exit_code == 0, imported.output
    assert sorted(json.loads(imported.stdout)["session_ids"]) == ["demo-fork", "demo-session"]
    assert export_bytes(cli, str(target), "--all") == exported


def test_import_twice_changes_nothing(cli: Cli, store_url: str, tmp_path: Path) -> None:
    """A second import of the same file skips every tree and writes nothing."""
    source = write_demo(str(tmp_path / "source.sqlite3"))
    dump = tmp_path / "dump.jsonl"
    assert cli("export", source, "--all", "-o", dump).exit_code == 0
    assert dump.stat().st_mode & 0o777 == 0o600  # private, like the database
    first = json.loads(cli("import", store_url, dump, "--json").stdout)
    second = json.loads(cli("import", store_url, dump, "--json").stdout)
    assert sorted(first["session_ids"]) == ["demo-fork", "demo-session"]
    assert second["session_ids"] == []
    assert sorted(second["skipped_session_ids"]) == ["demo-fork", "demo-session"]
    assert catalog(store_url) == ["demo-fork", "demo-session"]


def test_import_of_a_conflicting_session(cli: Cli, store_url: str, tmp_path: Path) -> None:
    """A differing existing session fails the import; skip keeps it; replace --yes replaces."""
    save_session(store_url, "s", "the original", [])
    dump = tmp_path / "dump.jsonl"
    assert cli("export", store_url, "s", "-o", dump).exit_code == 0
    with turnstore.open_blocking(store_url) as store:
        store.delete_sessions(["s"])
    save_session(store_url, "s", "changed since", [])
    assert_clean_error(cli("import", store_url, dump), "'s' exists", "--on-conflict skip")
    skipped = json.loads(cli("import", store_url, dump, "--on-conflict", "skip", "--json").stdout)
    assert skipped["skipped_session_ids"] == ["s"]
    refused = cli("import", store_url, dump, "--on-conflict", "replace")
    assert_clean_error(refused, "--yes", code=2)
    replaced = cli("import", store_url, dump, "--on-conflict", "replace", "--yes")
    assert replaced.exit_code == 0, replaced.output
    with turnstore.open_blocking(store_url) as store:
        summary = store.session_summary("s")
    assert summary is not None
    assert summary.first_user_message == "the original"


SUMMARY = r"^{verb} {sessions} sessions in [0-9.]+ s \({trees} trees, [0-9,]+ rows{size}\){rest}\.$"
"""The one line a bulk command prints without --verbose or --json."""


def summary(verb: str, sessions: str, trees: int, *, size: bool = True, rest: str = "") -> str:
    shown = r", [0-9.]+ (KiB|MiB|GiB|bytes)" if size else ""
    return SUMMARY.format(verb=verb, sessions=sessions, trees=trees, size=shown, rest=rest)


def test_bulk_commands_print_one_summary_line_and_ids_only_when_asked(
    cli: Cli, store_url: str, tmp_path: Path
) -> None:
    """export, import and copy of 60 sessions: one line each; --verbose lists the ids."""
    source = str(tmp_path / "many.sqlite3")
    for number in range(60):
        save_session(source, f"many-{number:02d}", f"question {number}", [])
    dump = tmp_path / "many.jsonl"
    exported = cli("export", source, "--all", "-o", dump)
    assert exported.exit_code == 0, exported.output
    assert re.fullmatch(summary("Exported", "60", 60), exported.stdout.strip()), exported.stdout
    imported = cli("import", store_url, dump)
    assert imported.exit_code == 0, imported.output
    assert re.fullmatch(summary("Imported", "60", 60), imported.stdout.strip()), imported.stdout
    again = cli("import", store_url, dump).stdout.strip()
    skipped = r"; 60 skipped \(already there\)"
    assert re.fullmatch(summary("Imported", "0 of 60", 60, rest=skipped), again), again
    copied = cli("copy", source, str(tmp_path / "copy.sqlite3")).stdout.strip()
    assert re.fullmatch(summary("Copied", "60", 60, size=False), copied), copied
    listed = cli("import", str(tmp_path / "listed.sqlite3"), dump, "--verbose").stdout
    assert listed.splitlines()[1] == "Sessions:"
    assert {f"many-{number:02d}" for number in range(60)} <= set(listed.split())
    piped = cli("import", str(tmp_path / "piped.sqlite3"), "-", input=dump.read_bytes())
    assert re.fullmatch(summary("Imported", "60", 60, size=False), piped.stdout.strip())


def test_export_of_named_sessions_carries_their_trees(cli: Cli, demo_url: str) -> None:
    """export SESSION_ID writes that tree (the fork with it) and no other; --owner selects."""
    lines = [json.loads(line) for line in export_bytes(cli, demo_url, "demo-session").splitlines()]
    trees = [line for line in lines if line["kind"] == "tree"]
    assert [sorted(tree["session_ids"]) for tree in trees] == [["demo-fork", "demo-session"]]
    assert b'"kind":"tree"' not in export_bytes(cli, demo_url, "--owner", "nobody")
    reported = cli("export", demo_url, "demo-fork", "--json")
    assert json.loads(reported.stderr)["tree_count"] == 1
    assert json.loads(reported.stdout_bytes.splitlines()[0])["kind"] == "turnstore_export"


def test_export_needs_one_selection(cli: Cli, demo_url: str) -> None:
    """export with no selection, or two, is a usage error."""
    assert_clean_error(cli("export", demo_url), "--all", code=2)
    assert_clean_error(cli("export", demo_url, "demo-fork", "--all"), "--all", code=2)


def test_export_refuses_an_existing_file(cli: Cli, demo_url: str, tmp_path: Path) -> None:
    """export -o to a file that exists fails and leaves the file as it was."""
    taken = tmp_path / "taken.jsonl"
    taken.write_text("mine")
    assert_clean_error(cli("export", demo_url, "--all", "-o", taken), str(taken))
    assert taken.read_text() == "mine"


def test_export_refuses_a_terminal_and_draws_progress_with_o(demo_url: str, tmp_path: Path) -> None:
    """On a terminal, export without -o refuses; with -o it draws a progress bar on stderr."""
    code, shown = on_terminal("export", demo_url, "--all")
    assert code == 2, shown
    assert "redirect it or pass -o FILE" in shown
    code, shown = on_terminal("export", demo_url, "--all", "-o", tmp_path / "e.jsonl")
    assert code == 0, shown
    assert "Exporting" in shown
    assert (tmp_path / "e.jsonl").stat().st_size > 0


# --- copy and backup -------------------------------------------------------------------------


def test_copy_from_sqlite_into_the_backend_and_again(
    cli: Cli, store_url: str, tmp_path: Path
) -> None:
    """copy SRC DST moves every tree; a second run (a resumed one) skips them all."""
    source = write_demo(str(tmp_path / "source.sqlite3"))
    first = cli("copy", source, store_url, "--json")
    assert first.exit_code == 0, first.output
    assert sorted(json.loads(first.stdout)["session_ids"]) == ["demo-fork", "demo-session"]
    assert catalog(store_url) == ["demo-fork", "demo-session"]
    again = json.loads(cli("copy", source, store_url, "--json").stdout)
    assert again["session_ids"] == []
    assert sorted(again["skipped_session_ids"]) == ["demo-fork", "demo-session"]


def test_copy_of_one_owner_with_a_progress_bar(store_url: str, tmp_path: Path) -> None:
    """copy --owner copies only that owner's trees, drawing progress on a terminal."""
    source = str(tmp_path / "source.sqlite3")
    write_demo(source)
    with turnstore.open_blocking(source) as store:
        checkpoint = Checkpoint(session_id="theirs")
        checkpoint.session_context.owner_id = "someone-else"
        checkpoint.sequence = 1
        store.save(checkpoint)
    code, shown = on_terminal("copy", source, store_url, "--owner", "demo-user")
    assert code == 0, shown
    assert "Copying" in shown
    assert catalog(store_url) == ["demo-fork", "demo-session"]


def test_backup_writes_a_copy_of_a_sqlite_store(
    cli: Cli, demo_url: str, backend_name: str, tmp_path: Path
) -> None:
    """backup writes a new SQLite file holding the sessions; PostgreSQL points at pg_dump."""
    destination = tmp_path / "backup.sqlite3"
    result = cli("backup", demo_url, destination, "--json")
    if backend_name == "postgres":
        assert_clean_error(result, "pg_dump")
        return
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bytes"] == destination.stat().st_size
    assert catalog(str(destination)) == ["demo-fork", "demo-session"]
    assert_clean_error(cli("backup", demo_url, destination), "backup.sqlite3")


# --- gc, vacuum, sweep -----------------------------------------------------------------------


def orphan_a_blob(url: str) -> None:
    """Commit two runtime heads, so the first head's checkpoint blob is reachable no more."""
    with turnstore.open_blocking(url) as store:
        rt = store.runtime("rt")
        state = HydratedSessionCheckpoint(tool_state={"v": 1})
        first = rt.commit_runtime_state(
            make_commit("rt", None, replace(chain("n1")), checkpoint=state)
        )
        later = HydratedSessionCheckpoint(tool_state={"v": 2})
        rt.commit_runtime_state(make_commit("rt", first.head_revision, checkpoint=later))


def test_gc_deletes_unreachable_blobs(cli: Cli, store_url: str) -> None:
    """gc refuses without --yes off a terminal; with it, deletes the orphaned blob."""
    orphan_a_blob(store_url)
    assert_clean_error(cli("gc", store_url), "--yes", code=2)
    result = cli("gc", store_url, "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted_blob_count"] >= 1
    with turnstore.open_blocking(store_url) as store:
        assert store.upkeep.doctor().unreachable_blob_count == 0


def test_vacuum_removes_tombstoned_nodes(cli: Cli, store_url: str, database: Any) -> None:
    """vacuum --yes removes a tombstoned graph node and reports the sizes."""
    with turnstore.open_blocking(store_url) as store:
        rt = store.runtime("rt")
        nodes = [*chain("n1", "n2"), chain("x")[0]]
        rt.commit_runtime_state(make_commit("rt", None, replace(nodes, leaf="n2")))
        rt.tombstone_nodes(["x"])
    assert_clean_error(cli("vacuum", store_url), "--yes", code=2)
    result = cli("vacuum", store_url, "--yes")
    assert result.exit_code == 0, result.output
    assert "removed graph nodes  1" in result.stdout
    assert database.count("graph_nodes") == 2


def test_sweep_reclaims_an_uncommitted_attachment(cli: Cli, store_url: str, tmp_path: Path) -> None:
    """sweep --older-than 1s deletes an attachment no commit referenced, and names it."""
    root = tmp_path / "attachments"
    root.mkdir()
    save_session(store_url, "s", "hi", [])
    with turnstore.open_blocking(store_url) as store:
        written = FileAttachmentStore(root).put(store.runtime("s"), "att-1", b"payload")
    time.sleep(1.2)
    args = ("sweep", store_url, "--attachments", root, "--older-than", "1s")
    assert_clean_error(cli(*args), "--yes", code=2)
    assert written.exists()
    result = cli(*args, "--yes", "--json")
    assert json.loads(result.stdout) == {"attachment_ids": ["att-1"]}
    assert not written.exists()


def test_a_piped_catalog_keeps_ids_and_messages_a_terminal_would_cut(tmp_path: Path) -> None:
    """`sessions list > file` keeps a 150-character id and a 300-character first message
    whole; on a terminal both are cut to its width."""
    url = str(tmp_path / "long.sqlite3")
    long_id = "tenant-" + "a" * 143
    message = "where " + "is the lighthouse " * 16 + "keeper"
    with turnstore.open_blocking(url) as store:
        store.save(Checkpoint(session_id=long_id, sequence=1, first_user_message=message))
    piped = subprocess.run(
        [sys.executable, "-m", "turnstore.cli", "sessions", "list", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert long_id in piped
    assert message in piped
    code, shown = on_terminal("sessions", "list", url)
    assert code == 0
    assert long_id not in shown
    assert "…" in shown


# --- migrate, doctor, stats ------------------------------------------------------------------


def test_migrate_lists_then_runs_the_steps(
    cli: Cli, backend_name: str, database: Any, pg_schema: str, store_url: str
) -> None:
    """On a schema-3 database: --dry-run lists steps 4 to 12, changes nothing; migrate runs them."""
    restore_fixture(backend_name, database, pg_schema, 3)
    dry = json.loads(cli("migrate", store_url, "--dry-run", "--json").stdout)
    assert (dry["from_version"], dry["to_version"], dry["dry_run"]) == (3, 12, True)
    assert [step["version"] for step in dry["steps"]] == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    table = cli("migrate", store_url)
    assert "Migrated from schema version 3 to 12" in table.stdout
    # The steps leave the search index to build again; migrate builds it.
    assert "Search index built: 3 sessions, 10 items indexed." in table.stdout
    with turnstore.open_blocking(store_url, read_only=True) as store:
        hits = store.search(turnstore.records.SearchRequest(query="question")).hits
        assert {hit.session_id for hit in hits} == {"chat", "chat-fork"}
    assert "up to date" in cli("migrate", store_url).stdout


def test_doctor_of_a_healthy_store(cli: Cli, demo_url: str) -> None:
    """doctor exits 0 and reports no problems."""
    result = cli("doctor", demo_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["problems"] == []
    assert report["schema_version"] == report["supported_schema_version"]
    assert "No problems found." in cli("doctor", demo_url).stdout


def test_doctor_exits_1_on_a_missing_index(cli: Cli, demo_url: str, database: Any) -> None:
    """doctor names a dropped index as a problem and exits 1."""
    database.query("DROP INDEX sessions_parent_idx")
    result = cli("doctor", demo_url)
    assert result.exit_code == 1, result.output
    assert "missing index sessions_parent_idx" in result.stdout
    report = json.loads(cli("doctor", demo_url, "--json").stdout)
    assert report["missing_indexes"] == ["sessions_parent_idx"]


def test_stats_count_the_demo(cli: Cli, demo_url: str) -> None:
    """stats counts the demo's two sessions, one a fork, and its two turns."""
    found = json.loads(cli("stats", demo_url, "--json").stdout)
    assert (found["session_count"], found["fork_count"], found["turn_count"]) == (2, 1, 2)
    assert found["total_tokens"] > 0
    table = cli("stats", demo_url)
    assert "2 (1 forks)" in table.stdout


# --- asking on a terminal --------------------------------------------------------------------


def test_delete_on_a_terminal_asks_and_obeys(demo_url: str) -> None:
    """On a terminal, delete lists the tree and asks: `n` keeps it, `y` deletes it."""
    code, shown = on_terminal("sessions", "delete", demo_url, "demo-session", answer=b"n\n")
    assert code == 1, shown
    assert "Will delete 2 session(s)" in shown
    assert catalog(demo_url) == ["demo-fork", "demo-session"]
    code, shown = on_terminal("sessions", "delete", demo_url, "demo-session", answer=b"y\n")
    assert code == 0, shown
    assert catalog(demo_url) == []


def test_operator_commands_read_turnstore_url(store_url: str, tmp_path: Path) -> None:
    """With TURNSTORE_URL set, import takes its file as the first argument, not as the URL."""
    source = write_demo(str(tmp_path / "source.sqlite3"))
    dump = tmp_path / "dump.jsonl"
    assert run("export", source, "--all", "-o", dump).exit_code == 0
    env = {"TURNSTORE_URL": store_url}
    for invoke in (run, run_process):
        result: Outcome = invoke("import", dump, "--json", env=env)
        assert result.exit_code == 0, result.output
    assert catalog(store_url) == ["demo-fork", "demo-session"]
    stats = json.loads(run("stats", "--json", env=env).stdout)
    assert stats["session_count"] == 2
