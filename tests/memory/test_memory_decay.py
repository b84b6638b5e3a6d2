"""Use and decay: recall_context, pack and search record what they return
(at most once per granularity, never waiting on a locked row), rank with
importance, recency and use as parameters, importance-5 facts and pinned
sources never decay, facts expire after their TTL and external sources
after the project's external_ttl unless pinned, and the worker purges
what expired."""

from __future__ import annotations

import threading

import psycopg
import pytest

from scsql import subsystems
from scsql.core import worker
from scsql.core.errors import ScsqlError

from ..helpers import wait_for


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def admin(db, sql, *args):
    with db.connect() as conn:
        out = conn.execute(sql, args).fetchall() if sql.lstrip().lower().startswith(("select", "with")) else None
        if out is None:
            conn.execute(sql, args)
        conn.commit()
        return out


def uses(agent, table="memory_facts", col="key"):
    return {r[col]: r["use_count"] for r in q(agent, f"select {col}, use_count from scsql.{table}")}


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("decay", scsql_db.project())


def _project(db, agent):
    return admin(db, "select p.name from scsql.agents a join scsql.projects p using (project_id) where a.name = %s",
                 agent.name)[0]["name"]


def test_recall_pack_and_search_record_use_once_per_granularity(scsql_db, agent):
    q(agent, "select * from scsql.remember('deploy.order', 'migrations run before the ledger deploy', 4)")
    q(agent, "select * from scsql.remember('office.plant', 'water the plant on fridays', 2)")
    q(agent, "select * from scsql.index_text('notes/ledger.md', '# Ledger\n\nThe ledger deploy waits for migrations.')")
    q(agent, "select * from scsql.recall_context()")
    assert uses(agent) == {"deploy.order": 1, "office.plant": 1}
    q(agent, "select * from scsql.recall_context()")  # within the granularity (1 minute): not counted again
    assert uses(agent) == {"deploy.order": 1, "office.plant": 1}
    assert q(agent, "select * from scsql.search('ledger deploy')")
    assert uses(agent, "kb_sources", "path") == {"notes/ledger.md": 1}
    admin(scsql_db, "select * from scsql.set_memory_lifecycle(%s, p_use_granularity => '0')", _project(scsql_db, agent))
    packed = q(agent, "select * from scsql.pack('ledger deploy migrations')")
    assert {p["source_path"] for p in packed} == {"memory:deploy.order", "notes/ledger.md"}
    assert uses(agent) == {"deploy.order": 2, "office.plant": 1}  # pack returned only the matching fact
    assert uses(agent, "kb_sources", "path") == {"notes/ledger.md": 2}
    last = q(agent, "select last_used_at from scsql.kb_sources")[0]["last_used_at"]
    assert last is not None
    # A read-only transaction (a standby) reads and records nothing.
    with agent.transaction() as conn:
        conn.execute("set transaction read only")
        assert conn.execute("select * from scsql.recall_context()").fetchall()
        assert conn.execute("select * from scsql.search('ledger')").fetchall()
    assert uses(agent) == {"deploy.order": 2, "office.plant": 1}


def test_a_reader_never_waits_on_a_locked_fact_and_skips_its_use(scsql_db, agent):
    """A writer holds the row lock of one fact (remember, uncommitted) while
    recall_context runs: recall returns at once, records the other facts'
    use and skips the locked one."""
    q(agent, "select * from scsql.remember('busy', 'being rewritten', 3)")
    q(agent, "select * from scsql.remember('idle', 'nobody touches it', 3)")
    writer = scsql_db.connect()
    try:
        writer.execute("update scsql.memory_facts set value = 'rewritten' where key = 'busy'")  # holds the row lock
        assert admin(scsql_db, "select count(*) as n from pg_locks l join pg_stat_activity a using (pid) "
                               "where l.relation = 'scsql.memory_facts'::regclass and l.granted and a.pid = %s",
                     writer.info.backend_pid)[0]["n"] >= 1
        done = threading.Event()
        rows = []

        def read():
            rows.extend(q(agent, "select * from scsql.recall_context()"))
            done.set()

        t = threading.Thread(target=read)
        t.start()
        assert done.wait(10), "recall_context waited on the writer's row lock"
        t.join()
        assert {r["key"] for r in rows if r["section"] == "fact"} == {"busy", "idle"}
        assert uses(agent) == {"busy": 0, "idle": 1}  # the lock was there: its use was skipped, not awaited
    finally:
        writer.rollback()
        writer.close()


