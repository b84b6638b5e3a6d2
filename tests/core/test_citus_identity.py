"""Who a chained row belongs to, on one server and on Citus.

scsql's functions decide the acting agent once (scsql._me()) and name it in
the rows they write; on Citus those statements reach the workers as the
owner, whose chain trigger takes the row's author_id (scsql._chain_author).
Only scsql's functions and the DBA act as the owner. These tests hold that on
one server (and run unchanged on the cluster, .ci/citus.sh): whatever an agent
sets, it writes only its own rows and reads only what its project may; a
session acting as the owner writes exactly the agent its row names."""

from __future__ import annotations

import psycopg
import pytest

from scsql.audit.signing import sign_row
from scsql.audit.telemetry import TOOL_CALL_FIELDS
from scsql.audit.verify import verify

_INSERT = ("insert into scsql.tool_calls (project_id, author_id, tool, origin, input_tokens, output_tokens, status, "
           "at, key_id, signature) values (%s, %s, %s, 'model', 0, 0, 'ok', %s, %s, %s) "
           "returning tool_call_id, author_id, chain_id, seq")

# Settings an agent might hope scsql (or Citus) reads for the acting agent,
# each with the values it tries (B: the other agent; the first that works stays).
_SETTINGS = {"scsql.agent": ("{name}",), "scsql.agent_id": ("{id}",), "scsql.author_id": ("{id}",),
             "scsql.acting_role": ("{role}",), "scsql.role": ("scsql_owner",), "scsql.project_id": ("{project}",),
             "citus.allow_nested_distributed_execution": ("on",), "citus.enable_unsafe_triggers": ("on",),
             "citus.propagate_set_commands": ("local",), "citus.override_table_visibility": ("on",),
             "session_authorization": ("{role}", "scsql_owner"), "role": ("{role}", "scsql_owner"),
             "session_replication_role": ("replica",)}


def _ids(conn, name: str) -> dict:
    return conn.execute("select a.agent_id, a.project_id, a.role_name, a.name from scsql.agents a where a.name = %s",
                        (name,)).fetchone()


def _set_everything(conn, b: dict) -> list[str]:
    """As the agent of CONN (autocommit): every role it may SET, then every
    setting of _SETTINGS it may change, to values naming agent B or the owner.
    Returns what it could set."""
    done = []
    roles = [r for (r,) in conn.execute(
        "select rolname from pg_roles where pg_has_role(current_user, oid, 'SET') and rolname <> current_user "
        "union select unnest(array['scsql_owner', %s::text])", (b["role_name"],)).fetchall()]
    for role in roles:
        try:
            conn.execute(f'set role "{role}"')
            done.append(f"role {role}")
            conn.execute("reset role")
        except psycopg.Error:
            pass
    for name, values in _SETTINGS.items():
        for value in values:
            value = value.format(name=b["name"], id=b["agent_id"], role=b["role_name"], project=b["project_id"])
            try:
                conn.execute("select pg_catalog.set_config(%s, %s, false)", (name, value))
                done.append(f"{name}={value}")
                break
            except psycopg.Error:
                pass
    return done


def test_an_agent_that_sets_what_it_can_still_writes_and_reads_only_as_itself(scsql_db):
    p, q = scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("setter", p)
    b = scsql_db.agent("victim", p)
    other = scsql_db.agent("elsewhere", q)
    for agent in (b, other):
        signed = sign_row(agent, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "theirs"})
        with agent.transaction() as conn:
            conn.execute("select * from scsql.record_tool_call(p_tool => %s, p_at => %s, p_key_id => %s, "
                         "p_signature => %s)", (signed["tool"], signed["at"], signed["key_id"], signed["signature"]))
    with scsql_db.connect() as admin:
        ids_a, ids_b, ids_other = _ids(admin, a.name), _ids(admin, b.name), _ids(admin, other.name)
        # As an administrator could by mistake: A may insert into tool_calls directly.
        admin.execute(f'grant insert on scsql.tool_calls to "{a.role}"')
        admin.execute(f'grant usage on sequence scsql.tool_calls_id_seq to "{a.role}"')
        admin.execute(f'create policy setter_insert on scsql.tool_calls for insert to "{a.role}" with check (true)')
        admin.commit()
    with psycopg.connect(scsql_db.login(a.name), autocommit=True) as conn:
        done = _set_everything(conn, ids_b)
        assert not any(d.startswith(("role scsql_owner", f"role {ids_b['role_name']}", "session_authorization",
                                     "role=", "session_replication_role")) for d in done), done
        assert any(d.startswith("scsql.author_id") for d in done)  # custom settings are free to set: none is read
        assert conn.execute("select scsql_caller.agent_id() as me").fetchone()[0] == ids_a["agent_id"]
        # Through scsql's function: the row is A's, in A's chain.
        signed = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "mine"})
        row = conn.execute("select * from scsql.record_tool_call(p_tool => %s, p_at => %s, p_key_id => %s, "
                           "p_signature => %s)",
                           (signed["tool"], signed["at"], signed["key_id"], signed["signature"])).fetchone()
        # Directly, naming B as the author, or B's project: refused.
        for project, author, code in ((ids_b["project_id"], ids_b["agent_id"], "SC011"),
                                      (ids_other["project_id"], ids_a["agent_id"], "SC104")):
            forged = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "forged"})
            with pytest.raises(psycopg.Error) as err:
                conn.execute(_INSERT, (project, author, forged["tool"], forged["at"], forged["key_id"],
                                       forged["signature"]))
            assert err.value.sqlstate in (code, "42501"), err.value
        # The owner's helpers are not the agent's to call.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select scsql._me()")
        assert conn.execute("select coalesce(has_function_privilege(to_regprocedure('scsql._chain_author(bigint)'), "
                            "'execute'), false)").fetchone()[0] is False
        # Reads: its project's rows only, whatever it set.
        seen = conn.execute("select distinct project_id from scsql.tool_calls").fetchall()
        assert seen == [(ids_a["project_id"],)]
    with scsql_db.connect() as admin:
        mine = admin.execute("select a.name, t.tool, t.chain_id, t.seq from scsql.tool_calls t "
                             "join scsql.agents a on a.agent_id = t.author_id where t.tool_call_id = %s",
                             (row[0],)).fetchone()
        assert mine["name"] == a.name and mine["tool"] == "mine" and mine["seq"] == 1
        assert admin.execute("select count(*) as n from scsql.tool_calls where tool = 'forged'").fetchone()["n"] == 0
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks


