"""One of several processes running turns of one LangGraph thread through one store.

    python _langgraph_writer.py URL THREAD NAME TURNS OUT.json

Writes OUT.json: every checkpoint this process put, with the message ids it held, so the
test can check each loads back exactly whatever the other process wrote meanwhile.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _langgraph_graph import build, config, user

from turnstore.integrations.langgraph import TurnstoreSaver


class RecordingSaver(TurnstoreSaver):
    """A saver that remembers the messages of each checkpoint it put."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.put_ids: dict[str, list[str]] = {}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        messages = checkpoint["channel_values"].get("messages", [])
        self.put_ids[checkpoint["id"]] = [message.id for message in messages]
        return stored


def main(url: str, thread: str, name: str, turns: int, out: Path) -> None:
    with RecordingSaver(url) as saver:
        graph = build(saver)
        for turn in range(turns):
            graph.invoke(user(f"{thread}-{name}", turn), config(thread), durability="sync")
        out.write_text(json.dumps(saver.put_ids))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
