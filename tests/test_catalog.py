"""The catalogue keeps the security rules: forced RLS on every table, pinned
search_path on every security-definer function, a comment on every function,
no agent privilege that no policy governs, and exactly the privileges each
role is meant to have."""

from __future__ import annotations

import re
from pathlib import Path

MANIFEST = Path(__file__).with_name("privileges.txt")
ROLES = ("scsql_agent", "scsql_auditor", "scsql_admin", "scsql_app", "scsql_worker")


def test_every_table_has_forced_row_level_security(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select c.oid::regclass::text as t, c.relrowsecurity, c.relforcerowsecurity
            from pg_class c
            where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p')
        """).fetchall()
    assert rows, "no tables found"
    bad = [r["t"] for r in rows if not (r["relrowsecurity"] and r["relforcerowsecurity"])]
    assert bad == []


def test_partitions_are_reached_only_through_their_parent(scsql_db):
    """A partition has RLS of its own only if reached directly; agents must not reach them."""
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select c.oid::regclass::text as t
            from pg_class c
            where c.relnamespace = 'scsql'::regnamespace and c.relispartition
              and (has_table_privilege('scsql_agent', c.oid, 'select,insert,update,delete'))
        """).fetchall()
    assert rows == []


def test_security_definer_functions_pin_search_path(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select p.oid::regprocedure::text as f, p.proconfig
            from pg_proc p
            where p.pronamespace = 'scsql'::regnamespace and p.prosecdef
        """).fetchall()
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


def test_no_agent_may_create_objects_anywhere_in_the_database(scsql_db):
    """No schema accepts an agent's objects and no agent has TEMP: nothing an
    agent names can be found by a function running as the owner."""
    project = scsql_db.project()
    agent = scsql_db.agent("creator", project)
    from scsql.config import role_for

    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select r.role, n.nspname as what
            from unnest(%s::text[]) r(role), pg_namespace n
            where has_schema_privilege(r.role, n.oid, 'CREATE')
            union all
            select r.role, 'TEMP on the database'
            from unnest(%s::text[]) r(role)
            where has_database_privilege(r.role, current_database(), 'TEMP')
               or has_database_privilege(r.role, current_database(), 'CREATE')
        """, (roles := ["scsql_agent", "scsql_app", role_for(agent.name)], roles)).fetchall()
    assert rows == []


def test_every_function_has_a_comment(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select p.oid::regprocedure::text as f
            from pg_proc p
            left join pg_depend d on d.objid = p.oid and d.deptype = 'e'
            where p.pronamespace = 'scsql'::regnamespace and d.objid is null
              and coalesce(obj_description(p.oid, 'pg_proc'), '') = ''
        """).fetchall()
    assert [r["f"] for r in rows] == []


def test_agent_table_privileges_are_all_governed_by_policies(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            with privs as (
              select c.oid, c.oid::regclass::text as t, p.priv
              from pg_class c
              cross join unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE']) p(priv)
              where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p', 'v')
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
        """).fetchall()
    assert rows == []


def test_no_truncate_or_references_for_anyone_but_the_owner(scsql_db):
    with scsql_db.connect() as conn:
        rows = conn.execute("""
            select r, c.oid::regclass::text as t
            from pg_class c, unnest(%s::text[]) r
            where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p')
              and (has_table_privilege(r, c.oid, 'TRUNCATE') or has_table_privilege(r, c.oid, 'REFERENCES')
                   or has_table_privilege(r, c.oid, 'TRIGGER'))
        """, (list(ROLES),)).fetchall()
    assert rows == []


def current_privileges(conn) -> list[str]:
    """Every privilege each scsql role holds on objects of schema scsql, one line each."""
    rows = conn.execute("""
        with r(role) as (select unnest(%s::text[]))
        select r.role || ' table ' || c.relname || ' ' || p.priv as line
        from r, pg_class c, unnest(array['SELECT','INSERT','UPDATE','DELETE','TRUNCATE']) p(priv)
        where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p', 'v', 'm')
          and not c.relispartition
          and has_table_privilege(r.role, c.oid, p.priv)
        union all
        select r.role || ' function ' || p.oid::regprocedure::text
        from r, pg_proc p
        where p.pronamespace = 'scsql'::regnamespace and has_function_privilege(r.role, p.oid, 'EXECUTE')
        union all
        select r.role || ' schema scsql ' || priv
        from r, unnest(array['USAGE', 'CREATE']) priv
        where has_schema_privilege(r.role, 'scsql', priv)
        order by 1
    """, (list(ROLES),)).fetchall()
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
            "select prosrc from pg_proc where pronamespace = 'scsql'::regnamespace").fetchall()]
        known = {r["code"] for r in conn.execute("select code from scsql.error_codes").fetchall()}
    raised = set()
    for src in sources:
        raised |= set(re.findall(r"errcode\s*=\s*'([0-9A-Z]{5})'", src))
    assert raised, "expected raise sites"
    assert sorted(raised - known) == []


if __name__ == "__main__":  # regenerate the manifest header and lines
    import sys

    import psycopg
    from psycopg.rows import dict_row

    print("\n".join(ln for ln in MANIFEST.read_text().splitlines() if ln.startswith("#")))
    with psycopg.connect(sys.argv[1], row_factory=dict_row) as conn:
        print("\n".join(current_privileges(conn)))
