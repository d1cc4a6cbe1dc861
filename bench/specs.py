"""The peers the agent-loop benchmark knows, and where each one's store lives.

Shared by the benchmark's one process (`bench.agent_loop`) and the processes it starts for
the tmpfs rows (`bench.tmpfs_rows`), which build each peer alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.measure import ByteMeter, NoBytes, ProcIo, proc_io_available
from bench.peers import (
    AgentsSessionPeer,
    DiskCeilingPeer,
    LangGraphDirectPeer,
    LangGraphGraphPeer,
    LangGraphPeer,
    Peer,
    StdlibFts5Peer,
    StdlibSqlitePeer,
    TurnstoreBlockingPeer,
    TurnstorePeer,
    close_all,
)
from bench.postgres import ScratchDatabase
from bench.same_work import SameWorkPeer

SHM = "/dev/shm"
"""Where the tmpfs rows keep their files."""
TMPFS = "@tmpfs"
"""The name suffix of a peer's tmpfs twin."""
LANGGRAPH = ("langgraph", "langgraph.checkpoint.sqlite")
LANGGRAPH_ASYNC = (*LANGGRAPH, "aiosqlite")
LANGGRAPH_PG = ("langgraph", "langgraph.checkpoint.postgres")


@dataclass(frozen=True)
class PeerSpec:
    """A peer the run may include: the modules it needs and how to build it."""

    name: str
    backend: str
    requires: tuple[str, ...]
    make: Callable[[Places, str], Peer]
    scaling: bool = False
    tmpfs: bool = False
    """Also run on tmpfs (`/dev/shm`), where an fsync costs nothing: what is left is CPU."""


@dataclass
class Places:
    """Where the run's stores live: a scratch directory and, maybe, a scratch PG database."""

    directory: Path
    database: ScratchDatabase | None
    tmpfs: Path | None = None
    """A scratch directory on /dev/shm for the tmpfs rows, when they run."""

    def sqlite_url(self, tag: str, name: str) -> str:
        return f"sqlite:///{self.file(tag, name)}"

    def file(self, tag: str, name: str) -> Path:
        return self.directory / f"{tag}-{name}.sqlite3"

    def turnstore_pg(
        self, tag: str, name: str, events: bool, *, indexing: bool = True, **query: str
    ) -> TurnstorePeer:
        database, schema = self._schema(tag, name)
        url = database.turnstore_url(schema, **query)
        sizer = partial(database.size, schema)
        return TurnstorePeer(url, events=events, backend="postgres", sizer=sizer, indexing=indexing)

    def langgraph_pg(self, tag: str, name: str, peer: type[LangGraphPeer]) -> Peer:
        database, schema = self._schema(tag, name)
        return peer("postgres", database.libpq_url(schema), partial(database.size, schema))

    def _schema(self, tag: str, name: str) -> tuple[ScratchDatabase, str]:
        assert self.database is not None
        return self.database, self.database.schema(f"{tag}_{name}")


