"""The demo's doomed worker: commits a turn, starts the next, streams, and waits to be killed.

Run as `python -m turnstore.cli._demo_child PATH`. It reports each milestone on a line of
standard output (`committed SEQ`, `started SEQ`, `streaming N`) so the demo knows where the
last commit was before it kills this process.
"""

from __future__ import annotations

import sys
import time

import turnstore
from turnstore.cli.demo import (
    ANSWER_2,
    CRASH_ID,
    FOLLOW_UP,
    QUESTION,
    REASONING_3,
    Clock,
    ScriptedSession,
    demo_author,
    replies,
)
from turnstore.events import MessageEvent


def report(*words: object) -> None:
    """Tell the demo how far this worker got; flushed, since the kill drops any buffer."""
    print(*words, flush=True)


def work(path: str) -> None:
    """Finish one turn durably, then start a second and stream part of its answer."""
    with turnstore.open_blocking(path) as store:
        session = ScriptedSession(store, Clock(), CRASH_ID)
        answer = replies()[1]
        session.start_turn(
            "turn-1", MessageEvent(author=demo_author(), delivery="turn", text=QUESTION)
        )
        session.model_step(answer)
        session.finish_turn("".join(text for _, text in answer.message))
        report("committed", session.checkpoint.sequence)
        session.start_turn(
            "turn-2", MessageEvent(author=demo_author(), delivery="turn", text=FOLLOW_UP)
        )
        session.start_step()
        session.commit()
        report("started", session.checkpoint.sequence)
        session.stream_reasoning(REASONING_3)
        session.stream_message("final_answer", ANSWER_2[:2])
        report("streaming", len(REASONING_3) + 2)
        # The model would keep streaming here; the demo kills this process instead.
        while True:
            time.sleep(1)


if __name__ == "__main__":
    work(sys.argv[1])
