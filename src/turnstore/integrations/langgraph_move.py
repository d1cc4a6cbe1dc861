"""LangGraph threads moved between any two checkpointers, through LangGraph's saver API.

    from turnstore.integrations.langgraph_move import copy_threads, verify_threads

    report = copy_threads(SqliteSaver(conn), TurnstoreSaver("sqlite:///agent.db"))
    assert verify_threads(source, target).difference is None

The copy reads its source through `get_tuple` only and writes its target through `put` and
`put_writes`, so it serves `SqliteSaver`, `PostgresSaver`, `InMemorySaver`, `TurnstoreSaver`
and any other `BaseCheckpointSaver`, in either direction; `acopy_threads` and
`averify_threads` do the same from an event loop, for `AsyncSqliteSaver` and
`AsyncPostgresSaver` too. A saver cannot list its threads,
and `get_tuple` gives pending writes without their `task_path`: for the savers named here both
are read from the saver's own tables (`SaverTables`); for any other saver the caller names the
threads, and their writes go without a task path.

One thread at a time, oldest checkpoint first (a parent before its children), every namespace:
memory holds one thread's few recent checkpoints, never the source. A checkpoint already on
the target is compared, not written: equal, it is skipped (its missing writes added); different,
it is a conflict, reported and left as it is. So a run killed at any point, or run again after
the source has grown, copies only what the target lacks.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, NamedTuple

from turnstore.errors import CorruptRecord
from turnstore.integrations import requires_extra

with requires_extra(__name__, "LangGraph", "langgraph"):
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        Checkpoint,
        CheckpointTuple,
    )

    from turnstore.integrations import _langgraph_compare as compare
    from turnstore.integrations._langgraph_compare import IGNORED_METADATA, OWNER_KEYS
    from turnstore.integrations._langgraph_tables import (
        Place,
        SaverTables,
        config_of,
        new_versions,
        place_of,
        shared_values,
        tables_of,
    )
    from turnstore.integrations.langgraph import TurnstoreSaver

Progress = Callable[[int, int], None]
"""Called after each thread: (threads done, threads in all; 0 when not known)."""
Read = tuple[Place, CheckpointTuple, dict[str, str]]
"""A source checkpoint read for the copy, with the task paths of its writes."""

RECENT = 16
"""Checkpoints of a thread kept while copying it, to find a child's parent among them."""


class Problem(NamedTuple):
    """A checkpoint the copy did not copy, and why: a conflict or an unreadable source row."""

    place: Place
    reason: str


@dataclass
class MoveReport:
    """What one copy did."""

    thread_count: int = 0
    checkpoint_count: int = 0
    """Checkpoints written to the target."""
    present_count: int = 0
    """Checkpoints the target already held, equal to the source's (not written again)."""
    write_count: int = 0
    """Pending writes written to the target."""
    conflicts: list[Problem] = field(default_factory=list)
    """Target checkpoints that differ from the source's: reported, never overwritten."""
    skipped: list[Problem] = field(default_factory=list)
    """Source checkpoints that could not be read, skipped because `skip_bad` was set."""
    seconds: float = 0.0


@dataclass
class VerifyReport:
    """What a verify compared, and the first difference it found (None: the same)."""

    thread_count: int = 0
    checkpoint_count: int = 0
    difference: Problem | None = None
    seconds: float = 0.0
    last_id: str = ""
    """The checkpoint the listing being compared reached (to place a row it cannot read)."""


@dataclass
class Survey:
    """What a copy would read: threads, checkpoints and the source's bytes (a dry run)."""

    thread_count: int = 0
    checkpoint_count: int = 0
    source_bytes: int | None = None


def survey(source: BaseCheckpointSaver[Any], thread_ids: Sequence[str] | None = None) -> Survey:
    """What `copy_threads` would read, without reading a checkpoint (a dry run)."""
    tables = tables_of(source, thread_ids)
    found = Survey(source_bytes=tables.size())
    for thread_id in tables.thread_ids():
        found.thread_count += 1
        found.checkpoint_count += sum(1 for _ in tables.checkpoint_ids(thread_id))
    return found


