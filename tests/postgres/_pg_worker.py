"""Worker processes of the PostgreSQL concurrency and setup tests.

Every worker runs in its own process (started with the `spawn` method) and opens its own
store, so the races they run are races between processes, as between hosts sharing one
database. `run` is the entry point of a spawned worker: it calls the named worker and puts
`(index, "ok", result)` or `(index, "error", traceback)` on the results queue. Results are
plain tuples, lists and dicts. The crash test's writer, shared by every backend, is
`tests/contract/_crash_writer.py`.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import random
import time
import traceback
from collections.abc import Callable
from typing import Any

import turnstore
from turnstore import (
    Checkpoint,
    Event,
    EventPageRequest,
    SequenceConflict,
    TimestampedEvent,
    TurnstoreError,
)
from turnstore.events import (
    WarningEvent,
)
from turnstore.records import (
    JournalEvent,
)

BARRIER_TIMEOUT_S = 60.0
SPAWN = multiprocessing.get_context("spawn")

Op = dict[str, Any]


def with_params(url: str, **params: object) -> str:
    """`url` with more query parameters."""
    extra = "&".join(f"{key}={value}" for key, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}" if extra else url


class Workers:
    """Worker processes started with `spawn`, each running one function of this module.

    Use as a context manager: on exit every worker still running is killed, so a failed
    test leaves no process behind.
    """

    def __init__(self) -> None:
        self.queue: Any = SPAWN.Queue()
        self.processes: dict[int, Any] = {}
        self.names: dict[int, str] = {}
        self.results: dict[int, Any] = {}

    def start(self, name: str, **kwargs: Any) -> int:
        """Start worker `name` with `kwargs` in a new process; return its index."""
        index = len(self.processes)
        process = SPAWN.Process(
            target=run, args=(self.queue, index, name, kwargs), name=f"{name}-{index}"
        )
        process.start()
        self.processes[index] = process
        self.names[index] = name
        return index

    def _receive(self, timeout: float) -> bool:
        """Take one report off the queue; False if none came within `timeout`."""
        exited = {i for i, p in self.processes.items() if p.exitcode is not None}
        try:
            index, status, value = self.queue.get(timeout=timeout)
        except queue_module.Empty:
            # A worker that had exited before the wait began and still reported nothing
            # died without reporting (a report is flushed before its process exits).
            dead = sorted(i for i in exited if i not in self.results)
            if dead:
                raise AssertionError(
                    f"workers {[(self.names[i], self.processes[i].exitcode) for i in dead]}"
                    " exited without a result"
                ) from None
            return False
        if status != "ok":
            raise AssertionError(f"worker {self.names[index]}-{index} failed:\n{value}")
        self.results[index] = value
        return True

    def wait(self, indices: list[int], timeout_s: float) -> dict[int, Any]:
        """Wait for the results of `indices`; fail if one fails or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        while missing := [i for i in indices if i not in self.results]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                names = [f"{self.names[i]}-{i}" for i in missing]
                raise AssertionError(f"workers {names} gave no result within {timeout_s}s")
            self._receive(min(remaining, 0.5))
        return {index: self.results[index] for index in indices}

    def reported(self, index: int, timeout_s: float = 0.0) -> bool:
        """Whether worker `index` has reported, taking reports for up to `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while index not in self.results:
            remaining = deadline - time.monotonic()
            if not self._receive(max(remaining, 0.01)) and remaining <= 0:
                break
        return index in self.results

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes.values():
            if process.is_alive():
                process.kill()
        for process in self.processes.values():
            process.join(timeout=30)
        self.queue.close()
        self.queue.join_thread()


def run(queue: Any, index: int, name: str, kwargs: dict[str, Any]) -> None:
    """Run worker `name` and report its result (or its traceback) on `queue`."""
    try:
        result = WORKERS[name](index, **kwargs)
    except BaseException:
        queue.put((index, "error", traceback.format_exc()))
    else:
        queue.put((index, "ok", result))


def _error(error: BaseException) -> tuple[str, str, bool | None]:
    """(type name, message, retryable) of an error, for the parent to judge."""
    return type(error).__name__, str(error), getattr(error, "retryable", None)


def warning(message: str, recorded_at_ms: int = 0) -> TimestampedEvent:
    """A journaled (non-transient, non-compacting) event carrying `message`."""
    return TimestampedEvent(
        recorded_at_ms=recorded_at_ms, event=Event(msg=WarningEvent(message=message))
    )


def event_message(event: JournalEvent) -> str:
    """The message of a journaled warning event."""
    msg = event.event.msg
    assert isinstance(msg, WarningEvent), msg
    return msg.message


# --- 1. racing saves at one sequence ----------------------------------------------------------


def racing_checkpoint(session_id: str, writer: int, sequence: int) -> Checkpoint:
    """The checkpoint writer `writer` tries to save at `sequence`: recognisably its own."""
    checkpoint = Checkpoint.empty(session_id)
    checkpoint.sequence = sequence
    # A new epoch per sequence: every writer's context replaces the stored one.
    checkpoint.context_epoch = sequence
    checkpoint.context = [{"writer": writer, "sequence": sequence}]
    checkpoint.metadata = {"writer": writer, "sequence": sequence}
    return checkpoint


def racing_saver(
    index: int, url: str, session_id: str, rounds: int, barrier: Any
) -> list[tuple[int, str, str]]:
    """Each round, wait for every racer, then save `session_id` at the round's sequence."""
    outcomes: list[tuple[int, str, str]] = []
    with turnstore.open_blocking(url) as store:
        for sequence in range(1, rounds + 1):
            barrier.wait(BARRIER_TIMEOUT_S)
            try:
                store.save_with_events(
                    racing_checkpoint(session_id, index, sequence),
                    [{"writer": index, "sequence": sequence}],
                    None,
                    [warning(f"writer {index} sequence {sequence}", sequence)],
                )
            except TurnstoreError as error:
                outcomes.append((sequence, type(error).__name__, str(error)))
            else:
                outcomes.append((sequence, "won", ""))
    return outcomes


