"""Contract: exports, imports and copies carry long-term memory (export format 2).

A whole-store or an owner's export carries the live memory items after the trees, in
sections of 500; importing into either backend and exporting again gives the same bytes;
importing twice changes nothing; an item that differs is refused, kept or replaced as asked;
a damaged section is refused whole; a version 1 file (made before memory was carried) still
imports.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import turnstore
from turnstore import BlockingStore, InvalidInput
from turnstore.errors import MemoryItemExists
from turnstore.records.memory import (
    MemoryCall,
    MemoryFindRequest,
    MemoryGet,
    MemoryItemCopy,
    MemoryPut,
    MemoryRow,
    MemoryVector,
)
from turnstore.scripts.transfer_memory import SECTION_ITEMS
from turnstore.transfer import copy_store, export_jsonl, import_jsonl, import_memory_items

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRICKY = 'quote " backslash \\ tab \t NUL-free é 漢字 \U0001f600 lighthouse'
HOUR_MS = 3_600_000


def export_bytes(store: Any, **selection: Any) -> bytes:
    """The export of `store` (everything unless narrowed), as bytes."""
    out = io.BytesIO()
    export_jsonl(store, out, **selection)
    return out.getvalue()


def put(store: BlockingStore, *writes: MemoryPut) -> None:
    """Write items in one batch."""
    store.memory.run(MemoryCall(writes=writes))


def item(
    namespace: tuple[str, ...], key: str, value: Any, owner: str | None = None, **how: Any
) -> MemoryPut:
    """A put of `value` (as JSON), searched by its words unless `text=False`."""
    return MemoryPut(
        namespace,
        key,
        json.dumps(value),
        how.get("ttl_ms"),
        owner,
        vectors=how.get("vectors"),
        text=how.get("text", True),
    )


def fill(store: BlockingStore) -> None:
    """Two owners' items, one ownerless, one with a time to live, vectors, one not searched,
    and a session, so that trees and memory share the file."""
    put(
        store,
        item(("ada", "notes"), "n1", {"text": TRICKY, "n": 1}, "ada"),
        item(("ada", "notes"), "n2", {"text": "tea at five"}, "ada", ttl_ms=HOUR_MS),
        item(
            ("ada", "prefs"),
            "vec",
            {"text": "answers in French"},
            "ada",
            vectors=(MemoryVector("text", b"\x00\x00\x80?" * 4),),
        ),
        item(("bob", "prefs"), "quiet", {"text": "quiet lighthouse"}, "bob", text=False),
        item(("shared",), "fact", {"text": "the lighthouse is white"}),
    )
    store.append_context("ada-chat", [{"role": "user", "content": "remember tea"}], "ada")


def memory_of(store: BlockingStore, namespace: tuple[str, ...], key: str) -> MemoryRow | None:
    """One live item as reads see it."""
    return store.memory.run(MemoryCall(gets=(MemoryGet(namespace, key),))).gets[0]


def found(store: BlockingStore, query: str) -> list[str]:
    """The keys a memory search finds, sorted."""
    return sorted(hit.key for hit in store.memory.find(MemoryFindRequest(query, limit=100)).hits)


@pytest.fixture
def source(tmp_path: Path) -> Any:
    """A SQLite store holding `fill`'s items and session."""
    with turnstore.open_blocking(tmp_path / "source.sqlite3") as store:
        fill(store)
        yield store


def test_memory_round_trips_byte_for_byte_through_either_backend(
    source: BlockingStore, store_url: str, tmp_path: Path
) -> None:
    """SQLite → the backend under test → SQLite: the same bytes; each item keeps its times,
    owner, vectors and whether its words are searched."""
    first = export_bytes(source)
    assert b'"format_version":2' in first.splitlines()[0]
    with turnstore.open_blocking(store_url) as target:
        report = import_jsonl(target, io.BytesIO(first))
        assert (report.memory_item_count, report.skipped_memory_item_count) == (5, 0)
        assert report.session_ids == ["ada-chat"]
        assert export_bytes(target) == first
        for namespace, key in ((("ada", "notes"), "n2"), (("ada", "prefs"), "vec")):
            assert memory_of(target, namespace, key) == memory_of(source, namespace, key)
        # The words are indexed again where they land; an item not searched stays unsearched.
        assert found(target, "lighthouse") == ["fact", "n1"]
        assert found(target, "french") == ["vec"]
        catalog = target.memory.catalog(turnstore.records.memory.MemoryCatalogRequest("ada"))
        assert [(n.namespace, n.items) for n in catalog.namespaces] == [
            (("ada", "notes"), 2),
            (("ada", "prefs"), 1),
        ]
    with turnstore.open_blocking(tmp_path / "again.sqlite3") as again:
        import_jsonl(again, io.BytesIO(first))
        assert export_bytes(again) == first


