"""Internal: the ASGI app: the endpoint table, the live tail, the viewer's files and the guard."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

import turnstore
from turnstore import Store
from turnstore.errors import (
    InvalidInput,
    NotFound,
    SearchIndexNotBuilt,
    StorageError,
    StoreClosed,
    TurnstoreError,
)
from turnstore.server.api import ENDPOINTS, Endpoint
from turnstore.server.memory_api import MEMORY_ENDPOINTS
from turnstore.server.metrics import HttpMetrics, MetricsEndpoint
from turnstore.server.openapi import openapi_document
from turnstore.server.params import ApiError, error_response, json_response
from turnstore.server.security import Guard
from turnstore.server.settings import ServeSettings
from turnstore.server.stream import STREAM_QUERY, event_stream

logger = logging.getLogger("turnstore.server")

STATIC = resources.files("turnstore.server") / "static"
"""The viewer's files, shipped inside the package."""

STREAM = Endpoint(
    "/api/sessions/{session_id}/events/stream",
    event_stream,
    "Live tail (Server-Sent Events); resumes after `Last-Event-ID`",
    str,
    STREAM_QUERY,
    media_type="text/event-stream",
)
"""The live tail, declared like the JSON endpoints so OpenAPI lists it."""


def create_app(
    store: Store | str | os.PathLike[str],
    settings: ServeSettings | None = None,
    *,
    close_store: bool | None = None,
) -> Starlette:
    """The read-only ASGI app over `store` (an open async store, or a URL it opens read-only).

    A store given open stays the caller's to close, unless `close_store` hands it over; one
    opened from a URL is closed when the application shuts down.
    """
    settings = settings or ServeSettings()
    endpoints = (*ENDPOINTS, *MEMORY_ENDPOINTS, STREAM)
    document = openapi_document(endpoints)

    async def openapi(request: Request) -> Response:
        return json_response(document)

    async def index(request: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"), headers={"cache-control": "no-store"})

    metrics = MetricsEndpoint()
    routes: list[BaseRoute] = [
        Route(endpoint.path, endpoint.handler, methods=["GET"]) for endpoint in endpoints
    ]
    routes += [
        Route("/api/openapi.json", openapi, methods=["GET"]),
        Route("/metrics", metrics.handle, methods=["GET"]),
        Route("/", index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = not isinstance(store, Store) if close_store is None else close_store
        opened = turnstore.open(store, read_only=True) if not isinstance(store, Store) else store
        app.state.store = opened
        app.state.settings = settings
        try:
            yield
        finally:
            if owned:
                await opened.close()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            ApiError: _api_error,
            TurnstoreError: _store_error,
            HTTPException: _http_error,
        },
    )
    app.add_middleware(RawSessionPaths)
    app.add_middleware(Guard, token=settings.token, allowed_hosts=settings.allowed_hosts)
    # Outermost: the guard's refusals are requests too.
    app.add_middleware(HttpMetrics, endpoint=metrics, routes=routes)
    return app


class RawSessionPaths:
    """Route on the raw path so a session id's encoded `/` stays inside its segment."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Swap the decoded path for the raw one under `/api/sessions/`."""
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw and raw.startswith(b"/api/sessions/"):
                scope = {**scope, "path": raw.decode("latin-1")}
        await self._app(scope, receive, send)


async def _api_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return error_response(error)


async def _store_error(request: Request, error: Exception) -> Response:
    status = 500
    if isinstance(error, InvalidInput):
        status = 400
    elif isinstance(error, NotFound):
        status = 404
    elif isinstance(error, StoreClosed | StorageError):
        status = 503
    elif isinstance(error, SearchIndexNotBuilt):
        status = 409
    if status >= 500:
        # The type, not the message: a driver's message may quote what it was given.
        logger.warning("%s %s failed: %s", request.method, request.url.path, type(error).__name__)
    notes = getattr(error, "__notes__", ())
    return error_response(ApiError(status, type(error).__name__, str(error), notes))


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
    headers: dict[str, Any] = dict(error.headers or {})
    response = error_response(ApiError(error.status_code, kind, str(error.detail)))
    response.headers.update(headers)
    return response
