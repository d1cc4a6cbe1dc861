"""Contract: exports and imports of whole session trees (`export_trees`, `import_trees`).

An export carries every row of a tree; importing it into either backend and exporting again
gives the same bytes; importing twice changes nothing; a conflicting tree is refused, kept or
replaced as asked; a damaged or cut-off file is refused at the tree it damages, which is
left wholly absent.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from store_dumps import Dumper
from transfer_corpus import TRICKY_TEXT, fill, table_counts

import turnstore
from conftest import postgres_connection, postgres_store_url, require_postgres
from turnstore import BlockingStore, Checkpoint, InvalidInput, SessionNotFound
from turnstore.errors import SessionExists
from turnstore.scripts.transfer_rows import (
    DERIVED_TABLES,
    MEMORY_ITEMS,
    MEMORY_TABLES,
    MEMORY_VECTORS,
    SESSION_TABLES,
    TABLES,
)
from turnstore.transfer import copy_store, export_jsonl, import_jsonl


def export_bytes(store: Any, **selection: Any) -> bytes:
    """The export of `store` (all trees unless narrowed), as bytes."""
    out = io.BytesIO()
    export_jsonl(store, out, **selection)
    return out.getvalue()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL of a fresh PostgreSQL schema, dropped afterwards."""
    require_postgres()
    schema = f"test_{uuid.uuid4().hex}"
    yield postgres_store_url(schema)
    with postgres_connection() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def source(tmp_path: Path) -> Iterator[BlockingStore]:
    """A SQLite store holding the corpus: every record kind of both contracts."""
    with turnstore.open_blocking(tmp_path / "source.sqlite3") as store:
        fill(store)
        yield store


def test_export_carries_every_table_of_both_contracts(source: BlockingStore) -> None:
    """The corpus's export has rows of every table but LangGraph's (tested with LangGraph)."""
    counts = table_counts(source)
    expected = {t.name for t in TABLES if not t.name.startswith("lg_")}
    assert expected <= set(counts), expected - set(counts)
    assert counts["tree"] == 3
    assert counts["turnstore_export"] == counts["end"] == 1


def test_export_import_export_is_byte_identical_across_backends(
    source: BlockingStore, pg_url: str, tmp_path: Path
) -> None:
    """SQLite → PostgreSQL → SQLite: every export of the corpus has the same bytes."""
    first = export_bytes(source)
    with turnstore.open_blocking(pg_url) as postgres:
        report = import_jsonl(postgres, io.BytesIO(first))
        assert report.tree_count == 3
        assert not report.skipped_session_ids
        second = export_bytes(postgres)
    assert second == first
    with turnstore.open_blocking(tmp_path / "again.sqlite3") as again:
        import_jsonl(again, io.BytesIO(second))
        assert export_bytes(again) == first
        loaded = again.load("plain-session")
        assert loaded is not None
        assert list(loaded.context) == [{"role": "user", "content": TRICKY_TEXT}]
        assert again.load_state("demo-session", "memory") == {
            "facts": [TRICKY_TEXT, 1.5, None, True]
        }
        graph = again.runtime("runtime-session").load_session()
        assert graph is not None
        assert graph.graph.leaf_node_id == "n3"


def test_importing_the_same_file_twice_changes_nothing(
    source: BlockingStore, store_url: str, backend_name: str, tmp_path: Path, pg_schema: str
) -> None:
    """A second import skips every tree and leaves every row as the first import wrote it."""
    data = export_bytes(source)
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(data))
        dumper = Dumper(backend_name, tmp_path / "turnstore.sqlite3", pg_schema)
        try:
            before = dumper.dump()
            again = import_jsonl(target, io.BytesIO(data))
            assert dumper.dump() == before
        finally:
            dumper.close()
    assert again.session_ids == []
    expected = [*source.upkeep.tree("demo-session"), "plain-session", "runtime-session"]
    assert sorted(again.skipped_session_ids) == sorted(expected)


def changed(store: BlockingStore, session_id: str) -> None:
    """Commit one more checkpoint of `session_id`."""
    checkpoint = store.load(session_id)
    assert checkpoint is not None
    checkpoint.sequence += 1
    store.save(checkpoint)


