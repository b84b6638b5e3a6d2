"""Connections, and the one agent identity a process acts as.

Every unit of work is one transaction on a pooled connection that begins with
``SET LOCAL ROLE <agent role>``; when the transaction ends the connection goes
back to the pool with no role set. The login holds no privileges of its own
beyond the agent's: on a shared server it is the agent's own role (SET LOCAL
ROLE to itself then also undoes any ``role`` its role's settings name), on
one user's machine scsql_app, which holds none, so a bug that forgot the role
could do nothing. The application_name is sent when connecting, where it
overrides whatever an agent set on its own role (ALTER ROLE ... SET).
"""

from __future__ import annotations

import selectors
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from . import errors
from .config import role_for
from .errors import ScsqlError


def unreachable(exc: Exception) -> ScsqlError:
    # libpq's first line carries the reason ("... failed: Connection refused");
    # the lines after it are generic advice.
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return ScsqlError(
        errors.SERVER_UNREACHABLE,
        f"cannot connect to PostgreSQL: {lines[0] if lines else repr(exc)}",
        "check SCSQL_DSN / SCSQL_AGENT_DSN, or start the embedded server with scsql up",
    )


def login_refused(exc: ScsqlError, agent: str, conninfo: str) -> ScsqlError:
    """What a failed connection of AGENT's process means, when the server
    refused the login rather than being unreachable (EXC as unreachable()
    made it; returned unchanged otherwise)."""
    from psycopg.conninfo import conninfo_to_dict

    text = exc.message
    own = conninfo_to_dict(conninfo).get("user") == role_for(agent)
    if "too many connections for role" in text:
        return ScsqlError(errors.AGENT_CONNECTION_LIMIT, f"agent {agent!r}: its login holds as many connections as its limit allows",
                          "stop some of its processes, or have an administrator raise it: "
                          f"scsql agent connection-limit N --agent {agent}")
    if own and "is not permitted to log in" in text:
        return ScsqlError(errors.AGENT_REVOKED, f"agent {agent!r} cannot log in: its role may not log in (it was revoked)",
                          "its history stays verifiable; an administrator creates a new agent (scsql agent create)")
    if own and any(m in text for m in ("password authentication failed", "no password supplied",
                                       "no pg_hba.conf entry", "certificate authentication failed")):
        return ScsqlError(errors.AGENT_LOGIN_REFUSED, f"the server refused agent {agent!r}'s own login: {text.removeprefix('cannot connect to PostgreSQL: ')}",
                          f"give the process the password scsql agent login {agent} issues (~/.pgpass, PGPASSWORD "
                          "or SCSQL_AGENT_DSN), or ask the DBA for a pg_hba.conf rule")
    return exc


