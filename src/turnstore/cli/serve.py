"""Internal: `turnstore serve`: run the read-only HTTP API and web viewer under uvicorn."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import click

import turnstore
from turnstore import Store
from turnstore.cli.common import (
    LOG_LEVELS,
    URL_ARGUMENT,
    StoreCommand,
    configure_logging,
    display_url,
    reported,
)

TOKEN_ENV = "TURNSTORE_TOKEN"
"""The environment variable that may carry `--token`, so it stays out of `ps`."""


@click.command(cls=StoreCommand)
@URL_ARGUMENT
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port."
)
@click.option(
    "--token",
    metavar="TOKEN",
    envvar=TOKEN_ENV,
    help=f"Require this bearer token on every request (or {TOKEN_ENV}); "
    "needed to bind a non-loopback address.",
)
@click.option("--owner", metavar="ID", help="Show only sessions of this owner, everywhere.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    metavar="NAME",
    multiple=True,
    help="Without --token, answer requests for this host name too (repeatable); only "
    "loopback names and addresses are answered otherwise.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Close a connection whose request head is not complete this long after its first "
    "byte (a new connection: after connecting).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    metavar="N",
    help="Connections open at once (fewer if the descriptor limit says so); at the cap a new "
    "one closes the one waiting longest for a request, or gets a 503 if all are serving.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="info",
    show_default=True,
    help="Log level of uvicorn and of turnstore's own loggers (unless TURNSTORE_LOG_LEVEL).",
)
def serve(
    url: str,
    host: str,
    port: int,
    token: str | None,
    owner: str | None,
    allowed_hosts: tuple[str, ...],
    header_timeout: float,
    max_connections: int,
    log_level: str,
) -> None:
    """Serve a read-only HTTP API, live tail and web viewer of the store at URL.

    Binds to loopback unless --host says otherwise; a non-loopback address needs --token,
    which every request must then carry (the viewer: open /?token=TOKEN once). Without a
    token only requests for a loopback host name are answered (and --allowed-host names).
    Needs the extra `turnstore[serve]`.
    """
    try:
        import uvicorn

        from turnstore.server import ServeSettings, create_app
        from turnstore.server.connections import fit_to_descriptors, guarded_http
        from turnstore.server.settings import is_loopback
    except ImportError as error:
        raise click.ClickException(
            f"turnstore serve needs the serve extra: pip install 'turnstore[serve]' ({error})"
        ) from None
    if token is not None and not token.strip():
        raise click.UsageError("--token must not be empty")
    if not is_loopback(host) and token is None:
        raise click.UsageError(
            f"refusing to bind {host}, which is not a loopback address, without --token "
            f"(or {TOKEN_ENV}): anyone who can reach it could read every session"
        )
    configure_logging(log_level)
    # Open (and check) the store and take the port before saying anything is served, so a
    # wrong path, an unmigrated schema or a port in use is one `Error:` line.
    store = _open_checked(url)
    try:
        listener = _listen(host, port)
        # The app closes the store as it shuts down: uvicorn ends a SIGTERM-ed process
        # by raising the signal again once it has stopped, so code after it never runs.
        settings = ServeSettings(
            token=token,
            owner_id=owner,
            allowed_hosts=allowed_hosts,
            header_timeout_seconds=header_timeout,
            max_connections=max_connections,
        )
        app = create_app(store, settings, close_store=True)
        descriptors = _descriptor_limit()
        cap, backlog = fit_to_descriptors(max_connections, descriptors)
        shown = f"[{host}]" if ":" in host else host
        bound = listener.getsockname()[1]
        click.echo(f"Serving {display_url(url)} on http://{shown}:{bound}/ (read-only)", err=True)
        if cap < max_connections:
            click.echo(
                f"At most {cap} connections at once: the limit of {descriptors} open files "
                "allows no more (raise it with `ulimit -n`)",
                err=True,
            )
        http = guarded_http(header_timeout, cap)
        _run(uvicorn, app, listener, log_level, http, backlog)
    finally:
        # Closing twice is nothing; this close is for a server that never started.
        asyncio.run(store.close())


def _open_checked(url: str) -> Store:
    """The store at `url`, opened read-only; a library error is one `Error:` line."""
    with reported(url, read_only=True):
        return turnstore.open(url, read_only=True)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (as uvicorn binds one); a refusal is one `Error:` line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        shown = f"[{host}]" if ":" in host else host
        raise click.ClickException(
            f"cannot listen on {shown}:{port}: {error.strerror or error}"
        ) from None
    return listener


def _descriptor_limit() -> int | None:
    """The open-file limit, its soft value first raised to the hard one; None if there is none.

    Each connection costs a descriptor, and the soft limit is often far below the hard one
    (256 on macOS, 1,024 on many Linux systems); Go programs raise it the same way at start.
    """
    try:
        import resource
    except ImportError:  # Windows: no such limit to read
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # macOS takes no infinite open-file limit; 10,240 is its OPEN_MAX.
    wanted = 10240 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return None if soft == resource.RLIM_INFINITY else soft


def _run(
    uvicorn: Any, app: Any, listener: socket.socket, log_level: str, http: type, backlog: int
) -> None:
    """Serve `app` on `listener` with the `http` protocol class until interrupted."""
    config = uvicorn.Config(
        app,
        log_level=log_level,
        # Our guard on uvicorn's h11 protocol: a deadline on request heads and a cap on
        # connections (server/connections.py), and a backlog that cannot outrun the cap.
        http=http,
        backlog=backlog,
        # The app has no WebSocket route, and an upgraded connection would leave the guard's
        # count without saying so.
        ws="none",
        # A tail stays open until its client leaves: give open streams a second, then close.
        timeout_graceful_shutdown=1,
        proxy_headers=False,
        server_header=False,
    )
    server = uvicorn.Server(config)
    with listener:
        server.run(sockets=[listener])
    if not server.started:
        raise click.ClickException("the server did not start; its log above says why")
