"""Contract: no row that a read cannot decode gets in by an import, and `doctor(deep=True)`
finds those that are there.

A forger edits one row of an export and recomputes its tree's digest, so the file passes
every check of its format; the import still refuses the tree, naming the row, because the
row does not decode as the store's reads decode it (before this, such a tree imported and
every read of it raised `CorruptRecord`). Rows damaged inside the database are found by
the deep doctor, on both backends.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from transfer_corpus import fill

import turnstore
from turnstore import BlockingStore, CorruptRecord, EventPageRequest, InvalidInput
from turnstore.transfer import export_jsonl, import_jsonl

Row = dict[str, Any]


@pytest.fixture
def source(tmp_path: Path) -> Iterator[BlockingStore]:
    """A SQLite store holding the corpus: every record kind of both contracts."""
    with turnstore.open_blocking(tmp_path / "source.sqlite3") as store:
        fill(store)
        yield store


def export_of(store: BlockingStore, session_id: str) -> bytes:
    out = io.BytesIO()
    export_jsonl(store, out, session_ids=[session_id])
    return out.getvalue()


def forge(data: bytes, kind: str, change: Callable[[Row, list[Row]], None]) -> bytes:
    """`data` with its first `kind` row changed and its tree's digest recomputed to match."""
    lines = data.splitlines(keepends=True)
    rows = [msgspec.json.decode(line) for line in lines]
    index = next(i for i, row in enumerate(rows) if row["kind"] == kind)
    change(rows[index], rows)
    start = max(i for i in range(index) if rows[i]["kind"] == "tree")
    end = next(i for i in range(index, len(rows)) if rows[i]["kind"] in ("tree", "end"))
    for i in range(start + 1, end):  # a change may reach more rows than the first
        lines[i] = msgspec.json.encode(rows[i]) + b"\n"
    rows[start]["digest"] = hashlib.sha256(b"".join(lines[start + 1 : end])).hexdigest()
    lines[start] = msgspec.json.encode(rows[start]) + b"\n"
    return b"".join(lines)


def _set(column: str, value: Any) -> Callable[[Row, list[Row]], None]:
    def change(row: Row, rows: list[Row]) -> None:
        row[column] = value

    return change


def _batch_event(value: Any) -> Callable[[Row, list[Row]], None]:
    def change(row: Row, rows: list[Row]) -> None:
        row["events_json"][0][2] = value

    return change


def _batch_metrics(value: Any) -> Callable[[Row, list[Row]], None]:
    def change(row: Row, rows: list[Row]) -> None:
        row["events_json"][0][3] = value

    return change


def _checkpoint_sequence(row: Row, rows: list[Row]) -> None:
    row["checkpoint_state_json"]["sequence"] = 99


def _elapsed(row: Row, rows: list[Row]) -> None:
    row["record_json"]["elapsed_ms"] += 1


def _manifest(row: Row, rows: list[Row]) -> None:
    (head,) = [r for r in rows if r["kind"] == "runtime_heads"]
    (manifest,) = [r for r in rows if r.get("blob_ref") == head["checkpoint_ref"]]
    manifest["data"] = base64.b64encode(b'{"schema_version":').decode()
    row.update(manifest)


def _tool_state(row: Row, rows: list[Row]) -> None:
    (head,) = [r for r in rows if r["kind"] == "runtime_heads"]
    (manifest,) = [r for r in rows if r.get("blob_ref") == head["checkpoint_ref"]]
    ref = msgspec.json.decode(base64.b64decode(manifest["data"]))["tool_state_ref"]
    if row["blob_ref"] != ref:
        (row,) = [r for r in rows if r["kind"] == "blobs" and r["blob_ref"] == ref]
    row["data"] = base64.b64encode(b"\xff not JSON").decode()


def nest(levels: int) -> Any:
    """`levels` lists, one inside the other."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def reseal(data: bytes) -> bytes:
    """`data` with every tree's digest recomputed from the rows it holds now."""
    lines = data.splitlines(keepends=True)
    # By the line's start: a forged row may nest past what any decoder follows.
    kinds = [line.split(b",", 1)[0].rstrip(b"}\n") for line in lines]
    marks = (b'{"kind":"tree"', b'{"kind":"end"')
    trees = [i for i, kind in enumerate(kinds) if kind == marks[0]]
    for start in trees:
        end = next(i for i in range(start + 1, len(lines)) if kinds[i] in marks)
        tree = msgspec.json.decode(lines[start])
        tree["digest"] = hashlib.sha256(b"".join(lines[start + 1 : end])).hexdigest()
        lines[start] = msgspec.json.encode(tree) + b"\n"
    return b"".join(lines)


