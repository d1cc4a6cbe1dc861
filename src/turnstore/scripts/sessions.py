"""The `sessions` table: one row per session of either contract, and the catalog read from it."""

from __future__ import annotations

from typing import NamedTuple

from turnstore.engine.protocol import Query, Statements, Tx, marks, select
from turnstore.records.base import decode_stored
from turnstore.records.checkpoint import (
    Checkpoint,
    ExecutionStats,
    SessionCursor,
    SessionPage,
    SessionSummary,
)
from turnstore.records.figures import FIGURES, Derived
from turnstore.records.kinds import kind_of
from turnstore.records.kinds.turnstore import KIND as CHECKPOINT
from turnstore.records.protocol import SessionContext
from turnstore.rules.context import ContextWrite, plan_context_write
from turnstore.rules.pages import CatalogQuery, split_page
from turnstore.rules.saves import PreparedSave, prepare_save


class SessionRow(NamedTuple):
    """The catalog columns of one session row, still JSON-encoded where they are records."""

    session_id: str
    parent_session_id: str | None
    parent_sequence: int | None
    latest_sequence: int
    catalog_visible: bool
    first_user_message: str | None
    session_context_json: str
    execution_stats_json: str
    created_at: int
    updated_at: int
    kind: str | None
    figures_json: str | None


class SessionWrite(NamedTuple):
    """The columns a save writes to its session row."""

    latest_sequence: int
    checkpoint_state_json: str
    context_epoch: int
    context_length: int
    context_tail: bytes | None
    session_context_json: str
    owner_id: str | None
    execution_stats_json: str
    catalog_visible: bool
    first_user_message: str | None
    latest_event_sequence: int


class Branch(NamedTuple):
    """Where a new session branches from: its parent and the parent's sequence (or neither)."""

    parent_session_id: str | None = None
    parent_sequence: int | None = None


_INSERTED = (*SessionWrite._fields, "session_id", *Branch._fields, "kind")
"""The parameters of a session row's INSERT, in order: what a save writes, its id, its branch,
its kind."""
_ORDER = " ORDER BY updated_at DESC, latest_sequence DESC, session_id DESC LIMIT ?"
_AFTER = "(updated_at, latest_sequence, session_id) < (?, ?, ?)"
_FROM = "FROM sessions"
# An id prefix is a range of ids (see `id_prefix_range`): byte-wise on both backends (the
# column's collation stays), with no LIKE to escape. Which plan is cheap depends on how many
# ids the range holds, and neither planner can know without fresh statistics, so the page
# counts them first on the primary key (`PREFIX_PROBE`, to at most `NARROW_PREFIX` + 1):
# - a narrow range is read whole through the primary key (materialised, so no planner walks
#   the catalog's order instead) and its few rows sorted;
# - a wide one walks the catalog's index in order, testing each id, until LIMIT stops it:
#   `|| ''` keeps the range off the primary key there, whose range would be read whole and
#   sorted. Its ids are at least one in `catalog size / NARROW_PREFIX`, so the walk is short
#   unless they all sit at the old end of the catalog.
NARROW_PREFIX = 2000
"""The most ids a prefix's range may hold to be read whole and sorted rather than walked."""
_RANGE = "session_id >= ? AND session_id < ?"
_ID = "(session_id || '')"
_PREFIX = f"{_ID} >= ? AND {_ID} < ?"
_HITS = (
    f"WITH hits AS MATERIALIZED (SELECT {', '.join(SessionRow._fields)}, owner_id"
    f" FROM sessions WHERE {_RANGE}) "
)


def _narrow(where: str) -> Query[SessionRow]:
    """A catalog page of the rows of a narrow id range, read whole, filtered by `where`."""
    query = select(SessionRow, f"FROM hits{where}{_ORDER}")
    return Query(_HITS + query.sql, query.make)