def copy_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    *,
    thread_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """Copy every checkpoint and pending write the target lacks, thread by thread.

    The source is only read. `owner_id` owns the threads the copy creates in a turnstore
    target (else each thread's metadata `owner_id` / `user_id`); `skip_bad` skips source
    checkpoints that cannot be read (reported) instead of stopping at the first.
    """
    started = time.monotonic()
    tables = tables_of(source, thread_ids)
    total = len(thread_ids) if thread_ids is not None else 0
    report = MoveReport()
    for thread_id in tables.thread_ids():
        copy = _ThreadCopy(source, target, tables, thread_id, owner_id, skip_bad, report)
        with _thread_durability(target), _shared_reads(source):
            copy.run()
        report.thread_count += 1
        if progress is not None:
            progress(report.thread_count, total)
    report.seconds = time.monotonic() - started
    return report


def _thread_durability(target: BaseCheckpointSaver[Any]) -> AbstractContextManager[None]:
    """One fsync a thread instead of one a put: a copy killed or cut off is run again."""
    if isinstance(target, TurnstoreSaver):
        return target.deferred_durability()
    return nullcontext()


def _shared_reads(*savers: BaseCheckpointSaver[Any]) -> ExitStack[bool | None]:
    """A turnstore saver's reads of a thread's checkpoints in turn decode only what each adds
    (neither the copy nor the verify changes a value it reads)."""
    stack = ExitStack()
    for saver in savers:
        if isinstance(saver, TurnstoreSaver):
            stack.enter_context(saver.shared_reads())
    return stack