def test_recall_context_ranks_with_importance_recency_and_use(scsql_db, agent):
    for key, imp, age_days in [("old.five", 5, 365), ("old.three", 3, 120), ("new.three", 3, 0), ("mid.four", 4, 60)]:
        q(agent, "select * from scsql.remember(%s, %s, %s)", key, f"value of {key}", imp)
        admin(scsql_db, "update scsql.memory_facts set updated_at = now() - make_interval(days => %s) where key = %s",
              age_days, key)

    def order(**weights):
        args = ", ".join(f"p_{k} => {v}" for k, v in weights.items())
        return [r["key"] for r in q(agent, f"select * from scsql.recall_context({args or ''})") if r["section"] == "fact"]

    admin(scsql_db, "select * from scsql.set_memory_lifecycle(%s, p_use_granularity => '0')", _project(scsql_db, agent))
    # Defaults: importance first; within importance 3 the recent fact first.
    assert order() == ["old.five", "mid.four", "new.three", "old.three"]
    # Recency alone: the importance-5 fact never decays; the others by age.
    assert order(importance_weight=0, recency_weight=1, use_weight=0) == ["old.five", "new.three", "mid.four", "old.three"]
    # Use: the old importance-3 fact, returned often lately, passes the new one.
    admin(scsql_db, "update scsql.memory_facts set use_count = 40, last_used_at = now() where key = 'old.three'")
    used = order(importance_weight=0, recency_weight=0.2, use_weight=1)
    assert used[0] == "old.three" and used.index("old.three") < used.index("new.three")
    assert order(importance_weight=1, recency_weight=0, use_weight=0)[0] == "old.five"
    for bad in ("p_importance_weight => -1", "p_use_weight => 'NaN'", "p_half_life_days => 0", "p_recency_weight => 101"):
        with pytest.raises(ScsqlError) as err:
            q(agent, f"select * from scsql.recall_context({bad})")
        assert err.value.code == "SC243", bad
        with pytest.raises(ScsqlError) as err:
            q(agent, f"select * from scsql.pack('ledger', {bad})")
        assert err.value.code == "SC243", bad
        with pytest.raises(ScsqlError) as err:
            q(agent, f"select * from scsql.search('ledger', {bad})")
        assert err.value.code == "SC243", bad


def test_search_ranks_with_recency_when_asked_and_stays_prefix_stable(scsql_db, agent):
    for i in range(8):
        q(agent, "select * from scsql.index_text(%s, %s)", f"notes/n{i}.md", f"# Ledger {i}\n\nThe ledger deploy note {i}.")
    admin(scsql_db, "update scsql.kb_sources set updated_at = now() - interval '200 days' where path in ('notes/n0.md', 'notes/n1.md')")
    plain = [r["source_path"] for r in q(agent, "select * from scsql.search('ledger deploy', 8)")]
    assert sorted(plain) == sorted(f"notes/n{i}.md" for i in range(8))
    lived = [r["source_path"] for r in q(agent, "select * from scsql.search('ledger deploy', 8, p_recency_weight => 1)")]
    assert set(lived[-2:]) == {"notes/n0.md", "notes/n1.md"}  # stale sources sink
    # A pinned source never decays.
    q(agent, "select * from scsql.pin('notes/n0.md')")
    lived = [r["source_path"] for r in q(agent, "select * from scsql.search('ledger deploy', 8, p_recency_weight => 1)")]
    assert lived[-1] == "notes/n1.md" and "notes/n0.md" in lived[:-1]
    scores = [r["score"] for r in q(agent, "select * from scsql.search('ledger deploy', 8, p_recency_weight => 1)")]
    assert scores == sorted(scores, reverse=True)
    top3 = [r["source_path"] for r in q(agent, "select * from scsql.search('ledger deploy', 3, p_recency_weight => 1)")]
    assert top3 == lived[:3]