def test_values_strict_json_refuses_move_as_they_were_stored(
    source: BlockingStore, store_url: str
) -> None:
    """A value holding NaN (as LangGraph's `json.dumps` writes one) and any text put without
    its words searched (a newline in it too) export, import and export again unchanged."""
    put(
        source,
        item(("odd",), "nan", {"text": "not a number"}, "odd")._replace(
            value_json='{"text": "not a number", "x": NaN}'
        ),
        MemoryPut(("odd",), "raw", "line one\nline two, not JSON", None, "odd"),
    )
    first = export_bytes(source)
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(first))
        assert export_bytes(target) == first
        nan = memory_of(target, ("odd",), "nan")
        raw = memory_of(target, ("odd",), "raw")
        assert nan is not None
        assert raw is not None
        assert nan.value_json == '{"text": "not a number", "x": NaN}'
        assert raw.value_json == "line one\nline two, not JSON"
        # Searched by its words where it landed: the NaN did not stop the indexer.
        assert found(target, "number") == ["nan"]


def test_importing_twice_skips_every_item(source: BlockingStore, store_url: str) -> None:
    """The second import writes nothing and says so; the end line counts both."""
    data = export_bytes(source)
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(data))
        again = import_jsonl(target, io.BytesIO(data))
        assert (again.memory_item_count, again.skipped_memory_item_count) == (0, 5)
        assert export_bytes(target) == data


def test_a_differing_item_is_refused_kept_or_replaced(
    source: BlockingStore, store_url: str
) -> None:
    """fail raises MemoryItemExists naming it and writes nothing of its section; skip keeps
    the item there; replace writes the file's."""
    data = export_bytes(source)
    with turnstore.open_blocking(store_url) as target:
        put(target, item(("ada", "notes"), "n1", {"text": "changed"}, "ada"))
        with pytest.raises(MemoryItemExists) as refused:
            import_jsonl(target, io.BytesIO(data))
        assert (refused.value.namespace, refused.value.key) == ("ada.notes", "n1")
        assert memory_of(target, ("shared",), "fact") is None
        kept = import_jsonl(target, io.BytesIO(data), on_conflict="skip")
        assert (kept.memory_item_count, kept.skipped_memory_item_count) == (4, 1)
        changed = memory_of(target, ("ada", "notes"), "n1")
        assert changed is not None
        assert json.loads(changed.value_json) == {"text": "changed"}
        replaced = import_jsonl(target, io.BytesIO(data), on_conflict="replace")
        assert (replaced.memory_item_count, replaced.skipped_memory_item_count) == (1, 4)
        assert export_bytes(target) == data
        assert found(target, "changed") == []


def test_an_expired_item_in_the_target_is_replaced_even_under_fail(
    source: BlockingStore, store_url: str
) -> None:
    """An expired item is no item: the file's takes its place without a conflict."""
    data = export_bytes(source)
    with turnstore.open_blocking(store_url) as target:
        put(target, item(("shared",), "fact", {"text": "old"}, ttl_ms=1))
        import_jsonl(target, io.BytesIO(data))
        assert export_bytes(target) == data


def test_what_an_export_selects_carries_the_memory_it_should(
    source: BlockingStore, tmp_path: Path
) -> None:
    """An owner's export carries their items only; named sessions carry none; an expired
    item is never exported."""
    put(source, item(("ada", "gone"), "x", {"text": "brief"}, "ada", ttl_ms=1))
    ada = io.BytesIO(export_bytes(source, owner_id="ada"))
    with turnstore.open_blocking(tmp_path / "ada.sqlite3") as target:
        report = import_jsonl(target, ada)
        assert report.memory_item_count == 3
        assert sorted(n.namespace for n in target.memory.catalog(_catalog()).namespaces) == [
            ("ada", "notes"),
            ("ada", "prefs"),
        ]
    named = export_bytes(source, session_ids=["ada-chat"])
    assert b'"kind":"memory' not in named


def _catalog() -> Any:
    return turnstore.records.memory.MemoryCatalogRequest()


def test_sections_of_500_and_a_cut_off_file_keeps_whole_sections(
    store_url: str, tmp_path: Path
) -> None:
    """1,201 items go in three sections; a file cut inside the second imports the first
    section whole and nothing of the second."""
    count = 2 * SECTION_ITEMS + 1
    with turnstore.open_blocking(tmp_path / "many.sqlite3") as many:
        put(many, *(item(("u",), f"k{n:04}", {"text": f"note {n}"}, "u") for n in range(count)))
        data = export_bytes(many)
    lines = data.splitlines(keepends=True)
    headers = [n for n, line in enumerate(lines) if line.startswith(b'{"kind":"memory"')]
    assert [json.loads(lines[n])["item_count"] for n in headers] == [500, 500, 1]
    cut = b"".join(lines[: headers[1] + 10])
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match="do not match"):
            import_jsonl(target, io.BytesIO(cut))
        page = target.memory.catalog(_catalog())
        assert [(n.namespace, n.items) for n in page.namespaces] == [(("u",), SECTION_ITEMS)]


