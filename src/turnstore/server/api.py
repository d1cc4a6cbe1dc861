"""Internal: the JSON endpoints, reading the store through its public async API, scoped, capped.

Every endpoint is declared once in `ENDPOINTS` with its response type; the router and the
OpenAPI document are both built from that table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

import turnstore
from turnstore import (
    ActivePath,
    EventPageRequest,
    ExecutionPageRequest,
    SessionPageRequest,
    Store,
    TranscriptPageRequest,
)
from turnstore.records import (
    ConversationPage,
    ConversationRequest,
    EventPage,
    ExecutionPage,
    ExecutionStats,
    ForkTree,
    SearchPage,
    SearchRequest,
    SessionNodeRecord,
    SessionSummary,
    TranscriptPage,
)
from turnstore.records.kinds import prefixed_ids
from turnstore.server import params
from turnstore.server.bodies import (
    CatalogBody,
    GraphBody,
    HealthBody,
    QueueBody,
    RecentExecutionsBody,
)
from turnstore.server.params import ApiError, json_response
from turnstore.server.settings import ServeSettings

Handler = Callable[[Request], Awaitable[Response]]


class Param(msgspec.Struct, frozen=True):
    """One query parameter of an endpoint, as OpenAPI describes it."""

    name: str
    kind: str
    description: str


class Endpoint(msgspec.Struct, frozen=True):
    """One GET endpoint: its path, handler, summary, query parameters and response type."""

    path: str
    handler: Handler
    summary: str
    response: Any
    query: tuple[Param, ...] = ()
    media_type: str = "application/json"


def store_of(request: Request) -> Store:
    """The store the application serves."""
    store: Store = request.app.state.store
    return store


def settings_of(request: Request) -> ServeSettings:
    """The server's settings: token, owner scope and page caps."""
    settings: ServeSettings = request.app.state.settings
    return settings


def in_scope(settings: ServeSettings, summary: SessionSummary) -> bool:
    """Whether the server's owner scope (if any) lets it show this session."""
    return settings.owner_id is None or summary.session_context.owner_id == settings.owner_id


async def visible_summary(request: Request) -> SessionSummary:
    """The summary of the path's session; 404 when absent or outside the owner scope."""
    session_id = params.session_id(request)
    summary = await store_of(request).session_summary(session_id)
    if summary is None or not in_scope(settings_of(request), summary):
        # The same answer either way, so a scoped server does not reveal others' sessions.
        meant = await _meant(request, session_id)
        raise ApiError(
            404,
            "SessionNotFound",
            f"no session {session_id!r}",
            [f"did you mean {' or '.join(map(repr, meant))}?"] if meant else [],
            did_you_mean=meant,
        )
    return summary


async def _meant(request: Request, session_id: str) -> list[str]:
    """The framework sessions stored under this bare id (`langgraph/<id>`) that the server
    may show."""
    settings = settings_of(request)
    meant = []
    for candidate in prefixed_ids(session_id):
        found = await store_of(request).session_summary(candidate)
        if found is not None and in_scope(settings, found):
            meant.append(candidate)
    return meant


async def health(request: Request) -> Response:
    """Liveness, version and owner scope."""
    settings = settings_of(request)
    return json_response(
        HealthBody(status="ok", version=turnstore.__version__, owner_scope=settings.owner_id)
    )


async def catalog(request: Request) -> Response:
    """One page of the catalog, newest update first."""
    settings = settings_of(request)
    limit = params.limit(request, default=50, high=settings.max_sessions)
    owner = params.text(request, "owner")
    if settings.owner_id is not None:
        if owner is not None and owner != settings.owner_id:
            # The filter and the scope intersect in nothing.
            return json_response(CatalogBody(sessions=[], next_cursor=None))
        owner = settings.owner_id
    page = await store_of(request).list_sessions_page(
        SessionPageRequest(
            owner_id=owner,
            cursor=params.cursor(request),
            limit=limit,
            id_prefix=params.text(request, "prefix"),
        )
    )
    token = page.next_cursor.to_token() if page.next_cursor is not None else None
    return json_response(CatalogBody(sessions=page.sessions, next_cursor=token))