def test_a_fact_with_a_ttl_expires_and_the_worker_purges_it(scsql_db, agent):
    r = q(agent, "select * from scsql.remember('build.lock', 'CI is frozen until the release', 5, '1 hour')")[0]
    assert r["stored"] == "memory"
    q(agent, "select * from scsql.remember('keep', 'kept for good', 2)")
    [f] = q(agent, "select expires_at - now() as left from scsql.memory_facts where key = 'build.lock'")
    assert 3500 < f["left"].total_seconds() <= 3600
    admin(scsql_db, "update scsql.memory_facts set expires_at = now() - interval '1 second' where key = 'build.lock'")
    assert [r["key"] for r in q(agent, "select * from scsql.recall_context()") if r["section"] == "fact"] == ["keep"]
    assert [p["key"] for p in q(agent, "select * from scsql.pack('CI frozen release')")] == []
    assert worker.drain(agent, subsystems.jobs(["memory_retention"])) == 1
    assert [r["key"] for r in q(agent, "select key from scsql.memory_facts")] == ["keep"]
    # Remembering again without a TTL keeps the fact for good.
    q(agent, "select * from scsql.remember('keep', 'still kept', 2, '1 day')")
    q(agent, "select * from scsql.remember('keep', 'still kept', 2)")
    assert q(agent, "select expires_at from scsql.memory_facts")[0]["expires_at"] is None
    for ttl in ("0 seconds", "-1 day", "3651 days"):
        with pytest.raises(ScsqlError) as err:
            q(agent, "select * from scsql.remember('t', 'v', 3, %s::interval)", ttl)
        assert err.value.code == "SC241", ttl
    assert [r["key"] for r in q(agent, "select key from scsql.memory_facts")] == ["keep"]


def test_external_sources_expire_unless_pinned_and_the_ttl_is_per_project(scsql_db, agent):
    other = scsql_db.agent("decay_other", scsql_db.project())
    for a in (agent, other):
        q(a, "select * from scsql.index_text('https://example.com/a', 'external page a', 'url')")
        q(a, "select * from scsql.index_text('https://example.com/b', 'external page b', 'url')")
        q(a, "select * from scsql.index_text('notes/internal.md', 'an internal note')")
    admin(scsql_db, "update scsql.kb_sources set updated_at = now() - interval '15 days'")
    assert q(agent, "select * from scsql.pin('https://example.com/b')")[0]["pinned"] is True
    # The other project keeps external sources 30 days.
    admin(scsql_db, "select * from scsql.set_memory_lifecycle(%s, '30 days')", _project(scsql_db, other))
    assert worker.drain(agent, subsystems.jobs(["memory_retention"])) == 1
    assert sorted(r["path"] for r in q(agent, "select path from scsql.kb_sources")) == [
        "https://example.com/b", "notes/internal.md"]
    assert q(agent, "select * from scsql.search('external page')")[0]["source_path"] == "https://example.com/b"
    assert worker.drain(other, subsystems.jobs(["memory_retention"])) == 0
    assert len(q(other, "select path from scsql.kb_sources")) == 3
    # Unpinned, it expires too.
    assert q(agent, "select * from scsql.pin('https://example.com/b', false)")[0]["pinned"] is False
    assert worker.drain(agent, subsystems.jobs(["memory_retention"])) == 1
    with pytest.raises(ScsqlError) as err:
        q(agent, "select * from scsql.pin('https://example.com/nowhere')")
    assert err.value.code == "SC242"
    for bad in ("p_external_ttl => '10 minutes'", "p_use_granularity => '2 days'"):
        with pytest.raises(psycopg.Error) as err:
            admin(scsql_db, f"select * from scsql.set_memory_lifecycle(%s, {bad})", _project(scsql_db, agent))
        assert err.value.sqlstate == "SC244", bad
    with pytest.raises(ScsqlError) as err:
        q(agent, "select * from scsql.set_memory_lifecycle('x', '1 day')")
    assert err.value.code == "42501"


def test_use_recording_from_many_concurrent_readers_neither_blocks_nor_deadlocks(scsql_db, agent):
    """Readers recording the same items at once: one holds its row locks
    (open transaction) while the others run; they finish without it."""
    for i in range(20):
        q(agent, "select * from scsql.remember(%s, %s, 3)", f"k{i}", f"shared ledger fact {i}")
    admin(scsql_db, "select * from scsql.set_memory_lifecycle(%s, p_use_granularity => '0')", _project(scsql_db, agent))
    with agent.transaction() as holder:
        holder.execute("select * from scsql.recall_context()").fetchall()  # locks and updates all 20, uncommitted
        errors = []

        def read():
            try:
                q(agent, "select * from scsql.recall_context()")
                q(agent, "select * from scsql.pack('shared ledger')")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=read) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), "a reader waited on another reader's use record"
        assert errors == []
        assert set(uses(agent).values()) == {0}  # every row was locked by the holder: skipped, not awaited
    wait_for(lambda: set(uses(agent).values()) == {1})
