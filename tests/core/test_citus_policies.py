"""The policies as scsql migrate --citus applies them (Citus refuses
subqueries in policies of distributed and reference tables): the same rows
visible as with the policies/ text, no subquery left, and what the
subquery-free form costs on one PostgreSQL server (printed with -s)."""

from __future__ import annotations

import os
import statistics
import time

import psycopg
import pytest

from scsql.core import citus
from scsql.core.migrate import Migrator, Source

from ..helpers import one_server_only, register

ROWS = int(os.environ.get("SCSQL_POLICY_BENCH_ROWS", "10000"))


def test_ddl_citus_sends_as_the_whole_text_runs_one_statement_at_a_time():
    text = "select 1;\ndrop trigger if exists t on scsql.x;\ncreate trigger t after insert on scsql.x\n" \
           "  for each row execute function scsql.f();\ncomment on table scsql.x is 'a; b';\n"
    out = citus.one_statement_ddl(text)
    assert out.splitlines()[0] == "select 1;"
    assert ("do $citus_do$ begin execute $citus_ddl$drop trigger if exists t on scsql.x$citus_ddl$; "
            "end $citus_do$;") in out
    assert ("execute $citus_ddl$create trigger t after insert on scsql.x\n"
            "  for each row execute function scsql.f()") in out
    assert out.endswith("comment on table scsql.x is 'a; b';\n")


def test_every_policy_is_written_without_a_subquery():
    files = [f for f in citus.CitusSource().api() if f.name.startswith("policies/")]
    plain = {f.name: f.text for f in Source().api()}
    assert files and all("(select scsql_caller." in plain[f.name] or "all functions in schema" in plain[f.name]
                         or f.text == plain[f.name] for f in files)
    for f in files:
        assert "(select scsql_caller." not in f.text, f.name


def test_grants_on_every_function_of_a_schema_run_with_types_qualified():
    text = ("select 1;\nrevoke all on all functions in schema scsql, scsql_caller from public, scsql_agent;\n"
            "grant execute on function scsql.f(text) to scsql_agent;\n")
    out = citus.qualified_function_grants(text)
    assert out.splitlines()[0] == "select 1;" and out.endswith("grant execute on function scsql.f(text) to scsql_agent;\n")
    assert ("perform pg_catalog.set_config('search_path', 'pg_catalog', true); execute $citus_ddl$revoke all on all "
            "functions in schema scsql, scsql_caller from public, scsql_agent$citus_ddl$; "
            "perform pg_catalog.set_config('search_path', p, true);") in out
    [privileges] = [f for f in citus.CitusSource().api() if f.name == "policies/00_privileges.sql"]
    assert "$citus_ddl$revoke all on all functions in schema scsql, scsql_caller" in privileges.text


@pytest.mark.parametrize("policy", [
    "create policy p on scsql.x for select to scsql_agent using (exists (select from scsql.agents));",
    "create policy p on scsql.x for select to scsql_agent\n"
    "  using (project_id in (select unnest(scsql_caller.readable_projects())));",
])
def test_a_policy_the_transformation_cannot_free_of_its_subquery_is_refused(policy):
    with pytest.raises(ValueError, match="subquery"):
        citus.citus_policies(policy)


_POLICY_QUALS = """
select c.relname::text as t, p.polname::text as name, p.polroles::regrole[]::text[] as roles, p.polcmd::text as cmd,
       pg_get_expr(p.polqual, p.polrelid) as qual, pg_get_expr(p.polwithcheck, p.polrelid) as chk
  from pg_policy p join pg_class c on c.oid = p.polrelid
 where c.relnamespace = 'scsql'::regnamespace
 order by 1, 2
"""


_TRIGGERS = """
select tgrelid::regclass::text, tgname::text, pg_get_triggerdef(oid) from pg_trigger
 where not tgisinternal and tgrelid::regclass::text like 'scsql.%' order by 1, 2
"""


def _visible(conn: psycopg.Connection, role: str) -> dict[str, int]:
    """Rows of every table of schema scsql the role can see."""
    tables = [t for (t,) in conn.execute(
        "select c.relname::text from pg_class c where c.relnamespace = 'scsql'::regnamespace "
        "and c.relkind in ('r', 'p') and not c.relispartition "
        "and has_table_privilege('scsql_agent', c.oid, 'select') order by 1").fetchall()]
    conn.execute(f'set role "{role}"')
    try:
        return {t: conn.execute(f"select count(*) from scsql.{t}").fetchone()[0] for t in tables}
    finally:
        conn.execute("reset role")


@one_server_only("it compares the two forms of the policies on one database; on Citus the plain form is refused")
def test_the_citus_form_shows_each_agent_the_same_rows(scsql_db):
    """Two projects with a few rows each, one agent granted read on the other
    project: every table shows each agent the same number of rows under both
    forms, and the Citus form holds no subquery."""
    a, b = scsql_db.project(), scsql_db.project()
    alice, bob = scsql_db.agent("alice", a), scsql_db.agent("bob", b)
    carol = register(scsql_db, "carol", a)
    for agent, key in ((alice, "a"), (bob, "b")):
        with agent.transaction() as conn:
            conn.execute("select scsql.remember(%s, %s, 3)", (f"k_{key}", f"the value of {key}"))
            conn.execute("select * from scsql.index_text(%s, %s, 'note')", (f"notes/{key}.md", f"notes of {key}"))
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (b, alice.name))
        roles = [conn.execute("select role_name from scsql.agents where name = %s", (n,)).fetchone()[0]
                 for n in (alice.name, bob.name, carol)]
        before = {r: _visible(conn, r) for r in roles}
        plain = conn.execute(_POLICY_QUALS).fetchall()
        triggers = conn.execute(_TRIGGERS).fetchall()
    Migrator(scsql_db.admin, citus.CitusSource()).run()  # its DDL one statement at a time, too
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        after = {r: _visible(conn, r) for r in roles}
        rewritten = conn.execute(_POLICY_QUALS).fetchall()
        assert conn.execute(_TRIGGERS).fetchall() == triggers
    assert after == before
    assert before[roles[0]]["kb_chunks"] > before[roles[2]]["kb_chunks"] > 0  # the grant shows b's chunks
    assert [r[:4] for r in rewritten] == [r[:4] for r in plain]
    assert [r for r in rewritten if "SELECT" in (r[4] or "").upper() or "SELECT" in (r[5] or "").upper()] == []
    assert any("SELECT scsql_caller" in (r[4] or "") for r in plain)


