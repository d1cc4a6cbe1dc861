"""The LangGraph checkpointer's operations, as steps: checked requests in, encoded rows out.

`turnstore.integrations.langgraph` serialises with LangGraph's serializer and builds the
requests; each operation here checks the identifiers it keys rows by, then runs its scripts.
Each method of the saver is one of these operations: where it needs the serializer between
two steps (a put's lists sent again whole, a listing's metadata filter), the saver hands the
operation that work as a callable, so the composition is written once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnstore.drivers.steps import Steps, read, write
from turnstore.engine.protocol import Tx
from turnstore.errors import InvalidInput
from turnstore.records.langgraph import (
    CheckpointRow,
    DeltaHistory,
    ListedPage,
    LoadedCheckpoint,
    PutRequest,
    PutResult,
    SearchQuery,
    WritesRequest,
)
from turnstore.rules.validation import (
    identifier,
    identifiers,
    optional_identifier,
    validate_session_id,
    validate_session_ids,
)
from turnstore.scripts import checkpoints, search_cuts, sessions
from turnstore.scripts import langgraph as scripts
from turnstore.scripts import langgraph_upkeep as upkeep


def _checked_put(request: PutRequest) -> PutRequest:
    validate_session_id(request.session_id)
    optional_identifier(request.owner_id, "owner ID")
    identifiers((request.checkpoint_ns, request.checkpoint_id), "checkpoint identifier")
    optional_identifier(request.parent_checkpoint_id, "parent checkpoint ID")
    optional_identifier(request.run_id, "run ID")
    channels = [blob.channel for blob in request.blobs] + [item.channel for item in request.lists]
    identifiers(channels, "channel name")
    versions = [blob.version for blob in request.blobs] + [item.version for item in request.lists]
    identifiers(versions, "channel version")
    tags = [request.checkpoint.value_type, request.metadata.value_type]
    tags += [blob.value_type for blob in request.blobs]
    tags += [item.value_type for write in request.lists for item in write.items]
    identifiers(tags, "serializer type tag")
    return request


def put(
    request: PutRequest,
    whole: Callable[[list[str]], PutRequest] | None = None,
    writes: Sequence[WritesRequest] = (),
) -> Steps[PutResult]:
    """Store a checkpoint and its new channel versions in one commit, with `writes` (pending
    writes on that checkpoint) in the same commit.

    A list sent as the new items of a lineage that is gone (pruned, or its thread deleted)
    writes nothing and comes back `missing`; given `whole`, the request it builds for those
    channels (their lists sent whole) is stored instead, and its result returned.
    """
    checked = _checked_put(request)
    pending = [_checked_writes(one) for one in writes if one.rows]

    def store(tx: Tx, stored: PutRequest) -> PutResult:
        result = scripts.put(tx, stored, search_cuts.langgraph_put)
        if not result.missing:
            for one in pending:
                scripts.put_writes(tx, one)
        return result

    result = yield from write(lambda tx: store(tx, checked))
    if result.missing and whole is not None:
        again = _checked_put(whole(list(result.missing)))
        result = yield from write(lambda tx: store(tx, again))
    return result


def _checked_writes(request: WritesRequest) -> WritesRequest:
    validate_session_id(request.session_id)
    optional_identifier(request.owner_id, "owner ID")
    identifiers((request.checkpoint_ns, request.checkpoint_id), "checkpoint identifier")
    identifiers((row.task_id for row in request.rows), "task ID")
    identifiers((row.task_path for row in request.rows), "task path")
    identifiers((row.channel for row in request.rows), "channel name")
    identifiers((row.value_type for row in request.rows), "serializer type tag")
    return request


def put_writes(request: WritesRequest) -> Steps[None]:
    """Store a task's pending writes on a checkpoint."""
    checked = _checked_writes(request)
    if checked.rows:
        yield from write(lambda tx: scripts.put_writes(tx, checked))