def peer_specs() -> list[PeerSpec]:
    """Every peer the benchmark knows, in the order they run."""
    f = Places.file
    return [
        PeerSpec(
            "turnstore",
            "sqlite",
            (),
            lambda p, t: _ts(p.sqlite_url(t, "ts"), False),
            scaling=True,
            tmpfs=True,
        ),
        PeerSpec(
            "turnstore+events",
            "sqlite",
            (),
            lambda p, t: _ts(p.sqlite_url(t, "tse"), True),
            scaling=True,
            tmpfs=True,
        ),
        PeerSpec(
            "turnstore-blocking",
            "sqlite",
            (),
            lambda p, t: TurnstoreBlockingPeer(p.sqlite_url(t, "tsb"), events=False),
            tmpfs=True,
        ),
        PeerSpec(
            "turnstore-blocking+events",
            "sqlite",
            (),
            lambda p, t: TurnstoreBlockingPeer(p.sqlite_url(t, "tsbe"), events=True),
            tmpfs=True,
        ),
        PeerSpec(
            "turnstore-noindex",
            "sqlite",
            (),
            lambda p, t: TurnstorePeer(p.sqlite_url(t, "tsn"), events=False, indexing=False),
            tmpfs=True,
        ),
        PeerSpec(
            "turnstore+events-noindex",
            "sqlite",
            (),
            lambda p, t: TurnstorePeer(p.sqlite_url(t, "tsen"), events=True, indexing=False),
        ),
        PeerSpec(
            "turnstore-blocking-noindex",
            "sqlite",
            (),
            lambda p, t: TurnstoreBlockingPeer(
                p.sqlite_url(t, "tsbn"), events=False, indexing=False
            ),
            tmpfs=True,
        ),
        *(_same_work(events, hop) for events in (False, True) for hop in (False, True)),
        PeerSpec(
            "langgraph-sqlite-graph",
            "sqlite",
            LANGGRAPH,
            lambda p, t: LangGraphGraphPeer("sqlite", f(p, t, "lg-graph")),
        ),
        PeerSpec(
            "langgraph-async-sqlite-graph",
            "sqlite",
            LANGGRAPH_ASYNC,
            lambda p, t: LangGraphGraphPeer("async_sqlite", f(p, t, "lga-graph")),
        ),
        PeerSpec(
            "langgraph-sqlite-direct",
            "sqlite",
            LANGGRAPH,
            lambda p, t: LangGraphDirectPeer("sqlite", f(p, t, "lg-direct")),
            True,
        ),
        PeerSpec(
            "langgraph-async-sqlite-direct",
            "sqlite",
            LANGGRAPH_ASYNC,
            lambda p, t: LangGraphDirectPeer("async_sqlite", f(p, t, "lga-direct")),
        ),
        PeerSpec(
            "agents-sqlitesession",
            "sqlite",
            ("agents",),
            lambda p, t: AgentsSessionPeer(f(p, t, "agents")),
            scaling=True,
            tmpfs=True,
        ),
        PeerSpec(
            "sqlite3-plain",
            "sqlite",
            (),
            lambda p, t: StdlibSqlitePeer(f(p, t, "plain")),
            scaling=True,
            tmpfs=True,
        ),
        PeerSpec(
            "sqlite3-plain+fts5",
            "sqlite",
            (),
            lambda p, t: StdlibFts5Peer(f(p, t, "plain-fts5")),
            tmpfs=True,
        ),
        PeerSpec(
            "disk-ceiling",
            "disk",
            (),
            lambda p, t: DiskCeilingPeer(p.directory / f"{t}-ceiling.log"),
        ),
        PeerSpec(
            "turnstore-pg",
            "postgres",
            (),
            lambda p, t: p.turnstore_pg(t, "ts", False),
            True,
        ),
        PeerSpec(
            "turnstore-pg-noindex",
            "postgres",
            (),
            lambda p, t: p.turnstore_pg(t, "tsn", False, indexing=False),
        ),
        PeerSpec(
            "turnstore-pg+events",
            "postgres",
            (),
            lambda p, t: p.turnstore_pg(t, "tse", True),
        ),
        PeerSpec(
            "langgraph-postgres-graph",
            "postgres",
            LANGGRAPH_PG,
            lambda p, t: p.langgraph_pg(t, "lg_graph", LangGraphGraphPeer),
        ),
        PeerSpec(
            "langgraph-postgres-direct",
            "postgres",
            LANGGRAPH_PG,
            lambda p, t: p.langgraph_pg(t, "lg_direct", LangGraphDirectPeer),
            True,
        ),
    ]


def _same_work(events: bool, hop: bool) -> PeerSpec:
    """`same-work`, `-async`, `+events`: stdlib sqlite3 sending a turnstore save's rows."""
    name = ("same-work-async" if hop else "same-work") + ("+events" if events else "")
    return PeerSpec(
        name,
        "sqlite",
        (),
        lambda p, t: SameWorkPeer(Places.file(p, t, name), events=events, hop=hop),
        tmpfs=True,
    )


def _ts(url: str, events: bool) -> TurnstorePeer:
    return TurnstorePeer(url, events=events)


def select_peers(
    specs: Sequence[PeerSpec], wanted: set[str] | None, pg_reason: str | None
) -> tuple[list[PeerSpec], dict[str, str]]:
    """The peers that can run here, and why each of the others cannot."""
    chosen: list[PeerSpec] = []
    skipped: dict[str, str] = {}
    for spec in specs:
        if wanted is not None and spec.name not in wanted:
            continue
        missing = [module for module in spec.requires if not importable(module)]
        if missing:
            skipped[spec.name] = (
                f"not installed ({', '.join(missing)}): pip install -e '.[bench]' or ./dev bench"
            )
        elif spec.backend == "postgres" and pg_reason is not None:
            skipped[spec.name] = pg_reason
        else:
            chosen.append(spec)
    return chosen, skipped


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def meter_for(peer: Peer, database: ScratchDatabase | None) -> ByteMeter:
    """Bytes written on a peer's behalf: /proc/self/io locally, the WAL on PostgreSQL."""
    if peer.backend == "postgres":
        return database.wal if database is not None else NoBytes()
    return ProcIo() if proc_io_available() else NoBytes()


async def open_peers(specs: Sequence[PeerSpec], places: Places, tag: str) -> list[Peer]:
    """Build and set up one fresh store per peer."""
    peers: list[Peer] = []
    try:
        for spec in specs:
            peers.append(await open_peer(spec, places, tag))
    except BaseException:
        await close_all(peers)
        raise
    return peers


async def open_peer(spec: PeerSpec, places: Places, tag: str, suffix: str = "") -> Peer:
    """Build and set up one peer's fresh store; a `suffix` names a twin (`@tmpfs`)."""
    peer = spec.make(places, tag)
    if suffix:
        peer.name = f"{peer.name}{suffix}"
        peer.label = f"{peer.label}, on tmpfs"
    peer.meter = meter_for(peer, places.database)
    await peer.setup()
    return peer


@contextlib.contextmanager
def tmpfs_directory(wanted: bool) -> Iterator[Path | None]:
    """A scratch directory on /dev/shm, or None when not wanted or there is no such tmpfs."""
    if not wanted or not os.access(SHM, os.W_OK):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="turnstore-bench-", dir=SHM) as scratch:
        yield Path(scratch)
