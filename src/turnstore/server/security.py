"""Internal: the server's guard: a bearer token on every request when one is set, the Host a
server without one answers to, and safe headers.

A browser cannot put a header on an `EventSource`, so the viewer authenticates once with
`/?token=…`: the guard answers with an HttpOnly, SameSite=Strict cookie and a redirect that
drops the token from the address bar. Programs send `Authorization: Bearer …`. A browser
that asks for a page without the token gets a page that says how to sign in, not JSON.

Without a token, only the loopback names and addresses (and the `--allowed-host` names) are
answered: a web page whose own name an attacker re-points at 127.0.0.1 (DNS rebinding) sends
its name in the Host header, and is refused before it reads anything.
"""

from __future__ import annotations

import hmac
import logging
from html import escape
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnstore.server.settings import is_loopback

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


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>turnstore: sign in</title></head>
<body><h1>This turnstore server needs its token</h1>
<p>{problem}</p>
<p>Open <code>/?token=TOKEN</code> once, with the token the server was started with
(<code>turnstore serve --token TOKEN</code> or <code>TURNSTORE_TOKEN</code>); the viewer
keeps it in a cookie. Programs send the header <code>Authorization: Bearer TOKEN</code>.</p>
</body></html>
"""
"""What a browser that asks for a page without the token is shown."""


class Guard:
    """ASGI middleware: require the token (when set), else a loopback or allowed Host, and add
    the security headers."""

    def __init__(
        self, app: ASGIApp, token: str | None, allowed_hosts: tuple[str, ...] = ()
    ) -> None:
        self._app = app
        self._token = token.encode() if token else None
        self._allowed = frozenset(host.lower() for host in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 without the token, set the cookie for `/?token=`, else pass through."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if self._token is None:
            host = _host(scope)
            if not (host is not None and (is_loopback(host) or host in self._allowed)):
                logger.info("refused %s %s: Host %r", scope["method"], scope["path"], host)
                await _respond(
                    send_with_headers,
                    400,
                    b'{"error":"this server answers only to loopback host names without a'
                    b' token (turnstore serve --allowed-host NAME adds one)",'
                    b'"type":"HostNotAllowed"}',
                    [],
                )
                return
        else:
            offered = _query_token(scope)
            if offered is not None and scope["path"] == "/":
                await _login(self._token, offered, send_with_headers, _wants_page(scope))
                return
            if not self._authorized(scope):
                # The path only: the query string may hold a token, a wrong one included.
                logger.info("refused %s %s: no valid bearer token", scope["method"], scope["path"])
                await _unauthorized(
                    send_with_headers,
                    "a bearer token is required",
                    _wants_page(scope),
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


def _host(scope: Scope) -> str | None:
    """The request's Host header without its port, lower-cased; None when it has none."""
    for name, value in scope["headers"]:
        if name == b"host":
            host: str = value.decode("latin-1").strip().lower()
            if host.startswith("["):  # an IPv6 address: [::1]:8765
                return host[1:].partition("]")[0]
            return host.rpartition(":")[0] if host.count(":") == 1 else host
    return None


def _wants_page(scope: Scope) -> bool:
    """Whether the client is a browser asking for a page (it accepts HTML)."""
    return any(
        name == b"accept" and b"text/html" in value.lower() for name, value in scope["headers"]
    )


async def _unauthorized(
    send: Send, problem: str, page: bool, headers: list[tuple[bytes, bytes]]
) -> None:
    """401: a page saying how to sign in for a browser, JSON for a program."""
    if page:
        body = SIGN_IN_PAGE.format(problem=escape(problem[0].upper() + problem[1:] + ".")).encode()
        await _respond(send, 401, body, headers, b"text/html; charset=utf-8")
        return
    error = b'{"error":"%s","type":"Unauthorized"}' % problem.encode()
    await _respond(send, 401, error, headers)


def _query_token(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


async def _login(token: bytes, offered: str, send: Send, page: bool) -> None:
    if not _same(offered.encode(), token):
        logger.info("refused the viewer's login: wrong token")
        await _unauthorized(send, "the token given is wrong", page, [])
        return
    cookie = SimpleCookie()
    cookie[COOKIE] = offered
    cookie[COOKIE]["httponly"] = True
    cookie[COOKIE]["samesite"] = "Strict"
    cookie[COOKIE]["path"] = "/"
    header = cookie[COOKIE].OutputString().encode("latin-1")
    await _respond(send, 303, b"", [(b"location", b"/"), (b"set-cookie", header)])


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    content_type: bytes = b"application/json",
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
