"""An agent's credentials name one agent. On a database set up for a shared
server each agent process logs in as its own role, which can act as that
agent only, and scsql_app as none; an agent cannot change what scsql relies
on in its own sessions; and an agent of one project hears nothing of
another's indexing, nor wakes its workers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import psycopg
import pytest

from scsql.cli import main
from scsql.core.app import Context
from scsql.coordination.client import my_channel
from scsql.core import roles, worker
from scsql.core.config import Settings, role_for
from scsql.core.db import Agent
from scsql.core.errors import ScsqlError

from ..helpers import SESSION, serial


def _per_agent(db) -> None:
    assert roles.set_login_mode(db.admin, "per_agent") == "per_agent"


def _context(db, tmp_path, agent_dsn: str | None = None) -> Context:
    """What an agent process of a shared server has: SCSQL_DSN, and SCSQL_AGENT_DSN when given."""
    return Context(Settings(dsn=db.admin, agent_dsn=agent_dsn, data_dir=tmp_path / "data", keystore=db.keystore.directory))


def _scram_matches(verifier: str, password: str) -> bool:
    """Whether a SCRAM-SHA-256 verifier (RFC 5802, as PostgreSQL stores it) was made from PASSWORD."""
    m = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", verifier)
    assert m, verifier
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(m.group(2)), int(m.group(1)))
    stored = hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
    server = hmac.new(salted, b"Server Key", "sha256").digest()
    return (stored, server) == (base64.b64decode(m.group(3)), base64.b64decode(m.group(4)))


# -- scsql_app on a shared server ------------------------------------------------


def test_on_a_database_for_a_shared_server_scsql_app_acts_as_no_agent(scsql_db):
    """scsql_app was a member, with SET, of every agent role: whoever read an
    agent process's configuration could SET ROLE to any agent of any project.
    Per-agent logins revoke it from the agents registered before and never
    grant it again; one_login gives it back."""
    db = scsql_db
    p, q = db.project(), db.project()
    before = db.agent("before", p)
    _per_agent(db)
    name = f"{SESSION}_after_{next(serial)}"
    roles.create_agent(db.admin, db.keystore, name, q, "developer")
    with psycopg.connect(db.app, autocommit=True) as app:
        for role in (before.role, role_for(name)):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(f'set role "{role}"')
    # The Python layer says what to do instead.
    with pytest.raises(ScsqlError) as err:
        Agent(db._pools[0], before.name).whoami()
    assert err.value.code == "SC027" and f"scsql agent login {before.name}" in err.value.hint
    # Back to one login for every agent (one user's machine): scsql_app acts as both again.
    assert roles.set_login_mode(db.admin, "one_login") == "one_login"
    assert before.whoami()["agent"] == before.name
    assert Agent(db._pools[0], name).whoami()["agent"] == name


def test_agent_processes_on_a_shared_server_log_in_as_their_own_role(scsql_db, tmp_path):
    """Without SCSQL_AGENT_DSN an agent process on SCSQL_DSN's server logs in
    as its own role, which acts as that agent and no other."""
    db = scsql_db
    p = db.project()
    a, b = db.agent("own", p), db.agent("other", p)
    _per_agent(db)
    ctx = _context(db, tmp_path)
    agent = ctx.open_agent(a.name)
    try:
        with agent.transaction() as conn:
            row = conn.execute("select session_user::text as login, current_setting('application_name') as app, "
                               "(select agent from scsql.whoami()) as me").fetchone()
        assert row == {"login": a.role, "app": f"scsql:{a.name}", "me": a.name}
        # The same login, named for another agent: refused, whoever it claims to be.
        with pytest.raises(ScsqlError) as err:
            Agent(agent.db, b.name).whoami()
        assert err.value.code == "SC027"
    finally:
        agent.db.close()
    # A revoked agent's own login is refused, and said so.
    roles.revoke_agent(db.admin, a.name)
    with pytest.raises(ScsqlError) as err:
        ctx.open_agent(a.name, need_key=False)
    assert err.value.code == "SC002"


def test_agent_create_issues_a_login_whose_password_the_server_holds_only_hashed(scsql_db, tmp_path, monkeypatch,
                                                                                  capsys):
    """scsql agent create on a database for a shared server prints the DSN
    its process uses and a new password, once; the server holds only the
    SCRAM verifier of that password, made by the client."""
    db = scsql_db
    project = db.project()
    _per_agent(db)
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCSQL_AGENT_DSN", raising=False)
    name = f"{SESSION}_cli_{next(serial)}"
    assert main(["agent", "create", name, "--project", project, "--role", "qa"]) == 0
    out = capsys.readouterr().out
    dsn = re.search(r"SCSQL_AGENT_DSN  (\S+)", out).group(1)
    password = re.search(r"password         (\S+)  \(shown once", out).group(1)
    assert dsn.startswith(f"postgresql://{role_for(name)}@") and password not in dsn
    assert re.search(rf"~/.pgpass        \S+:\S+:{db.name}:{role_for(name)}:{re.escape(password)}\n", out)
    with db.connect() as conn:
        verifier = conn.execute("select rolpassword from pg_authid where rolname = %s", (role_for(name),)).fetchone()
    assert _scram_matches(verifier["rolpassword"], password) and password not in verifier["rolpassword"]
    # A new password replaces it; --no-password removes it (client certificates).
    assert main(["agent", "login", name]) == 0
    again = re.search(r"password         (\S+)  \(shown once", capsys.readouterr().out).group(1)
    with db.connect() as conn:
        verifier = conn.execute("select rolpassword from pg_authid where rolname = %s", (role_for(name),)).fetchone()
        assert _scram_matches(verifier["rolpassword"], again) and not _scram_matches(verifier["rolpassword"], password)
        assert main(["agent", "login", name, "--no-password"]) == 0
        assert "client certificate whose CN is" in capsys.readouterr().out
        assert conn.execute("select rolpassword from pg_authid where rolname = %s",
                            (role_for(name),)).fetchone()["rolpassword"] is None
    # The DSN it printed is what the agent's process uses.
    ctx = Context(Settings(dsn=None, agent_dsn=dsn, data_dir=tmp_path / "data", keystore=tmp_path / "keys"))
    agent = ctx.open_agent(name)
    try:
        assert agent.whoami()["agent"] == name
    finally:
        agent.db.close()


def test_a_password_in_clear_is_refused(scsql_db):
    db = scsql_db
    a = db.agent("clear", db.project())
    with db.connect() as conn:
        for bad in ("hunter2", "md5" + "0" * 32, "SCRAM-SHA-256$4096:abc"):
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql.set_agent_password(%s, %s)", (a.name, bad))
            assert err.value.sqlstate == "SC025"
            conn.rollback()
        assert conn.execute("select rolpassword from pg_authid where rolname = %s", (a.role,)).fetchone()["rolpassword"] is None


def test_migrate_sets_a_new_shared_database_up_for_per_agent_logins(empty_db, tmp_path, monkeypatch, capsys):
    """scsql migrate on SCSQL_DSN's server: a database with no agent yet gets
    each agent its own login; one whose agents act through scsql_app is only
    warned about; --print ends with the same choice, for psql."""
    monkeypatch.setenv("SCSQL_DSN", empty_db)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    assert main(["migrate"]) == 0
    assert "each agent logs in as its own role" in capsys.readouterr().out
    assert roles.login_settings(empty_db)["one_login"] is False
    assert roles.set_login_mode(empty_db, "one_login") == "one_login"
    roles.create_project(empty_db, "p")
    name = f"{SESSION}_mig_{next(serial)}"
    roles.create_agent(empty_db, _keystore(tmp_path), name, "p", "developer")
    assert main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert "warning: every agent of this database can act through the one login scsql_app" in out
    assert roles.login_settings(empty_db)["one_login"] is True
    assert main(["migrate", "--logins", "per-agent"]) == 0
    assert roles.login_settings(empty_db)["one_login"] is False
    assert [r["other_logins"] for r in roles.agent_logins(empty_db)] == [[]]
    assert main(["migrate", "--print"]) == 0
    assert capsys.readouterr().out.endswith(
        "select scsql.set_login_mode('per_agent') where not exists (select from scsql.agents);\nreset role;\n")


def _keystore(tmp_path):
    from scsql.core.keys import Keystore

    return Keystore(tmp_path / "keys")


# -- an agent's own role settings ------------------------------------------------


def test_an_agent_changing_its_own_role_settings_changes_nothing_scsql_relies_on(scsql_db, tmp_path, capsys,
                                                                                 monkeypatch):
    """PostgreSQL lets a role set defaults for its own sessions (ALTER ROLE
    ... SET): application_name, role, work_mem all succeed. They cannot be
    refused, so scsql's client sets what it relies on when it connects, the
    worker's heartbeat names the backend the server saw, and scsql agent
    logins lists them until an administrator resets them."""
    db = scsql_db
    p = db.project()
    a, b = db.agent("setter", p), db.agent("victim", p)
    _per_agent(db)
    with psycopg.connect(db.login(a.name), autocommit=True) as conn:
        conn.execute(f"alter role current_user set application_name = 'scsql:{b.name}'")
        conn.execute(f"alter role current_user set role = '{b.role}'")  # only a NOTICE: the server checks at login
        conn.execute("alter role current_user set work_mem = '1GB'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # its connection limit is not its own to change
            conn.execute("alter role current_user connection limit -1")
    agent = _context(db, tmp_path).open_agent(a.name)
    try:
        with agent.transaction() as conn:
            seen = conn.execute("select current_user::text as acting, current_setting('application_name') as app, "
                                "pg_backend_pid() as pid, (select agent from scsql.whoami()) as me").fetchone()
        assert seen == {"acting": a.role, "app": f"scsql:{a.name}", "pid": seen["pid"], "me": a.name}
        worker.Heartbeat(agent, [], 5.0).beat(force=True)
        with db.connect() as conn:
            beat = conn.execute("select backend_pid, login from scsql.worker_heartbeats where agent_id = "
                                "(select agent_id from scsql.agents where name = %s)", (a.name,)).fetchone()
            session = conn.execute("select usename::text as login, application_name from pg_stat_activity "
                                   "where pid = %s", (beat["backend_pid"],)).fetchone()
        assert beat["login"] == a.role and session == {"login": a.role, "application_name": f"scsql:{a.name}"}
    finally:
        agent.db.close()
    listed = {r["agent"]: r for r in roles.agent_logins(db.admin)}
    assert listed[a.name]["role_settings"] == [f"application_name=scsql:{b.name}", f"role={b.role}", "work_mem=1GB"]
    assert listed[b.name]["role_settings"] == [] and listed[a.name]["other_logins"] == []
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_DATA_DIR", str(tmp_path / "data"))
    assert main(["agent", "logins"]) == 1
    assert f"application_name=scsql:{b.name}" in capsys.readouterr().out
    # Every one but role, which PostgreSQL lets no security-definer function
    # change (and which SET LOCAL ROLE overrides): a superuser removes that.
    assert main(["agent", "reset-settings", a.name]) == 0
    out = capsys.readouterr().out
    assert "removed 2 setting(s)" in out and f"a superuser runs: alter role {a.role} reset role" in out
    assert roles.agent_logins(db.admin)[0]["role_settings"] == [f"role={b.role}"]
    with db.connect() as conn:
        conn.execute(f"alter role {a.role} reset role")
    assert main(["agent", "logins"]) == 0


# -- what an agent of another project can hear ---------------------------------------


def test_indexing_is_heard_only_on_the_projects_own_secret_channel(scsql_db):
    """NOTIFY scsql_embed, '<project_id>' on a fixed channel told every agent
    which project was indexing, and when, and let any agent wake every
    project's workers. The embed channel is now derived from the project's
    secret, with a fixed hint."""
    db = scsql_db
    p, q = db.project(), db.project()
    a, spy = db.agent("indexer", p), db.agent("spy", q)
    mine = my_channel(a, "embed")
    assert re.fullmatch(r"scsql_[0-9a-f]{32}", mine) and mine != my_channel(spy, "embed")
    assert mine not in (my_channel(a), my_channel(a, "learnings"))
    with psycopg.connect(db.login(spy.name), autocommit=True) as ears, \
            psycopg.connect(db.app, autocommit=True) as workers:
        ears.execute("listen scsql_embed")
        ears.execute(f'listen "{my_channel(spy, "embed")}"')
        workers.execute(f'listen "{mine}"')
        with a.transaction() as conn:
            conn.execute("select * from scsql.index_text('doc.md', 'Kestrel runs the nightly build.', 'file')")
        heard = [(n.channel, n.payload) for n in workers.notifies(timeout=5, stop_after=1)]
        assert heard == [(mine, "embed")]
        assert list(ears.notifies(timeout=0.5)) == []
        # An outsider's NOTIFY on the old channel, or on its own, never reaches A's workers.
        ears.execute("notify scsql_embed, 'wake up'")
        ears.execute(f'notify "{my_channel(spy, "embed")}", \'wake up\'')
        assert list(workers.notifies(timeout=0.5)) == []
