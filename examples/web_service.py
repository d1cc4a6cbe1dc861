"""A small web service that keeps chat sessions in turnstore (standard library only).

    python examples/web_service.py [--port 8080] [--database sqlite:///chats.sqlite3]
    python examples/web_service.py --self-test     # start, call every endpoint, stop

Endpoints (JSON):
    POST /chats/{id}/messages  {"text": "..."}   add a user message and a (scripted) reply
    GET  /chats/{id}                              the chat's messages, oldest first
    GET  /chats?limit=N                           the newest chats, with their first message

The service is stateless: every request loads the chat from the store and saves it back, so
any number of service processes can share one database, and a restart loses nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import urllib.error
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import turnstore
from turnstore import Checkpoint, SequenceConflict, SessionPageRequest

CHAT = re.compile(r"^/chats/([A-Za-z0-9_-]{1,64})(/messages)?$")


def reply_to(text: str) -> str:
    """What the assistant answers; a model call in a real service."""
    return f"You said {len(text.split())} words."


class Chats:
    """The service's operations over one store."""

    def __init__(self, store: turnstore.BlockingStore) -> None:
        self.store = store

    def add_message(self, chat_id: str, text: str) -> dict[str, Any]:
        user = {"role": "user", "content": text}
        reply = {"role": "assistant", "content": reply_to(text)}
        while True:
            checkpoint = self.store.load(chat_id) or Checkpoint.empty(chat_id)
            checkpoint.context += [user, reply]
            checkpoint.sequence += 1
            try:
                self.store.save(checkpoint, [user, reply])
                return {"chat": chat_id, "sequence": checkpoint.sequence, "reply": reply}
            except SequenceConflict:
                continue  # another request saved this chat first: build on its turn

    def messages(self, chat_id: str) -> dict[str, Any] | None:
        checkpoint = self.store.load(chat_id)
        if checkpoint is None:
            return None
        return {"chat": chat_id, "messages": checkpoint.context}

    def newest(self, limit: int) -> dict[str, Any]:
        page = self.store.list_sessions_page(SessionPageRequest(limit=limit))
        return {
            "chats": [
                {"chat": s.session_id, "turns": s.sequence, "first": s.first_user_message}
                for s in page.sessions
            ]
        }


def handler_for(chats: Chats) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: HTTPStatus, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/chats":
                limit = int(parse_qs(url.query).get("limit", ["20"])[0])
                return self._send(HTTPStatus.OK, chats.newest(max(1, min(limit, 100))))
            match = CHAT.match(url.path)
            found = chats.messages(match.group(1)) if match and not match.group(2) else None
            if found is None:
                return self._send(HTTPStatus.NOT_FOUND, {"error": "no such chat"})
            return self._send(HTTPStatus.OK, found)

        def do_POST(self) -> None:
            match = CHAT.match(self.path)
            if not match or not match.group(2):
                return self._send(HTTPStatus.NOT_FOUND, {"error": "no such endpoint"})
            length = int(self.headers.get("Content-Length", "0"))
            text = json.loads(self.rfile.read(length) or b"{}").get("text")
            if not isinstance(text, str) or not text.strip():
                return self._send(HTTPStatus.BAD_REQUEST, {"error": "text is required"})
            return self._send(HTTPStatus.OK, chats.add_message(match.group(1), text))

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the example's output to what it shows

    return Handler


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def self_test(server: ThreadingHTTPServer) -> None:
    """Call every endpoint once, from two clients at once, and check the answers."""
    base = f"http://127.0.0.1:{server.server_address[1]}"
    before = _message_count(base, "support-1")
    posts = [
        threading.Thread(
            target=call, args=(base, "POST", "/chats/support-1/messages", {"text": text})
        )
        for text in ("My order has not arrived", "It was order 1234")
    ]
    for post in posts:
        post.start()
    for post in posts:
        post.join()
    chat = call(base, "GET", "/chats/support-1")
    assert len(chat["messages"]) == before + 4, chat
    newest = call(base, "GET", "/chats?limit=5")
    print(json.dumps(newest["chats"][0]), f"({len(chat['messages'])} messages)")


def _message_count(base: str, chat_id: str) -> int:
    try:
        return len(call(base, "GET", f"/chats/{chat_id}")["messages"])
    except urllib.error.HTTPError as error:
        if error.code == HTTPStatus.NOT_FOUND:
            return 0
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--database", default="sqlite:///chats.sqlite3")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    with turnstore.open_blocking(args.database) as store:
        port = 0 if args.self_test else args.port
        server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(Chats(store)))
        if not args.self_test:
            print(f"serving on http://127.0.0.1:{port}")
            server.serve_forever()
            return
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            self_test(server)
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