def test_a_conflicting_tree_is_refused_kept_or_replaced(
    source: BlockingStore, store_url: str
) -> None:
    """fail raises SessionExists and writes nothing of the tree; skip keeps; replace overwrites."""
    data = export_bytes(source, session_ids=["plain-session"])
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(data))
        changed(target, "plain-session")
        ours = export_bytes(target)
        with pytest.raises(SessionExists) as refused:
            import_jsonl(target, io.BytesIO(data))
        assert refused.value.session_id == "plain-session"
        assert export_bytes(target) == ours
        kept = import_jsonl(target, io.BytesIO(data), on_conflict="skip")
        assert kept.skipped_session_ids == ["plain-session"]
        assert export_bytes(target) == ours
        replaced = import_jsonl(target, io.BytesIO(data), on_conflict="replace")
        assert replaced.session_ids == ["plain-session"]
        assert replaced.replaced_session_ids == ["plain-session"]
        assert export_bytes(target) == data


def test_an_extra_fork_in_the_target_is_a_conflict(source: BlockingStore, store_url: str) -> None:
    """A tree present with one more fork is not the same tree."""
    data = export_bytes(source, session_ids=["plain-session"])
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(data))
        target.fork("plain-session", 1, Checkpoint.empty("plain-fork"))
        with pytest.raises(SessionExists):
            import_jsonl(target, io.BytesIO(data))
        replaced = import_jsonl(target, io.BytesIO(data), on_conflict="replace")
        assert replaced.replaced_session_ids == ["plain-fork", "plain-session"]
        assert target.upkeep.tree("plain-session") == ["plain-session"]


def test_exporting_a_fork_exports_its_whole_tree(source: BlockingStore) -> None:
    """Naming a fork exports the tree from its root, so the file imports anywhere."""
    report = source.upkeep.export_trees(io.BytesIO(), session_ids=["demo-fork"])
    assert report.session_ids == ["demo-session", "demo-fork"]
    assert report.tree_count == 1


def test_exporting_an_absent_session_is_refused(source: BlockingStore) -> None:
    """An unknown id raises SessionNotFound before anything is written."""
    out = io.BytesIO()
    with pytest.raises(SessionNotFound):
        source.upkeep.export_trees(out, session_ids=["demo-session", "nobody"])
    assert out.getvalue() == b""


def test_export_by_owner_carries_only_that_owners_trees(source: BlockingStore) -> None:
    """owner_id selects the trees whose root that owner holds."""
    report = source.upkeep.export_trees(io.BytesIO(), owner_id="demo-user")
    assert report.session_ids == ["demo-session", "demo-fork"]
    assert source.upkeep.export_trees(io.BytesIO(), owner_id="nobody").session_ids == []


def lines_of(data: bytes) -> list[bytes]:
    """The lines of an export, newlines kept."""
    return data.splitlines(keepends=True)


def tree_spans(data: bytes) -> list[tuple[int, int]]:
    """(first, past-last) line numbers of each tree, its tree line included."""
    lines = lines_of(data)
    starts = [i for i, line in enumerate(lines) if line.startswith(b'{"kind":"tree"')]
    return list(zip(starts, [*starts[1:], len(lines) - 1], strict=True))