# (table, query) timed under each form of the table's agent policy.
_QUERIES = {
    "count a project's tasks": ("tasks", "select count(*) from scsql.tasks"),
    "queue scan (queued tasks of one role, first 10)":
        ("tasks", "select task_id from scsql.tasks where state = 'queued' and team_role = 'developer' "
                  "order by priority desc, task_id limit 10"),
    "one task by id": ("tasks", "select task_id from scsql.tasks where task_id = 17"),
    "count the chunks an agent can read (own + granted)": ("kb_chunks", "select count(*) from scsql.kb_chunks"),
    "chunks whose text matches (search's text filter)":
        ("kb_chunks", "select chunk_id from scsql.kb_chunks where content like '%%chunk 4242%%'"),
}
_OWN = "project_id = (select scsql_caller.project_id())"
_GRANTED = "(published and project_id = any ((select scsql_caller.readable_projects())::bigint[]))"
_POLICIES = {"tasks": _OWN, "kb_chunks": f"{_OWN} or {_GRANTED}"}
OLD, NEW = "subquery (policies/)", "direct call (Citus)"


def _populate(scsql_db) -> str:
    """ROWS tasks and ROWS published chunks in each of two projects; the
    first project's agent is granted read on the second. Returns its role."""
    a, b = scsql_db.project(), scsql_db.project()
    alice, bob = scsql_db.agent("alice", a), scsql_db.agent("bob", b)
    for agent in (alice, bob):
        with agent.transaction() as conn:
            conn.execute("select * from scsql.index_text('notes/bench.md', 'bench notes', 'note')")
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("select scsql.grant_project_read(%s, %s)", (b, alice.name))
        conn.execute("""
            insert into scsql.tasks (project_id, team_role, priority, created_by)
            select p.project_id, 'developer', g %% 7, 1
              from scsql.projects p, generate_series(1, %s) g where p.name = any(%s)""", (ROWS, [a, b]))
        conn.execute("""
            insert into scsql.kb_chunks (project_id, source_id, seq, chunk_hash, line_start, line_end,
                                         char_start, char_end, content, n_terms, term_ids, published)
            select s.project_id, s.source_id, 1000 + g,
                   encode(sha256(convert_to(s.project_id || ':' || g, 'UTF8')), 'hex'),
                   1, 1, 0, 10, 'chunk ' || g, 2, '{}', true
              from scsql.kb_sources s, generate_series(1, %s) g where s.path = 'notes/bench.md'""", (ROWS,))
        conn.execute("analyze scsql.tasks, scsql.kb_chunks")
        return conn.execute("select role_name from scsql.agents where name = %s", (alice.name,)).fetchone()[0]


def _time(conn: psycopg.Connection, role: str, rounds: int = 3) -> dict[tuple[str, str], float]:
    """Median time of each query under each form, the forms alternating."""
    times: dict[tuple[str, str], list[float]] = {}
    for _round in range(rounds):
        for form in (OLD, NEW):
            for table, qual in _POLICIES.items():
                text = qual if form == OLD else citus.citus_policies(f"create policy p on t using ({qual});")
                text = text if form == OLD else text[text.index("using (") + 7:-2]
                conn.execute(f"alter policy agent_read on scsql.{table} using ({text})")
            conn.execute(f'set role "{role}"')
            for name, (_table, query) in _QUERIES.items():
                start = time.perf_counter()
                result = conn.execute(query).fetchall()
                times.setdefault((form, name), []).append(time.perf_counter() - start)
                if name.startswith("count"):
                    assert result[0][0] == (ROWS if "tasks" in name else 2 * ROWS + 2)
            conn.execute("reset role")
    return {k: statistics.median(v) for k, v in times.items()}


@one_server_only("it times the plain form, which Citus refuses")
def test_what_the_subquery_free_form_costs_on_one_server(scsql_db):
    """Both forms of the tasks and kb_chunks policies on the same data in the
    same run, as an agent: prints the median times and their ratio. The
    direct call is evaluated once per row where the planner cannot use it as
    an index key (an OR of two conditions: kb_chunks)."""
    role = _populate(scsql_db)
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        times = _time(conn, role)
    print(f"\npolicy form cost, {ROWS} tasks and {ROWS} chunks in each of 2 projects, "
          f"load average {os.getloadavg()[0]:.2f}:")
    for name in _QUERIES:
        t_old, t_new = times[(OLD, name)] * 1000, times[(NEW, name)] * 1000
        print(f"  {name}: {OLD} {t_old:.2f} ms, {NEW} {t_new:.2f} ms, ratio {t_new / t_old:.1f}x")
    count = "count the chunks an agent can read (own + granted)"
    assert times[(NEW, count)] > times[(OLD, count)]
