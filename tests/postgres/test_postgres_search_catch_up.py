"""A search through a writable store finds every write committed before it began, even when
another transaction holds the written session's row (the background indexer, a writer).

The row is held by a second connection, deterministically: the search must wait for it, not
skip the session and answer without it (what it did with `FOR UPDATE SKIP LOCKED`).
"""

from __future__ import annotations

import threading
import time

import pytest

import turnstore
from conftest import postgres_connection
from turnstore import Checkpoint
from turnstore.records import SearchRequest


@pytest.fixture
def backend_name() -> str:
    """Only PostgreSQL: `pg_schema` and `store_url` give a fresh schema."""
    return "postgres"


def test_a_search_waits_for_a_held_session_instead_of_missing_it(
    store_url: str, pg_schema: str
) -> None:
    """Saved, then its row held elsewhere: the search answers once the holder commits, with
    the hit; it does not answer early without it."""
    with turnstore.open_blocking(store_url, index_in_background=False) as store:
        checkpoint = Checkpoint.empty("held")
        checkpoint.sequence = 1
        store.save(checkpoint, [{"role": "user", "content": "a walrus on the ice"}])
        with postgres_connection(pg_schema) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT 1 FROM sessions WHERE session_id = 'held' FOR UPDATE")
            found: list[object] = []
            searching = threading.Thread(
                target=lambda: found.append(store.search(SearchRequest(query="walrus")))
            )
            searching.start()
            time.sleep(1.0)
            # Still waiting for the row: answering now would miss the committed write.
            assert searching.is_alive()
            assert found == []
            holder.execute("COMMIT")
            searching.join(timeout=30)
        assert not searching.is_alive()
        (page,) = found
        assert [hit.session_id for hit in page.hits] == ["held"]  # type: ignore[attr-defined]