def _mangled(data: bytes, kind: bytes, change: Any) -> bytes:
    lines = data.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if line.startswith(b'{"kind":"' + kind))
    lines[at] = change(lines[at])
    return b"".join(lines)


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        (b"memory_items", lambda line: line.replace(b'\\"n\\": 1', b'\\"n\\": 2'), "do not match"),
        (b"memory_items", lambda line: line.replace(b'"ttl_ms":null', b'"ttl_ms":5'), "disagree"),
        (
            b"memory_items",
            lambda line: line.replace(b'"item_key":"n1"', b'"item_key":""'),
            "no put could write",
        ),
        (b"memory_items", lambda line: line.replace(b'"searched":true', b'"searched":1'), "bool"),
        (
            b"memory_vectors",
            lambda line: line.replace(b'"item_key":"vec"', b'"item_key":"v"'),
            "follow",
        ),
        (
            b'memory"',
            lambda line: line.replace(b'"item_count":5', b'"item_count":4'),
            "do not match",
        ),
    ],
)
def test_a_damaged_section_is_refused_and_writes_nothing(
    source: BlockingStore, store_url: str, kind: bytes, change: Any, message: str
) -> None:
    """A changed row (its digest), a time to live without an expiry, an empty key, a mistyped
    value, a vector away from its item, wrong counts: InvalidInput, and no item written."""
    data = _mangled(export_bytes(source), kind, change)
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match=message):
            import_jsonl(target, io.BytesIO(data))
        assert target.memory.catalog(_catalog()).namespaces == []


def test_copy_carries_memory_between_backends(source: BlockingStore, store_url: str) -> None:
    """copy_store moves the items too, and again changes nothing."""
    with turnstore.open_blocking(store_url) as target:
        report = copy_store(source, target)
        assert report.memory_item_count == 5
        assert copy_store(source, target).skipped_memory_item_count == 5
        assert export_bytes(target) == export_bytes(source)


def test_a_version_1_file_still_imports(store_url: str) -> None:
    """`tests/fixtures/export_v1.jsonl`, written by `turnstore export --all` of the demo before
    format 2, imports into either backend; its trees export again to the same lines."""
    old = (FIXTURES / "export_v1.jsonl").read_bytes()
    assert old.startswith(b'{"kind":"turnstore_export","format_version":1,')
    with turnstore.open_blocking(store_url) as target:
        report = import_jsonl(target, io.BytesIO(old))
        assert sorted(report.session_ids) == ["demo-crash", "demo-fork", "demo-session"]
        again = export_bytes(target).splitlines()
    assert again[0].startswith(b'{"kind":"turnstore_export","format_version":2,')
    assert again[1:] == old.splitlines()[1:]


def test_items_another_store_held_go_in_with_their_own_times(store_url: str) -> None:
    """`import_memory_items` writes items as given (times, owner, expiry, searched or not),
    skips identical ones, refuses or keeps differing ones, and refuses a place no put could
    write, writing nothing of its section."""
    later = 4_102_444_800_000  # 2100-01-01
    items = [
        MemoryItemCopy(
            ("ada", "notes"),
            f"k{n}",
            json.dumps({"text": f"lighthouse {n}"}),
            1_000,
            2_000 + n,
            "ada",
        )
        for n in range(3)
    ]
    items.append(
        MemoryItemCopy(("bob",), "ttl", '{"text": "quiet"}', 5, 6, None, 60_000, later, False)
    )
    with turnstore.open_blocking(store_url) as target:
        report = import_memory_items(target, items)
        assert (report.memory_item_count, report.skipped_memory_item_count) == (4, 0)
        row = memory_of(target, ("bob",), "ttl")
        assert row is not None
        assert (row.created_at_ms, row.updated_at_ms, row.ttl_ms, row.expires_at_ms) == (
            5,
            6,
            60_000,
            later,
        )
        assert row.owner_id is None
        assert found(target, "lighthouse") == ["k0", "k1", "k2"]
        assert found(target, "quiet") == []
        again = import_memory_items(target, items)
        assert (again.memory_item_count, again.skipped_memory_item_count) == (0, 4)
        changed = [items[0]._replace(value_json='{"text": "other"}')]
        with pytest.raises(MemoryItemExists):
            import_memory_items(target, changed)
        kept = import_memory_items(target, changed, on_conflict="skip")
        assert kept.skipped_memory_item_count == 1
        bad = [items[1]._replace(key="fresh"), items[1]._replace(key="x" * 300)]
        with pytest.raises(InvalidInput, match="no put could write"):
            import_memory_items(target, bad)
        assert memory_of(target, ("ada", "notes"), "fresh") is None
        for bad, message in (
            (items[1]._replace(namespace=("ada.notes",)), "cannot contain"),
            (items[1]._replace(key="zero", ttl_ms=0, expires_at_ms=later), "disagree"),
            (items[1]._replace(key="text", value_json="not JSON"), "no put could write"),
        ):
            with pytest.raises(InvalidInput, match=message):
                import_memory_items(target, [bad])
        assert memory_of(target, ("ada", "notes"), "zero") is None
