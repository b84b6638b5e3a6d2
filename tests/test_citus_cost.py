"""What the calls that read several projects cost, next to the same calls
within one project: run on one server (the default) and on a Citus cluster
(.ci/citus.sh, TESTS=tests/test_citus_cost.py), it prints median times with
-s, so the two runs compare the same calls on the same data."""

from __future__ import annotations

import os
import statistics
import time

import psycopg

NOTES = int(os.environ.get("SCSQL_COST_NOTES", "20"))
WORDS = ["telescope", "nebula", "orbit", "comet", "quasar", "lens", "mirror", "focus"]

# name -> (who calls it, query); "a" is an agent granted read on two other projects.
CALLS = {
    "search (own project)": ("a", "select count(*) from scsql.search('telescope orbit')"),
    "search_global (3 projects)": ("a", "select count(*) from scsql.search_global('telescope orbit')"),
    "pack (own project)": ("a", "select length(scsql.pack('telescope orbit')::text)"),
    "recall_context (own project)": ("a", "select length(scsql.recall_context()::text)"),
    "read own project's chunks": ("a", "select count(*) from scsql.kb_chunks where project_id = "
                                       "scsql_caller.project_id()"),
    "read chunks of every readable project": ("a", "select count(*) from scsql.kb_chunks"),
    "admin: chunks of every project": ("admin", "select count(*) from scsql.kb_chunks"),
    "admin: verify one chain": ("admin", "select count(*) from scsql.chains c, "
                                         "lateral scsql.verify_chain(c.chain_id) v where c.chain_id = "
                                         "(select min(chain_id) from scsql.chains)"),
    "admin: verify every chain": ("admin", "select count(*) from scsql.chains c, lateral scsql.verify_chain(c.chain_id) v"),
}


def _note(i: int, project: str) -> str:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(5))
    return f"# note {i} of {project}\n\n{words} observed on night {i}.\nThe {WORDS[i % len(WORDS)]} log, entry {i}.\n"


def _median_ms(conn: psycopg.Connection, query: str, rounds: int = 7) -> float:
    conn.execute(query).fetchall()  # plans and caches warm
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        conn.execute(query).fetchall()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def test_calls_that_read_several_projects_against_one_project(scsql_db):
    projects = [scsql_db.project() for _ in range(3)]
    agents = [scsql_db.agent(f"c{i}", p) for i, p in enumerate(projects)]
    for agent, project in zip(agents, projects):
        with agent.transaction() as conn:
            for i in range(NOTES):
                conn.execute("select * from scsql.index_text(%s, %s, 'note')", (f"notes/{i}.md", _note(i, project)))
            conn.execute("select scsql.remember('telescope.site', 'the telescope sits on the north ridge', 3)")
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        for p in projects[1:]:
            conn.execute("select scsql.grant_project_read(%s, %s)", (p, agents[0].name))
        role = conn.execute("select role_name from scsql.agents where name = %s", (agents[0].name,)).fetchone()[0]
        citus = conn.execute("select count(*) from pg_extension where extname = 'citus'").fetchone()[0] == 1
        times = {}
        for name, (who, query) in CALLS.items():
            if who == "a":
                conn.execute(f'set role "{role}"')
            try:
                times[name] = _median_ms(conn, query)
            finally:
                conn.execute("reset role")
        conn.execute(f'set role "{role}"')
        spans = conn.execute("select count(distinct project) from scsql.search_global('telescope')").fetchone()[0]
        conn.execute("reset role")
    assert spans == 3
    print(f"\n{'Citus cluster' if citus else 'one server'}: 3 projects x {NOTES} notes, "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, ms in times.items():
        print(f"  {name}: {ms:.1f} ms")
