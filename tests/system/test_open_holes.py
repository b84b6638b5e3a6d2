"""Known holes, each staged for real against a database with an agent's own
psql login. Each test asserts the behaviour scsql should have and is expected
to fail (strict xfail) until the hole is closed; SECURITY.md lists them."""

from __future__ import annotations

import time

import psycopg
import pytest

from scsql.core.config import role_for

from ..helpers import ON_CITUS

# Two holes are of one server only. On a Citus cluster (.ci/citus.sh) the
# coordinator's tables hold no rows (the shards are on the workers, where
# agents do not log in), so its statistics show no project's activity; and
# there a forget from a snapshot taken before a revocation is refused (the
# workers run it in snapshots of their own, taken when it reaches them).
ONE_SERVER = not ON_CITUS


@pytest.fixture
def two_projects(scsql_db):
    pa, pb = scsql_db.project(), scsql_db.project()
    a = scsql_db.agent("alice", pa)
    b = scsql_db.agent("bob", pb)
    return scsql_db, pa, pb, a, b


@pytest.mark.xfail(strict=True, reason="DoS mitigation does not hold: an agent lifts the DBA's per-role "
                   "idle_in_transaction_session_timeout (SECURITY.md's fix for the NOTIFY-queue DoS) with SET or "
                   "ALTER ROLE on itself, and keeps a LISTENing transaction open")
def test_agent_cannot_lift_the_idle_timeout_its_dba_set(two_projects):
    db, _, _, a, _ = two_projects
    with db.connect(autocommit=True) as admin:
        admin.execute(f'alter role "{role_for(a.name)}" set idle_in_transaction_session_timeout = 500')
    lifted = []
    with psycopg.connect(db.login(a.name), autocommit=True) as conn:
        for stmt in ("set idle_in_transaction_session_timeout = 0",
                     "alter role current_user reset idle_in_transaction_session_timeout"):
            try:
                conn.execute(stmt)
                lifted.append(stmt)
            except psycopg.errors.InsufficientPrivilege:
                pass
    with psycopg.connect(db.login(a.name)) as conn:  # a new login: the role's setting is gone
        setting = conn.execute("show idle_in_transaction_session_timeout").fetchone()[0]
        conn.execute("listen anything")
        time.sleep(1.5)  # past the DBA's 500 ms: the server would have closed the session
        alive = conn.execute("select 1").fetchone()[0] == 1
        conn.rollback()
    assert not lifted and setting != "0" and not alive, (lifted, setting, alive)


@pytest.mark.xfail(ONE_SERVER, strict=True,
                   reason="cross-project leak: pg_stat_user_tables (readable by PUBLIC) counts every "
                   "project's rows, so an agent watches another project's activity on shared tables")
def test_table_statistics_do_not_reveal_other_projects_activity(two_projects):
    db, _, _, a, b = two_projects
    q = "select n_tup_ins from pg_stat_user_tables where relid = 'scsql.memory_facts'::regclass"
    with psycopg.connect(db.login(a.name), autocommit=True) as spy:
        before = spy.execute(q).fetchone()[0]
        with psycopg.connect(db.login(b.name), autocommit=True) as victim:
            for i in range(5):
                victim.execute("select * from scsql.remember(%s, 'v', 3)", (f"k{i}",))
        seen = before
        deadline = time.monotonic() + 10
        while seen == before and time.monotonic() < deadline:  # stats reach the spy once B's backend flushes
            spy.execute("select pg_stat_clear_snapshot()")
            seen = spy.execute(q).fetchone()[0]
            time.sleep(0.1)
    assert seen == before, f"agent of project A saw project B insert {seen - before} facts"


@pytest.mark.xfail(strict=True, reason="cross-project leak to a granted reader: kb_terms rows of published terms show "
                   "df (all chunks, unpublished included) and memory_state shows n_chunks/total_len, so a reader learns "
                   "which words the project's private session summaries, archived facts and learnings contain")
def test_a_granted_reader_learns_nothing_of_unpublished_chunks(two_projects):
    db, _, pb, a, b = two_projects
    with db.connect(autocommit=True) as admin:
        admin.execute("select scsql.grant_project_read(%s, %s)", (pb, a.name))
        pid = admin.execute("select project_id from scsql.projects where name = %s", (pb,)).fetchone()["project_id"]
    with psycopg.connect(db.login(b.name), autocommit=True) as victim:
        victim.execute("select * from scsql.index_text('docs/plan.md', 'release plan for merger and layoffs')")
        # Private to project B: a session summary (never published).
        victim.execute("select * from scsql.summarize_session(%s::jsonb)",
                       ('{"decisions": "the merger is on; layoffs in march"}',))
    with psycopg.connect(db.login(a.name), autocommit=True) as reader:
        assert reader.execute("select count(*) from scsql.kb_sources where project_id = %s and not published",
                              (pid,)).fetchone()[0] == 0  # the summary itself is hidden ...
        leaked = reader.execute(
            "select term, df, published_df from scsql.kb_terms where project_id = %s and df <> published_df "
            "order by term", (pid,)).fetchall()
        state = reader.execute("select n_chunks, published_chunks from scsql.memory_state where project_id = %s",
                               (pid,)).fetchone()
    # ... but its words and its size are not.
    assert not leaked and (state is None or state[0] == state[1]), (leaked, state)


