"""Internal: reading a request: path ids, bounded integers, cursors; and the JSON responses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from turnstore.records import SessionCursor
from turnstore.server.bodies import ErrorBody

_ENCODER = msgspec.json.Encoder()


class ApiError(Exception):
    """An error answered as `{"error", "type"}` (and `notes`, if any) with an HTTP status."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        notes: Sequence[str] = (),
        *,
        did_you_mean: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.notes = [str(note) for note in notes]
        self.did_you_mean = list(did_you_mean)


def json_response(body: Any, status: int = 200) -> Response:
    """`body` (a record, struct or builtin) as a JSON response the browser may not cache."""
    return Response(
        _ENCODER.encode(body),
        status_code=status,
        media_type="application/json",
        headers={"cache-control": "no-store"},
    )


def error_response(error: ApiError) -> Response:
    """An `ApiError` as its JSON body and status."""
    body = ErrorBody(
        error=str(error), type=error.kind, notes=error.notes, did_you_mean=error.did_you_mean
    )
    return json_response(body, error.status)


def session_id(request: Request) -> str:
    """The `{session_id}` path segment, percent-decoded (the router sees it still encoded)."""
    return unquote(request.path_params["session_id"])


def bounded_int(
    request: Request, name: str, *, default: int | None, low: int, high: int
) -> int | None:
    """The query parameter `name` as an integer in [low, high], else `default`; 400 if bad."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "InvalidInput", f"{name} must be an integer") from None
    if not low <= value <= high:
        raise ApiError(400, "InvalidInput", f"{name} must be between {low} and {high}")
    return value


def limit(request: Request, *, default: int, high: int) -> int:
    """The `limit` parameter: a page size from 1 to this server's cap."""
    value = bounded_int(request, "limit", default=default, low=1, high=high)
    assert value is not None
    return value


def sequence(request: Request, name: str) -> int | None:
    """A sequence cursor (`before`, `after`): a non-negative integer, or absent."""
    return bounded_int(request, name, default=None, low=0, high=2**63 - 1)


def text(request: Request, name: str, *, max_length: int = 1024) -> str | None:
    """A text query parameter, absent when empty; 400 when longer than `max_length`."""
    raw = request.query_params.get(name)
    if not raw:
        return None
    if len(raw) > max_length:
        raise ApiError(400, "InvalidInput", f"{name} is longer than {max_length} characters")
    return raw


def cursor(request: Request) -> SessionCursor | None:
    """The catalog's `cursor` parameter, decoded; 400 when it is not one."""
    raw = text(request, "cursor", max_length=4096)
    if raw is None:
        return None
    try:
        return SessionCursor.from_token(raw)
    except ValueError as error:
        raise ApiError(400, "InvalidInput", str(error)) from None