class SessionSql(Statements):
    """Statements of the sessions table."""

    exists = "SELECT 1 FROM sessions WHERE session_id = ?"
    lock = "SELECT 1 FROM sessions WHERE session_id = ?{lock}"
    insert = (
        f"INSERT INTO sessions ({', '.join(_INSERTED)}, created_at, updated_at)"
        f" VALUES ({marks(len(_INSERTED))}, {{now}}, {{now}})"
        " ON CONFLICT (session_id) DO NOTHING RETURNING session_id"
    )
    # A session keeps the first user message it was ever saved with.
    update = (
        "UPDATE sessions SET "
        + ", ".join(
            "first_user_message = COALESCE(first_user_message, ?)"
            if name == "first_user_message"
            else f"{name} = ?"
            for name in SessionWrite._fields
        )
        + ", updated_at = {now} WHERE session_id = ?"
    )
    row = select(SessionRow, "FROM sessions WHERE session_id = ?")
    first_page = select(SessionRow, _FROM + _ORDER)
    next_page = select(SessionRow, f"{_FROM} WHERE {_AFTER}{_ORDER}")
    owner_first_page = select(SessionRow, f"{_FROM} WHERE owner_id = ?{_ORDER}")
    owner_next_page = select(SessionRow, f"{_FROM} WHERE owner_id = ? AND {_AFTER}{_ORDER}")
    prefix_probe = f"SELECT COUNT(*) FROM (SELECT 1 FROM sessions WHERE {_RANGE} LIMIT ?) AS ids"
    prefix_first_page = select(SessionRow, f"{_FROM} WHERE {_PREFIX}{_ORDER}")
    prefix_next_page = select(SessionRow, f"{_FROM} WHERE {_PREFIX} AND {_AFTER}{_ORDER}")
    owner_prefix_first_page = select(
        SessionRow, f"{_FROM} WHERE owner_id = ? AND {_PREFIX}{_ORDER}"
    )
    owner_prefix_next_page = select(
        SessionRow, f"{_FROM} WHERE owner_id = ? AND {_PREFIX} AND {_AFTER}{_ORDER}"
    )
    narrow_first_page = _narrow("")
    narrow_next_page = _narrow(f" WHERE {_AFTER}")
    owner_narrow_first_page = _narrow(" WHERE owner_id = ?")
    owner_narrow_next_page = _narrow(f" WHERE owner_id = ? AND {_AFTER}")


def session_write(save: PreparedSave, plan: ContextWrite, latest_event: int = 0) -> SessionWrite:
    """The session-row columns of a save whose context is written as `plan` says.

    `latest_event` is the event sequence the save leaves: its events are planned before the
    row is written, so one UPDATE moves both the checkpoint and the journal.
    """
    return SessionWrite(
        latest_sequence=save.sequence,
        checkpoint_state_json=save.state_json,
        context_epoch=plan.stored.epoch,
        context_length=plan.stored.length,
        context_tail=plan.stored.tail_digest,
        session_context_json=save.session_context_json,
        owner_id=save.owner_id,
        execution_stats_json=save.execution_stats_json,
        catalog_visible=save.catalog_visible,
        first_user_message=save.first_user_message,
        latest_event_sequence=latest_event,
    )


ROOT = Branch()
"""A session that branches from nothing."""


def insert(
    tx: Tx,
    save: PreparedSave,
    plan: ContextWrite,
    branch: Branch = ROOT,
    latest_event: int = 0,
    kind: str = CHECKPOINT.name,
) -> bool:
    """Insert a session row of `kind`; False, inserting nothing, if the id is taken."""
    params = (*session_write(save, plan, latest_event), save.session_id, *branch, kind)
    return tx.value(tx.sql(SessionSql).insert, params) is not None


def update(tx: Tx, save: PreparedSave, plan: ContextWrite, latest_event: int) -> None:
    """Advance a session row to a save that leaves its event journal at `latest_event`."""
    params = (*session_write(save, plan, latest_event), save.session_id)
    tx.run(tx.sql(SessionSql).update, params)


