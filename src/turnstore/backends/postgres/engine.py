"""The PostgreSQL engine: a psycopg connection pool, row locks, and PostgreSQL's dialect."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import Conninfo, TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from turnstore.backends.postgres.notify import PostgresWatch
from turnstore.backends.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from turnstore.backends.postgres.upkeep import PostgresUpkeep
from turnstore.backends.sql.engine import Dialect, Tx
from turnstore.errors import (
    ConfigError,
    ReadOnlyStore,
    SchemaError,
    StorageError,
    StoreClosed,
    TurnstoreError,
)
from turnstore.records.base import WriterStats

T = TypeVar("T")

_BLOB_LOCK_KEY = "hashtextextended(current_schema() || ':blobs', 0)"
POSTGRES = Dialect(
    placeholder="%s",
    # Row locks stand in for SQLite's single writer: a session row is locked for the whole
    # save, so sequences of checkpoints and events advance one writer at a time per session.
    lock=" FOR UPDATE",
    # A fork keeps its parent from being deleted until the child row exists.
    key_share=" FOR KEY SHARE",
    now="CAST(FLOOR(EXTRACT(EPOCH FROM now())) AS BIGINT)",
    now_ms="CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
    in_ids="{column} = ANY(?)",
    id_list=lambda ids: ids,
    # A lateral subquery behind OFFSET 0 is planned on its own, once per tree row, so each
    # step is a lookup of sessions_parent_idx even without statistics; as a plain join, a
    # planner that has none (no ANALYZE since a bulk load) hashes a scan of every session.
    children=(
        "tree CROSS JOIN LATERAL (SELECT session_id FROM sessions"
        " WHERE parent_session_id = tree.session_id OFFSET 0) AS child"
    ),
    # Commits share this lock and garbage collection takes it alone, so a blob a commit is
    # about to reference is never deleted between the commit's insert and its head update.
    blob_read_lock=f"SELECT pg_advisory_xact_lock_shared({_BLOB_LOCK_KEY})",
    blob_write_lock=f"SELECT pg_advisory_xact_lock({_BLOB_LOCK_KEY})",
    server_cursors=True,
    # Pipeline mode needs libpq 14 or newer (psycopg's binary wheels bundle one).
    pipelined=psycopg.Pipeline.is_supported(),
)


_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""How a read transaction begins: one snapshot for all its statements."""


def _pipelined(connection: psycopg.Connection[Any], begin: str, work: Callable[[], T]) -> T:
    """Run `work` in one transaction in pipeline mode, begun with `begin`, and commit.

    BEGIN, every statement whose rows are not read, and COMMIT are sent without waiting, so
    a save waits for the server only where it reads rows and at the commit. BEGIN and COMMIT
    are sent as statements: psycopg's transaction blocks sync the pipeline at both ends.
    A statement that fails raises at the next read or at the commit, the transaction
    aborted; whatever fails, the connection goes back to the pool outside any transaction.
    """
    try:
        with connection.pipeline() if POSTGRES.pipelined else contextlib.nullcontext():
            connection.execute(begin)
            result = work()
            connection.execute("COMMIT")
    except BaseException:
        if connection.info.transaction_status != TransactionStatus.IDLE and not connection.closed:
            with contextlib.suppress(psycopg.Error):
                connection.execute("ROLLBACK")
        raise
    return result


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_RETRIES = 5
"""Attempts of a write whose transaction lost a deadlock or serialization race."""

OWN_PARAMETERS = ("schema", "pool_min_size", "pool_max_size", "pool_timeout")
"""turnstore's own query parameters of a PostgreSQL URL; the others go to libpq."""

_REFUSED = re.compile(
    r'role ".*" does not exist|database ".*" does not exist|authentication failed'
    r"|no pg_hba\.conf entry|pg_hba\.conf rejects|no password supplied"
    r"|is not permitted to log in|permission denied for database",
    re.DOTALL,
)
"""What the server answers a connection whose URL names a wrong role, password or database.

libpq gives no SQLSTATE for a failed connection, so its (English) message is all there is."""


@functools.cache
def libpq_parameters() -> tuple[str, ...]:
    """The connection parameters the installed libpq takes in a URL's query, sorted."""
    # `ssl=true` is libpq's one alias outside its list of keywords.
    return tuple(sorted({o.keyword.decode() for o in Conninfo.get_defaults()} | {"ssl"}))


