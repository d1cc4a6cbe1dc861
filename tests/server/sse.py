"""A small Server-Sent Events client for the tests: frames arrive on a queue from a thread."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import httpx

Frame = tuple[int | str, Any]
"""An `event` message as (id, JournalEvent); any other message as (its event name, data)."""


class Tail:
    """One open event stream; `next()` returns the next message as a `Frame`."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self._frames: queue.Queue[Frame | BaseException | None] = queue.Queue()
        self.comments: list[str] = []
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self._request = self._client.build_request("GET", url, headers=headers or {})
        self.response = self._client.send(self._request, stream=True)
        self.retry_ms: int | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            for line in self.response.iter_lines():
                if line == "":
                    self._dispatch(fields)
                    fields = {}
                elif line.startswith(":"):
                    self.comments.append(line[1:].strip())
                else:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
            self._frames.put(None)
        except (httpx.HTTPError, RuntimeError) as error:
            self._frames.put(error)

    def _dispatch(self, fields: dict[str, str]) -> None:
        if "data" in fields:
            data = json.loads(fields["data"])
            kind = fields.get("event", "message")
            self._frames.put((int(fields["id"]), data) if kind == "event" else (kind, data))
        elif "retry" in fields:
            self.retry_ms = int(fields["retry"])

    def next(self, timeout: float = 10.0) -> Frame:
        """The next event, or AssertionError when none comes within `timeout` seconds."""
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout} s") from None
        if frame is None or isinstance(frame, BaseException):
            raise AssertionError(f"the stream ended: {frame!r}")
        return frame

    def take(self, count: int, timeout: float = 10.0) -> list[Frame]:
        """The next `count` events."""
        return [self.next(timeout) for _ in range(count)]

    def quiet(self, seconds: float) -> bool:
        """Whether no event arrives for `seconds`."""
        try:
            frame = self._frames.get(timeout=seconds)
        except queue.Empty:
            return True
        self._frames.put(frame)
        return False

    def close(self) -> None:
        """Close the stream and its connection."""
        self.response.close()
        self._client.close()