# --- 2. event sequences ----------------------------------------------------------------------


def event_writer(
    index: int,
    url: str,
    session_ids: list[str],
    operations: int,
    events_per_save: int,
    barrier: Any,
    seed: int,
) -> dict[str, Any]:
    """Interleave `append_event` and `save_with_events` on a few shared sessions.

    Return every acknowledged event as (session, sequence, recorded_at_ms, message), the
    sequences of each acknowledged save's events, and how many saves lost a race.
    """
    rng = random.Random(seed)
    acked: list[tuple[str, int, int, str]] = []
    save_batches: list[tuple[str, list[int]]] = []
    conflicts = 0
    with turnstore.open_blocking(url) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        for number in range(operations):
            session_id = rng.choice(session_ids)
            recorded_at_ms = index * 1_000_000 + number
            if rng.random() < 0.5:
                message = f"append w{index} n{number}"
                stored = store.append_event(
                    session_id, recorded_at_ms, Event(msg=WarningEvent(message=message))
                )
                assert event_message(stored) == message
                acked.append((session_id, stored.sequence, stored.recorded_at_ms, message))
                continue
            for attempt in range(100):
                checkpoint = store.load(session_id)
                assert checkpoint is not None
                checkpoint.sequence += 1
                checkpoint.metadata = {"writer": index, "number": number}
                events = [
                    warning(f"save w{index} n{number} a{attempt} e{e}", recorded_at_ms)
                    for e in range(events_per_save)
                ]
                try:
                    stored_events = store.save_with_events(
                        checkpoint, [{"writer": index, "number": number}], None, events
                    )
                except SequenceConflict:
                    conflicts += 1
                    continue
                # One save's events are journaled in order, at consecutive sequences.
                assert [(e.recorded_at_ms, e.event) for e in stored_events] == [
                    (e.recorded_at_ms, e.event) for e in events
                ]
                for stored in stored_events:
                    acked.append(
                        (session_id, stored.sequence, stored.recorded_at_ms, event_message(stored))
                    )
                save_batches.append((session_id, [stored.sequence for stored in stored_events]))
                break
            else:
                raise AssertionError("a save lost 100 races in a row")
    return {"acked": acked, "save_batches": save_batches, "conflicts": conflicts}


# --- 3. forks against an advancing parent ----------------------------------------------------


def parent_advancer(
    index: int, url: str, parent_id: str, stop: Any, barrier: Any, max_saves: int
) -> dict[str, Any]:
    """Advance the parent by one sequence at a time until told to stop."""
    acked: list[int] = []
    conflicts = 0
    with turnstore.open_blocking(url) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        while not stop.is_set() and len(acked) < max_saves:
            checkpoint = store.load(parent_id)
            assert checkpoint is not None
            checkpoint.sequence += 1
            checkpoint.metadata = {"writer": index}
            sequence = checkpoint.sequence
            try:
                store.save(checkpoint, [{"sequence": sequence, "writer": index}])
            except SequenceConflict:
                conflicts += 1
                continue
            acked.append(sequence)
    return {"acked": acked, "conflicts": conflicts}


FORK_KINDS = ("summary", "load", "future", "historical")


def forker(index: int, url: str, parent_id: str, forks: int, barrier: Any) -> list[Op]:
    """Fork children of the parent at the sequence just read (or one past it)."""
    records: list[Op] = []
    with turnstore.open_blocking(url) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        for number in range(forks):
            kind = FORK_KINDS[number % len(FORK_KINDS)]
            if kind == "load":
                loaded = store.load(parent_id)
                assert loaded is not None
                read = loaded.sequence
            else:
                summary = store.session_summary(parent_id)
                assert summary is not None
                read = summary.sequence
            point = {"future": read + 1, "historical": max(1, read - 2)}.get(kind, read)
            child_id = f"child-{index}-{number}"
            record: Op = {"child": child_id, "kind": kind, "read": read, "point": point}
            try:
                forked = store.fork(parent_id, point, Checkpoint.empty(child_id))
            except TurnstoreError as error:
                record["error"] = _error(error)
            else:
                after = store.session_summary(parent_id)
                assert after is not None
                record["after"] = after.sequence
                record["summary"] = (
                    forked.session_id,
                    forked.parent_session_id,
                    forked.parent_sequence,
                    forked.sequence,
                )
            records.append(record)
    return records


