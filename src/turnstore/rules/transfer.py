"""Exports and imports: which sessions export, which lines and trees an import takes."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

import msgspec

from turnstore.errors import InvalidInput, MemoryItemExists, SessionExists, SessionNotFound
from turnstore.records.memory import SEPARATOR, MemoryItemCopy
from turnstore.records.upkeep import OnConflict
from turnstore.rules import memory_names
from turnstore.rules.search import memory_value
from turnstore.rules.validation import identifier, optional_identifier

T = TypeVar("T")


def check_export_sessions(session_ids: list[str], found: Collection[str]) -> None:
    """Refuse an export naming sessions of which only `found` are stored."""
    missing = [session_id for session_id in session_ids if session_id not in found]
    if missing:
        raise SessionNotFound(f"no session {missing[0]!r} to export", session_id=missing[0])


def check_export_tree(session_ids: list[str], root: str) -> None:
    """Refuse to export the tree of `root` when it holds no session (`root` is gone)."""
    if not session_ids:
        raise SessionNotFound(f"no session {root!r} to export", session_id=root)


def check_exportable_json(table: str, column: str, nullable: bool, value: Any) -> None:
    """Refuse a nullable JSON column holding JSON null: its export would read back as NULL."""
    if nullable and value == "null":
        raise ValueError(f"{table}.{column} holds JSON null; it cannot export")


def export_line(raw: bytes, number: int, limit: int | None, decode: Callable[[bytes], T]) -> T:
    """Line `number` of an export, at most `limit` bytes long, decoded by `decode`."""
    if limit is not None and len(raw) > limit:
        raise InvalidInput(
            f"export line {number} is longer than the {limit:,}-byte limit on a"
            " line (an import holds three to four times its longest line in memory); raise it"
            " with max_line_bytes (turnstore import --max-line-mib)"
        )
    try:
        return decode(raw)
    except msgspec.ValidationError as error:
        raise InvalidInput(f"export line {number}: {error}") from None
    except msgspec.DecodeError as error:
        raise InvalidInput(f"export line {number} is not JSON: {error}") from None
    except RecursionError:
        raise InvalidInput(
            f"export line {number} nests deeper than a decoder can follow (about 1,000 "
            "levels); no read could use it"
        ) from None


def check_tree_root(session_ids: list[str], root: str, number: int) -> None:
    """Refuse a tree line (line `number`) whose sessions do not start with its root."""
    if not session_ids or session_ids[0] != root:
        raise InvalidInput(f"export line {number}: a tree must list its root first")


def check_import_conflict(on_conflict: OnConflict, present: list[str]) -> None:
    """Refuse, under `on_conflict='fail'`, a tree whose `present` sessions hold other rows."""
    if on_conflict == "fail":
        raise SessionExists(
            f"session {present[0]!r} exists with other content; import with "
            "on_conflict='skip' to keep it or 'replace' to overwrite it",
            session_id=present[0],
        )


def check_row(number: int, problem: str | None, root: str) -> None:
    """Refuse an imported row (line `number`) that a read would refuse for `problem`."""
    if problem is not None:
        raise InvalidInput(
            f"export line {number}: {problem}; no read could use it, so tree "
            f"{root!r} is not imported"
        )


def row_params(number: int, params: Callable[[], T]) -> T:
    """An imported row's statement parameters (line `number`); a JSON column must be UTF-8."""
    try:
        return params()
    except UnicodeDecodeError as error:
        raise InvalidInput(f"export line {number}: a JSON column is not UTF-8: {error}") from None


def check_row_owner(table: str, owner: str, allowed: Collection[str], number: int) -> None:
    """Refuse a row (line `number`) of a session its tree line does not list."""
    if owner not in allowed:
        raise InvalidInput(
            f"export line {number}: a {table} row of session {owner!r}, which its tree "
            "does not list"
        )


def check_tree_rows(
    root: str, count: int, digest: str, expected_count: int, expected_digest: str, number: int
) -> None:
    """Refuse a tree whose rows are not the count and digest its tree line gives."""
    if count != expected_count or digest != expected_digest:
        raise InvalidInput(
            f"export tree {root!r} is damaged or cut off: its rows do not match the "
            f"count and digest its tree line gives (line {number})"
        )


def check_tree_problems(root: str, problems: list[str]) -> None:
    """Refuse a tree whose rows reads would refuse together (the first of `problems`)."""
    if problems:
        raise InvalidInput(
            f"export tree {root!r}: {problems[0]}; no read could use it, so the tree"
            " is not imported"
        )


def check_tree_session(root: str, session_id: str, summary: object | None) -> None:
    """Refuse a tree listing a session whose sessions row it did not carry (`summary` None)."""
    if summary is None:
        raise InvalidInput(f"export tree {root!r} has no sessions row for {session_id!r}")


def check_memory_conflict(on_conflict: OnConflict, namespace: str, key: str) -> None:
    """Refuse, under `on_conflict='fail'`, a live memory item that holds other content."""
    if on_conflict == "fail":
        raise MemoryItemExists(
            f"memory item {key!r} in {namespace!r} exists with other content; import with"
            " on_conflict='skip' to keep it or 'replace' to overwrite it",
            namespace=namespace,
            key=key,
        )


def check_memory_item(number: int, item: MemoryItemCopy) -> None:
    """Refuse an imported memory item (line `number`) no put could have written."""
    problem = _memory_problem(item)
    if problem is not None:
        raise InvalidInput(f"export line {number}: {problem}")


def check_memory_copy(item: MemoryItemCopy) -> None:
    """Refuse an item another store held that no put could write (`import_memory_items`)."""
    problem = _memory_problem(item)
    if problem is not None:
        raise InvalidInput(problem)


def _memory_problem(item: MemoryItemCopy) -> str | None:
    """Why no put could have written `item`: a namespace or key the store cannot key by, an
    owner that is not an identifier, a time to live without an expiry (or the reverse), a
    value a put would refuse (not text, or, searched by its words, not JSON); None if none."""
    where = f"memory item {item.key!r} in {SEPARATOR.join(map(str, item.namespace))!r} has"
    try:
        memory_names.namespace(item.namespace)
        memory_names.key(item.key)
        optional_identifier(item.owner_id, "owner ID")
    except InvalidInput as error:
        return f"{where} a place no put could write ({error})"
    ttl_ms, expires_at_ms = item.ttl_ms, item.expires_at_ms
    if (ttl_ms is None) != (expires_at_ms is None) or (ttl_ms is not None and ttl_ms <= 0):
        return f"{where} a time to live and an expiry that disagree"
    try:
        identifier(item.value_json, "memory value")
        if item.searched:
            # A put searched by its words takes only what its words can be read from.
            memory_value(item.value_json)
    except InvalidInput as error:
        return f"{where} a value no put could write ({error})"
    return None


def check_vector_follows(
    number: int, vector: tuple[str, str], item: tuple[str, str] | None
) -> None:
    """Refuse a `memory_vectors` row (line `number`) that does not follow its item's row."""
    if vector != item:
        raise InvalidInput(f"export line {number}: a memory_vectors row does not follow its item")


def check_memory_section(
    number: int, read: tuple[int, int, str], said: tuple[int, int, str]
) -> None:
    """Refuse a memory section whose items, rows and digest are not what its line said."""
    if read != said:
        raise InvalidInput(
            f"export line {number}: a memory section's rows do not match its memory line"
            f" ({read[0]} items and {read[1]} rows read, {said[0]} and {said[1]} announced,"
            " or another digest); nothing of it is imported"
        )
