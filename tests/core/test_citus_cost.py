"""What the calls that read several projects cost, next to the same calls
within one project. Run on one server (the default), it prints median times
with -s; on a Citus cluster, the same measurement runs against a database
migrated with scsql migrate --citus:

    python3 -m tests.core.test_citus_cost "host=127.0.0.1 port=9700 user=postgres dbname=scsql"

so the two runs compare the same calls on the same data. A call that fails
there is printed with its error."""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from scsql.core import roles
from scsql.core.keys import Keystore

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
    "admin: verify every chain": ("admin", "select count(*) from scsql.chains c, "
                                           "lateral scsql.verify_chain(c.chain_id) v"),
}


def _note(i: int, project: str) -> str:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(5))
    return f"# note {i} of {project}\n\n{words} observed on night {i}.\nThe {WORDS[i % len(WORDS)]} log, entry {i}.\n"


def populate(admin: str, keystore: Keystore, prefix: str) -> str:
    """Three projects of NOTES notes each (indexed by their agents); the first
    agent is granted read on the other two. Returns its role."""
    projects = [f"{prefix}_p{i}" for i in range(3)]
    names = [f"{prefix}_c{i}" for i in range(3)]
    for project, name in zip(projects, names):
        roles.create_project(admin, project)
        roles.create_agent(admin, keystore, name, project, "developer")
    with psycopg.connect(admin, autocommit=True) as conn:
        role_of = {n: conn.execute("select role_name from scsql.agents where name = %s", (n,)).fetchone()[0]
                   for n in names}
        for project, name in zip(projects, names):
            conn.execute(f'set role "{role_of[name]}"')
            for i in range(NOTES):
                conn.execute("select * from scsql.index_text(%s, %s, 'note')", (f"notes/{i}.md", _note(i, project)))
            conn.execute("reset role")
        for project in projects[1:]:
            conn.execute("select scsql.grant_project_read(%s, %s)", (project, names[0]))
    return role_of[names[0]]


def _median_ms(conn: psycopg.Connection, query: str, rounds: int = 7) -> float:
    conn.execute(query).fetchall()  # plans and caches warm
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        conn.execute(query).fetchall()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure(admin: str, role: str) -> tuple[dict[str, float], dict[str, str]]:
    """Median ms of each call, and the error of each call that failed."""
    times, failed = {}, {}
    with psycopg.connect(admin, autocommit=True) as conn:
        for name, (who, query) in CALLS.items():
            if who == "a":
                conn.execute(f'set role "{role}"')
            try:
                times[name] = _median_ms(conn, query)
            except psycopg.Error as exc:
                failed[name] = str(exc).splitlines()[0]
            finally:
                conn.execute("reset role")
        citus = conn.execute("select count(*) from pg_extension where extname = 'citus'").fetchone()[0] == 1
    print(f"\n{'Citus cluster' if citus else 'one server'}: 3 projects x {NOTES} notes, "
          f"load average {os.getloadavg()[0]:.2f}")
    for name in CALLS:
        print(f"  {name}: " + (f"{times[name]:.1f} ms" if name in times else f"fails: {failed[name]}"))
    return times, failed


def test_calls_that_read_several_projects_against_one_project(scsql_db):
    role = populate(scsql_db.admin, scsql_db.keystore, f"{scsql_db.name}_cost")
    times, failed = measure(scsql_db.admin, role)
    if not scsql_db.server.workers:
        assert failed == {}
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute(f'set role "{role}"')
        try:
            spans = conn.execute("select count(distinct project) from scsql.search_global('telescope')").fetchone()[0]
        except psycopg.Error:
            spans = None
    assert spans == 3 or scsql_db.server.workers


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as keys:
        measure(sys.argv[1], populate(sys.argv[1], Keystore(Path(keys)), "cost" + secrets.token_hex(3)))
