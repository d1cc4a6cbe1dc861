"""Moving long-term memory in: LangGraph's `SqliteStore` / `PostgresStore` items and ADK's
`SqliteMemoryService` memories, read from their tables, never written.

A LangGraph item keeps its namespace, key, value, creation and update times and its time to
live (an expired item is not moved), owned as `TurnstoreStore` owns items: by its first
namespace label unless an owner is given. The items go in through
`turnstore.transfer.import_memory_items`, 500 to a transaction: one already there and the same
is skipped, one that differs is left as it is and reported by `verify_langgraph_items`.
Vectors are not moved: a `TurnstoreStore` with an index embeds an item again when it is put.

An ADK memory is added through `TurnstoreMemoryService.add_events_to_memory`, as the event
it was made from (its id, author, time and content), so it is stored exactly as the service
stores what it is given; adding it again changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby, islice
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from turnstore import BlockingStore
from turnstore.integrations._memory_tables import (
    LangGraphRow,
    LangGraphSource,
    adk_rows,
    check_adk_source,
    to_ms,
)
from turnstore.records.memory import MemoryCall, MemoryGet, MemoryItemCopy, MemoryRow
from turnstore.seam import json_loads
from turnstore.transfer import check_memory_item, import_memory_items

__all__ = [
    "Difference",
    "LangGraphSource",
    "MemoryMoveReport",
    "MemoryVerifyReport",
    "check_adk_source",
    "copy_adk_memories",
    "copy_langgraph_items",
    "count_adk_memories",
    "count_langgraph_items",
    "first_label",
    "verify_adk_memories",
    "verify_langgraph_items",
]

BATCH = 500
"""Source rows read, checked and written at a time."""


class Difference(NamedTuple):
    """Where a moved item differs from its source, and how."""

    namespace: tuple[str, ...]
    key: str
    reason: str


@dataclass
class MemoryMoveReport:
    """What a move of memory did: items read, written, already there, left out (and why)."""

    item_count: int = 0
    written_count: int = 0
    present_count: int = 0
    skipped: list[Difference] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class MemoryVerifyReport:
    """A verify's verdict: items compared, and the first that differs (None: none)."""

    item_count: int = 0
    difference: Difference | None = None
    seconds: float = 0.0


# --- LangGraph's stores ---------------------------------------------------------------------


def _value_json(value: Any) -> str:
    """A stored value as the text to keep: SQLite's JSON text (or bytes) as it is written,
    PostgreSQL's decoded jsonb as compact JSON; a verify compares the same text."""
    text = value.decode() if isinstance(value, bytes) else value
    decoded = json_loads(text) if isinstance(text, str) else value
    if not isinstance(decoded, dict):
        raise ValueError("the value is not a JSON object")
    return text if isinstance(text, str) else msgspec.json.encode(decoded).decode()


def langgraph_item(
    row: LangGraphRow, owner: Callable[[tuple[str, ...]], str | None], searched: bool
) -> MemoryItemCopy:
    """A `store` row as the item it becomes; ValueError for one no store could hold."""
    prefix, key, value, created_at, updated_at, expires_at, ttl_minutes = row
    namespace = tuple(str(prefix).split("."))
    if not key or not all(namespace):
        raise ValueError("an empty namespace label or key")
    ttl_ms = None if ttl_minutes is None or expires_at is None else round(ttl_minutes * 60_000)
    return MemoryItemCopy(
        namespace,
        str(key),
        _value_json(value),
        to_ms(created_at),
        to_ms(updated_at),
        owner(namespace),
        ttl_ms if ttl_ms else None,
        to_ms(expires_at) if ttl_ms else None,
        searched,
    )


def first_label(namespace: tuple[str, ...]) -> str | None:
    """`TurnstoreStore`'s default owner of an item: its namespace's first label."""
    return namespace[0] if namespace else None