PLAIN = "plain-session"
RUNTIME = "runtime-session"
DEMO = "demo-session"

FORGERIES = [
    # (session exported, row kind, change, what the error names)
    (PLAIN, "event_batches", _batch_event({"msg": {"type": "no_such_event"}}), "event batch"),
    (PLAIN, "event_batches", _batch_event("not an event"), "event batch"),
    (PLAIN, "event_batches", _set("events_json", "not a batch"), "event batch"),
    (PLAIN, "event_batches", _set("events_json", None), "event batch"),
    (PLAIN, "event_batches", _batch_metrics({}), "event batch"),
    (PLAIN, "event_batches", _set("event_count", 99), "event batch does not match its index"),
    (PLAIN, "event_batches", _set("first_sequence", 2), "event batch does not match its index"),
    (PLAIN, "sessions", _set("session_context_json", [1]), "session context"),
    (PLAIN, "sessions", _set("execution_stats_json", {"run_count": -1}), "execution stats"),
    (PLAIN, "sessions", _checkpoint_sequence, "does not match its index"),
    (PLAIN, "sessions", _set("context_length", 7), "holds 1 items, the row says 7"),
    (PLAIN, "context_chunks", _set("items_json", {"not": "a list"}), "checkpoint context"),
    (PLAIN, "transcript_delta", _set("items_json", 5), "transcript"),
    (PLAIN, "execution_journal", _elapsed, "execution record is invalid"),
    (RUNTIME, "runtime_heads", _set("schema_version", 99), "schema_version 99"),
    (RUNTIME, "runtime_heads", _set("config_json", []), "config"),
    (RUNTIME, "runtime_heads", _set("agent_frames_json", {}), "agent frames"),
    (RUNTIME, "graph_nodes", _set("record_json", {}), "graph node"),
    (RUNTIME, "token_ledger", _set("entry_json", 1), "token ledger entry"),
    (RUNTIME, "turn_commits", _set("result_json", {}), "turn commit"),
    (RUNTIME, "queued_work", _set("items_json", "x"), "queued work"),
    (RUNTIME, "session_meta", _set("meta_json", []), "session meta"),
    (RUNTIME, "blobs", _manifest, "checkpoint manifest"),
    (RUNTIME, "blobs", _tool_state, "tool state"),
    # Free JSON past what a save takes (64 levels) gets in by no import either.
    (PLAIN, "context_chunks", _set("items_json", [nest(65)]), "nests deeper than 64 levels"),
    (PLAIN, "transcript_delta", _set("items_json", [nest(900)]), "nests deeper than 64 levels"),
    (RUNTIME, "queued_work", _set("items_json", [{"a": nest(70)}]), "nests deeper than 64"),
    (PLAIN, "context_chunks", _set("items_json", [2**64]), "integer outside 64 bits"),
]


@pytest.mark.parametrize(
    ("session_id", "kind", "change", "named"),
    FORGERIES,
    ids=[f"{kind}-{named.replace(' ', '-')}" for _, kind, _, named in FORGERIES],
)
def test_a_row_no_read_can_decode_is_refused_with_its_tree(
    source: BlockingStore,
    store_url: str,
    database: Any,
    session_id: str,
    kind: str,
    change: Callable[[Row, list[Row]], None],
    named: str,
) -> None:
    """A forged row with a matching digest raises InvalidInput naming the row and what
    does not decode; its tree is wholly absent afterwards."""
    data = forge(export_of(source, session_id), kind, change)
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match="no read could use it") as raised:
            import_jsonl(target, io.BytesIO(data))
        message = str(raised.value)
        assert named in message, message
        # A blob is named by the head that reaches it.
        row = "runtime_heads" if kind == "blobs" else kind
        assert f"{row} row (session_id {session_id!r}" in message, message
        assert target.session_summary(session_id) is None
        assert database.count("sessions") == 0


@pytest.mark.parametrize("levels", [1_100, 20_000])
@pytest.mark.parametrize("kind", ["context_chunks", "transcript_delta"])
def test_items_nested_past_any_decoder_are_refused_typed(
    source: BlockingStore, store_url: str, database: Any, kind: str, levels: int
) -> None:
    """Nesting no decoder follows (about 1,000 levels): InvalidInput, not a RecursionError."""
    marked = forge(export_of(source, PLAIN), kind, _set("items_json", ["DEEP"]))
    data = reseal(marked.replace(b'["DEEP"]', b"[" + b"[" * levels + b"]" * levels + b"]", 1))
    with turnstore.open_blocking(store_url) as target:
        with pytest.raises(InvalidInput, match="no read could use it") as raised:
            import_jsonl(target, io.BytesIO(data))
        assert "nests deeper than a decoder can follow" in str(raised.value)
        assert target.session_summary(PLAIN) is None
        assert database.count("sessions") == 0


