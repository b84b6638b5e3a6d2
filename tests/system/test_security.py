"""Attacks an agent with a psql login of its own can try, each a regression
test: the attack is run for real and must fail."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from scsql.core.config import role_for


@pytest.fixture
def attacker(scsql_db):
    project = scsql_db.project()
    agent = scsql_db.agent("mallory", project)
    return scsql_db, agent


def test_agent_may_not_create_temporary_objects(attacker):
    db, agent = attacker
    with psycopg.connect(db.login(agent.name)) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("create temporary table loot (x text)")


def _shadow_text(conn) -> None:
    """The attack of finding 1: temporary types named like ours whose CHECK
    records each role it runs as, in a setting the attacker reads back. Run
    as the agent itself (in its own invoker functions) it gains nothing; run
    as anyone else it is an escalation."""
    conn.execute("""
        create function pg_temp.spy(v pg_catalog.text) returns boolean
        language plpgsql as $$
        begin
          perform pg_catalog.set_config('attack.ran_as', pg_catalog.concat_ws(' ',
            pg_catalog.current_setting('attack.ran_as', true), current_user::pg_catalog.text), false);
          return true;
        end $$""")
    conn.execute("create domain pg_temp.text as pg_catalog.text check (pg_temp.spy(value))")
    conn.execute("create domain pg_temp.int8 as pg_catalog.int8 check (pg_temp.spy(value::pg_catalog.text))")
    conn.execute("create domain pg_temp.bigint as pg_catalog.int8 check (pg_temp.spy(value::pg_catalog.text))")


def _ran_as(conn) -> set[str]:
    value = conn.execute("select current_setting('attack.ran_as', true)").fetchone()[0]
    return set((value or "").split())


def test_temporary_types_never_shadow_ours_in_security_definer_functions(attacker):
    """Even where a DBA handed agents TEMP on the database, a type or table
    an agent creates in pg_temp is never what a security-definer function
    resolves: their search_path names pg_temp last."""
    db, agent = attacker
    with db.connect() as admin:
        admin.execute(sql.SQL("grant temporary on database {} to {}").format(
            sql.Identifier(db.name), sql.Identifier(role_for(agent.name))))
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        _shadow_text(conn)
        for call in ("select * from scsql.whoami()", "select scsql.remember('k', 'v')",
                     "select * from scsql.search('anything')"):
            try:
                conn.execute(call)
            except psycopg.Error:
                pass  # the agent's own invoker functions may trip over its own types
        assert _ran_as(conn) <= {role_for(agent.name)}


def test_every_security_definer_function_resists_temporary_shadowing(attacker):
    """The same attack against every security-definer function an agent may
    execute, called with NULL arguments: none may resolve the agent's type."""
    db, agent = attacker
    with db.connect() as admin:
        admin.execute(sql.SQL("grant temporary on database {} to {}").format(
            sql.Identifier(db.name), sql.Identifier(role_for(agent.name))))
        functions = [r["f"] for r in admin.execute("""
            select p.oid::regprocedure::text as f from pg_proc p
            where p.pronamespace = 'scsql'::regnamespace and p.prosecdef and p.prokind = 'f'
              and p.prorettype <> 'trigger'::regtype
              and has_function_privilege(%s, p.oid, 'execute')
        """, (role_for(agent.name),)).fetchall()]
    assert functions
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        _shadow_text(conn)
        conn.execute("set statement_timeout = '2s'")
        for f in functions:
            name, _, args = f.partition("(")
            nargs = len([a for a in args.rstrip(")").split(",") if a.strip()])
            try:
                conn.execute(f"select {name}({', '.join(['null'] * nargs)})")
            except psycopg.Error:
                pass
        assert _ran_as(conn) <= {role_for(agent.name)}


DEEP = "[" * 2000 + "]" * 2000


def test_values_nested_too_deep_for_a_client_are_refused_where_they_enter(attacker):
    """A payload nested 2,000 deep is valid jsonb, but no client (the verifier
    included) could read it back: every write path refuses it."""
    db, agent = attacker
    orch = db.agent("boss", db.project(), "orchestrator")
    with psycopg.connect(db.login(orch.name), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql.enqueue_task('developer', %s::jsonb)", (DEEP,))
        assert err.value.sqlstate == "SC010" and "64 levels" in str(err.value)
        task = conn.execute("select task_id from scsql.enqueue_task('developer', %s::jsonb)",
                            ('{"a": [[1]]}',)).fetchone()[0]
    assert task
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select * from scsql.index_text('notes/a.md', 'text', p_meta => %s::jsonb)",
                         ('{"m": ' + DEEP + "}",))
        assert err.value.sqlstate == "SC010"


def test_the_verifier_encodes_values_python_cannot_parse(scsql_db):
    """A row holding jsonb Python cannot parse (nested past its recursion
    limit, an integer past its digit limit: a superuser could plant one) is
    encoded from PostgreSQL's own text, exactly as the database encodes it,
    so it verifies or breaks on its own and never stops verification."""
    from psycopg.types.json import set_json_loads

    from scsql.audit import encoding

    huge = "1" * 5000
    with scsql_db.connect() as conn:
        set_json_loads(encoding.JsonValue.parse, conn)
        for text in (DEEP, '{"n": ' + huge + "}", '{"a": [1, 2.50, "x"]}'):
            row = conn.execute("select %s::jsonb as v, scsql._enc_jsonb(%s::jsonb) as e", (text, text)).fetchone()
            assert encoding.encode("jsonb", row["v"]) == bytes(row["e"]), text[:20]


def test_agents_may_not_create_large_objects(attacker):
    """Large objects live outside row-level security and the audit trail."""
    db, agent = attacker
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        for call in ("select lo_from_bytea(0, 'loot')", "select lo_create(0)", "select lo_creat(-1)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(call)


def test_role_comments_name_no_project(attacker):
    """Every role of the cluster reads role comments; RLS hides projects."""
    db, agent = attacker
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        comment = conn.execute("select shobj_description(oid, 'pg_authid') from pg_roles where rolname = %s",
                               (role_for(agent.name),)).fetchone()[0]
    project = agent.whoami()["project"]
    assert comment and project not in comment


def test_a_session_setting_never_breaks_search(attacker):
    db, agent = attacker
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        conn.execute("set scsql.bm25_prune_postings = 'many'")
        conn.execute("select * from scsql.search('anything')").fetchall()


def test_an_agent_cannot_hold_off_its_own_revocation_or_key_rotation(attacker):
    """An agent that keeps a write transaction open holds key-share locks on
    its own agents row; revoking it or rotating its key must not wait on them."""
    from scsql.core.keys import generate, public_bytes

    db, agent = attacker
    with psycopg.connect(db.login(agent.name)) as conn:
        conn.execute("select scsql.remember('held', 'open transaction')")
        held = conn.execute("select count(*) from pg_locks where pid = pg_backend_pid() "
                            "and relation = 'scsql.agents'::regclass").fetchone()[0]
        assert held  # the open transaction really holds a lock on scsql.agents
        with db.connect() as admin:
            admin.execute("set statement_timeout = '10s'")
            admin.execute("select scsql.rotate_agent_key(%s, %s)", (agent.name, public_bytes(generate())))
            admin.execute("select scsql.revoke_agent(%s)", (agent.name,))
            admin.commit()
        conn.rollback()
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql.remember('after', 'revocation')")
        assert err.value.sqlstate == "SC002"
