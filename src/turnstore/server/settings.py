"""Internal: what one server may show and how much at a time: token, owner scope, page caps."""

from __future__ import annotations

import ipaddress

import msgspec

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
"""Host names that always mean this machine."""


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A server's settings: bearer token, owner scope, page caps, the SQLite poll, slow clients."""

    token: str | None = None
    owner_id: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    """Host names a server without a token answers to besides the loopback ones."""
    max_sessions: int = 200
    max_events: int = 500
    max_batches: int = 100
    max_executions: int = 200
    max_fork_tree: int = 1000
    stream_batch: int = 100
    keepalive_seconds: float = 15.0
    header_timeout_seconds: float = 10.0
    """Under `turnstore serve`: seconds a request head may take from its first byte (a new
    connection's: from connecting) before the connection is closed."""
    max_connections: int = 1000
    """Under `turnstore serve`: connections open at once; at the cap a new one closes the one
    waiting longest for a request, or is refused with 503 when every one is serving."""


def is_loopback(host: str) -> bool:
    """Whether binding `host` only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
