"""The writer process of the crash test, and the schedules both sides replay.

Run as `python _crash_writer.py SCHEDULE STORE`, where SCHEDULE names one of `SCHEDULES` and
STORE is a SQLite path or a `postgresql://` URL (anything `turnstore.open_blocking`
accepts): one thread per session of the schedule resumes from what `load` returns and saves
forever, printing `ack <session> <sequence>` once each save has returned. The test kills it
at a random instant and replays `Schedule.advance` from an empty checkpoint to know exactly
what each acknowledged sequence must look like.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import traceback
from typing import Any, NamedTuple

from turnstore import (
    ActiveExecution,
    Checkpoint,
    Event,
    ExecutionRecord,
    TimestampedEvent,
    open_blocking,
)
from turnstore.events import (
    TurnCompleteEvent,
    TurnStartedEvent,
    WarningEvent,
)
from turnstore.records import (
    ContextRewrite,
)

ITEMS_PER_SAVE = 3
TURN_EVENTS = 3
"""A save carrying this many events is a whole turn: started, a warning, complete, and a run."""

Step = tuple[Checkpoint, list[Any], ExecutionRecord | None, list[TimestampedEvent]]


def _filler(session_id: str, sequence: int, label: str, size: int) -> str:
    """`size` characters of deterministic, poorly compressible text."""
    seed = hashlib.sha256(f"{session_id}:{sequence}:{label}".encode()).digest()
    chunks = []
    while sum(map(len, chunks)) < size:
        seed = hashlib.sha256(seed).digest()
        chunks.append(seed.hex())
    return "".join(chunks)[:size]


def _event(sequence: int, msg: Any) -> TimestampedEvent:
    return TimestampedEvent(recorded_at_ms=sequence * 1_000, event=Event(msg=msg))


class Schedule(NamedTuple):
    """What a writer saves on each of its sessions, sequence after sequence."""

    name: str
    sessions: tuple[str, ...]
    rewrite_every: int
    """Every `rewrite_every`th sequence rewrites the context to a summary in a new epoch."""
    events_cycle: tuple[int, ...]
    """Events the save of sequence s carries: `events_cycle[s % len(events_cycle)]`.

    `TURN_EVENTS` is a whole turn with an execution record, 1 is a lone warning, and 0 is a
    plain `save` (no events, no execution).
    """
    item_chars: int
    """Filler characters in each appended context item."""
    transcript_chars: int
    """Filler characters of the transcript batch's assistant item (none when 0)."""
    metadata_chars: int
    """Filler characters of a metadata blob (none when 0)."""
    event_chars: int
    """Filler characters in the warning of a turn."""

    def events_at(self, sequence: int) -> int:
        """How many journal events the save of `sequence` carries."""
        return self.events_cycle[sequence % len(self.events_cycle)]

    def events_up_to(self, sequence: int) -> int:
        """How many journal events the saves up to `sequence` carried in all."""
        return sum(self.events_at(s) for s in range(1, sequence + 1))

    def runs_up_to(self, sequence: int) -> int:
        """How many saves up to `sequence` finished an execution."""
        return sum(self.events_at(s) == TURN_EVENTS for s in range(1, sequence + 1))

    def context_length(self, sequence: int) -> int:
        """How many context items the checkpoint saved at `sequence` holds."""
        summary = 1 if sequence >= self.rewrite_every else 0
        return summary + ITEMS_PER_SAVE * (sequence % self.rewrite_every)

    def advance(self, previous: Checkpoint | None, session_id: str) -> Step:
        """The save after `previous` (mutated in place): checkpoint, transcript, execution,
        events."""
        checkpoint = Checkpoint.empty(session_id) if previous is None else previous
        sequence = checkpoint.sequence + 1
        checkpoint.sequence = sequence
        checkpoint.metadata = {"step": sequence}
        if self.metadata_chars:
            checkpoint.metadata["blob"] = _filler(session_id, sequence, "meta", self.metadata_chars)
        if sequence % self.rewrite_every == 0:
            checkpoint.context_epoch += 1
            checkpoint.compaction_count += 1
            checkpoint.last_context_rewrite = ContextRewrite(
                epoch=checkpoint.context_epoch, reasons=["compaction"]
            )
            checkpoint.context = [{"role": "system", "content": f"summary up to {sequence}"}]
        else:
            checkpoint.context.extend(
                {
                    "role": "assistant",
                    "content": f"{session_id} {sequence}.{item} "
                    + _filler(session_id, sequence, f"context {item}", self.item_chars),
                }
                for item in range(ITEMS_PER_SAVE)
            )
        transcript: list[Any] = [{"role": "user", "content": f"{session_id} turn {sequence}"}]
        if self.transcript_chars:
            filler = _filler(session_id, sequence, "transcript", self.transcript_chars)
            transcript.append({"role": "assistant", "content": filler})
        execution = None
        events: list[TimestampedEvent] = []
        if self.events_at(sequence) == TURN_EVENTS:
            turn_id = f"turn-{sequence}"
            checkpoint.active_execution = ActiveExecution(
                submission_id=f"submission-{sequence}",
                turn_id=turn_id,
                started_at_ms=sequence * 1_000,
                model_calls=1,
                tool_calls=sequence % 4,
            )
            execution = checkpoint.finish_execution("completed", sequence * 1_000 + 250)
            warning = f"warning {sequence} " + _filler(
                session_id, sequence, "event", self.event_chars
            )
            events = [
                _event(sequence, TurnStartedEvent(turn_id=turn_id)),
                _event(sequence, WarningEvent(message=warning)),
                _event(sequence, TurnCompleteEvent(turn_id=turn_id)),
            ]
        elif self.events_at(sequence) == 1:
            events = [_event(sequence, WarningEvent(message=f"note {sequence}"))]
        assert len(events) == self.events_at(sequence)
        return checkpoint, transcript, execution, events