class _ThreadCopy:
    """One thread's copy: oldest checkpoint first, each compared with the target's."""

    def __init__(
        self,
        source: BaseCheckpointSaver[Any],
        target: BaseCheckpointSaver[Any],
        tables: SaverTables,
        thread_id: str,
        owner_id: str | None,
        skip_bad: bool,
        report: MoveReport,
    ) -> None:
        self.source, self.target, self.tables = source, target, tables
        self.thread_id, self.owner_id, self.skip_bad = thread_id, owner_id, skip_bad
        self.report = report
        self.owned = not isinstance(target, TurnstoreSaver)
        # A child's parent is nearly always among the last few checkpoints copied; keeping
        # them lets the child share its parent's unchanged values (see `shared_values`).
        self.recent: OrderedDict[tuple[str, str], Checkpoint] = OrderedDict()
        self.empty: bool | None = None
        """Whether the target held none of the thread when the copy began (None: not asked)."""

    def run(self) -> None:
        # One thread: the source's decoding holds the GIL, and a writer thread beside it
        # waited out a switch interval at each of its statements (measured: slower overall).
        for read in self._reads():
            self._copy(read)

    def _reads(self) -> Iterator[Read]:
        """The source side alone: its checkpoints oldest first, each with its task paths."""
        for ns, checkpoint_id in self.tables.checkpoint_ids(self.thread_id):
            place = Place(self.thread_id, ns, checkpoint_id)
            item = self._read(place)
            if item is not None:
                paths = self.tables.task_paths(place) if item.pending_writes else {}
                yield place, item, paths

    def _read(self, place: Place) -> CheckpointTuple | None:
        try:
            return self.source.get_tuple(config_of(*place))
        except Exception as error:
            reason = f"cannot be read: {type(error).__name__}: {error}"
            if not self.skip_bad:
                failure = CorruptRecord(f"{place} {reason}")
                failure.add_note("skip_bad=True skips such checkpoints and reports them")
                raise failure from error
            self.report.skipped.append(Problem(place, reason))
            return None

    def _copy(self, read: Read) -> None:
        """The target side alone: write a checkpoint, or compare it with the target's."""
        place, item, paths = read
        existing = self._existing(place)
        if existing is not None:
            self._compare(place, item, paths, existing)
            return
        parent_id = compare.parent_id(item)
        parent = None if parent_id is None else self.recent.get((place.checkpoint_ns, parent_id))
        checkpoint = shared_values(item.checkpoint, parent)
        config = config_of(self.thread_id, place.checkpoint_ns, parent_id)
        config["configurable"].update(self._owner(item))
        versions = new_versions(checkpoint, parent)
        writes = item.pending_writes or []
        if isinstance(self.target, TurnstoreSaver):
            # One commit for the checkpoint and its writes, where LangGraph's API takes two.
            calls = _write_calls(writes, paths)
            self.target.put_with_writes(config, checkpoint, item.metadata, versions, calls)
            self.report.write_count += len(writes)
        else:
            self.target.put(config, checkpoint, item.metadata, versions)
            self.report.write_count += self._put_writes(place, writes, paths)
        self.report.checkpoint_count += 1
        self._keep(place, checkpoint)

    def _existing(self, place: Place) -> CheckpointTuple | None:
        """The target's checkpoint at `place`, not asked for when the thread was new to it.

        A thread the target lacked at the start holds only what this copy wrote, each place
        once: one probe instead of a `get_tuple` per checkpoint of a first copy."""
        if self.empty is None:
            thread: RunnableConfig = {"configurable": {"thread_id": self.thread_id}}
            self.empty = next(iter(self.target.list(thread, limit=1)), None) is None
        return None if self.empty else self.target.get_tuple(config_of(*place))

    def _owner(self, item: CheckpointTuple) -> dict[str, str]:
        """The owner for the config of a thread's first put into turnstore (it owns the thread)."""
        if self.owned:
            return {}
        self.owned = True
        if self.owner_id is not None:
            return {"owner_id": self.owner_id}
        for key in OWNER_KEYS:
            value = item.metadata.get(key)
            if isinstance(value, str) and value:
                # Under its own key, so the stored metadata stays as the source's.
                return {key: value}
        return {}

    def _compare(
        self, place: Place, item: CheckpointTuple, paths: dict[str, str], existing: CheckpointTuple
    ) -> None:
        self.owned = True
        difference = compare.difference(item, existing, writes=False)
        if difference is None and not compare.same(item.pending_writes, existing.pending_writes):
            # Writes the source took after an earlier run: put them all again (a put of a
            # write already stored changes nothing), then compare once more.
            self.report.write_count += self._put_writes(place, item.pending_writes or [], paths)
            existing = self.target.get_tuple(config_of(*place)) or existing
            difference = compare.difference(item, existing, writes=True)
        if difference is not None:
            self.report.conflicts.append(Problem(place, difference))
            return
        self.report.present_count += 1
        self._keep(place, existing.checkpoint)

    def _keep(self, place: Place, checkpoint: Checkpoint) -> None:
        self.recent[place[1:]] = checkpoint
        if len(self.recent) > RECENT:
            self.recent.popitem(last=False)

    def _put_writes(
        self, place: Place, writes: Sequence[tuple[str, str, Any]], paths: dict[str, str]
    ) -> int:
        """Put a checkpoint's writes, call by call (`_write_calls`)."""
        config = config_of(*place)
        for task_id, path, task_writes in _write_calls(writes, paths):
            self.target.put_writes(config, task_writes, task_id, path)
        return len(writes)


def _write_calls(
    writes: Sequence[tuple[str, str, Any]], paths: dict[str, str]
) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """A checkpoint's writes as the `put_writes` calls that give each write its index again,
    each with its task path: a task's ordinary writes in one call (index 0, 1, …), each
    special write (error, interrupt, …) alone (its fixed index)."""
    calls: list[tuple[str, str, list[tuple[str, Any]]]] = []
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in writes:
        if channel in WRITES_IDX_MAP:
            calls.append((task_id, paths.get(task_id, ""), [(channel, value)]))
        else:
            tasks.setdefault(task_id, []).append((channel, value))
    calls += [(task_id, paths.get(task_id, ""), found) for task_id, found in tasks.items()]
    return calls


async def acopy_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    *,
    thread_ids: Sequence[str] | None = None,
    owner_id: str | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> MoveReport:
    """`copy_threads` from an event loop, for `AsyncSqliteSaver` and `AsyncPostgresSaver` too.

    The copy runs in a worker thread, whose calls an async saver sends to its own loop (this
    one); `progress` is called from that thread.
    """
    return await asyncio.to_thread(
        copy_threads,
        source,
        target,
        thread_ids=thread_ids,
        owner_id=owner_id,
        skip_bad=skip_bad,
        progress=progress,
    )


