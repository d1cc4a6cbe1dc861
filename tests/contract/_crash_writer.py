"""The writer process of the crash test, and the schedule both sides replay.

Run as `python _crash_writer.py STORE`, where STORE is a SQLite path or a `postgresql://`
URL (anything `turnstore.open_blocking` accepts): one thread per session resumes from what
`load` returns and saves forever, printing `ack <session> <sequence>` once each save has
returned. The test kills it at a random instant and replays `advance` from an empty
checkpoint to know exactly what each acknowledged sequence must look like.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from turnstore import (
    ActiveExecution,
    Checkpoint,
    ContextRewrite,
    Event,
    ExecutionRecord,
    TimestampedEvent,
    TurnCompleteEvent,
    TurnStartedEvent,
    WarningEvent,
    open_blocking,
)

SESSIONS = ("crash-a", "crash-b", "crash-c", "crash-d")
REWRITE_EVERY = 10
"""Every tenth sequence rewrites the context to a summary in a new epoch."""
ITEMS_PER_SAVE = 3

Step = tuple[Checkpoint, list[Any], ExecutionRecord | None, list[TimestampedEvent]]


def _event(sequence: int, msg: Any) -> TimestampedEvent:
    return TimestampedEvent(recorded_at_ms=sequence * 1_000, event=Event(msg=msg))


def events_at(sequence: int) -> int:
    """How many journal events the save of `sequence` carries."""
    return (3, 1, 0)[sequence % 3]


def context_length(sequence: int) -> int:
    """How many context items the checkpoint saved at `sequence` holds."""
    summary = 1 if sequence >= REWRITE_EVERY else 0
    return summary + ITEMS_PER_SAVE * (sequence % REWRITE_EVERY)


def advance(previous: Checkpoint | None, session_id: str) -> Step:
    """Return the next save after `previous`: checkpoint, transcript, execution, events."""
    checkpoint = Checkpoint.empty(session_id) if previous is None else previous
    sequence = checkpoint.sequence + 1
    checkpoint.sequence = sequence
    checkpoint.metadata = {"step": sequence}
    if sequence % REWRITE_EVERY == 0:
        checkpoint.context_epoch += 1
        checkpoint.compaction_count += 1
        checkpoint.last_context_rewrite = ContextRewrite(
            epoch=checkpoint.context_epoch, reasons=["compaction"]
        )
        checkpoint.context = [{"role": "system", "content": f"summary up to {sequence}"}]
    else:
        checkpoint.context.extend(
            {"role": "assistant", "content": f"{session_id} {sequence}.{index} " + "x" * 200}
            for index in range(ITEMS_PER_SAVE)
        )
    transcript = [{"sequence": sequence, "text": f"{session_id} said {sequence}"}]
    execution = None
    events: list[TimestampedEvent] = []
    if sequence % 3 == 0:
        turn = f"turn-{sequence}"
        checkpoint.active_execution = ActiveExecution(
            submission_id=f"submission-{sequence}",
            turn_id=turn,
            started_at_ms=sequence * 1_000,
            model_calls=1,
            tool_calls=2,
        )
        execution = checkpoint.finish_execution("completed", sequence * 1_000 + 7)
        events = [
            _event(sequence, TurnStartedEvent(turn_id=turn)),
            _event(sequence, WarningEvent(message=f"warning {sequence}")),
            _event(sequence, TurnCompleteEvent(turn_id=turn)),
        ]
    elif sequence % 3 == 1:
        events = [_event(sequence, WarningEvent(message=f"note {sequence}"))]
    assert len(events) == events_at(sequence)
    return checkpoint, transcript, execution, events


def _write_forever(store: Any, session_id: str, print_lock: threading.Lock) -> None:
    checkpoint = store.load(session_id)
    while True:
        checkpoint, transcript, execution, events = advance(checkpoint, session_id)
        if events:
            store.save_with_events(checkpoint, transcript, execution, events)
        else:
            store.save(checkpoint, transcript, execution)
        with print_lock:
            sys.stdout.write(f"ack {session_id} {checkpoint.sequence}\n")
            sys.stdout.flush()


def main(store_url: str) -> None:
    """Save on every session of the store at `store_url` from its own thread until killed."""
    store = open_blocking(store_url)
    print_lock = threading.Lock()
    failed = threading.Event()

    def run(session_id: str) -> None:
        try:
            _write_forever(store, session_id, print_lock)
        except BaseException:
            failed.set()
            raise

    threads = [threading.Thread(target=run, args=(session,), daemon=True) for session in SESSIONS]
    for thread in threads:
        thread.start()
    failed.wait()
    sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1])
