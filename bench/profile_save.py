"""A sequential save loop to profile with py-spy (`--threads --idle`, `-m bench.profile_save`).

20 sessions x 150 turns of the agent-loop workload's shape (four items of ~3 KB per turn plus
~500 B of loop state), saved one at a time on the blocking store, into a fresh temporary file.
"""

from __future__ import annotations

import random
import string
import tempfile
from pathlib import Path

import turnstore
from turnstore import (
    Checkpoint,
)


def _text(rng: random.Random, size: int) -> str:
    return "".join(rng.choices(string.ascii_letters + " ", k=size))


def main(sessions: int = 20, turns: int = 150) -> None:
    """Save `sessions` x `turns` growing checkpoints one after another."""
    rng = random.Random(1)
    folder = tempfile.mkdtemp(prefix="turnstore-profile-")
    with turnstore.open_blocking(Path(folder) / "profile.sqlite3") as store:
        checkpoints = [Checkpoint.empty(f"s{index}") for index in range(sessions)]
        for _ in range(turns):
            for checkpoint in checkpoints:
                items = [
                    {"type": "message", "role": "user", "content": _text(rng, 1000)},
                    {"type": "function_call", "call_id": "c", "arguments": _text(rng, 450)},
                    {"type": "function_call_output", "call_id": "c", "output": _text(rng, 450)},
                    {"type": "message", "role": "assistant", "content": _text(rng, 1000)},
                ]
                checkpoint.sequence += 1
                checkpoint.context.extend(items)
                checkpoint.metadata["loop"] = _text(rng, 500)
                store.save(checkpoint, items)


if __name__ == "__main__":
    main()
