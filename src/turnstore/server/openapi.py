"""Internal: the OpenAPI 3.1 document, built from the endpoint table and msgspec's JSON Schemas."""

from __future__ import annotations

from typing import Any

import msgspec

import turnstore
from turnstore.server.api import Endpoint
from turnstore.server.bodies import ErrorBody

_ERRORS = {
    "400": "Bad input: a parameter out of range or not a cursor",
    "401": "The server needs a bearer token",
    "404": "No such session, or outside the server's owner scope",
}


def openapi_document(endpoints: tuple[Endpoint, ...]) -> dict[str, Any]:
    """The OpenAPI document describing every endpoint, its parameters and its body."""
    types = [endpoint.response for endpoint in endpoints] + [ErrorBody]
    schemas, components = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}"
    )
    error_ref = schemas[-1]
    paths: dict[str, Any] = {}
    for endpoint, schema in zip(endpoints, schemas, strict=False):
        parameters: list[dict[str, Any]] = [
            {
                "name": p.name,
                "in": "query",
                "required": False,
                "description": p.description,
                "schema": {"type": p.kind},
            }
            for p in endpoint.query
        ]
        if "{session_id}" in endpoint.path:
            parameters.insert(0, _SESSION_ID)
        content = (
            {endpoint.media_type: {"schema": schema}}
            if endpoint.media_type == "application/json"
            else {endpoint.media_type: {"schema": {"type": "string"}}}
        )
        responses: dict[str, Any] = {"200": {"description": endpoint.summary, "content": content}}
        for status, description in _ERRORS.items():
            responses[status] = {
                "description": description,
                "content": {"application/json": {"schema": error_ref}},
            }
        paths[endpoint.path] = {
            "get": {
                "summary": endpoint.summary,
                "operationId": endpoint.handler.__name__,
                "parameters": parameters,
                "responses": responses,
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "turnstore",
            "version": turnstore.__version__,
            "description": "A read-only view of a turnstore store: catalog, journals, live tail.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }


_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "The session id, percent-encoded (it may hold `/` or any character).",
    "schema": {"type": "string"},
}