MIXED = Schedule(
    name="mixed",
    sessions=("crash-a", "crash-b", "crash-c", "crash-d"),
    rewrite_every=10,
    events_cycle=(TURN_EVENTS, 1, 0),
    item_chars=200,
    transcript_chars=0,
    metadata_chars=0,
    event_chars=0,
)
"""Small saves of every shape: a turn with an execution, a lone event, a plain save."""
LARGE = Schedule(
    name="large",
    sessions=("large-a", "large-b", "large-c"),
    rewrite_every=8,
    events_cycle=(TURN_EVENTS,),
    item_chars=2_000,
    transcript_chars=8_000,
    metadata_chars=32_000,
    event_chars=1_000,
)
"""Every save a whole turn, and large (a 32 KB metadata blob, 2 KB context items, an 8 KB
transcript batch, 1 KB events), so that a kill has a good chance to land while a save is on
the wire."""
SCHEDULES = {schedule.name: schedule for schedule in (MIXED, LARGE)}


def _write_forever(
    store: Any, schedule: Schedule, session_id: str, print_lock: threading.Lock
) -> None:
    checkpoint = store.load(session_id)
    while True:
        checkpoint, transcript, execution, events = schedule.advance(checkpoint, session_id)
        if events:
            store.save_with_events(checkpoint, transcript, execution, events)
        else:
            store.save(checkpoint, transcript, execution)
        with print_lock:
            sys.stdout.write(f"ack {session_id} {checkpoint.sequence}\n")
            sys.stdout.flush()


def main(schedule_name: str, store_url: str) -> None:
    """Save on every session of the schedule from its own thread until killed."""
    schedule = SCHEDULES[schedule_name]
    store = open_blocking(store_url)
    print_lock = threading.Lock()
    failed = threading.Event()

    def run(session_id: str) -> None:
        try:
            _write_forever(store, schedule, session_id, print_lock)
        except BaseException:
            traceback.print_exc()
            failed.set()

    for session_id in schedule.sessions:
        threading.Thread(target=run, args=(session_id,), daemon=True).start()
    failed.wait()
    sys.stderr.flush()
    sys.exit(3)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SCHEDULES:
        sys.exit(f"usage: _crash_writer.py {{{','.join(SCHEDULES)}}} STORE")
    main(sys.argv[1], sys.argv[2])
