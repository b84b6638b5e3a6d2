"""Identity: one role per agent, isolation between projects under forced RLS,
identity from the role and never from an argument, revocation, and clear
errors for bad input that leave nothing half-done."""

from __future__ import annotations

import os
import stat

import psycopg
import pytest

from scsql.core import roles
from scsql.core.config import role_for
from scsql.core.db import Agent, Database
from scsql.core.errors import ScsqlError
from scsql.core.keys import generate, public_bytes

# Tables that carry no project_id: catalogues every agent may read, and tables
# whose rows belong to a project through the agent they name.
GLOBAL_TABLES = {"schema_migrations", "error_codes", "chain_break_kinds", "team_roles"}
# Audit catalogues: the registry of chained tables, the model price list, the
# auditor's public keys and per-table partition settings belong to no project.
GLOBAL_TABLES |= {"chained_tables", "model_prices", "auditor_keys", "partition_settings"}
# A partition holds rows of every project: its retirement and the retention settings log are global.
GLOBAL_TABLES |= {"partition_retirements", "partition_settings_log"}
GLOBAL_TABLES.add("chain_settings")  # one row: the clock tolerance of every chain, set by administrators
GLOBAL_TABLES.add("login_settings")  # one row: how agent processes log in, set by administrators
GLOBAL_TABLES.add("embed_models")  # catalogue of embedding models: name, dimension (one HNSW index each)
GLOBAL_TABLES.add("applied_definitions")  # one row: the checksum of the sql/ and policies/ files applied last
THROUGH_AGENT = {"agent_keys"}


@pytest.fixture
def two_projects(scsql_db):
    pa, pb = scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("a", pa)
    b = scsql_db.agent("b", pb)
    return scsql_db, a, b


def _fill(db, agent, orch) -> None:
    """Rows of the agent's project in every subsystem, written as its agents write them."""
    from scsql.api import Api

    api, boss = Api(agent), Api(orch)
    api.call("remember", key="deploy", value="staging deploys from ci/deploy.sh", importance=4)
    api.call("index_text", path="docs/notes.md", content="# Notes\nThe parser lives in src/parser.py.")
    api.call("summarize_session", summary={"done": "fixed the parser", "decisions": ["keep it small"]})
    session = api.call("start_session", client="test", title="work")
    call = api.call("record_tool_call", tool="Read", session_id=session["session_id"], input_tokens=3)
    for cls in ("public", "internal", "restricted"):
        api.call("record_outcome", kind="failed", summary=f"{cls} failure", tool_call_id=call["tool_call_id"],
                 classification=cls)
    task = boss.call("enqueue_task", role=agent.whoami()["team_role"], payload={"do": "x"},
                     exclusive_files=["src/parser.py"])
    boss.call("enqueue_task", role="qa", payload={"do": "y"})
    claimed = api.call("claim_task", n=1)
    api.call("complete_task", task=task["task_id"], token=claimed[0]["lease_token"], result={"ok": True})
    boss.call("broadcast", type="ASSIGN", to_agent=agent.name, payload={"go": True})
    [msg] = api.call("replay_messages")
    api.call("ack_message", message=msg["message_id"])


def _tables(conn) -> list[tuple[str, bool]]:
    return [(r["relname"], r["has_project"]) for r in conn.execute("""
        select c.relname,
               exists (select from pg_attribute a where a.attrelid = c.oid
                       and a.attname = 'project_id' and not a.attisdropped) as has_project
        from pg_class c
        where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
        order by 1
    """).fetchall()]


def test_agent_sees_no_row_of_another_project_in_any_table(two_projects):
    db, a, b = two_projects
    with db.connect() as conn:
        pb = conn.execute("select p.name from scsql.projects p join scsql.agents g using (project_id) "
                          "where g.name = %s", (b.name,)).fetchone()["name"]
    _fill(db, b, db.agent("b_boss", pb, "orchestrator"))
    with db.connect() as conn:
        tables = _tables(conn)
        b_project = conn.execute("select project_id from scsql.agents where name = %s", (b.name,)).fetchone()
        filled = [t for t, has in tables if has and conn.execute(
            f"select exists (select from scsql.{t} where project_id = %s) as x", (b_project["project_id"],)
        ).fetchone()["x"]]
    # Project B really has rows in most tables (else the check below proves little).
    assert len(filled) >= 15, filled
    seen_own = 0
    with db.connect(db.login(a.name)) as conn:
        for table, has_project in tables:
            if has_project:
                if not conn.execute(f"select has_table_privilege('scsql.{table}', 'select') as ok").fetchone()["ok"]:
                    continue
                rows = conn.execute(f"select project_id from scsql.{table}").fetchall()
                assert b_project["project_id"] not in {r["project_id"] for r in rows}, table
                seen_own += len(rows)
            elif table in THROUGH_AGENT:
                rows = conn.execute(
                    f"select a.project_id from scsql.{table} t join scsql.agents a using (agent_id)").fetchall()
                assert b_project["project_id"] not in {r["project_id"] for r in rows}, table
                keys = conn.execute(f"select count(*) as n from scsql.{table}").fetchone()["n"]
                assert keys == len(rows), f"{table} shows rows of agents A cannot see"
            else:
                assert table in GLOBAL_TABLES, f"table {table} has no project_id: scope it or list it here"
    assert seen_own > 0  # A does see its own project's rows


