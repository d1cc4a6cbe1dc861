"""Internal: the server's guard: a bearer token on every request when one is set, and safe headers.

A browser cannot put a header on an `EventSource`, so the viewer authenticates once with
`/?token=…`: the guard answers with an HttpOnly, SameSite=Strict cookie and a redirect that
drops the token from the address bar. Programs send `Authorization: Bearer …`.
"""

from __future__ import annotations

import hmac
import logging
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("turnstore.server")

COOKIE = "turnstore_token"
"""The cookie that carries the token for the viewer's own requests."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
"""Only the viewer's own files may run or load: stored content can never become a script."""

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
"""Headers every response carries."""


class Guard:
    """ASGI middleware: require the token (when set) and add the security headers."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 without the token, set the cookie for `/?token=`, else pass through."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if self._token is not None:
            offered = _query_token(scope)
            if offered is not None and scope["path"] == "/":
                await _login(self._token, offered, send_with_headers)
                return
            if not self._authorized(scope):
                # The path only: the query string may hold a token, a wrong one included.
                logger.info("refused %s %s: no valid bearer token", scope["method"], scope["path"])
                await _respond(
                    send_with_headers,
                    401,
                    b'{"error":"a bearer token is required","type":"Unauthorized"}',
                    [(b"www-authenticate", b'Bearer realm="turnstore"')],
                )
                return
        await self._app(scope, receive, send_with_headers)

    def _authorized(self, scope: Scope) -> bool:
        assert self._token is not None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                if scheme.lower() == b"bearer" and _same(credential.strip(), self._token):
                    return True
            elif name == b"cookie":
                morsel = SimpleCookie(value.decode("latin-1")).get(COOKIE)
                if morsel is not None and _same(morsel.value.encode(), self._token):
                    return True
        return False


def _same(offered: bytes, token: bytes) -> bool:
    # A constant-time comparison, so response timing reveals nothing about the token.
    return hmac.compare_digest(offered, token)


def _query_token(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


async def _login(token: bytes, offered: str, send: Send) -> None:
    if not _same(offered.encode(), token):
        logger.info("refused the viewer's login: wrong token")
        await _respond(send, 401, b'{"error":"wrong token","type":"Unauthorized"}', [])
        return
    cookie = SimpleCookie()
    cookie[COOKIE] = offered
    cookie[COOKIE]["httponly"] = True
    cookie[COOKIE]["samesite"] = "Strict"
    cookie[COOKIE]["path"] = "/"
    header = cookie[COOKIE].OutputString().encode("latin-1")
    await _respond(send, 303, b"", [(b"location", b"/"), (b"set-cookie", header)])


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