def test_a_row_written_as_the_owner_is_the_named_agents(scsql_db):
    """The DBA path (and, on Citus, every statement of scsql's functions on a
    worker): acting as scsql_owner, a row naming agent B in author_id is B's,
    linked into B's chain and checked like B's own write; a row naming no
    agent, a revoked one, another project or a key not B's is refused."""
    p, q = scsql_db.project(), scsql_db.project()
    b = scsql_db.agent("named", p)
    gone = scsql_db.agent("gone", p)
    scsql_db.agent("other_project", q)
    from scsql.api import Api

    first = Api(b).call("record_tool_call", tool="first")
    with scsql_db.connect() as admin:
        ids_b, ids_gone = _ids(admin, b.name), _ids(admin, gone.name)
        other_project = admin.execute("select project_id from scsql.projects where name = %s", (q,)).fetchone()["project_id"]
    from scsql.core import roles

    roles.revoke_agent(scsql_db.admin, gone.name)
    signed = sign_row(b, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "by the owner"})
    args = (signed["tool"], signed["at"], signed["key_id"], signed["signature"])
    refused = [((ids_b["project_id"], None, *args), "SC001"),
               ((ids_b["project_id"], -1, *args), "SC001"),
               ((ids_gone["project_id"], ids_gone["agent_id"], *args), "SC002"),
               ((other_project, ids_b["agent_id"], *args), "SC104"),
               ((ids_b["project_id"], ids_b["agent_id"], *args[:2], 99, args[3]), "SC102")]
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("set role scsql_owner")
        for values, code in refused:
            with pytest.raises(psycopg.Error) as err:
                conn.execute(_INSERT, values)
            assert err.value.sqlstate == code, (values[:2], err.value)
        row = conn.execute(_INSERT, (ids_b["project_id"], ids_b["agent_id"], *args)).fetchone()
    assert row[1] == ids_b["agent_id"] and row[2] == first["chain_id"] and row[3] == first["seq"] + 1
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks


def test_a_row_that_names_no_project_belongs_to_the_acting_agents(scsql_db):
    """scsql_caller.row_project(), the default migrate --citus gives project_id
    of every chained table (Citus routes a row by project_id before any
    trigger runs): the acting agent's project; SC001 for the owner (on Citus
    its row must name its project) and for a role that is no agent; SC002 for
    a revoked agent. An agent's direct INSERT that names no project is refused
    as on one server, for want of the grant (the default is evaluated after
    the privilege check). tests/audit/test_chain.py holds the rest: with a grant,
    such a row is checked by the trigger (Citus refused it with 22004 before)."""
    p, q = scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("row_project", p)
    b = scsql_db.agent("row_project_other", q)
    gone = scsql_db.agent("row_project_gone", p)
    from scsql.core import roles

    roles.revoke_agent(scsql_db.admin, gone.name)
    with scsql_db.connect() as admin:
        ids_a, ids_b, ids_gone = _ids(admin, a.name), _ids(admin, b.name), _ids(admin, gone.name)
    signed = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "no project"})
    for agent, ids in ((a, ids_a), (b, ids_b)):
        with psycopg.connect(scsql_db.login(agent.name)) as conn:
            assert conn.execute("select scsql_caller.row_project()").fetchone()[0] == ids["project_id"]
    with psycopg.connect(scsql_db.login(a.name)) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("insert into scsql.tool_calls (tool, origin, input_tokens, output_tokens, status, at, "
                         "key_id, signature) values (%s, 'model', 0, 0, 'ok', %s, %s, %s)",
                         (signed["tool"], signed["at"], signed["key_id"], signed["signature"]))
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        for role, code, says in (("none", "SC001", 'role "postgres" is not a scsql agent'),
                                 ("scsql_owner", "SC001", "names its project in project_id"),
                                 (ids_gone["role_name"], "SC002", "was revoked")):
            conn.execute(f'set role "{role}"')
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql_caller.row_project()")
            assert err.value.sqlstate == code and says in err.value.diag.message_primary, (role, err.value)
            conn.execute("reset role")