def test_set_role_to_another_agent_fails(two_projects):
    db, a, b = two_projects
    with db.connect(db.login(a.name)) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"set role {b.role}")


def test_agent_cannot_act_for_another_agent_through_any_function(two_projects):
    db, a, b = two_projects
    calls = [
        ("select scsql.revoke_agent(%s)", (b.name,)),
        ("select scsql.rotate_agent_key(%s, %s)", (b.name, public_bytes(generate()))),
        ("select scsql.register_agent(%s, %s, 'developer', %s)", (b.name + "x", "x", public_bytes(generate()))),
        ("select scsql.grant_project_read(%s, %s)", ("x", b.name)),
        ("select scsql.create_project(%s)", ("stolen",)),
    ]
    for query, args in calls:
        with pytest.raises(ScsqlError) as err, a.transaction() as conn:
            conn.execute(query, args)
        assert err.value.code == "42501", query
    # Nothing in scsql's tables can be written directly either.
    with db.connect(db.login(a.name)) as conn:
        for table in ("agents", "agent_keys", "projects", "project_grants", "team_roles"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"delete from scsql.{table}")
            conn.rollback()


def test_whoami_is_derived_from_the_role(two_projects):
    db, a, b = two_projects
    me = a.whoami()
    assert me["agent"] == a.name and me["role_name"] == a.role and me["key_id"] == 1
    assert me["public_key"] == public_bytes(a.key).hex()
    with db.connect(db.login(b.name)) as conn:
        assert conn.execute("select agent from scsql.whoami()").fetchone()["agent"] == b.name


def test_not_an_agent_is_told_so(scsql_db):
    with scsql_db.connect() as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select * from scsql.whoami()")
    assert err.value.sqlstate == "SC001"


def test_revoked_agent_can_no_longer_act_but_stays_listed(two_projects):
    db, a, b = two_projects
    revoked_at = roles.revoke_agent(db.admin, a.name)
    assert roles.revoke_agent(db.admin, a.name) == revoked_at  # idempotent
    with pytest.raises(ScsqlError) as err:
        a.whoami()
    assert err.value.code == "SC002"
    with pytest.raises(ScsqlError) as err, a.transaction() as conn:
        conn.execute("select * from scsql.agents")
    assert err.value.code == "SC002"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(db.login(a.name)).close()
    listed = {r["agent"]: r for r in roles.list_agents(db.admin)}
    assert listed[a.name]["revoked_at"] == revoked_at and listed[a.name]["public_key"]
    assert b.whoami()["agent"] == b.name  # others unaffected


def test_unknown_agent_is_a_clear_error(scsql_db):
    db = Database(scsql_db.app).open()
    try:
        with pytest.raises(ScsqlError) as err:
            Agent(db, "nobody_here").whoami()
    finally:
        db.close()
    assert err.value.code == "SC003"
    assert "nobody_here" in err.value.message


@pytest.mark.parametrize(
    ("name", "project", "team_role", "key", "code"),
    [
        ("Bad-Name", "P", "developer", 32, "SC007"),
        ("", "P", "developer", 32, "SC007"),
        ("good", "P", "developer", 31, "SC009"),
        ("good", "no_such_project", "developer", 32, "SC005"),
        ("good", "P", "astronaut", 32, "SC008"),
    ],
)
def test_register_agent_rejects_bad_input_and_leaves_nothing(scsql_db, name, project, team_role, key, code):
    project_name = scsql_db.project()
    project = project_name if project == "P" else project
    with scsql_db.connect() as conn:
        before = conn.execute("select count(*) as n from scsql.agents").fetchone()["n"]
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql.register_agent(%s, %s, %s, %s)",
                         (name, project, team_role, os.urandom(key)))
        conn.rollback()
        assert err.value.sqlstate == code
        assert err.value.diag.message_primary
        after = conn.execute("select count(*) as n from scsql.agents").fetchone()["n"]
        role = conn.execute("select count(*) as n from pg_roles where rolname = %s", (role_for(name),)).fetchone()["n"]
    assert (after, role) == (before, 0)


