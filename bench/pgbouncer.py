"""A PgBouncer in transaction mode in front of a PostgreSQL server, for tests and benchmarks.

Debian's `pgbouncer` package (1.18 on Debian 12: no named prepared statements, no startup
`options`) started on a free local port with a configuration of its own in a temporary
folder, trust authentication for the URL's user, and an admin console the tests use to kill
its server connections. As root it runs as the `postgres` user: PgBouncer refuses root.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

BINARY_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
"""Where the distribution's package puts the binary (it is not on a user's PATH)."""
START_TIMEOUT_S = 10.0


def binary() -> str | None:
    """The pgbouncer executable, or None when it is not installed."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    return next((path for path in BINARY_PATHS if os.access(path, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(upstream: Any, port: int, folder: Path, pool_size: int) -> str:
    host = upstream.hostname or "127.0.0.1"
    database = upstream.path.lstrip("/") or "postgres"
    # The URL's database by name, any other through the wildcard: a database the wildcard
    # made is dropped whole by KILL ("database removed" to every new client for a while),
    # where a named one waits for RESUME, as a production configuration's would.
    return f"""[databases]
{database} = host={host} port={upstream.port or 5432} dbname={database}
* = host={host} port={upstream.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = {pool_size}
admin_users = {upstream.username or "postgres"}
logfile = {folder}/pgbouncer.log
log_connections = 0
log_disconnections = 0
server_reset_query =
"""


class PgBouncer:
    """One PgBouncer process in transaction mode; `url(path_and_query)` points through it."""

    def __init__(self, upstream_url: str, *, pool_size: int = 20) -> None:
        executable = binary()
        if executable is None:
            raise RuntimeError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
        self.upstream = urlsplit(upstream_url)
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="turnstore-pgbouncer-"))
        user = self.upstream.username or "postgres"
        (self.folder / "users.txt").write_text(f'"{user}" ""\n')
        config = self.folder / "pgbouncer.ini"
        config.write_text(_config(self.upstream, self.port, self.folder, pool_size))
        command = [executable, str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "postgres"]
            owner = pwd.getpwnam("postgres")
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        # Its log goes to a file: a pipe no one reads would fill and stop PgBouncer dead.
        with open(self.folder / "stderr.log", "wb") as stderr:
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited at start: {self.log()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"pgbouncer did not listen within {START_TIMEOUT_S} s: {self.log()}")

    def url(self, upstream_url: str | None = None) -> str:
        """`upstream_url` (or the server's URL) with its host and port replaced by PgBouncer's."""
        parts = urlsplit(upstream_url) if upstream_url else self.upstream
        user = f"{parts.username}@" if parts.username else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def admin(self, command: str) -> None:
        """Run one command (`RECONNECT`, `KILL test`, ...) on the admin console."""
        import psycopg

        user = self.upstream.username or "postgres"
        with psycopg.connect(
            f"postgresql://{user}@127.0.0.1:{self.port}/pgbouncer", autocommit=True
        ) as connection:
            # The console speaks the simple query protocol only.
            connection.pgconn.exec_(command.encode())

    def log(self) -> str:
        """PgBouncer's log so far."""
        logs = (self.folder / name for name in ("stderr.log", "pgbouncer.log"))
        return "".join(path.read_text(errors="replace") for path in logs if path.exists())

    def close(self) -> None:
        """Stop the process and remove its folder."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