def _hostile_broadcast(db, agent, payload: str) -> None:
    """A STATUS message with PAYLOAD (jsonb text, well under the 64 KiB limit), sent
    from the agent's own login with a garbage signature."""
    with psycopg.connect(db.login(agent.name), autocommit=True) as conn:
        conn.execute(
            "select * from scsql.broadcast('STATUS', 'developer', null, %s::jsonb, "
            "null, now(), (select k.key_id from scsql.agent_keys k join scsql.agents a using (agent_id) "
            "where a.role_name = current_user order by k.valid_from desc limit 1), decode(repeat('ab', 64), 'hex'))",
            (payload,))


HOSTILE_PAYLOADS = {
    "nested 2000 deep": "[" * 2000 + "]" * 2000,            # json.loads: RecursionError
    "a 5000-digit integer": "[" + "9" * 5000 + "]",          # json.loads: ValueError (int max_str_digits 4300)
}


@pytest.mark.xfail(ONE_SERVER, strict=True, reason="revocation bypass: an agent holding a REPEATABLE READ snapshot taken before "
                   "revoke_agent still forgets its project's facts and knowledge sources after the revocation "
                   "committed, because _me() reads scsql.agents in the caller's snapshot (chained writes are saved "
                   "only by their FK lock on the agent's row)")
def test_a_revoked_agent_cannot_forget_from_a_snapshot_taken_before_revocation(two_projects):
    db, _, _, a, _ = two_projects
    with psycopg.connect(db.login(a.name), autocommit=True) as setup:
        setup.execute("select * from scsql.remember('decision', 'keep the cache', 3)")
        setup.execute("select * from scsql.index_text('docs/design.md', 'the design of the cache')")
    done = []
    with psycopg.connect(db.login(a.name)) as hostile:
        hostile.execute("begin isolation level repeatable read")
        hostile.execute("select 1 from scsql.team_roles limit 1")  # the snapshot
        with db.connect(autocommit=True) as admin:
            admin.execute("select scsql.revoke_agent(%s)", (a.name,))
        for call in ("select scsql.forget('decision')", "select scsql.forget_source('docs/design.md')"):
            try:
                hostile.execute("savepoint s")
                hostile.execute(call)
                hostile.execute("release savepoint s")
                done.append(call)
            except psycopg.Error:
                hostile.execute("rollback to savepoint s")
        hostile.commit()
    with db.connect() as admin:
        left = admin.execute("select (select count(*) from scsql.memory_facts where key = 'decision') + "
                             "(select count(*) from scsql.kb_sources where path = 'docs/design.md') as n"
                             ).fetchone()["n"]
    assert not done and left == 2, (done, left)


@pytest.mark.xfail(strict=True, reason="cross-project leak: ids come from sequences shared by every project "
                   "(kb_sources.source_id, and likewise task, message, learning and tool-call ids), so the gap "
                   "between two of an agent's own ids counts another project's writes in between")
def test_ids_do_not_count_other_projects_writes(two_projects):
    db, _, _, a, b = two_projects
    q = "select source_id from scsql.kb_sources where path = %s"
    with psycopg.connect(db.login(a.name), autocommit=True) as spy, \
            psycopg.connect(db.login(b.name), autocommit=True) as victim:
        spy.execute("select * from scsql.index_text('one.md', 'first note')")
        first = spy.execute(q, ("one.md",)).fetchone()[0]
        for i in range(7):
            victim.execute("select * from scsql.index_text(%s, 'private note')", (f"n{i}.md",))
        spy.execute("select * from scsql.index_text('two.md', 'second note')")
        second = spy.execute(q, ("two.md",)).fetchone()[0]
    assert second - first == 1, f"the spy's ids jumped by {second - first}: project B wrote {second - first - 1} sources"


@pytest.mark.xfail(strict=True, reason="quarantine abuse across projects: one garbage-signed row per day keeps each "
                   "shared daily partition of tool_calls from retention forever (even after the quarantine is "
                   "acknowledged), and with it every other project's expired rows")
def test_one_agents_quarantine_does_not_keep_other_projects_expired_rows(two_projects):
    from scsql.audit.checkpoints import record_checkpoints
    from scsql.api import Api

    from ..helpers import auditor_key, backdate_keys, old_day, partition_of, write_at
    from ..audit.test_audit_attacks import _forge, _maintain

    db, _, _, a, c = two_projects
    old = old_day(db)  # three days ago; setup widens the clock tolerance to write there
    backdate_keys(db)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    write_at(c, old, "c-old")   # project C's row, expired under the retention
    _forge(db, a, old)           # project A: a garbage signature the same day
    Api(c).call("record_tool_call", tool="c-new")
    record_checkpoints(db.admin, auditor_key(db), progress=False)  # quarantines A's chain, signs C's
    part = partition_of(db, "c-old")
    actions = [(r["action"], r["partition"]) for r in _maintain(db)]
    with db.connect() as conn:
        kept = conn.execute("select count(*) as n from scsql.tool_calls where tool = 'c-old'").fetchone()["n"]
    assert kept == 0, f"retention kept project C's expired row: {actions} ({part})"