class Database:
    """Connections to one server, the first opened eagerly so a bad DSN fails
    at once: a pool of up to ``max_size``, or with ``max_size=1`` one plain
    connection and no pool (a one-shot command: one connection, no pool
    import, no pool worker threads)."""

    def __init__(self, conninfo: str, *, max_size: int = 4, application_name: str = "scsql"):
        self.conninfo = conninfo
        self.application_name = application_name  # sent when connecting: beats a role's own setting
        self._kwargs = {"autocommit": False, "application_name": application_name, "row_factory": dict_row}
        self.pool = None if max_size == 1 else _Pool.make(conninfo, max_size, self._kwargs, self._configure, self._check)
        self._conn: psycopg.Connection | None = None

    @staticmethod
    def _check(conn: psycopg.Connection) -> None:
        """A connection taken from the pool: an idle one has nothing to read
        unless the server closed it (a restart, a crash), and only then is the
        server asked, so a dead connection is replaced instead of failing a call."""
        with selectors.DefaultSelector() as sel:
            sel.register(conn.fileno(), selectors.EVENT_READ)
            if sel.select(0):
                conn.execute("select 1")
                conn.rollback()

    def _configure(self, conn: psycopg.Connection) -> None:
        """Per-connection setup; subsystems add adapters here."""
        for hook in _CONNECTION_HOOKS:
            hook(conn)

    def _connect(self, timeout: float) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo, connect_timeout=max(1, int(timeout)), **self._kwargs)
        self._configure(conn)
        conn.commit()   # the hooks' queries end no transaction of their own
        return conn

    def open(self, timeout: float = 10.0) -> Database:
        """Connect: the one connection, or the pool's first. Fails fast (no
        retry in the background) on an unreachable server; an extra probe
        connection is never made."""
        try:
            if self.pool is None:
                self._conn = self._connect(timeout)
            else:
                self.pool.open_first(self._connect(timeout), timeout)
        except (psycopg.OperationalError, _Pool.Timeout) as exc:
            raise unreachable(exc) from None
        return self

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection for one transaction: the pool's, or the one connection
        (reconnected when the server closed it)."""
        if self.pool is not None:
            with self.pool.connection() as conn:
                yield conn
            return
        if self._conn is None or self._conn.closed:
            self._conn = self._connect(10.0)
        else:
            try:
                self._check(self._conn)
            except psycopg.OperationalError:
                self._conn.close()
                self._conn = self._connect(10.0)
        yield self._conn

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._conn is not None:
            self._conn.close()

    def refuse_privileged_login(self) -> None:
        """Agent processes must log in as a role with no power of its own
        (scsql_app, or an agent's own login): never a superuser or a role that
        creates roles or bypasses row-level security."""
        with self.connection() as conn, conn.transaction():
            row = conn.execute(
                "select rolname, rolsuper, rolcreaterole, rolbypassrls from pg_catalog.pg_roles "
                "where rolname = session_user").fetchone()
        if row and (row["rolsuper"] or row["rolcreaterole"] or row["rolbypassrls"]):
            raise ScsqlError(
                errors.AGENT_LOGIN_PRIVILEGED,
                f"agent processes may not log in as {row['rolname']}, which is a superuser or administers roles",
                "set SCSQL_AGENT_DSN to the scsql_app login (or the agent's own login)",
            )

    @contextmanager
    def transaction(self, role: str | None = None) -> Iterator[psycopg.Connection]:
        """One transaction; ``role`` is SET LOCAL first. Database errors become ScsqlError."""
        try:
            with self.connection() as conn, conn.transaction():
                if role is not None:
                    conn.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
                yield conn
        except psycopg.OperationalError as exc:
            if exc.sqlstate is None:
                raise unreachable(exc) from None
            raise errors.from_psycopg(exc) from None
        except psycopg.Error as exc:
            raise errors.from_psycopg(exc) from None
        except UnicodeEncodeError as exc:  # a str holding a lone surrogate cannot be sent as UTF-8
            raise ScsqlError(errors.INVALID_ARGUMENT, f"an argument is not valid Unicode text: {exc.reason}",
                             "send well-formed UTF-8: a lone surrogate (\\ud800-\\udfff) is not a character") from None


class _Pool:
    """psycopg_pool, imported only when a pool is made."""

    class Timeout(Exception):
        pass

    @staticmethod
    def make(conninfo, max_size, kwargs, configure, check):
        import psycopg_pool

        _Pool.Timeout = psycopg_pool.PoolTimeout

        class Pool(psycopg_pool.ConnectionPool):
            def open_first(self, conn: psycopg.Connection, timeout: float) -> None:
                """Open the pool with CONN, already connected, as its first
                connection (min_size 1 is then met without connecting again)."""
                self._first = conn
                self.open(wait=True, timeout=timeout)

            def _connect(self, timeout=None):
                first = getattr(self, "_first", None)
                if first is not None:
                    self._first = None
                    # Accounted as the pool's own connection.
                    first._pool = self
                    self._stats[self._CONNECTIONS_NUM] += 1
                    self._set_connection_expiry_date(first)
                    return first
                return super()._connect(timeout)

        return Pool(conninfo, min_size=1, max_size=max_size, open=False, kwargs=kwargs, configure=configure,
                    check=check)


# Functions run on every new pooled connection (for example, registering the
# pgvector adapter). Subsystems append to it at import time.
_CONNECTION_HOOKS: list = []


def on_connect(hook):
    """Register ``hook(conn)`` to run on every new pooled connection."""
    _CONNECTION_HOOKS.append(hook)
    return hook


class Agent:
    """The agent a process acts as: named once, explicitly, and never changed."""

    def __init__(self, db: Database, name: str, key=None):
        self.db = db
        self.name = name
        self.role = role_for(name)
        self.key = key  # Ed25519 private key, when loaded
        self.home: Path | None = None  # the data directory of the process, when it has one (its hook spool, ...)
        self._rules = None

    def rules(self, conn: psycopg.Connection | None = None):
        """The rules the client applies as the database does (core/rules.py),
        read once (on CONN, when given)."""
        if self._rules is None:
            from .rules import Rules

            if conn is not None:
                self._rules = Rules.read(conn)
            else:
                with self.transaction() as c:
                    self._rules = Rules.read(c)
        return self._rules

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        try:
            with self.db.transaction(self.role) as conn:
                yield conn
        except ScsqlError as exc:
            # SET ROLE to a role that does not exist, or that this login may not assume.
            if exc.sqlstate in ("22023", "42704") and "role" in exc.message:
                raise ScsqlError(
                    errors.AGENT_UNKNOWN,
                    f"agent {self.name!r} is not registered on this server (no role {self.role})",
                    "scsql agent list shows the agents; an administrator adds one with scsql agent create",
                ) from None
            if exc.code == "42501" and "set role" in exc.message.lower():
                raise ScsqlError(
                    errors.LOGIN_NOT_THIS_AGENT,
                    f"this login may not act as agent {self.name!r}",
                    "log in as the agent's own role: SCSQL_AGENT_DSN as scsql agent login "
                    f"{self.name} prints it (scsql_app acts as an agent only on a one-user server)",
                ) from None
            raise

    def whoami(self) -> dict:
        with self.transaction() as conn:
            errors.learn_names(conn)
            return conn.execute("select * from scsql.whoami()").fetchone()