def lock(tx: Tx, session_id: str) -> bool:
    """Lock a session row for this transaction; False if there is none."""
    return tx.value(tx.sql(SessionSql).lock, (session_id,)) is not None


def ensure(tx: Tx, session_id: str) -> bool:
    """Create the session's row (an empty checkpoint) if missing, then lock it.

    Returns whether the row existed before.
    """
    if lock(tx, session_id):
        return True
    empty = prepare_save(Checkpoint.empty(session_id), (), None, ())
    insert(tx, empty, plan_context_write(None, 0, []))
    lock(tx, session_id)
    return False


def summary_of(row: SessionRow) -> SessionSummary:
    """Build a catalog summary from a session row without touching the checkpoint: the
    figures its saves counted, and those the indexer derived from its items."""
    session_id = row.session_id
    stats = decode_stored(row.execution_stats_json, ExecutionStats, "execution stats", session_id)
    measured = set(kind_of(row.kind).counts)
    derived = Derived()
    if row.figures_json is not None:
        derived = decode_stored(row.figures_json, Derived, "figures", session_id)
        # Past 2**64 a figure stops growing where it was, as a save's own stats do.
        stats.checked_add(derived.stats)
        measured.update(derived.measured)
    return SessionSummary(
        session_id=session_id,
        session_context=decode_stored(
            row.session_context_json, SessionContext, "session context", session_id
        ),
        parent_session_id=row.parent_session_id,
        parent_sequence=row.parent_sequence,
        sequence=row.latest_sequence,
        catalog_visible=bool(row.catalog_visible),
        first_user_message=row.first_user_message,
        execution_stats=stats,
        created_at=row.created_at,
        updated_at=row.updated_at,
        kind=row.kind,
        measured=[name for name in FIGURES if name in measured],
        waiting=derived.waiting,
    )


def summary(tx: Tx, session_id: str) -> SessionSummary | None:
    """One session's catalog entry, or None."""
    row = tx.row(tx.sql(SessionSql).row, (session_id,))
    return None if row is None else summary_of(row)


def catalog_page(tx: Tx, query: CatalogQuery) -> SessionPage:
    """One newest-first page of the catalog, strictly after the query's cursor."""
    sql = tx.sql(SessionSql)
    owned = query.owner_id is not None
    owner = [query.owner_id] if owned else []
    after = list(query.after or ())
    if query.id_range is None:
        kind = "plain"
    elif tx.value(sql.prefix_probe, (*query.id_range, NARROW_PREFIX + 1)) <= NARROW_PREFIX:
        kind = "narrow"
    else:
        kind = "prefix"
    statements = {
        ("plain", False): (sql.first_page, sql.next_page),
        ("plain", True): (sql.owner_first_page, sql.owner_next_page),
        ("prefix", False): (sql.prefix_first_page, sql.prefix_next_page),
        ("prefix", True): (sql.owner_prefix_first_page, sql.owner_prefix_next_page),
        ("narrow", False): (sql.narrow_first_page, sql.narrow_next_page),
        ("narrow", True): (sql.owner_narrow_first_page, sql.owner_narrow_next_page),
    }
    first, then = statements[kind, owned]
    statement = first if query.after is None else then
    id_range = list(query.id_range or ())
    if kind == "narrow":  # the range is bound in the WITH, before the page's own terms
        params = (*id_range, *owner, *after, query.fetch)
    else:
        params = (*owner, *id_range, *after, query.fetch)
    rows, last = split_page(tx.rows(statement, params), query.limit)
    cursor = None
    if last is not None:
        cursor = SessionCursor(
            updated_at=last.updated_at, sequence=last.latest_sequence, session_id=last.session_id
        )
    return SessionPage(sessions=[summary_of(row) for row in rows], next_cursor=cursor)