def test_the_unforged_file_imports_and_reads(source: BlockingStore, store_url: str) -> None:
    """The checks refuse nothing a store writes: the whole corpus imports and reads back."""
    out = io.BytesIO()
    export_jsonl(source, out)
    with turnstore.open_blocking(store_url) as target:
        report = import_jsonl(target, io.BytesIO(out.getvalue()))
        assert report.tree_count == 3
        assert target.event_page(PLAIN, EventPageRequest(limit=10)).events
        assert target.runtime(RUNTIME).load_session() is not None
        assert target.upkeep.doctor(deep=True).problems == []


BAD_BATCH = '[[1,1,{"msg":{"type":"no_such_event"}},[]]]'
"""A batch whose one event no read can decode."""


def test_a_forged_event_would_otherwise_break_every_event_page(
    source: BlockingStore, store_url: str, database: Any
) -> None:
    """What the import protects: the same event stored directly makes event_page raise."""
    with turnstore.open_blocking(store_url) as target:
        import_jsonl(target, io.BytesIO(export_of(source, PLAIN)))
    set_batch = "UPDATE event_batches SET events_json = ? WHERE session_id = ?"
    database.query(set_batch, (BAD_BATCH, PLAIN))
    with turnstore.open_blocking(store_url) as target, pytest.raises(CorruptRecord):
        target.event_page(PLAIN, EventPageRequest(limit=10))


# --- doctor(deep=True) --------------------------------------------------------------------------


def test_deep_doctor_names_every_row_a_read_would_refuse(store_url: str, database: Any) -> None:
    """Rows damaged in the database: a plain doctor sees nothing, a deep one names each."""
    with turnstore.open_blocking(store_url) as store:
        fill(store)
        store.save_state("global", "settings", {"a": 1})
        assert store.upkeep.doctor(deep=True).problems == []
    query = database.query
    query(
        "UPDATE event_batches SET events_json = ? WHERE session_id = ? AND first_sequence = 1",
        (BAD_BATCH, PLAIN),
    )
    query("UPDATE sessions SET context_length = 9 WHERE session_id = ?", (DEMO,))
    query("UPDATE middleware_state SET value_json = ? WHERE scope = ?", ("{oops", "global"))
    query("UPDATE graph_nodes SET record_json = ? WHERE node_id = ?", ("[]", "n2"))
    with turnstore.open_blocking(store_url, read_only=True) as store:
        shallow = store.upkeep.doctor()
        assert (shallow.deep, shallow.undecodable_row_count, shallow.problems) == (False, 0, [])
        report = store.upkeep.doctor(deep=True)
    assert report.deep
    assert report.undecodable_row_count == 4, report.undecodable_rows
    rows = "\n".join(report.undecodable_rows)
    assert f"event_batches row (session_id {PLAIN!r}, first_sequence 1): stored event" in rows
    assert f"sessions row (session_id {DEMO!r}): checkpoint context holds" in rows
    assert "middleware_state row (scope 'global', key 'settings')" in rows
    assert f"graph_nodes row (session_id {RUNTIME!r}, node_id 'n2'): stored graph node" in rows
    assert len(report.problems) == 4
    assert all(problem.startswith("undecodable ") for problem in report.problems)


def test_deep_doctor_lists_a_hundred_rows_and_counts_the_rest(
    store_url: str, database: Any
) -> None:
    """Many damaged rows: the first 100 are listed, the others counted in one problem."""
    with turnstore.open_blocking(store_url) as store:
        for number in range(120):
            store.save_state(f"scope-{number:03d}", "k", number)
    database.query("UPDATE middleware_state SET value_json = ?", ("{",))
    with turnstore.open_blocking(store_url) as store:
        report = store.upkeep.doctor(deep=True)
    assert report.undecodable_row_count == 120
    assert len(report.undecodable_rows) == 100
    assert report.problems[-1] == "20 more undecodable rows"


async def test_the_async_face_takes_deep(store: Any) -> None:
    """Upkeep.doctor(deep=True) on the async face too."""
    report = await store.upkeep.doctor(deep=True)
    assert report.deep
    assert report.problems == []