async def search(request: Request) -> Response:
    """One page of the items, in the sessions in scope, whose text matches `q`."""
    settings = settings_of(request)
    owner = params.text(request, "owner")
    if settings.owner_id is not None:
        if owner is not None and owner != settings.owner_id:
            return json_response(SearchPage())
        owner = settings.owner_id
    order = params.text(request, "order") or "newest"
    if order not in ("newest", "best"):
        raise ApiError(400, "InvalidInput", "order must be 'newest' or 'best'")
    page = await store_of(request).search(
        SearchRequest(
            query=request.query_params.get("q", ""),
            owner_id=owner,
            kind=params.text(request, "kind"),
            since_ms=params.bounded_int(
                request, "since", default=None, low=-(2**63), high=2**63 - 1
            ),
            until_ms=params.bounded_int(
                request, "until", default=None, low=-(2**63), high=2**63 - 1
            ),
            order="best" if order == "best" else "newest",
            limit=params.limit(request, default=20, high=100),
            cursor=params.text(request, "cursor", max_length=64),
        )
    )
    return json_response(page)


async def summary(request: Request) -> Response:
    """A session's catalog summary, with its execution stats."""
    return json_response(await visible_summary(request))


async def stats(request: Request) -> Response:
    """A session's execution stats: runs, failures, calls, time and tokens."""
    return json_response((await visible_summary(request)).execution_stats)


async def transcript(request: Request) -> Response:
    """One newest-first page of a session's transcript batches."""
    found = await visible_summary(request)
    settings = settings_of(request)
    page = await store_of(request).transcript_page(
        found.session_id,
        TranscriptPageRequest(
            before_sequence=params.sequence(request, "before"),
            max_batches=params.limit(request, default=20, high=settings.max_batches),
        ),
    )
    return json_response(page)


async def conversation(request: Request) -> Response:
    """One newest-first page of a session of any kind, read as messages."""
    found = await visible_summary(request)
    settings = settings_of(request)
    page = await store_of(request).conversation(
        found.session_id,
        ConversationRequest(
            before=params.sequence(request, "before"),
            limit=params.limit(request, default=50, high=settings.max_events),
            channel=params.text(request, "channel"),
        ),
    )
    if page is None:
        raise ApiError(404, "SessionNotFound", f"no session {found.session_id!r}")
    return json_response(page)


async def events(request: Request) -> Response:
    """One newest-first page of a session's event journal, with its high-water mark."""
    found = await visible_summary(request)
    settings = settings_of(request)
    page = await store_of(request).event_page(
        found.session_id,
        EventPageRequest(
            before_sequence=params.sequence(request, "before"),
            limit=params.limit(request, default=100, high=settings.max_events),
        ),
    )
    return json_response(page)


async def turn(request: Request) -> Response:
    """The newest whole turn of events before a cursor."""
    found = await visible_summary(request)
    page = await store_of(request).event_turn_page(
        found.session_id, params.sequence(request, "before")
    )
    return json_response(page)


async def executions(request: Request) -> Response:
    """One newest-first page of a session's finished turns."""
    found = await visible_summary(request)
    settings = settings_of(request)
    page = await store_of(request).execution_page(
        found.session_id,
        ExecutionPageRequest(
            before_sequence=params.sequence(request, "before"),
            limit=params.limit(request, default=20, high=settings.max_executions),
        ),
    )
    return json_response(page)


async def recent_executions(request: Request) -> Response:
    """Finished turns across the sessions in scope, most recently started first."""
    settings = settings_of(request)
    limit = params.limit(request, default=20, high=settings.max_executions)
    found = await store_of(request).recent_executions(limit, owner_id=settings.owner_id)
    return json_response(RecentExecutionsBody(executions=found))


async def forks(request: Request) -> Response:
    """The fork tree the session belongs to: its root first, then every descendant."""
    found = await visible_summary(request)
    settings = settings_of(request)
    tree = await store_of(request).fork_tree(found.session_id, limit=settings.max_fork_tree)
    if tree is None:
        raise ApiError(404, "SessionNotFound", f"no session {found.session_id!r}")
    tree.sessions = [s for s in tree.sessions if in_scope(settings, s)]
    if tree.sessions and tree.sessions[0].session_id != tree.root_session_id:
        # The root belongs to another owner: name the first session the scope may show.
        tree.root_session_id = tree.sessions[0].session_id
    return json_response(tree)