def test_a_cut_off_file_imports_the_whole_trees_before_the_cut_and_nothing_else(
    source: BlockingStore, store_url: str
) -> None:
    """A file cut inside its last tree raises InvalidInput; that tree is wholly absent."""
    data = export_bytes(source)
    spans = tree_spans(data)
    lines = lines_of(data)
    last_start, last_end = spans[-1]
    cut = b"".join(lines[: (last_start + last_end) // 2 + 1])
    trees = [msgspec.json.decode(lines[start])["session_ids"] for start, _ in spans]
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match=r"cut off|damaged"):
            import_jsonl(target, io.BytesIO(cut))
        for ids in trees[:-1]:
            assert all(target.session_summary(i) is not None for i in ids), ids
        assert all(target.session_summary(i) is None for i in trees[-1])


def test_a_damaged_row_fails_its_tree_and_changes_nothing(
    source: BlockingStore, store_url: str
) -> None:
    """A row whose text was altered no longer matches its tree's digest: nothing is written."""
    data = export_bytes(source, session_ids=["plain-session"])
    damaged = data.replace(b'"content":"tab', b'"content":"TAB', 1)
    assert damaged != data
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match="damaged"):
            import_jsonl(target, io.BytesIO(damaged))
        assert target.session_summary("plain-session") is None


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda lines: [b"hello\n", *lines[1:]], "not JSON"),
        (lambda lines: lines[1:], "first line"),
        (
            lambda lines: [
                lines[0],
                lines[1],
                lines[2].replace(b'{"kind":"sessions",', b'{"kind":"sessions","extra":1,'),
                *lines[3:],
            ],
            "unknown field|extra",
        ),
        (
            lambda lines: [
                lines[0],
                lines[1],
                lines[2].replace(b'"latest_sequence":', b'"latest_sequence":"x","_":'),
                *lines[3:],
            ],
            "latest_sequence|Expected",
        ),
        (
            lambda lines: [
                lines[0].replace(b'"format_version":2', b'"format_version":9'),
                *lines[1:],
            ],
            "format version 9",
        ),
        (lambda lines: lines[:-1], "no end line"),
    ],
)
def test_malformed_files_are_refused_with_a_typed_error(
    source: BlockingStore, store_url: str, mangle: Any, message: str
) -> None:
    """Bad input is InvalidInput naming what is wrong, and writes nothing of the bad tree."""
    data = b"".join(mangle(lines_of(export_bytes(source, session_ids=["plain-session"]))))
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match=message):
            import_jsonl(target, io.BytesIO(data))
        if message != "no end line":
            assert target.session_summary("plain-session") is None


def test_a_row_of_a_session_its_tree_does_not_list_is_refused(
    source: BlockingStore, store_url: str
) -> None:
    """Rows may only belong to the sessions of their tree line."""
    data = export_bytes(source, session_ids=["plain-session"])
    forged = data.replace(b'"scope":"plain-session"', b'"scope":"other"')
    forged = forged.replace(
        b'{"kind":"context_chunks","session_id":"plain-session"',
        b'{"kind":"context_chunks","session_id":"victim"',
        1,
    )
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match="does not list"):
            import_jsonl(target, io.BytesIO(forged))
        assert target.session_summary("plain-session") is None


def test_copy_between_backends_resumes_after_an_interruption(
    source: BlockingStore, pg_url: str
) -> None:
    """A copy cut short and run again ends with the same store as one copy."""
    with turnstore.open_blocking(pg_url) as target:
        seen: list[tuple[int, int]] = []

        def stop_after_first(done: int, total: int) -> None:
            seen.append((done, total))
            if done == 1:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target, progress=stop_after_first)
        assert seen == [(1, 3)]
        report = copy_store(source, target)
        assert len(report.skipped_session_ids) == len(source.upkeep.tree("demo-session"))
        assert export_bytes(target) == export_bytes(source)


async def test_the_async_face_round_trips(store: Any, tmp_path: Path) -> None:
    """export_trees and import_trees on both faces: a round trip through another store."""
    checkpoint = Checkpoint.empty("async-session")
    checkpoint.context += [{"role": "user", "content": TRICKY_TEXT}]
    checkpoint.sequence += 1
    await store.save(checkpoint, transcript_delta=list(checkpoint.context))
    out = io.BytesIO()
    report = await store.upkeep.export_trees(out)
    assert report.session_ids == ["async-session"]
    with turnstore.open_blocking(tmp_path / "copy.sqlite3") as copy:
        copy.upkeep.import_trees(io.BytesIO(out.getvalue()))
        back = io.BytesIO()
        copy.upkeep.export_trees(back)
    assert back.getvalue() == out.getvalue()
    await store.delete_sessions(["async-session"])
    imported = await store.upkeep.import_trees(io.BytesIO(out.getvalue()))
    assert imported.session_ids == ["async-session"]
    assert (await store.load("async-session")).context == checkpoint.context


