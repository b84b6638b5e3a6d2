"""A scratch scsql database for a benchmark: created on the server the
command points at (SCSQL_DSN or the embedded server), migrated, given one
project and one agent, and dropped afterwards with the agent's role."""

from __future__ import annotations

import secrets
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..core import roles
from ..core.config import APP_ROLE, role_for
from ..core.db import Agent, Database
from ..core.migrate import Migrator
from ..core.keys import Keystore


@dataclass
class Scratch:
    admin: str  # administrator's conninfo of the scratch database
    project: str
    agent: Agent

    def connect(self, **kw) -> psycopg.Connection:
        from psycopg.rows import dict_row

        return psycopg.connect(self.admin, row_factory=dict_row, **kw)


def _with_db(conninfo: str, dbname: str, user: str | None = None) -> str:
    parts = conninfo_to_dict(conninfo)
    parts["dbname"] = dbname
    if user is not None:
        parts["user"] = user
        parts.pop("password", None)
    return make_conninfo(**parts)


@contextmanager
def exit_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into SystemExit for the block, so a terminated benchmark
    still runs its cleanup (finally blocks drop what it created)."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def scratch(admin_conninfo: str, label: str, agent_conninfo: str | None = None) -> Iterator[Scratch]:
    token = secrets.token_hex(3)
    dbname = f"scsql_bench_{label}_{token}"
    agent_name = f"bench_{label}_{token}"
    project = f"bench-{label}"
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
    admin = _with_db(admin_conninfo, dbname)
    db: Database | None = None
    with exit_on_sigterm():
        try:
            print(f"scratch database {dbname}: migrating", file=sys.stderr)
            Migrator(admin).run()
            with tempfile.TemporaryDirectory(prefix="scsql-bench-") as keys:
                roles.create_project(admin, project)
                roles.create_agent(admin, Keystore(Path(keys)), agent_name, project, "developer")
                app = _with_db(agent_conninfo, dbname) if agent_conninfo else _with_db(admin_conninfo, dbname, APP_ROLE)
                try:
                    db = Database(app, max_size=2, application_name="scsql-bench").open()
                except Exception:  # noqa: BLE001 - scsql_app may not log in here: act from the admin login
                    db = Database(admin, max_size=2, application_name="scsql-bench").open()
                yield Scratch(admin, project, Agent(db, agent_name))
        finally:
            if db is not None:
                db.close()
            with psycopg.connect(admin_conninfo, autocommit=True) as conn:
                conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(dbname)))
                conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role_for(agent_name))))
            print(f"scratch database {dbname}: dropped", file=sys.stderr)