async def graph(request: Request) -> Response:
    """The runtime graph's active path, root first; empty for a session without one."""
    found = await visible_summary(request)
    read = await store_of(request).runtime(found.session_id).load_session(ActivePath())
    if read is None:
        # A checkpoint-only session: nothing to show, which is not an error of the request.
        return json_response(
            GraphBody(
                session_id=found.session_id,
                head_revision=None,
                current_agent_frame_id=None,
                nodes=[],
            )
        )
    by_id = {node.node_id: node for node in read.graph.nodes}
    path: list[SessionNodeRecord] = []
    node_id = read.graph.leaf_node_id
    while node_id is not None and node_id in by_id and len(path) < len(by_id):
        path.append(by_id[node_id])
        node_id = by_id[node_id].parent_node_id
    path.reverse()
    return json_response(
        GraphBody(
            session_id=found.session_id,
            head_revision=read.head_revision,
            current_agent_frame_id=read.current_agent_frame_id,
            nodes=path,
        )
    )


async def queue(request: Request) -> Response:
    """A session's durable queued work and its claims."""
    found = await visible_summary(request)
    batches = await store_of(request).runtime(found.session_id).list_queued_work()
    return json_response(QueueBody(batches=batches))


_BEFORE = Param("before", "integer", "Only entries with a sequence below this cursor.")
_LIMIT = Param("limit", "integer", "Page size, from 1 to the server's cap.")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/api/health", health, "Liveness, version and owner scope", HealthBody),
    Endpoint(
        "/api/sessions",
        catalog,
        "The catalog, newest update first, by keyset cursor",
        CatalogBody,
        (
            _LIMIT,
            Param("cursor", "string", "The `next_cursor` of the previous page."),
            Param("owner", "string", "Only sessions of this owner."),
            Param("prefix", "string", "Only sessions whose id starts with this text."),
        ),
    ),
    Endpoint(
        "/api/search",
        search,
        "Items of any session whose text matches a query, newest (or best) first",
        SearchPage,
        (
            Param("q", "string", 'Words and "quoted phrases", all required; word* is a prefix.'),
            Param("owner", "string", "Only sessions of this owner."),
            Param("kind", "string", "Only sessions of this kind."),
            Param("since", "integer", "Only items written at or after this Unix time in ms."),
            Param("until", "integer", "Only items written before this Unix time in ms."),
            Param("order", "string", "`newest` (the default) or `best`."),
            Param("limit", "integer", "Hits per page, 1 to 100."),
            Param("cursor", "string", "The `next_cursor` of the previous page."),
        ),
    ),
    Endpoint(
        "/api/executions/recent",
        recent_executions,
        "Finished turns across sessions, newest first",
        RecentExecutionsBody,
        (_LIMIT,),
    ),
    Endpoint("/api/sessions/{session_id}", summary, "A session's summary", SessionSummary),
    Endpoint(
        "/api/sessions/{session_id}/stats", stats, "A session's execution stats", ExecutionStats
    ),
    Endpoint(
        "/api/sessions/{session_id}/transcript",
        transcript,
        "Transcript batches, newest first",
        TranscriptPage,
        (_BEFORE, _LIMIT),
    ),
    Endpoint(
        "/api/sessions/{session_id}/conversation",
        conversation,
        "The session read as messages, whatever wrote it; newest page first",
        ConversationPage,
        (
            Param(
                "before",
                "integer",
                "The `next_before` of the page before: a transcript sequence, or an item index.",
            ),
            Param("limit", "integer", "Items (batches for a transcript) per page, to the cap."),
            Param("channel", "string", "A LangGraph thread's list channel; `messages` if absent."),
        ),
    ),
    Endpoint(
        "/api/sessions/{session_id}/events",
        events,
        "Journal events, newest first, with the high-water mark",
        EventPage,
        (_BEFORE, _LIMIT),
    ),
    Endpoint(
        "/api/sessions/{session_id}/turn",
        turn,
        "The newest whole turn of events before a cursor",
        EventPage,
        (_BEFORE,),
    ),
    Endpoint(
        "/api/sessions/{session_id}/executions",
        executions,
        "Finished turns with their stats, newest first",
        ExecutionPage,
        (_BEFORE, _LIMIT),
    ),
    Endpoint("/api/sessions/{session_id}/forks", forks, "The session's fork tree", ForkTree),
    Endpoint(
        "/api/sessions/{session_id}/graph",
        graph,
        "The runtime graph's active path",
        GraphBody,
    ),
    Endpoint("/api/sessions/{session_id}/queue", queue, "Durable queued work", QueueBody),
)
"""Every JSON endpoint; the event stream is declared beside it in `turnstore.server.app`."""