@functools.cache
def _secret_parameters() -> frozenset[str]:
    # libpq marks its secret options with "*" (password, sslpassword, ...).
    marked = {o.keyword.decode() for o in Conninfo.get_defaults() if o.dispchar == b"*"}
    return frozenset(marked | {"password", "scram_client_key", "scram_server_key"})


def _url_secrets(url: str) -> tuple[str, ...]:
    """Every spelling of the secrets a URL carries, found without a parser that could fail."""
    found: list[str] = []
    netloc = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    userinfo, at, _ = netloc.rpartition("@")
    if at and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    for name, value in re.findall(r"[?&]([^=&#]+)=([^&#]*)", url):
        if unquote_plus(name) in _secret_parameters():
            found.append(value)
    return _spellings(found)


def _spellings(secrets: list[str]) -> tuple[str, ...]:
    spelt = {form for secret in secrets for form in (secret, unquote(secret), unquote_plus(secret))}
    spelt |= {quote(form, safe="") for form in spelt}
    # Longest first, so a secret that contains another is replaced whole.
    return tuple(sorted((form for form in spelt if form), key=len, reverse=True))


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


@dataclass(frozen=True, slots=True, repr=False)
class PostgresOptions:
    """Where and how to connect, parsed from a `postgresql://` URL; its repr shows no secret."""

    conninfo: str
    schema: str = "turnstore"
    pool_min_size: int = 1
    pool_max_size: int = 10
    pool_timeout_s: float = 30.0
    secrets: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_url(cls, url: str) -> PostgresOptions:
        """Split turnstore's own query parameters from the libpq URL, checking both.

        Every problem is a `ConfigError` whose message quotes no secret of the URL.
        """
        secrets = _url_secrets(url)
        problem: str | None = None
        try:
            parts = urlsplit(url)
        except ValueError as error:
            problem = str(error)
        # Raised outside the `except` blocks, so no error that could quote the URL is chained.
        if problem is not None:
            raise ConfigError(f"malformed PostgreSQL URL: {_redact(problem, secrets)}")
        if re.search(r"%(?![0-9A-Fa-f]{2})", parts.query):
            # parse_qsl would keep a stray `%` as is, where libpq refuses it.
            raise ConfigError("malformed PostgreSQL URL: invalid percent-encoding in the query")
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        names = [name for name, _ in pairs]
        unknown = sorted(set(names) - {*OWN_PARAMETERS, *libpq_parameters()})
        if unknown:
            raise ConfigError(
                f"unknown PostgreSQL URL parameter {', '.join(map(repr, unknown))}; "
                f"turnstore's are {', '.join(OWN_PARAMETERS)}, and libpq's are "
                f"{', '.join(libpq_parameters())}"
            )
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(f"PostgreSQL URL parameter given twice: {', '.join(repeated)}")
        ours = {name: value for name, value in pairs if name in OWN_PARAMETERS}
        theirs = [(name, value) for name, value in pairs if name not in OWN_PARAMETERS]
        # quote, not quote_plus: libpq reads a `+` as itself, not as a space.
        conninfo = urlunsplit(parts._replace(query=urlencode(theirs, quote_via=quote)))
        params: dict[str, Any] = {}
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.Error as error:
            problem = str(error).strip()
        if problem is not None:
            raise ConfigError(f"malformed PostgreSQL URL: {_redact(problem, secrets)}")
        secrets = _spellings(
            [*secrets, *(str(params[k]) for k in _secret_parameters() if params.get(k))]
        )
        for port in str(params.get("port") or "").split(","):
            if port and not (port.isdecimal() and 0 < int(port) < 65536):
                raise ConfigError(
                    f"invalid port {port!r} in the PostgreSQL URL (expected 1 to 65535)"
                )
        try:
            options = cls(
                conninfo=conninfo,
                schema=ours.get("schema", "turnstore"),
                pool_min_size=int(ours.get("pool_min_size", 1)),
                pool_max_size=int(ours.get("pool_max_size", 10)),
                pool_timeout_s=float(ours.get("pool_timeout", 30.0)),
                secrets=secrets,
            )
        except ValueError:
            problem = "pool_min_size, pool_max_size and pool_timeout must be numbers"
        if problem is not None:
            raise ConfigError(problem)
        if not _SCHEMA_NAME.fullmatch(options.schema):
            raise ConfigError("schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*)")
        if not 0 <= options.pool_min_size <= options.pool_max_size or options.pool_max_size < 1:
            raise ConfigError("the pool needs 0 <= pool_min_size <= pool_max_size and a size >= 1")
        return options

    def redact(self, text: str) -> str:
        """Replace every secret of the URL (password and the like) in a message by `***`."""
        return _redact(text, self.secrets)

    def __repr__(self) -> str:
        return (
            f"PostgresOptions(url={self.redact(self.conninfo)!r}, schema={self.schema!r}, "
            f"pool_min_size={self.pool_min_size}, pool_max_size={self.pool_max_size}, "
            f"pool_timeout_s={self.pool_timeout_s})"
        )


