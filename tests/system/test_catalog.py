"""The catalogue keeps the security rules: forced RLS on every table, pinned
search_path on every security-definer function, a comment on every function,
no private function an agent may execute, no agent privilege that no policy
governs, and exactly the privileges each role is meant to have, in every
schema scsql creates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scsql.core.errors import ScsqlError

MANIFEST = Path(__file__).parent.with_name("privileges.txt")
ROLES = ("scsql_agent", "scsql_auditor", "scsql_admin", "scsql_app", "scsql_worker")
# scsql's schemas: the API (and its private _ functions), and the functions
# that run with the caller's rights (policies, caller-rights API functions).
SCHEMAS = ["scsql", "scsql_caller"]

def _catalog_rows(db, query: str, *params) -> list[dict]:
    """The rows of a query of the catalogue, as the administrator."""
    with db.connect() as conn:
        return conn.execute(query, params).fetchall()


def test_every_table_has_forced_row_level_security(scsql_db):
    rows = _catalog_rows(scsql_db, """
        select c.oid::regclass::text as t, c.relrowsecurity, c.relforcerowsecurity
        from pg_class c
        where c.relnamespace::regnamespace::text = any(%s) and c.relkind in ('r', 'p')
    """, SCHEMAS)
    assert rows, "no tables found"
    bad = [r["t"] for r in rows if not (r["relrowsecurity"] and r["relforcerowsecurity"])]
    assert bad == []


def test_partitions_are_reached_only_through_their_parent(scsql_db):
    """A partition has RLS of its own only if reached directly; agents must not reach them."""
    rows = _catalog_rows(scsql_db, """
        select c.oid::regclass::text as t
        from pg_class c
        where c.relnamespace::regnamespace::text = any(%s) and c.relispartition
          and (has_table_privilege('scsql_agent', c.oid, 'select,insert,update,delete'))
    """, SCHEMAS)
    assert rows == []


def test_security_definer_functions_pin_search_path(scsql_db):
    rows = _catalog_rows(scsql_db, """
        select p.oid::regprocedure::text as f, p.proconfig
        from pg_proc p
        where p.pronamespace::regnamespace::text = any(%s) and p.prosecdef
    """, SCHEMAS)
    assert rows, "expected security-definer functions"
    bad = []
    for r in rows:
        path = [c for c in (r["proconfig"] or []) if c.startswith("search_path=")]
        schemas = [s.strip() for s in path[0].removeprefix("search_path=").split(",")] if path else []
        # pg_catalog first, so nothing shadows the built-ins; pg_temp named last,
        # or PostgreSQL searches the caller's temporary schema first.
        if schemas[:1] != ["pg_catalog"] or schemas[-1:] != ["pg_temp"]:
            bad.append(f"{r['f']}: {path}")
    assert bad == []


def test_agents_cannot_execute_private_functions(scsql_db):
    """A leading _ means agents cannot execute the function: not the agent
    group, not an agent registered now (through the group or PUBLIC). What
    policies and caller-rights functions evaluate as the agent lives in
    schema scsql_caller under public names."""
    from scsql.core.config import role_for

    agent = scsql_db.agent("private", scsql_db.project())
    roles = ["scsql_agent", role_for(agent.name)]
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select r.role, p.oid::regprocedure::text as f
            from unnest(%s::text[]) r(role), pg_proc p
            where p.pronamespace = 'scsql'::regnamespace and p.proname ~ '^_'
              and has_function_privilege(r.role, p.oid, 'EXECUTE')
            order by 1, 2
        """, (roles,)).fetchall()
        names = conn.execute("""
            select count(*) as n from pg_proc p
            where p.pronamespace = 'scsql'::regnamespace and p.proname ~ '^_'
        """).fetchone()["n"]
    assert names > 50  # the private helpers are there, and the pattern finds them
    assert [(r["role"], r["f"]) for r in rows] == []
    # The agent's policies, which call scsql_caller, work; a private function is refused.
    with agent.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.agents").fetchone()["n"] == 1
    for call in ("scsql._me()", "scsql._my_project()", "scsql._require(true, 'x')", "scsql._chunk_hash('x')",
                 "scsql._check_name('a', 'b', 'c', 'd')"):
        with pytest.raises(ScsqlError) as err, agent.transaction() as conn:
            conn.execute(f"select {call}")
        assert err.value.code == "42501", call