def get(
    session_id: str, checkpoint_ns: str, checkpoint_id: str | None
) -> Steps[LoadedCheckpoint | None]:
    """Load one checkpoint by id, or a namespace's newest."""
    session_id = validate_session_id(session_id)
    identifier(checkpoint_ns, "checkpoint namespace")
    optional_identifier(checkpoint_id, "checkpoint ID")
    return (yield from read(lambda tx: scripts.get(tx, session_id, checkpoint_ns, checkpoint_id)))


def list_page(
    query: SearchQuery,
    keep: Callable[[CheckpointRow], bool] | None = None,
    remaining: int | None = None,
) -> Steps[ListedPage]:
    """One page of a listing: the newest-first checkpoint rows the query finds that `keep`
    keeps (at most `remaining`), loaded with their values and writes; and the query of the
    next page, or None when the listing has given all it may."""
    if query.session_id is not None:
        validate_session_id(query.session_id)
    for value in (query.checkpoint_ns, query.checkpoint_id, query.before):
        optional_identifier(value, "checkpoint identifier")
    if remaining is not None and remaining <= 0:
        return ListedPage([], None)
    rows = yield from read(lambda tx: scripts.search(tx, query))
    # Only what the listing gives is loaded: the rows past its limit cost no values.
    matching = [row for row in rows if keep is None or keep(row)][:remaining]
    loaded = (yield from read(lambda tx: scripts.load_rows(tx, matching))) if matching else []
    left = None if remaining is None else remaining - len(loaded)
    if len(rows) < query.limit or left == 0:
        return ListedPage(loaded, None)
    last = rows[-1]
    after = (last.checkpoint_id, last.session_id, last.checkpoint_ns)
    return ListedPage(loaded, query._replace(after=after))


def delta_history(
    session_id: str, checkpoint_ns: str, checkpoint_id: str | None, channels: Sequence[str]
) -> Steps[list[DeltaHistory]]:
    """Each channel's writes on a checkpoint's ancestors back to its nearest stored value."""
    session_id = validate_session_id(session_id)
    identifier(checkpoint_ns, "checkpoint namespace")
    optional_identifier(checkpoint_id, "checkpoint ID")
    names = list(channels)
    identifiers(names, "channel name")
    return (
        yield from read(
            lambda tx: upkeep.delta_history(tx, session_id, checkpoint_ns, checkpoint_id, names)
        )
    )


def delete_threads(session_ids: Sequence[str]) -> Steps[None]:
    """Delete threads' sessions (and everything hanging off them); absent ones are ignored."""
    ids = sorted(set(validate_session_ids(session_ids)))
    if ids:
        yield from write(lambda tx: _delete_present(tx, ids))


def _delete_present(tx: Tx, ids: list[str]) -> None:
    present = [session_id for session_id in ids if sessions.lock(tx, session_id)]
    if present:
        checkpoints.delete(tx, present)


def delete_runs(run_ids: Sequence[str]) -> Steps[None]:
    """Delete the checkpoints and writes the given runs made."""
    ids = list(run_ids)
    identifiers(ids, "run ID")
    if ids:
        yield from write(lambda tx: upkeep.delete_runs(tx, ids))


def keep_latest(session_ids: Sequence[str]) -> Steps[None]:
    """Prune each thread to its namespaces' newest checkpoints (and what they replay)."""
    for session_id in validate_session_ids(session_ids):
        yield from write(_keeper(session_id))


def prune(session_ids: Sequence[str], strategy: str) -> Steps[None]:
    """Prune threads: `keep_latest` as that operation does, or `delete` them."""
    if strategy == "delete":
        yield from delete_threads(session_ids)
    elif strategy == "keep_latest":
        yield from keep_latest(session_ids)
    else:
        raise InvalidInput(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")


def _keeper(session_id: str) -> Callable[[Tx], None]:
    return lambda tx: upkeep.keep_latest(tx, session_id)


def copy(source: str, target: str) -> Steps[bool]:
    """Copy a thread's checkpoints, values and writes to another thread."""
    source, target = validate_session_id(source), validate_session_id(target)
    return (yield from write(lambda tx: upkeep.copy(tx, source, target)))
