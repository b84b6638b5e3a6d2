"""Scratch databases for benchmarks: each run gets a database of its own on
the server the command points at (SCSQL_DSN or the embedded server),
migrated, with one project and the agents it adds, dropped afterwards with
the agents' roles."""

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
from ..core.keys import Keystore
from ..core.migrate import Migrator


def with_db(conninfo: str, dbname: str, user: str | None = None) -> str:
    """``conninfo`` naming another database (and another user, without its password)."""
    parts = conninfo_to_dict(conninfo)
    parts["dbname"] = dbname
    if user is not None:
        parts["user"] = user
        parts.pop("password", None)
    return make_conninfo(**parts)


class ScratchDatabase:
    """One benchmark's database: ``create()`` makes and migrates it with one
    project, ``add_agent`` registers agents (keys in a temporary keystore),
    ``open_agent`` connects as one, ``drop()`` removes it all (not when
    ``keep`` is set, so it can be inspected)."""

    def __init__(self, server_admin: str, label: str):
        token = secrets.token_hex(3)
        self.server_admin = server_admin
        self.name = f"scsql_bench_{label}_{token}"
        self.admin = with_db(server_admin, self.name)  # an administrator, in the scratch database
        self.project = f"bench-{label}-{token}"
        self.keep = False
        self._keys = tempfile.TemporaryDirectory(prefix="scsql-bench-")
        self.keystore = Keystore(Path(self._keys.name))
        self.agents: list[str] = []
        self._pools: list[Database] = []

    def create(self, migrate: bool = True) -> ScratchDatabase:
        with psycopg.connect(self.server_admin, autocommit=True) as conn:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(self.name)))
        if migrate:
            print(f"scratch database {self.name}: migrating", file=sys.stderr)
            Migrator(self.admin).run()
            roles.create_project(self.admin, self.project)
        return self

    def add_agent(self, name: str, team_role: str = "developer") -> str:
        roles.create_agent(self.admin, self.keystore, name, self.project, team_role)
        self.agents.append(name)
        return name

    def open_agent(self, name: str, login: str | None = None, with_key: bool = True, max_size: int = 2) -> Agent:
        """The agent ``name`` on a pool of its own, logged in as ``login`` (default: the administrator)."""
        db = Database(login or self.admin, max_size=max_size, application_name=f"scsql-bench:{name}").open()
        self._pools.append(db)
        return Agent(db, name, self.keystore.load(name) if with_key else None)

    def drop(self) -> None:
        for db in self._pools:
            db.close()
        self._pools.clear()
        if not self.keep:
            with psycopg.connect(self.server_admin, autocommit=True) as conn:
                conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(self.name)))
                for name in self.agents:
                    conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role_for(name))))
            print(f"scratch database {self.name}: dropped", file=sys.stderr)
        else:
            print(f"scratch database {self.name}: kept", file=sys.stderr)
        self._keys.cleanup()


@dataclass
class Scratch:
    admin: str  # administrator's conninfo of the scratch database
    project: str
    agent: Agent

    def connect(self, **kw) -> psycopg.Connection:
        from psycopg.rows import dict_row

        return psycopg.connect(self.admin, row_factory=dict_row, **kw)


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
def scratch(admin_conninfo: str, label: str, agent_conninfo: str | None = None, keep: bool = False) -> Iterator[Scratch]:
    """A scratch database with one agent, acting over the agents' login (the
    administrator's when that login may not connect here); with KEEP it is
    not dropped afterwards (its name is printed)."""
    scratch_db = ScratchDatabase(admin_conninfo, label)
    scratch_db.keep = keep
    with exit_on_sigterm():
        try:
            scratch_db.create()
            name = scratch_db.add_agent(f"bench_{label}_{scratch_db.name.rsplit('_', 1)[1]}")
            app = with_db(agent_conninfo, scratch_db.name) if agent_conninfo else \
                with_db(admin_conninfo, scratch_db.name, APP_ROLE)
            try:
                agent = scratch_db.open_agent(name, app, with_key=False)
            except Exception:  # noqa: BLE001 - scsql_app may not log in here: act from the admin login
                agent = scratch_db.open_agent(name, with_key=False)
            yield Scratch(scratch_db.admin, scratch_db.project, agent)
        finally:
            scratch_db.drop()
