"""`turnstore memory …` on both backends: namespaces, items, one item, search, delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import assert_clean_error, last_line, run, run_printed, run_process

import turnstore
from turnstore.records.memory import MemoryCall, MemoryGet, MemoryPut

NOTES = 5


def put(url: str, namespace: tuple[str, ...], key: str, value: Any, **how: Any) -> None:
    """Put one item, its words indexed, as `TurnstoreStore` does."""
    owner = how.get("owner", namespace[0])
    write = MemoryPut(namespace, key, json.dumps(value), how.get("ttl_ms"), owner, text=True)
    with turnstore.open_blocking(url) as store:
        store.memory.run(MemoryCall(writes=(write,)))


def seed(url: str) -> str:
    """Ada's notes (one about a lighthouse each), her preferences and Bob's; return `url`."""
    for n in range(NOTES):
        put(url, ("ada", "notes"), f"n{n}", {"text": f"note {n} on the lighthouse\nkeeper"})
    put(url, ("ada", "prefs"), "tone", {"tone": "short", "weight": 3})
    put(url, ("bob", "prefs"), "lang", {"text": "answers in French"})
    return url


def stored(url: str, namespace: tuple[str, ...], key: str) -> Any:
    """The item as the library reads it, or None."""
    with turnstore.open_blocking(url) as store:
        return store.memory.run(MemoryCall(gets=(MemoryGet(namespace, key),))).gets[0]


def test_namespaces_counts_items_per_namespace_and_per_owner(store_url: str) -> None:
    """The catalog lists each namespace once with its items; --owner counts one owner's."""
    seed(store_url)
    every = run("memory", "namespaces", store_url, "--json").json_lines()
    assert [(line["namespace"], line["items"]) for line in every[:-1]] == [
        (["ada", "notes"], NOTES),
        (["ada", "prefs"], 1),
        (["bob", "prefs"], 1),
    ]
    assert every[-1] == {"next": None}
    bobs = run("memory", "namespaces", store_url, "--owner", "bob", "--json").json_lines()
    assert [line["namespace"] for line in bobs[:-1]] == [["bob", "prefs"]]
    under = run("memory", "namespaces", store_url, "--prefix", "ada", "--json").json_lines()
    assert [line["namespace"] for line in under[:-1]] == [["ada", "notes"], ["ada", "prefs"]]
    table = run("memory", "namespaces", store_url)
    assert table.exit_code == 0, table.output
    assert "ada.notes" in table.stdout
    assert "bob.prefs" in table.stdout
    none = run("memory", "namespaces", store_url, "--owner", "carol")
    assert none.stdout.strip() == "No memory items of 'carol'."


def test_every_page_command_runs_as_printed(store_url: str) -> None:
    """namespaces, list and search end a page with the command printing the next, which does."""
    seed(store_url)
    # A process, not the runner: the command it prints must run as it is (`python -m …`).
    first = run_process("memory", "namespaces", store_url, "--limit", 2)
    assert "More namespaces exist" in first.stdout
    second = run_printed(last_line(first))
    assert second.exit_code == 0, second.output
    assert "bob.prefs" in second.stdout
    assert "ada.notes" not in second.stdout
    seen: list[str] = []
    for command in ("list", "search"):
        words = ["ada"] if command == "list" else ["lighthouse", "--prefix", "ada"]
        page = run_process("memory", command, store_url, *words, "--limit", 3)
        keys = []
        while True:
            assert page.exit_code == 0, page.output
            keys += [word for word in page.stdout.split() if word.startswith("n")]
            if "More" not in page.stdout:
                break
            page = run_printed(last_line(page))
        seen.append(",".join(sorted(key for key in keys if key[1:].isdigit())))
    assert seen == [",".join(f"n{n}" for n in range(NOTES))] * 2


def test_list_shows_an_items_text_or_its_json_and_json_holds_the_value(store_url: str) -> None:
    """A row shows the value's `text` on one line, else compact JSON; --json the whole value."""
    seed(store_url)
    table = run("memory", "list", store_url, "ada")
    assert table.exit_code == 0, table.output
    flat = " ".join(table.stdout.replace("│", " ").split())
    assert "note 4 on the lighthouse keeper" in flat
    assert '{"tone":"short","weight":3}' in flat
    lines = run("memory", "list", store_url, "ada.prefs", "--json").json_lines()
    (item, end) = lines
    assert (item["namespace"], item["key"], item["owner_id"]) == (["ada", "prefs"], "tone", "ada")
    assert item["value"] == {"tone": "short", "weight": 3}
    assert item["expires_at_ms"] is None
    assert item["created_at_ms"] <= item["updated_at_ms"]
    assert end == {"next": None}
    empty = run("memory", "list", store_url, "carol")
    assert empty.stdout.strip() == "No memory items in 'carol'."


def test_show_prints_the_value_and_leaves_its_time_to_live(store_url: str) -> None:
    """show prints the whole value and its times; reading does not restart the time to live."""
    seed(store_url)
    put(store_url, ("ada", "session"), "draft", {"text": "half a plan"}, ttl_ms=3_600_000)
    before = stored(store_url, ("ada", "session"), "draft")
    shown = run("memory", "show", store_url, "ada.session", "draft")
    assert shown.exit_code == 0, shown.output
    assert '"text": "half a plan"' in shown.stdout
    assert "expires" in shown.stdout
    item = json.loads(run("memory", "show", store_url, "ada.session", "draft", "--json").stdout)
    assert item["value"] == {"text": "half a plan"}
    assert item["expires_at_ms"] == before.expires_at_ms
    assert stored(store_url, ("ada", "session"), "draft") == before
    missing = run("memory", "show", store_url, "ada.session", "nope")
    assert_clean_error(missing, "no memory item 'nope' in 'ada.session'")


