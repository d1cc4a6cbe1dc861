"""Internal: long-term memory's JSON endpoints: namespaces, a namespace's items, a search.

A namespace travels as its labels joined by `.` (`ada.prefs`), as the CLI writes it. A server
scoped to an owner shows that owner's items only, on every endpoint.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from turnstore.records.memory import (
    SEPARATOR,
    MemoryCall,
    MemoryCatalogRequest,
    MemoryFindRequest,
    MemoryRow,
    MemorySearch,
    namespace_of,
)
from turnstore.server import params
from turnstore.server.api import Endpoint, Param, settings_of, store_of
from turnstore.server.params import ApiError, json_response

MAX_PAGE = 100
"""The most namespaces, items or hits on one page."""


class MemoryNamespaceBody(msgspec.Struct, kw_only=True):
    """A namespace holding live items: how many (of the owner asked for) and the newest time."""

    namespace: list[str]
    items: int
    updated_at_ms: int


class MemoryCatalogBody(msgspec.Struct, kw_only=True):
    """A page of namespaces in order; `next_after` (a dotted namespace) fetches the next."""

    namespaces: list[MemoryNamespaceBody]
    next_after: str | None


class MemoryItemBody(msgspec.Struct, kw_only=True):
    """One live item: where it is, its owner, its value and the text it is stored as, its
    times."""

    namespace: list[str]
    key: str
    owner_id: str | None
    value: Any
    """The value decoded (a number JSON cannot write, `NaN`, as null), or the stored text
    itself when it is not JSON (an item put without its words searched may hold any text)."""
    value_json: str
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int | None


class MemoryItemsBody(msgspec.Struct, kw_only=True):
    """A page of a namespace's items, newest update first; `next_offset` fetches the next."""

    items: list[MemoryItemBody]
    next_offset: int | None


class MemoryHitBody(msgspec.Struct, kw_only=True):
    """An item whose words match: where it is, when written, the matching part marked."""

    namespace: list[str]
    key: str
    updated_at_ms: int
    snippet: str
    marks: list[tuple[int, int]]


class MemorySearchBody(msgspec.Struct, kw_only=True):
    """A page of hits, best match first; `next_offset` fetches the next."""

    hits: list[MemoryHitBody]
    next_offset: int | None = None


def _namespace(request: Request, name: str, *, required: bool = False) -> tuple[str, ...] | None:
    """A dotted namespace parameter; 400 when it has an empty label (or is missing, if
    `required`)."""
    raw = params.text(request, name)
    if raw is None:
        if required:
            raise ApiError(400, "InvalidInput", f"{name} is required: labels joined by dots")
        return None
    labels = tuple(raw.split(SEPARATOR))
    if not all(labels):
        raise ApiError(400, "InvalidInput", f"{name} {raw!r} has an empty label")
    return labels


def _owner(request: Request) -> tuple[str | None, bool]:
    """The owner to narrow to (the scope's, on a scoped server) and whether the request's own
    `owner` is outside the scope (an empty answer)."""
    scope, asked = settings_of(request).owner_id, params.text(request, "owner")
    if scope is None:
        return asked, False
    return scope, asked is not None and asked != scope


def _offset(request: Request) -> int:
    found = params.bounded_int(request, "offset", default=0, low=0, high=2**62)
    assert found is not None
    return found


async def namespaces(request: Request) -> Response:
    """A page of the namespaces holding live items, in order, with their counts."""
    owner, outside = _owner(request)
    if outside:
        return json_response(MemoryCatalogBody(namespaces=[], next_after=None))
    page = await store_of(request).memory.catalog(
        MemoryCatalogRequest(
            owner,
            _namespace(request, "prefix"),
            _namespace(request, "after"),
            params.limit(request, default=50, high=MAX_PAGE),
        )
    )
    found = [
        MemoryNamespaceBody(
            namespace=list(n.namespace), items=n.items, updated_at_ms=n.updated_at_ms
        )
        for n in page.namespaces
    ]
    following = None if page.next_after is None else SEPARATOR.join(page.next_after)
    return json_response(MemoryCatalogBody(namespaces=found, next_after=following))


def _item(row: MemoryRow) -> MemoryItemBody:
    return MemoryItemBody(
        namespace=list(namespace_of(row.namespace)),
        key=row.key,
        owner_id=row.owner_id,
        value=row.decoded_value(),
        value_json=row.value_json,
        created_at_ms=row.created_at_ms,
        updated_at_ms=row.updated_at_ms,
        expires_at_ms=row.expires_at_ms,
    )


async def items(request: Request) -> Response:
    """A page of the live items in a namespace and below it, newest update first."""
    owner, outside = _owner(request)
    if outside:
        return json_response(MemoryItemsBody(items=[], next_offset=None))
    namespace = _namespace(request, "namespace", required=True)
    assert namespace is not None
    limit, offset = params.limit(request, default=50, high=MAX_PAGE), _offset(request)
    keep = None if owner is None else (lambda row: row.owner_id == owner)
    search = MemorySearch(namespace, keep, offset=offset, limit=limit + 1)
    answer = await store_of(request).memory.run(MemoryCall(searches=(search,)))
    rows = [found.row for found in answer.searches[0]]
    following = offset + limit if len(rows) > limit else None
    return json_response(
        MemoryItemsBody(items=[_item(r) for r in rows[:limit]], next_offset=following)
    )


async def search(request: Request) -> Response:
    """A page of the live items whose words match `q`, best match first."""
    owner, outside = _owner(request)
    if outside:
        return json_response(MemorySearchBody(hits=[]))
    page = await store_of(request).memory.find(
        MemoryFindRequest(
            request.query_params.get("q", ""),
            owner,
            _namespace(request, "prefix"),
            params.limit(request, default=20, high=MAX_PAGE),
            _offset(request),
        )
    )
    hits = [
        MemoryHitBody(
            namespace=list(hit.namespace),
            key=hit.key,
            updated_at_ms=hit.updated_at_ms,
            snippet=hit.snippet,
            marks=hit.marks,
        )
        for hit in page.hits
    ]
    return json_response(MemorySearchBody(hits=hits, next_offset=page.next_offset))


_OWNER = Param("owner", "string", "Only items of this owner (a scoped server: its own).")
_PREFIX = Param("prefix", "string", "Only at or below this namespace (labels joined by dots).")
_MEMORY_LIMIT = Param("limit", "integer", f"Page size, from 1 to {MAX_PAGE}.")
_OFFSET = Param("offset", "integer", "The `next_offset` of the previous page.")

MEMORY_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "/api/memory/namespaces",
        namespaces,
        "Namespaces holding live memory items, in order, with their counts",
        MemoryCatalogBody,
        (
            _OWNER,
            _PREFIX,
            Param("after", "string", "The `next_after` of the previous page."),
            _MEMORY_LIMIT,
        ),
    ),
    Endpoint(
        "/api/memory/items",
        items,
        "A namespace's live memory items and those below it, newest update first",
        MemoryItemsBody,
        (
            Param("namespace", "string", "The namespace (labels joined by dots); required."),
            _OWNER,
            _MEMORY_LIMIT,
            _OFFSET,
        ),
    ),
    Endpoint(
        "/api/memory/search",
        search,
        "Memory items whose words match a query, best match first",
        MemorySearchBody,
        (
            Param("q", "string", 'Words and "quoted phrases", all required; word* is a prefix.'),
            _OWNER,
            _PREFIX,
            _MEMORY_LIMIT,
            _OFFSET,
        ),
    ),
)
"""Long-term memory's endpoints, served beside `ENDPOINTS`."""
