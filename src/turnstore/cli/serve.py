"""Internal: `turnstore serve`: run the read-only HTTP API and web viewer under uvicorn."""

from __future__ import annotations

import click

from turnstore.cli.common import URL_ARGUMENT, StoreCommand, display_url

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
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="uvicorn's log level.",
)
def serve(
    url: str, host: str, port: int, token: str | None, owner: str | None, log_level: str
) -> None:
    """Serve a read-only HTTP API, live tail and web viewer of the store at URL.

    Binds to loopback unless --host says otherwise; a non-loopback address needs --token,
    which every request must then carry (the viewer: open /?token=TOKEN once). Needs the
    extra `turnstore[serve]`.
    """
    try:
        import uvicorn

        from turnstore.server import ServeSettings, create_app
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
    app = create_app(url, ServeSettings(token=token, owner_id=owner))
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"Serving {display_url(url)} on http://{shown}:{port}/ (read-only)", err=True)
    # A tail stays open until its client leaves: give open streams a second, then close them.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=1,
        proxy_headers=False,
        server_header=False,
    )