def test_search_finds_memories_by_their_words_with_the_match_marked(store_url: str) -> None:
    """search finds items by words, one owner's with --owner; JSON has snippet and marks."""
    seed(store_url)
    hits = run("memory", "search", store_url, "french", "--json").json_lines()
    assert [(hit["namespace"], hit["key"]) for hit in hits[:-1]] == [(["bob", "prefs"], "lang")]
    (hit,) = hits[:-1]
    start, end = hit["marks"][0]
    assert hit["snippet"][start:end] == "French"
    assert run(
        "memory", "search", store_url, "french", "--owner", "ada", "--json"
    ).json_lines() == [{"next": None}]
    table = run("memory", "search", store_url, "keeper")
    # A snippet's line break shows as a space in the table.
    assert "note 0 on the lighthouse keeper" in " ".join(table.stdout.replace("│", " ").split())
    nothing = run("memory", "search", store_url, "nowhere")
    assert nothing.stdout.strip() == "No memory item matches."


def test_delete_is_all_or_nothing_and_what_it_deletes_cannot_be_found(store_url: str) -> None:
    """delete asks for --yes off a terminal, refuses an absent key deleting nothing, and
    takes the deleted items out of search."""
    seed(store_url)
    refused = run("memory", "delete", store_url, "ada.notes", "n1", "n2")
    assert_clean_error(refused, "--yes", code=2)
    absent = run("memory", "delete", store_url, "ada.notes", "n1", "gone", "--yes")
    assert_clean_error(absent, "nothing deleted; no memory item 'gone' in 'ada.notes'")
    assert stored(store_url, ("ada", "notes"), "n1") is not None
    dry = run("memory", "delete", store_url, "ada.notes", "n1", "n2", "--dry-run")
    assert "Would delete (dry run, nothing deleted) 2 memory item(s) in 'ada.notes'" in dry.stdout
    assert stored(store_url, ("ada", "notes"), "n2") is not None
    done = run("memory", "delete", store_url, "ada.notes", "n1", "n2", "n1", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {
        "namespace": ["ada", "notes"],
        "keys": ["n1", "n2"],
        "dry_run": False,
    }
    assert stored(store_url, ("ada", "notes"), "n1") is None
    found = run("memory", "search", store_url, "lighthouse", "--json").json_lines()
    assert sorted(hit["key"] for hit in found[:-1]) == ["n0", "n3", "n4"]


def test_a_namespace_with_an_empty_label_is_a_usage_error(tmp_path: Path) -> None:
    """`a..b`, `.a` and `a.` are no namespace: a usage error before the store is opened."""
    for spelt in ("a..b", ".a", "a."):
        result = run("memory", "list", tmp_path / "none.sqlite3", spelt)
        assert_clean_error(result, "is not a namespace like ada.preferences", code=2)
    assert not (tmp_path / "none.sqlite3").exists()


def test_changing_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    """delete on a mistyped path fails in one line and leaves no empty database behind."""
    path = tmp_path / "typo.sqlite3"
    result = run("memory", "delete", path, "ada.notes", "n1", "--yes")
    assert result.exit_code == 1, result.output
    assert not path.exists()


def test_export_import_and_copy_carry_memory_and_say_so(store_url: str, tmp_path: Path) -> None:
    """`export --owner` carries that owner's items, `import` counts what it wrote and
    skipped, and `copy` moves the rest."""
    seed(store_url)
    exported = tmp_path / "ada.jsonl"
    done = run("export", store_url, "--owner", "ada", "-o", exported)
    assert done.exit_code == 0, done.output
    assert "(0 trees, 6 memory items," in done.stdout
    target = tmp_path / "target.sqlite3"
    first = run("import", target, exported)
    assert "(0 trees, 6 memory items," in first.stdout
    again = run("import", target, exported, "--json")
    report = json.loads(again.stdout)
    assert (report["memory_item_count"], report["skipped_memory_item_count"]) == (0, 6)
    copied = run("copy", store_url, target, "--json")
    report = json.loads(copied.stdout)
    assert (report["memory_item_count"], report["skipped_memory_item_count"]) == (1, 6)
    assert stored(str(target), ("bob", "prefs"), "lang") is not None


def test_values_strict_json_cannot_carry_are_listed_and_shown(store_url: str) -> None:
    """NaN lists and prints (as null in --json, the stored text beside it); any text put
    without its words searched shows as that text."""
    with turnstore.open_blocking(store_url) as store:
        writes = (
            MemoryPut(("odd",), "nan", '{"x": NaN}', None, "odd"),
            MemoryPut(("odd",), "raw", "plain text", None, "odd"),
        )
        store.memory.run(MemoryCall(writes=writes))
    lines = run("memory", "list", store_url, "odd", "--json").json_lines()
    shown = {line["key"]: line for line in lines[:-1]}
    assert shown["nan"]["value"] == {"x": None}
    assert shown["nan"]["value_json"] == '{"x": NaN}'
    assert shown["raw"]["value"] == "plain text"
    table = run("memory", "list", store_url, "odd")
    assert table.exit_code == 0, table.output
    assert "plain text" in table.stdout
    for key, text in (("nan", "NaN"), ("raw", "plain text")):
        printed = run("memory", "show", store_url, "odd", key)
        assert printed.exit_code == 0, printed.output
        assert text in printed.stdout