def translated(options: PostgresOptions, call: Callable[[], T]) -> T:
    """Run `call`, turning driver errors into `StorageError` with no trace of the original.

    The new error is raised outside the `except` block so it carries no `__context__`: the
    driver's own error can quote connection details that must not reach logs.
    """
    try:
        return call()
    except PoolClosed:
        failure: TurnstoreError = StoreClosed("the store is closed")
    except (psycopg.Error, PoolTimeout) as error:
        failure = storage_error(error, options)
    raise failure


def storage_error(error: BaseException, options: PostgresOptions) -> StorageError:
    """Wrap a driver error in the public hierarchy; connection loss and lock races retry."""
    retryable = isinstance(
        error,
        psycopg.OperationalError
        | PoolTimeout
        | errors.DeadlockDetected
        | errors.SerializationFailure,
    )
    return StorageError(f"PostgreSQL error: {options.redact(str(error))}", retryable=retryable)


class PostgresEngine:
    """A connection pool: reads on the caller's thread, writes on a pool of writer threads.

    Nothing here is process-local state that correctness depends on: every ordering rule is
    enforced by row locks in the database, so any number of processes on any number of hosts
    can share one schema.
    """

    def __init__(self, url: str, *, read_only: bool = False, any_version: bool = False) -> None:
        self.options = options = PostgresOptions.from_url(url)
        self._read_only = read_only
        self._any_version = any_version and read_only
        self._pool = self._open_pool()
        self._transactions = 0
        self._counter = threading.Lock()
        try:
            self._prepare_schema()
        except BaseException:
            self._pool.close()
            raise
        self._writes = ThreadPoolExecutor(
            options.pool_max_size, thread_name_prefix="turnstore-postgres-write"
        )
        self._watch = PostgresWatch(options.conninfo, options.schema, self._pool)

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        options = self.options
        # The store's statements are short index lookups; JIT compiling one costs more than
        # running it (13-200 ms, seen on tree walks whose cost estimate had no statistics).
        # First, so a URL that asks for `-c jit=on` still gets it.
        settings = "-c jit=off"
        # The store's own settings go after the URL's `options`, which they would replace.
        given = conninfo_to_dict(options.conninfo).get("options")
        if given:
            settings = f"{settings} {given}"
        settings += f" -c search_path={options.schema}"
        if self._read_only:
            settings += " -c default_transaction_read_only=on"

        def connect() -> ConnectionPool[psycopg.Connection[Any]]:
            # One direct connection first, so an unreachable server fails at once with the
            # server's own reason instead of a pool time-out.
            psycopg.connect(options.conninfo, connect_timeout=10).close()
            pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                options.conninfo,
                min_size=options.pool_min_size,
                max_size=options.pool_max_size,
                timeout=options.pool_timeout_s,
                kwargs={"autocommit": True, "options": settings},
                name="turnstore",
                open=False,
            )
            pool.open(wait=options.pool_min_size > 0, timeout=options.pool_timeout_s)
            return pool

        try:
            return translated(options, connect)
        except StorageError as error:
            if not _REFUSED.search(error.message):
                raise
            # A wrong role, password or database fails every retry alike: not retryable.
            refused = ConfigError(
                error.message.replace("PostgreSQL error:", "PostgreSQL refused the connection:", 1)
                + " (check the user, password and database the URL names)"
            )
        # Raised outside the `except` block, so the retryable error is not its context.
        raise refused

    def _prepare_schema(self) -> None:
        translated(self.options, self._migrate)

    def _migrate(self) -> None:
        schema = self.options.schema
        with self._pool.connection() as connection, connection.transaction():
            # One migrator at a time per schema, across processes and hosts.
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"turnstore:{schema}",)
            )
            version = self._version(connection)
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f'PostgreSQL schema "{schema}" is at version {version}; this build of '
                    f"turnstore supports version {SCHEMA_VERSION} (upgrade turnstore)"
                )
            if self._read_only:
                if version != SCHEMA_VERSION and not self._any_version:
                    raise SchemaError(
                        f'PostgreSQL schema "{schema}" is at version {version}, not '
                        f"{SCHEMA_VERSION}; open it once for writing to migrate it"
                    )
                return
            connection.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
            connection.execute(
                "CREATE TABLE IF NOT EXISTS turnstore_schema (version INTEGER NOT NULL)"
            )
            for number in range(version, SCHEMA_VERSION):
                connection.execute(MIGRATIONS[number])
                connection.execute(
                    "INSERT INTO turnstore_schema (version) VALUES (%s)", (number + 1,)
                )

    def _version(self, connection: psycopg.Connection[Any]) -> int:
        exists = connection.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{self.options.schema}.turnstore_schema",)
        ).fetchone()
        if not exists or not exists[0]:
            return 0
        row = connection.execute("SELECT max(version) FROM turnstore_schema").fetchone()
        return int(row[0] or 0) if row else 0

    @property
    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """The engine's connection pool (autocommit connections on the store's schema)."""
        return self._pool

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return self._read_only

    @property
    def schema(self) -> str:
        """The store's schema."""
        return self.options.schema

    def run_translated(self, call: Callable[[], T]) -> T:
        """Run `call`, turning driver errors into turnstore errors without the password."""
        return translated(self.options, call)

    def schema_version(self) -> int:
        """The schema version the store's schema is at."""

        def run() -> int:
            with self._pool.connection() as connection:
                return self._version(connection)

        return translated(self.options, run)

    def upkeep(self) -> PostgresUpkeep:
        """The maintenance calls of this schema."""
        return PostgresUpkeep(self)

    def read(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in one repeatable-read, read-only transaction."""

        def transaction() -> T:
            with self._pool.connection() as connection:
                tx = Tx(connection, POSTGRES)
                return _pipelined(connection, _READ, lambda: work(tx))

        return translated(self.options, transaction)

    def write(self, work: Callable[[Tx], T]) -> Future[T]:
        """Run `work` in its own transaction on a writer thread."""
        if self._read_only:
            raise ReadOnlyStore("the store was opened read-only")
        try:
            return self._writes.submit(self._write_now, work)
        except RuntimeError:
            # The writer pool shuts down in close(); a call that raced it sees a closed store.
            raise StoreClosed("the store is closed") from None

    def write_blocking(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in its own transaction on a writer thread and wait for its COMMIT."""
        return self.write(work).result()

    def _write_now(self, work: Callable[[Tx], T]) -> T:
        def transaction() -> T:
            with self._pool.connection() as connection:
                tx = Tx(connection, POSTGRES)
                result = _pipelined(connection, "BEGIN", lambda: work(tx))
            # COMMIT returned. The notification goes out from another connection (see
            # `notify`), never inside the transaction.
            if tx.event_sessions:
                self._watch.committed(tx.event_sessions)
            return result

        failure: TurnstoreError | None = None
        for _ in range(_RETRIES):
            try:
                result = transaction()
            except (errors.DeadlockDetected, errors.SerializationFailure) as error:
                # The transaction was rolled back whole; running it again is safe.
                failure = storage_error(error, self.options)
                continue
            except TurnstoreError:
                raise
            except PoolClosed:
                failure = StoreClosed("the store is closed")
                break
            except (psycopg.Error, PoolTimeout) as error:
                failure = storage_error(error, self.options)
                break
            with self._counter:
                self._transactions += 1
            return result
        # Raised outside the `except` blocks, so the driver's error is not its context.
        assert failure is not None
        raise failure

    def writer_stats(self) -> WriterStats:
        """Return how many write transactions committed (one write each)."""
        return WriterStats(self._transactions, self._transactions)

    def watch(self) -> PostgresWatch:
        """The store's waiters, notification sender and listener."""
        return self._watch

    def close(self) -> None:
        """Finish running writes, then close the pool."""
        if hasattr(self, "_writes"):
            self._writes.shutdown(wait=True)
        if hasattr(self, "_watch"):
            # After the writes, so their notifications are sent; before the pool closes.
            self._watch.close()
        self._pool.close()