def test_functions_that_run_as_the_caller_are_not_tools(scsql_db):
    """Tools are derived from scsql_caller.api(): public functions of schema
    scsql only. What agents execute in scsql_caller is never a tool."""
    agent = scsql_db.agent("tools", scsql_db.project())
    with agent.transaction() as conn:
        schemas = conn.execute("""
            select p.pronamespace::regnamespace::text as nsp, count(*) as n
            from scsql_caller.api() a join pg_proc p on p.oid = a.signature::regprocedure
            group by 1
        """).fetchall()
        callable_here = conn.execute("""
            select count(*) as n from pg_proc p
            where p.pronamespace = 'scsql_caller'::regnamespace and has_function_privilege(p.oid, 'EXECUTE')
        """).fetchone()["n"]
    assert [r["nsp"] for r in schemas] == ["scsql"] and schemas[0]["n"] > 20
    assert callable_here > 0


def test_no_agent_may_create_objects_anywhere_in_the_database(scsql_db):
    """No schema accepts an agent's objects and no agent has TEMP: nothing an
    agent names can be found by a function running as the owner."""
    project = scsql_db.project()
    agent = scsql_db.agent("creator", project)
    from scsql.core.config import role_for

    rows = _catalog_rows(scsql_db, """
        select r.role, n.nspname as what
        from unnest(%s::text[]) r(role), pg_namespace n
        where has_schema_privilege(r.role, n.oid, 'CREATE')
        union all
        select r.role, 'TEMP on the database'
        from unnest(%s::text[]) r(role)
        where has_database_privilege(r.role, current_database(), 'TEMP')
           or has_database_privilege(r.role, current_database(), 'CREATE')
    """, roles := ["scsql_agent", "scsql_app", role_for(agent.name)], roles)
    assert rows == []


def test_every_function_has_a_comment(scsql_db):
    rows = _catalog_rows(scsql_db, """
        select p.oid::regprocedure::text as f
        from pg_proc p
        left join pg_depend d on d.objid = p.oid and d.deptype = 'e'
        where p.pronamespace::regnamespace::text = any(%s) and d.objid is null
          and coalesce(obj_description(p.oid, 'pg_proc'), '') = ''
    """, SCHEMAS)
    assert [r["f"] for r in rows] == []


def test_agent_table_privileges_are_all_governed_by_policies(scsql_db):
    rows = _catalog_rows(scsql_db, """
        with privs as (
          select c.oid, c.oid::regclass::text as t, p.priv
          from pg_class c
          cross join unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE']) p(priv)
          where c.relnamespace::regnamespace::text = any(%s) and c.relkind in ('r', 'p', 'v')
            and has_table_privilege('scsql_agent', c.oid, p.priv)
        )
        select t, priv from privs
        where not exists (
          select from pg_policy pol
          where pol.polrelid = privs.oid
            and (pol.polcmd = '*' or pol.polcmd = lower(left(privs.priv, 1))
                 or (privs.priv = 'SELECT' and pol.polcmd = 'r')
                 or (privs.priv = 'INSERT' and pol.polcmd = 'a')
                 or (privs.priv = 'UPDATE' and pol.polcmd = 'w')
                 or (privs.priv = 'DELETE' and pol.polcmd = 'd'))
            and (0 = any (pol.polroles) or 'scsql_agent'::regrole::oid = any (pol.polroles))
        )
        -- A view agents may only insert into (scsql.kb_staging) is governed by
        -- its INSTEAD OF INSERT trigger, a security-definer function that
        -- takes the project and agent from the acting role.
        and not (privs.priv = 'INSERT' and exists (
          select from pg_class v join pg_trigger tg on tg.tgrelid = v.oid join pg_proc f on f.oid = tg.tgfoid
          where v.oid = privs.oid and v.relkind = 'v' and f.prosecdef
            and tg.tgtype & 64 <> 0 and tg.tgtype & 4 <> 0))
    """, SCHEMAS)
    assert rows == []


def test_no_truncate_or_references_for_anyone_but_the_owner(scsql_db):
    rows = _catalog_rows(scsql_db, """
        select r, c.oid::regclass::text as t
        from pg_class c, unnest(%s::text[]) r
        where c.relnamespace::regnamespace::text = any(%s) and c.relkind in ('r', 'p')
          and (has_table_privilege(r, c.oid, 'TRUNCATE') or has_table_privilege(r, c.oid, 'REFERENCES')
               or has_table_privilege(r, c.oid, 'TRIGGER'))
    """, list(ROLES), SCHEMAS)
    assert rows == []