def test_duplicate_agent_is_refused_without_touching_the_keystore(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("dup", project)
    key_before = scsql_db.keystore.path(a.name).read_bytes()
    with pytest.raises(ScsqlError) as err:
        roles.create_agent(scsql_db.admin, scsql_db.keystore, a.name, project, "qa")
    assert err.value.code == "SC004"
    assert scsql_db.keystore.path(a.name).read_bytes() == key_before


def test_failed_registration_leaves_no_key_file(scsql_db):
    with pytest.raises(ScsqlError) as err:
        roles.create_agent(scsql_db.admin, scsql_db.keystore, "orphan_key", "no_such_project", "qa")
    assert err.value.code == "SC005"
    assert not scsql_db.keystore.path("orphan_key").exists()
    assert list(scsql_db.keystore.directory.glob("*")) == []


def test_key_file_is_private_and_loose_permissions_are_refused(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("keys", project)
    path = scsql_db.keystore.path(a.name)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o640)
    with pytest.raises(ScsqlError) as err:
        scsql_db.keystore.load(a.name)
    assert err.value.code == "SC032" and "chmod 600" in str(err.value)
    path.unlink()
    with pytest.raises(ScsqlError) as err:
        scsql_db.keystore.load(a.name)
    assert err.value.code == "SC031"


def test_key_rotation_keeps_old_keys_registered(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("rot", project)
    old = public_bytes(a.key)
    assert roles.rotate_key(scsql_db.admin, scsql_db.keystore, a.name) == 2
    new = scsql_db.keystore.load(a.name)
    with a.transaction() as conn:
        keys = conn.execute("select key_id, public_key, valid_from from scsql.agent_keys k "
                            "join scsql.agents using (agent_id) where name = %s order by key_id",
                            (a.name,)).fetchall()
    assert [(k["key_id"], bytes(k["public_key"])) for k in keys] == [(1, old), (2, public_bytes(new))]
    assert keys[0]["valid_from"] < keys[1]["valid_from"]


def test_auditor_reads_everything_and_changes_nothing(two_projects):
    db, a, b = two_projects
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        names = {r["name"] for r in conn.execute("select name from scsql.agents").fetchall()}
        assert {a.name, b.name} <= names
        for stmt in ("delete from scsql.agents", "insert into scsql.team_roles values ('x', false, '')",
                     "update scsql.projects set name = 'x'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
            conn.rollback()
            conn.execute("set role scsql_auditor")


def test_cross_project_grant_shows_the_granted_project(two_projects):
    db, a, b = two_projects
    with db.connect() as conn:
        pb = conn.execute("select p.name from scsql.projects p join scsql.agents g using (project_id) "
                          "where g.name = %s", (b.name,)).fetchone()["name"]
        conn.execute("select scsql.grant_project_read(%s, %s)", (pb, a.name))
        conn.commit()
    with a.transaction() as conn:
        assert pb in {r["name"] for r in conn.execute("select name from scsql.projects").fetchall()}
        # The grant is to public rows of the project, not to its agents.
        assert b.name not in {r["name"] for r in conn.execute("select name from scsql.agents").fetchall()}


def test_agent_cannot_become_the_agent_group(two_projects):
    """An agent inherits scsql_agent's privileges but cannot SET ROLE to the
    group, where it would act as no agent (PostgreSQL 16 and newer)."""
    db, a, _ = two_projects
    with db.connect(db.login(a.name)) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("the SET option of role membership needs PostgreSQL 16")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("set role scsql_agent")


def test_queue_maintenance_for_every_project_needs_an_administrator(two_projects):
    db, a, _ = two_projects
    with db.connect() as conn:  # a role that is neither an agent nor an administrator
        conn.execute("set role scsql_agent")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select * from scsql.queue_maintenance(10)")
        conn.rollback()
        conn.execute("set role scsql_admin")
        conn.execute("select * from scsql.queue_maintenance(10)")


def test_agent_processes_refuse_an_administrators_login(scsql_db):
    from scsql.core.db import Database
    from scsql.core.errors import ScsqlError as Err

    db = Database(scsql_db.admin).open()
    try:
        with pytest.raises(Err) as err:
            db.refuse_privileged_login()
    finally:
        db.close()
    assert err.value.code == "SC036"
    app = Database(scsql_db.app).open()
    try:
        app.refuse_privileged_login()  # scsql_app holds nothing: fine
    finally:
        app.close()