# --- 4. deleting trees under concurrent saves and forks --------------------------------------


def tree_mutator(
    index: int,
    url: str,
    nodes: dict[str, list[str]],
    duration_s: float,
    barrier: Any,
    seed: int,
) -> list[Op]:
    """Save, fork and write session-scoped state inside the trees for `duration_s`.

    Each operation is logged with its monotonic start and end (one clock for all processes
    of the host), its outcome, and the error type of a failure. An exception that is not a
    `TurnstoreError` is logged as `unexpected`.
    """
    rng = random.Random(seed)
    known = {tree: list(ids) for tree, ids in nodes.items()}
    log: list[Op] = []
    with turnstore.open_blocking(url) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        deadline = time.monotonic() + duration_s
        number = 0
        while known and time.monotonic() < deadline:
            number += 1
            tree = rng.choice(sorted(known))
            node = rng.choice(known[tree])
            roll = rng.random()
            op: Op = {"tree": tree, "node": node, "start": time.monotonic_ns()}
            try:
                if roll < 0.45:
                    op["kind"] = "save"
                    checkpoint = store.load(node)
                    if checkpoint is None:
                        op["kind"] = "load-missing"
                    else:
                        checkpoint.sequence += 1
                        checkpoint.metadata = {"writer": index, "number": number}
                        checkpoint.context.append({"writer": index, "number": number})
                        store.save_with_events(
                            checkpoint,
                            [{"writer": index, "number": number}],
                            None,
                            [warning(f"w{index} n{number}", number)],
                        )
                        op["sequence"] = checkpoint.sequence
                elif roll < 0.8:
                    op["kind"] = "fork"
                    child = f"{tree}.w{index}.{number}"
                    op["child"] = child
                    summary = store.session_summary(node)
                    if summary is None:
                        op["kind"] = "load-missing"
                    else:
                        op["point"] = summary.sequence
                        store.fork(node, summary.sequence, Checkpoint.empty(child))
                        known[tree].append(child)
                else:
                    op["kind"] = "state"
                    store.save_state(node, "progress", {"writer": index, "number": number})
            except TurnstoreError as error:
                op["error"] = _error(error)
            except Exception as error:
                op["unexpected"] = repr(error)
            op["end"] = time.monotonic_ns()
            log.append(op)
            if op["kind"] == "load-missing":
                # Deleted: spend the time on the trees still there, where deletions race.
                known[tree].remove(node)
                if not known[tree]:
                    del known[tree]
    return log


def tree_deleter(
    index: int, url: str, deletions: list[list[str]], pause_s: float, barrier: Any, seed: int
) -> list[Op]:
    """Delete each group of trees once, first together with an absent id (deleting nothing)."""
    rng = random.Random(seed)
    log: list[Op] = []
    with turnstore.open_blocking(url) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        for roots in deletions:
            time.sleep(rng.uniform(0.1, pause_s))
            for ids in ([*roots, f"absent-{index}"], roots):
                op: Op = {"ids": ids, "start": time.monotonic_ns()}
                try:
                    op["result"] = store.delete_sessions(ids)
                except TurnstoreError as error:
                    op["error"] = _error(error)
                except Exception as error:
                    op["unexpected"] = repr(error)
                op["end"] = time.monotonic_ns()
                log.append(op)
    return log


# --- 5. no global lock -----------------------------------------------------------------------


def one_save(index: int, url: str, session_id: str, sequence: int) -> tuple[int, int]:
    """Save `session_id` at `sequence`; return the monotonic instants around the save."""
    with turnstore.open_blocking(url) as store:
        checkpoint = store.load(session_id)
        assert checkpoint is not None
        checkpoint.sequence = sequence
        checkpoint.metadata = {"writer": index}
        started = time.monotonic_ns()
        store.save(checkpoint, [{"writer": index, "sequence": sequence}])
        return started, time.monotonic_ns()


# --- 6. opening at once ----------------------------------------------------------------------


def opener(index: int, url: str, barrier: Any) -> tuple[int, int]:
    """Open the store at the same instant as the other openers, then save and load."""
    barrier.wait(BARRIER_TIMEOUT_S)
    with turnstore.open_blocking(url) as store:
        session_id = f"opener-{index}"
        checkpoint = Checkpoint.empty(session_id)
        checkpoint.sequence = 1
        store.save(checkpoint, [{"opener": index}])
        loaded = store.load(session_id)
        assert loaded is not None
        events = store.event_page(session_id, EventPageRequest(limit=1))
        return loaded.sequence, events.latest_sequence


WORKERS: dict[str, Callable[..., Any]] = {
    "racing_saver": racing_saver,
    "event_writer": event_writer,
    "parent_advancer": parent_advancer,
    "forker": forker,
    "tree_mutator": tree_mutator,
    "tree_deleter": tree_deleter,
    "one_save": one_save,
    "opener": opener,
}