def current_privileges(conn) -> list[str]:
    """Every privilege each scsql role holds on objects of scsql's schemas, one line each."""
    rows = conn.execute("""
        with r(role) as (select unnest(%s::text[])), s(nsp) as (select unnest(%s::text[]))
        select r.role || ' table '
               || case when c.relnamespace = 'scsql'::regnamespace then c.relname::text else c.oid::regclass::text end
               || ' ' || p.priv as line
        from r, pg_class c, unnest(array['SELECT','INSERT','UPDATE','DELETE','TRUNCATE']) p(priv)
        where c.relnamespace::regnamespace::text in (select nsp from s) and c.relkind in ('r', 'p', 'v', 'm')
          and not c.relispartition
          and has_table_privilege(r.role, c.oid, p.priv)
        union all
        select r.role || ' function ' || p.oid::regprocedure::text
        from r, pg_proc p
        where p.pronamespace::regnamespace::text in (select nsp from s)
          and has_function_privilege(r.role, p.oid, 'EXECUTE')
        union all
        select r.role || ' schema ' || s.nsp || ' ' || priv
        from r, s, unnest(array['USAGE', 'CREATE']) priv
        where has_schema_privilege(r.role, s.nsp, priv)
        order by 1
    """, (list(ROLES), SCHEMAS)).fetchall()
    return [r["line"] for r in rows]


def test_each_role_holds_exactly_the_listed_privileges(scsql_db):
    """tests/privileges.txt lists every privilege on purpose. A new grant must
    be added there, in review; anything unlisted, or missing, fails."""
    with scsql_db.connect() as conn:
        actual = current_privileges(conn)
    expected = [ln for ln in MANIFEST.read_text().splitlines() if ln and not ln.startswith("#")]
    unexpected = sorted(set(actual) - set(expected))
    missing = sorted(set(expected) - set(actual))
    assert (unexpected, missing) == ([], [])


def test_login_role_holds_nothing_and_auditor_changes_nothing(scsql_db):
    with scsql_db.connect() as conn:
        actual = current_privileges(conn)
    assert [ln for ln in actual if ln.startswith("scsql_app ")] == []
    auditor = [ln for ln in actual if ln.startswith("scsql_auditor table ")]
    assert auditor and all(ln.endswith(" SELECT") for ln in auditor)
    with scsql_db.connect() as conn:
        app = conn.execute("select rolinherit, rolsuper, rolcreaterole, rolbypassrls from pg_roles "
                           "where rolname = 'scsql_app'").fetchone()
    assert app == {"rolinherit": False, "rolsuper": False, "rolcreaterole": False, "rolbypassrls": False}


def test_every_raised_sqlstate_is_in_the_error_catalogue(scsql_db):
    with scsql_db.connect() as conn:
        sources = [r["prosrc"] for r in conn.execute(
            "select prosrc from pg_proc where pronamespace::regnamespace::text = any(%s)", (SCHEMAS,)).fetchall()]
        known = {r["code"] for r in conn.execute("select code from scsql.error_codes").fetchall()}
    raised = set()
    for src in sources:
        raised |= set(re.findall(r"errcode\s*=\s*'([0-9A-Z]{5})'", src))
    assert raised, "expected raise sites"
    assert sorted(raised - known) == []


# Every login role that can become (SET ROLE to, or inherit) an agent role of
# this database, through any chain of memberships, and how many agents it can
# become; superusers and scsql's owner's and administrators' logins left out.
ACTS_AS_AGENTS = """
    with recursive agent_roles as (
      select pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name))::oid as oid from scsql.agents a
    ), reach(member, agent) as (
      select m.member, m.roleid from pg_catalog.pg_auth_members m where m.roleid in (select oid from agent_roles)
      union
      select m.member, r.agent from pg_catalog.pg_auth_members m join reach r on m.roleid = r.member
    )
    select l.rolname::text as login, count(distinct r.agent) as agents
    from reach r join pg_catalog.pg_roles l on l.oid = r.member
    where l.rolcanlogin and not l.rolsuper
      and not pg_catalog.pg_has_role(l.oid, 'scsql_owner', 'MEMBER')
      and not pg_catalog.pg_has_role(l.oid, 'scsql_admin', 'MEMBER')
    group by 1 having count(distinct r.agent) > 1 order by 1
"""