def test_every_schema_table_is_in_the_format(store_url: str, database: Any) -> None:
    """A table added to the schema without an export spec fails here."""
    with turnstore.open_blocking(store_url):
        pass
    if database.backend == "postgres":
        rows = database.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
            (database.schema,),
        )
    else:
        rows = database.query("SELECT name FROM sqlite_schema WHERE type = 'table'")
    tables = {name for (name,) in rows} - {"turnstore_schema"} - DERIVED_TABLES
    # The text indexes (FTS5 and its shadow tables) are derived: an import rebuilds them.
    tables = {name for name in tables if not name.startswith(("search_fts", "memory_fts"))}
    assert tables == {t.name for t in (*TABLES, *MEMORY_TABLES)}
    for table in (*SESSION_TABLES, MEMORY_VECTORS):
        if database.backend == "postgres":
            found = database.query(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = ?"
                " AND table_name = ? ORDER BY ordinal_position",
                (database.schema, table.name),
            )
        else:
            found = database.query(f"SELECT name FROM pragma_table_info('{table.name}')")
        assert tuple(name for (name,) in found) == table.names, table.name
    # An item's columns but `searched` are the table's; the rest are the text index's, which
    # each database keeps in columns of its own (`searched` is read from them).
    if database.backend == "postgres":
        found = database.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ?"
            " AND table_name = 'memory_items' ORDER BY ordinal_position",
            (database.schema,),
        )
    else:
        found = database.query("SELECT name FROM pragma_table_info('memory_items')")
    names = {name for (name,) in found}
    index = {"words"} if database.backend == "postgres" else INDEX_COLUMNS
    assert names - set(MEMORY_ITEMS.names[:-1]) == index
    assert set(MEMORY_ITEMS.names[:-1]) <= names


INDEX_COLUMNS = {"item_id", "text_indexed", "words_pending", "stale_words"}
"""SQLite's columns of an item's text index (schemas 11, 12): derived, not exported."""


# --- a line's length: memory grows with the longest line, so it is limited -----------------


def test_a_line_over_the_limit_is_refused_before_it_is_read_whole(
    source: BlockingStore, store_url: str
) -> None:
    """A line longer than max_line_bytes is InvalidInput naming the line and the limit, read
    no further than one byte past the limit; its tree is absent; a higher limit imports it."""
    data = export_bytes(source, session_ids=["plain-session"])
    lines = lines_of(data)
    longest = max(len(line) for line in lines)
    number = next(i for i, line in enumerate(lines, start=1) if len(line) == longest)
    start = sum(len(line) for line in lines[: number - 1])
    file = io.BytesIO(data)
    half = longest // 2
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match=f"line {number} is longer than the {half:,}"):
            import_jsonl(target, file, max_line_bytes=half)
        assert file.tell() == start + half + 1
        with pytest.raises(InvalidInput, match=f"line {number} is longer"):
            import_jsonl(target, io.BytesIO(data), max_line_bytes=longest - 1)
        assert target.session_summary("plain-session") is None
        import_jsonl(target, io.BytesIO(data), max_line_bytes=longest)
        assert target.session_summary("plain-session") is not None


def test_the_default_limit_is_64_mib_and_copies_take_any_line(
    tmp_path: Path, store_url: str
) -> None:
    """A 65 MiB line is refused by default, taken with max_line_bytes=None, and copy_store
    (whose lines are rows a store already holds) takes it without being told."""
    with turnstore.open_blocking(tmp_path / "long.sqlite3") as long:
        checkpoint = Checkpoint.empty("long")
        checkpoint.context.append({"content": "x" * (65 << 20)})
        checkpoint.sequence += 1
        long.save(checkpoint)
        data = export_bytes(long)
        with turnstore.open_blocking(store_url) as target:
            with pytest.raises(InvalidInput, match="67,108,864-byte limit"):
                import_jsonl(target, io.BytesIO(data))
            assert import_jsonl(target, io.BytesIO(data), max_line_bytes=None).tree_count == 1
            target.delete_sessions(["long"])
            assert copy_store(long, target).session_ids == ["long"]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "64"])
def test_a_bad_line_limit_is_refused(source: BlockingStore, bad: Any) -> None:
    """max_line_bytes is a positive int or None."""
    with pytest.raises(InvalidInput, match="max_line_bytes"):
        import_jsonl(source, io.BytesIO(b""), max_line_bytes=bad)
