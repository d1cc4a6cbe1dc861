"""A separate writer process: it adds one turn to a session while the viewer watches.

Usage: python _live_writer.py URL SESSION_ID TURN_ID QUESTION ANSWER
It prints "started" once the turn's start is committed, then streams reasoning and the answer
and finishes the turn.
"""

from __future__ import annotations

import sys
import time

from sessions import finish_turn, start_turn, stream_answer, stream_reasoning

import turnstore


def main() -> None:
    url, session_id, turn_id, question, answer = sys.argv[1:6]
    with turnstore.open_blocking(url) as store:
        checkpoint = store.load(session_id)
        assert checkpoint is not None, f"no session {session_id!r}"
        started = start_turn(store, checkpoint, turn_id, question)
        print("started", flush=True)
        time.sleep(0.6)
        stream_reasoning(store, checkpoint, turn_id, ["Thinking about ", "the question."])
        words = answer.split(" ")
        for index in range(0, len(words), 3):
            stream_answer(store, checkpoint, turn_id, [" ".join(words[index : index + 3]) + " "])
            time.sleep(0.15)
        # Long enough for the watcher to see the streamed parts before the step completes.
        time.sleep(1.0)
        finish_turn(store, checkpoint, turn_id, question, answer, started)
        print("finished", flush=True)


if __name__ == "__main__":
    main()