def test_on_a_database_for_a_shared_server_no_login_can_become_more_than_one_agent(scsql_db):
    """A credential names one agent: on a database set up for a shared server
    (scsql.set_login_mode('per_agent'), what scsql migrate does for a new
    database on SCSQL_DSN), no login but the owner's and the administrators'
    can act as more than one agent, neither the agents registered before the
    switch nor after it."""
    db = scsql_db
    p, q = db.project(), db.project()
    for short, project in (("one", p), ("two", p), ("three", q)):
        db.agent(short, project)
    # One user's machine (the embedded default): scsql_app acts as every agent, and the walk finds it.
    assert _catalog_rows(db, ACTS_AS_AGENTS) == [{"login": "scsql_app", "agents": 3}]
    with db.connect() as conn:
        conn.execute("select scsql.set_login_mode('per_agent')")
    db.agent("four", q)
    assert _catalog_rows(db, ACTS_AS_AGENTS) == []


# Built-in functions no agent may execute in scsql's database: what writes
# the WAL or stores data outside scsql's tables (and so outside row-level
# security, quotas and the audit trail), and the advisory locks every
# project shares (the bootstrap revokes these from PUBLIC); and what
# PostgreSQL keeps from PUBLIC already (WAL switches and restore points,
# statistics resets, server files, reloads), checked so a grant to PUBLIC
# shows. Left to agents, as to every role: NOTIFY (a command, not a
# privilege; scsql's channels are secret names), pg_sleep and
# pg_terminate_backend of an agent's own sessions (bounded by its connection
# limit), txid_current (one transaction id per call, as any write);
# pg_import_system_collations refuses all but superusers itself.
AGENTS_MAY_NOT_EXECUTE = r"""
    select p.oid::regprocedure::text as f
    from pg_catalog.pg_proc p
    where p.pronamespace = 'pg_catalog'::regnamespace
      and (p.proname ~ '^pg_(try_)?advisory_'
           or p.proname in ('pg_logical_emit_message', 'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_import',
                            'lo_export', 'pg_switch_wal', 'pg_create_restore_point', 'pg_log_standby_snapshot',
                            'pg_stat_reset', 'pg_stat_reset_shared', 'pg_stat_reset_single_table_counters',
                            'pg_stat_reset_slru', 'pg_read_file', 'pg_read_binary_file', 'pg_ls_dir',
                            'pg_reload_conf', 'pg_rotate_logfile', 'pg_promote', 'pg_replication_origin_create',
                            'pg_log_backend_memory_contexts'))
"""


def test_agents_cannot_write_the_wal_or_store_outside_scsqls_tables(scsql_db):
    """pg_logical_emit_message was executable by agents: 10 MB of WAL a call,
    as often as an agent liked, in every project's backups and replicas."""
    from scsql.core.config import role_for

    agent = scsql_db.agent("wal", scsql_db.project())
    functions = [r["f"] for r in _catalog_rows(scsql_db, AGENTS_MAY_NOT_EXECUTE)]
    assert len(functions) >= 30 and any(f.startswith("pg_logical_emit_message(") for f in functions)
    rows = _catalog_rows(scsql_db, f"""
        select r.role, f.f from unnest(%s::text[]) r(role), ({AGENTS_MAY_NOT_EXECUTE}) f
        where has_function_privilege(r.role, f.f::regprocedure, 'EXECUTE') order by 1, 2
    """, ["scsql_agent", "scsql_app", "scsql_worker", role_for(agent.name)])
    assert rows == []
    with scsql_db.connect(scsql_db.login(agent.name)) as conn:
        with pytest.raises(Exception) as err:
            conn.execute("select pg_logical_emit_message(false, 'scsql', repeat('x', 10 * 1024 * 1024))")
    assert getattr(err.value, "sqlstate", None) == "42501"


if __name__ == "__main__":  # regenerate the manifest header and lines
    import sys

    import psycopg
    from psycopg.rows import dict_row

    print("\n".join(ln for ln in MANIFEST.read_text().splitlines() if ln.startswith("#")))
    with psycopg.connect(sys.argv[1], row_factory=dict_row) as conn:
        print("\n".join(current_privileges(conn)))
