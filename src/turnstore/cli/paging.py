"""Internal: keyset paging of the catalog and the event journal: opaque cursors and page walks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click

from turnstore import BlockingStore, SessionPageRequest
from turnstore.records import SessionCursor, SessionPage, SessionSummary

ALL_PAGE_SIZE = 100
"""Sessions fetched per page by `--all` when `--limit` is not given."""


class Cursor(click.ParamType[SessionCursor]):
    """A `--after` token: where the previous `sessions list` page stopped."""

    name = "cursor"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> SessionCursor:
        """Decode the token, failing as a usage error when it is not one."""
        if isinstance(value, SessionCursor):
            return value
        try:
            return SessionCursor.from_token(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


CURSOR = Cursor()
"""The `--after` type."""


def session_pages(
    store: BlockingStore, owner_id: str | None, limit: int, cursor: SessionCursor | None
) -> Iterator[SessionPage]:
    """Every catalog page from `cursor` on, one at a time, so memory stays one page."""
    while True:
        page = store.list_sessions_page(
            SessionPageRequest(owner_id=owner_id, limit=limit, cursor=cursor)
        )
        yield page
        if page.next_cursor is None or not page.sessions:
            return
        cursor = page.next_cursor


def page_lines(page: SessionPage, *, last: bool) -> Iterator[Any]:
    """A page as NDJSON values: each session, then `{"next": token}` on the last page shown."""
    for summary in page.sessions:
        yield summary.to_builtins()
    if last and page.next_cursor is not None:
        yield {"next": page.next_cursor.to_token()}


def summaries(store: BlockingStore, session_ids: list[str]) -> list[SessionSummary]:
    """The catalog entries of `session_ids` still present, in the order given."""
    found = (store.session_summary(session_id) for session_id in session_ids)
    return [summary for summary in found if summary is not None]
