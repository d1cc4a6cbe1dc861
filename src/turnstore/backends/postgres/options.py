"""Where and how to connect: a `postgresql://` URL parsed into options, and its secrets redacted."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import Conninfo

from turnstore.errors import ConfigError

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

OWN_PARAMETERS = (
    "schema",
    "pool_min_size",
    "pool_max_size",
    "pool_timeout",
    "pooler",
    "listen_url",
)
"""turnstore's own query parameters of a PostgreSQL URL; the others go to libpq."""


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


def _unspellable(url: str) -> str | None:
    """Why libpq cannot take the URL as text (a NUL would cut it short), or None."""
    if "\0" in url:
        return "it contains a NUL character, which would cut it short"
    try:
        url.encode()
    except UnicodeEncodeError as error:
        return f"it is not valid Unicode text (a lone surrogate at position {error.start})"
    return None


def _split_query(query: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """turnstore's own parameters of a URL's query, and libpq's, each name known and once."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", query):
        # parse_qsl would keep a stray `%` as is, where libpq refuses it.
        raise ConfigError("malformed PostgreSQL URL: invalid percent-encoding in the query")
    pairs = parse_qsl(query, keep_blank_values=True)
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
    return ours, theirs


def _conninfo_params(conninfo: str, secrets: tuple[str, ...]) -> dict[str, Any]:
    """The connection parameters libpq reads from `conninfo`; what it refuses, redacted."""
    problem: str | None = None
    try:
        return conninfo_to_dict(conninfo)
    except psycopg.Error as error:
        problem = str(error).strip()
    except UnicodeDecodeError:
        # libpq decodes `%XX` escapes to bytes; psycopg reads the values back as UTF-8.
        problem = "a percent-encoded value is not UTF-8 once decoded"
    # Raised outside the `except` blocks, so no error that could quote the URL is chained.
    raise ConfigError(f"malformed PostgreSQL URL: {_redact(problem, secrets)}")


POOLERS = ("none", "session", "transaction")
"""Values of the `pooler` URL parameter: what stands between the store and the server."""


def _check_ports(params: dict[str, Any]) -> None:
    for port in str(params.get("port") or "").split(","):
        if port and not (port.isdecimal() and 0 < int(port) < 65536):
            raise ConfigError(f"invalid port {port!r} in the PostgreSQL URL (expected 1 to 65535)")


def _listen_conninfo(url: str) -> tuple[str, list[str]]:
    """The `listen_url` parameter checked as a URL of its own, and the secrets it carries."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "listen_url must be a percent-encoded postgresql:// URL of the server itself"
        )
    inner = PostgresOptions.from_url(url)
    ours, _ = _split_query(urlsplit(url).query)
    if ours:
        raise ConfigError(
            f"listen_url takes libpq's parameters only, not {', '.join(sorted(ours))}"
        )
    return inner.conninfo, list(inner.secrets)


@dataclass(frozen=True, slots=True, repr=False)
class PostgresOptions:
    """Where and how to connect, parsed from a `postgresql://` URL; its repr shows no secret."""

    conninfo: str
    schema: str = "turnstore"
    pool_min_size: int = 1
    pool_max_size: int = 10
    pool_timeout_s: float = 30.0
    transaction_pooler: bool = False
    """The URL reaches PostgreSQL through a pooler in transaction mode (`pooler=transaction`):
    no named prepared statements, settings sent in each transaction, no `LISTEN` on it."""
    listen_conninfo: str | None = None
    """Where the live tail LISTENs (`listen_url`): the server itself, past the pooler."""
    secrets: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_url(cls, url: str) -> PostgresOptions:
        """Split turnstore's own query parameters from the libpq URL, checking both.

        Every problem is a `ConfigError` whose message quotes no secret of the URL.
        """
        problem: str | None = _unspellable(url)
        if problem is not None:
            raise ConfigError(f"malformed PostgreSQL URL: {problem}")
        secrets = _url_secrets(url)
        try:
            parts = urlsplit(url)
        except ValueError as error:
            problem = str(error)
        # Raised outside the `except` blocks, so no error that could quote the URL is chained.
        if problem is not None:
            raise ConfigError(f"malformed PostgreSQL URL: {_redact(problem, secrets)}")
        ours, theirs = _split_query(parts.query)
        # quote, not quote_plus: libpq reads a `+` as itself, not as a space.
        conninfo = urlunsplit(parts._replace(query=urlencode(theirs, quote_via=quote)))
        params = _conninfo_params(conninfo, secrets)
        secrets = _spellings(
            [*secrets, *(str(params[k]) for k in _secret_parameters() if params.get(k))]
        )
        _check_ports(params)
        listen = ours.get("listen_url")
        if listen is not None:
            listen, listen_secrets = _listen_conninfo(listen)
            secrets = _spellings([*secrets, *listen_secrets])
        pooler = ours.get("pooler", "none")
        if pooler not in POOLERS:
            raise ConfigError(
                f"pooler must be one of {', '.join(POOLERS)} (got {_redact(pooler, secrets)!r})"
            )
        try:
            options = cls(
                conninfo=conninfo,
                schema=ours.get("schema", "turnstore"),
                pool_min_size=int(ours.get("pool_min_size", 1)),
                pool_max_size=int(ours.get("pool_max_size", 10)),
                pool_timeout_s=float(ours.get("pool_timeout", 30.0)),
                transaction_pooler=pooler == "transaction",
                listen_conninfo=listen,
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
            f"pool_timeout_s={self.pool_timeout_s}, "
            f"pooler={'transaction' if self.transaction_pooler else 'none'!r}, "
            f"listen_url={self.redact(self.listen_conninfo) if self.listen_conninfo else None!r})"
        )