def verify_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    *,
    thread_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Read each thread back through both savers and compare them field by field.

    Both listings (newest first, every namespace, pending writes included) are walked side by
    side; then each namespace's newest checkpoint through `get_tuple`, and the delta channels'
    history where the thread has any. Stops at the first difference, which names its place.
    """
    started = time.monotonic()
    tables = tables_of(source, thread_ids)
    total = len(thread_ids) if thread_ids is not None else 0
    report = VerifyReport()
    for thread_id in tables.thread_ids():
        with _shared_reads(source, target):
            report.difference = _verify_thread(source, target, thread_id, report)
        report.thread_count += 1
        if progress is not None:
            progress(report.thread_count, total)
        if report.difference is not None:
            break
    report.seconds = time.monotonic() - started
    return report


async def averify_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    *,
    thread_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """`verify_threads` from an event loop (see `acopy_threads`)."""
    return await asyncio.to_thread(
        verify_threads, source, target, thread_ids=thread_ids, progress=progress
    )


def _verify_thread(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    thread_id: str,
    report: VerifyReport,
) -> Problem | None:
    # Namespace by namespace: savers order one namespace's listing by id, but not all of
    # them order a whole thread's that way (InMemorySaver lists namespace after namespace).
    spaces = {ns for side in (source, target) for ns, _ in _thread_ids(side, thread_id)}
    for ns in sorted(spaces):
        try:
            problem = _verify_namespace(source, target, thread_id, ns, report)
        except Exception as error:
            # A row one saver cannot decode (a copy run with skip_bad skipped it): a
            # difference, named by where the listing stopped.
            place = Place(thread_id, ns, report.last_id)
            return Problem(place, f"a listing cannot be read: {type(error).__name__}: {error}")
        if problem is not None:
            return problem
    return None


def _verify_namespace(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    thread_id: str,
    ns: str,
    report: VerifyReport,
) -> Problem | None:
    listed = config_of(thread_id, ns)
    newest = None
    report.last_id = "(the newest)"
    for a, b in zip_longest(source.list(listed), target.list(listed)):
        if a is None or b is None:
            side = "target" if a is None else "source"
            return Problem(place_of(a or b), f"only the {side} has this checkpoint")
        report.checkpoint_count += 1
        report.last_id = f"(after {place_of(a).checkpoint_id})"
        if place_of(a) != place_of(b):
            return Problem(place_of(a), f"the target lists {place_of(b)} in its place")
        difference = compare.difference(a, b, writes=True)
        if difference is not None:
            return Problem(place_of(a), difference)
        newest = newest or a
    return None if newest is None else _verify_latest(source, target, thread_id, ns, newest)


def _thread_ids(saver: BaseCheckpointSaver[Any], thread_id: str) -> Iterator[tuple[str, str]]:
    return tables_of(saver, [thread_id]).checkpoint_ids(thread_id)


def _verify_latest(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    thread_id: str,
    ns: str,
    listed: CheckpointTuple,
) -> Problem | None:
    """A namespace's newest checkpoint as a graph resumes from it, on both sides."""
    config = config_of(thread_id, ns)
    a, b = source.get_tuple(config), target.get_tuple(config)
    if a is None or b is None:
        return Problem(place_of(listed), "get_tuple finds no checkpoint on one side")
    difference = compare.difference(a, b, writes=True)
    if difference is not None:
        return Problem(place_of(a), f"get_tuple: {difference}")
    counters = a.metadata.get("counters_since_delta_snapshot") or {}
    if counters:
        channels = sorted(counters)
        at = config_of(*place_of(a))
        history_a = source.get_delta_channel_history(config=at, channels=channels)
        history_b = target.get_delta_channel_history(config=at, channels=channels)
        if not compare.same(dict(history_a), dict(history_b)):
            return Problem(place_of(a), f"delta history of {channels}")
    return None


__all__ = [
    "IGNORED_METADATA",
    "OWNER_KEYS",
    "RECENT",
    "MoveReport",
    "Place",
    "Problem",
    "Progress",
    "SaverTables",
    "Survey",
    "VerifyReport",
    "acopy_threads",
    "averify_threads",
    "config_of",
    "copy_threads",
    "survey",
    "tables_of",
    "verify_threads",
]