def copy_langgraph_items(
    source: LangGraphSource,
    store: BlockingStore,
    *,
    owner: Callable[[tuple[str, ...]], str | None] = first_label,
    searched: bool = True,
    skip_bad: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> MemoryMoveReport:
    """Write every live item of `source` that the store lacks; identical ones are skipped,
    differing ones left as they are. A row no store could hold stops the move (ValueError),
    or with `skip_bad` is reported and left out."""
    started = time.monotonic()
    report = MemoryMoveReport()
    rows = _live(source)
    while batch := list(islice(rows, BATCH)):
        items = []
        for row in batch:
            place = (tuple(str(row.prefix).split(".")), str(row.key))
            report.item_count += 1
            try:
                item = langgraph_item(row, owner, searched)
                check_memory_item(item)
                items.append(item)
            except (ValueError, msgspec.DecodeError) as error:
                if not skip_bad:
                    raise ValueError(
                        f"item {place[1]!r} in {'.'.join(place[0])!r}: {error}"
                    ) from None
                report.skipped.append(Difference(*place, str(error)))
        done = import_memory_items(store, items, on_conflict="skip")
        report.written_count += done.memory_item_count
        report.present_count += done.skipped_memory_item_count
        if progress is not None:
            progress(report.item_count, 0)
    report.seconds = time.monotonic() - started
    return report


def count_langgraph_items(source: LangGraphSource) -> MemoryMoveReport:
    """How many live items `source` holds (a dry run's count)."""
    started = time.monotonic()
    count = sum(1 for _ in _live(source))
    return MemoryMoveReport(item_count=count, seconds=time.monotonic() - started)


def _live(source: LangGraphSource) -> Iterator[LangGraphRow]:
    """The source's rows that have not expired by its own clock."""
    now = source.now_ms()
    return (row for row in source.rows() if row.expires_at is None or to_ms(row.expires_at) > now)


def _stored(store: BlockingStore, items: list[MemoryItemCopy]) -> list[MemoryRow | None]:
    gets = tuple(MemoryGet(item.namespace, item.key) for item in items)
    return store.memory.run(MemoryCall(gets=gets, omit_expired=False)).gets


def _differs(item: MemoryItemCopy, row: MemoryRow | None) -> str | None:
    if row is None:
        return "missing from the store"
    if row.value_json != item.value_json:
        return "the value differs"
    if (row.created_at_ms, row.updated_at_ms) != (item.created_at_ms, item.updated_at_ms):
        return "the times differ"
    if (row.ttl_ms, row.expires_at_ms) != (item.ttl_ms, item.expires_at_ms):
        return "the time to live differs"
    return None


def verify_langgraph_items(source: LangGraphSource, store: BlockingStore) -> MemoryVerifyReport:
    """Read every live source item and its copy back and compare value, times and time to
    live; the first difference (None: none)."""
    started = time.monotonic()
    report = MemoryVerifyReport()
    live = _live(source)
    while batch := list(islice(live, BATCH)):
        items = []
        for row in batch:
            try:
                item = langgraph_item(row, first_label, searched=True)
                check_memory_item(item)
                items.append(item)
            except (ValueError, msgspec.DecodeError):
                continue  # a bad row was refused by the move, and reported there
        for item, copied in zip(items, _stored(store, items), strict=True):
            report.item_count += 1
            reason = _differs(item, copied)
            if reason is not None and report.difference is None:
                report.difference = Difference(item.namespace, item.key, reason)
    report.seconds = time.monotonic() - started
    return report


# --- ADK's SqliteMemoryService -------------------------------------------------------------


def count_adk_memories(path: str | Path) -> MemoryMoveReport:
    """How many memories a `SqliteMemoryService` database holds (a dry run's count)."""
    started = time.monotonic()
    count = sum(1 for _ in adk_rows(path))
    return MemoryMoveReport(item_count=count, seconds=time.monotonic() - started)


async def copy_adk_memories(
    path: str | Path, service: Any, *, progress: Callable[[int, int], None] | None = None
) -> MemoryMoveReport:
    """Add every memory of a `SqliteMemoryService` database to `service` (a
    `TurnstoreMemoryService`) as the event it was made from; those already there as they are
    are left alone. A memory whose content has no text but thoughts is reported, not added
    (the service remembers no thoughts)."""
    from google.adk.events.event import Event
    from google.genai import types

    from turnstore.integrations.adk_memory import ROOT, UNKNOWN_SESSION, content_text

    started = time.monotonic()
    report = MemoryMoveReport()
    scope = lambda row: (row.app_name, row.user_id, row.session_id)  # noqa: E731
    for (app, user, session), group in groupby(adk_rows(path), key=scope):
        while batch := list(islice(group, BATCH)):
            events = []
            for row in batch:
                report.item_count += 1
                content = types.Content.model_validate_json(row.content_json)
                if not content_text(content):
                    place = (ROOT, app, user, session)
                    report.skipped.append(Difference(place, row.event_id, "no text but thoughts"))
                    continue
                events.append(
                    Event(
                        id=row.event_id,
                        author=row.author,
                        timestamp=row.timestamp,
                        content=content,
                        invocation_id="",
                    )
                )
            before = await _present(service, app, user, session, events)
            await service.add_events_to_memory(
                app_name=app,
                user_id=user,
                events=events,
                session_id=None if session == UNKNOWN_SESSION else session,
            )
            report.present_count += before
            report.written_count += len(events) - before
            if progress is not None:
                progress(report.item_count, 0)
    report.seconds = time.monotonic() - started
    return report


async def _present(service: Any, app: str, user: str, session: str, events: list[Any]) -> int:
    """How many of `events` the service holds already with the same text, author and time."""
    found = await _memories(service, app, user, session, [event.id for event in events])
    # A memory deleted with `delete_memory` stays deleted: it is there, as the service keeps it.
    return sum(
        1
        for event, held in zip(events, found, strict=True)
        if held is not None and (held.get("erased") or _adk_difference(event, held) is None)
    )


async def _memories(
    service: Any, app: str, user: str, session: str, ids: list[str]
) -> list[dict[str, Any] | None]:
    from turnstore.integrations.adk_memory import memory_place

    gets = tuple(MemoryGet(*memory_place(app, user, session, one)) for one in ids)
    rows = (await service.store.memory.run(MemoryCall(gets=gets))).gets
    return [None if row is None else msgspec.json.decode(row.value_json) for row in rows]


def _adk_difference(event: Any, held: dict[str, Any]) -> str | None:
    from turnstore.integrations.adk_memory import content_text

    if held.get("erased"):
        return "deleted by delete_memory (a tombstone)"
    if held.get("text") != content_text(event.content):
        return "the text differs"
    if (held.get("author"), held.get("timestamp")) != (event.author, float(event.timestamp)):
        return "the author or time differs"
    return None


async def verify_adk_memories(path: str | Path, service: Any) -> MemoryVerifyReport:
    """Read every source memory with text and its copy back and compare text, author and
    time; the first difference (None: none)."""
    from google.genai import types

    from turnstore.integrations.adk_memory import ROOT, content_text

    started = time.monotonic()
    report = MemoryVerifyReport()
    scope = lambda row: (row.app_name, row.user_id, row.session_id)  # noqa: E731
    for (app, user, session), group in groupby(adk_rows(path), key=scope):
        while batch := list(islice(group, BATCH)):
            rows = [
                (row, content)
                for row in batch
                if content_text(content := types.Content.model_validate_json(row.content_json))
            ]
            held = await _memories(service, app, user, session, [row.event_id for row, _ in rows])
            for (row, content), found in zip(rows, held, strict=True):
                report.item_count += 1
                event = _Event(row.author, row.timestamp, content)
                reason = (
                    "missing from the store" if found is None else _adk_difference(event, found)
                )
                if reason is not None and report.difference is None:
                    report.difference = Difference((ROOT, app, user, session), row.event_id, reason)
    report.seconds = time.monotonic() - started
    return report


class _Event(NamedTuple):
    author: str
    timestamp: float
    content: Any
