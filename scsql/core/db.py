"""Connections, and the one agent identity a process acts as.

Every unit of work is one transaction on a pooled connection that begins with
``SET LOCAL ROLE <agent role>``; when the transaction ends the connection goes
back to the pool with no role set. The login (scsql_app by default) holds no
privileges of its own, so a bug that forgot the role could do nothing.
"""

from __future__ import annotations

import selectors
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

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


class Database:
    """A pool of connections to one server, opened eagerly so a bad DSN fails at once."""

    def __init__(self, conninfo: str, *, max_size: int = 4, application_name: str = "scsql"):
        self.conninfo = conninfo
        self.pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": False, "application_name": application_name, "row_factory": dict_row},
            configure=self._configure,
            check=self._check,
        )

    @staticmethod
    def _check(conn: psycopg.Connection) -> None:
        """A connection taken from the pool: an idle one has nothing to read
        unless the server closed it (a restart, a crash), and only then is the
        server asked, so a dead connection is replaced instead of failing a call."""
        with selectors.DefaultSelector() as sel:
            sel.register(conn.fileno(), selectors.EVENT_READ)
            if sel.select(0):
                ConnectionPool.check_connection(conn)

    def _configure(self, conn: psycopg.Connection) -> None:
        """Per-connection setup; subsystems add adapters here."""
        for hook in _CONNECTION_HOOKS:
            hook(conn)

    def open(self, timeout: float = 10.0) -> Database:
        try:
            # Fail fast on an unreachable server instead of retrying in the background.
            psycopg.connect(self.conninfo, connect_timeout=int(timeout)).close()
            self.pool.open(wait=True, timeout=timeout)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise unreachable(exc) from None
        return self

    def close(self) -> None:
        self.pool.close()

    def refuse_privileged_login(self) -> None:
        """Agent processes must log in as a role with no power of its own
        (scsql_app, or an agent's own login): never a superuser or a role that
        creates roles or bypasses row-level security."""
        with self.pool.connection() as conn, conn.transaction():
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
            with self.pool.connection() as conn, conn.transaction():
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

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        try:
            with self.db.transaction(self.role) as conn:
                yield conn
        except ScsqlError as exc:
            # SET ROLE to a role that does not exist, or that this login may not assume.
            if exc.sqlstate in ("22023", "42704") and "role" in exc.message:
                raise ScsqlError(
                    "SC003",
                    f"agent {self.name!r} is not registered on this server (no role {self.role})",
                    "scsql agent list shows the agents; an administrator adds one with scsql agent create",
                ) from None
            if exc.code == "42501" and "set role" in exc.message.lower():
                raise ScsqlError(
                    "SC003",
                    f"this login may not act as agent {self.name!r}",
                    "connect as scsql_app (SCSQL_AGENT_DSN) or as the agent's own login",
                ) from None
            raise

    def whoami(self) -> dict:
        with self.transaction() as conn:
            errors.learn_names(conn)
            return conn.execute("select * from scsql.whoami()").fetchone()
