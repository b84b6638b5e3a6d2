"""Where subsystems meet: learnings are indexed into the knowledge base and
found by search; recall_context restores recent broadcasts."""

from __future__ import annotations

from scsql import subsystems
from scsql.api import Api

from ..helpers import ON_CITUS


def _search(agent, query: str) -> list[dict]:
    with agent.transaction() as conn:
        return conn.execute("select * from scsql.search(p_query => %s, p_k => 10)", (query,)).fetchall()


def test_failed_outcome_becomes_a_learning_that_search_finds(scsql_db):
    project = scsql_db.project()
    author, later = scsql_db.agent("author", project), scsql_db.agent("later", project)
    Api(author).call("record_outcome", kind="rejected", summary="migration lock timeout on tasks_archive",
                     signal="review", evidence="lock_timeout exceeded while vacuuming", task_ref="T-17")
    hits = _search(later, "tasks_archive lock timeout")
    assert hits, "the learning was not found"
    top = hits[0]
    assert top["source_path"].startswith("learning:") and "tasks_archive" in top["content"]
    assert "Failure learning" in top["content"] and "review" in top["content"]
    # And it is one source per learning, of kind learning, in the author's project.
    with scsql_db.connect() as conn:
        kinds = conn.execute("select kind, count(*) as n from scsql.kb_sources where path like 'learning:%%' "
                             "group by kind").fetchall()
    assert kinds == [{"kind": "learning", "n": 1}]


def test_restricted_and_confidential_learnings_stay_out_of_the_knowledge_base(scsql_db):
    project = scsql_db.project()
    author, other = scsql_db.agent("secret_author", project), scsql_db.agent("other", project, "qa")
    api = Api(author)
    api.call("record_outcome", kind="failed", summary="zanzibar credential rotation broke", task_ref="T-1",
             classification="restricted")
    api.call("record_outcome", kind="failed", summary="zanzibar staging deploy broke", task_ref="T-2",
             classification="confidential")
    assert _search(other, "zanzibar") == []
    assert _search(author, "zanzibar") == []  # not in the knowledge base at all
    assert {x["summary"] for x in api.call("learnings", query="zanzibar")} == {
        "zanzibar credential rotation broke", "zanzibar staging deploy broke"}  # the author still has them


def _record_outcome_sql(agent, conn, summary: str) -> dict:
    """record_outcome as a psql user calls it: signed arguments, no Python adapter afterwards."""
    from scsql.audit.telemetry import OUTCOME_FIELDS
    from scsql.audit.signing import sign_row

    args = sign_row(agent, "scsql.outcomes", OUTCOME_FIELDS, {"kind": "failed", "summary": summary, "task_ref": "T-9"})
    return conn.execute(
        "select * from scsql.record_outcome(p_kind => %(kind)s, p_summary => %(summary)s, "
        "p_task_ref => %(task_ref)s, p_at => %(at)s, p_key_id => %(key_id)s, p_signature => %(signature)s)",
        args).fetchone()


def test_outcome_recorded_from_sql_is_indexed_by_the_worker(scsql_db):
    from scsql.core import worker

    project = scsql_db.project()
    a = scsql_db.agent("sqlpath", project)
    with a.transaction() as conn:
        assert _record_outcome_sql(a, conn, "wombat cache stampede")["learning_id"] is not None
    assert _search(a, "wombat stampede") == []  # queued, not indexed yet
    done = worker.drain(a, subsystems.jobs(["learnings"]))
    assert done == 1
    assert _search(a, "wombat stampede")[0]["source_path"].startswith("learning:")


def test_learning_rolls_back_with_its_outcome(scsql_db):
    """The learning and its place in the queue are written in the outcome's
    transaction: when that transaction rolls back, neither remains."""
    from scsql.core import worker

    project = scsql_db.project()
    a = scsql_db.agent("rollback", project)
    conn = a.db.pool.getconn()
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(f"set local role {a.role}")
            assert _record_outcome_sql(a, conn, "quokka failure")["learning_id"] is not None
            if not ON_CITUS:  # there the agent may not read, in this transaction, the shard the owner wrote
                assert conn.execute("select count(*) as n from scsql.learnings").fetchone()["n"] == 1
    finally:
        a.db.pool.putconn(conn)
    assert worker.drain(a, subsystems.jobs(["learnings"])) == 0
    assert _search(a, "quokka") == []


def test_an_open_outcome_transaction_does_not_block_other_outcomes(scsql_db):
    """Queuing, not indexing, in the outcome's transaction: another agent's
    failure is recorded while the first transaction is still open."""
    import threading

    project = scsql_db.project()
    a, b = scsql_db.agent("slow", project), scsql_db.agent("fast", project)
    conn = a.db.pool.getconn()
    done = threading.Event()
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(f"set local role {a.role}")
            _record_outcome_sql(a, conn, "first failure, still open")

            def other():
                Api(b).call("record_outcome", kind="failed", summary="second failure", task_ref="T-2")
                done.set()

            t = threading.Thread(target=other)
            t.start()
            t.join(30)
            assert done.is_set(), "the second outcome waited on the first transaction"
    finally:
        a.db.pool.putconn(conn)
    assert _search(b, "second failure")[0]["source_path"].startswith("learning:")


def test_recall_context_restores_recent_broadcasts_with_provenance(scsql_db):
    project = scsql_db.project()
    orch = scsql_db.agent("orch", project, "orchestrator")
    dev = scsql_db.agent("dev", project, "developer")
    peer = scsql_db.agent("peer", project, "qa")
    Api(orch).call("broadcast", type="ASSIGN", to_agent=dev.name, payload={"do": "fix the parser"})
    Api(peer).call("broadcast", type="STATUS", to_role="developer", payload={"note": "tests are red"})
    Api(orch).call("broadcast", type="STATUS", to_role="qa", payload={"not": "for developers"})
    with dev.transaction() as conn:
        rows = conn.execute("select * from scsql.recall_context(p_budget => 1500) "
                            "where section = 'broadcast' order by item").fetchall()
    contents = [r["content"] for r in rows]
    assert len(contents) == 2  # the qa message is not the developer's
    assert contents[0].startswith("STATUS from ") and "(unverified agent output)" in contents[0]
    assert "tests are red" in contents[0]
    assert contents[1].startswith("ASSIGN from ") and "(orchestrator)" in contents[1] and "fix the parser" in contents[1]


def test_worker_wakes_on_enqueue_and_runs_the_task_with_a_command(scsql_db, tmp_path):
    """scsql worker -- CMD: LISTENs on its (project, role) channel. Its poll
    interval here is an hour, so only the enqueue's NOTIFY can wake it."""
    import sys
    import threading

    from scsql.core import worker
    from scsql.coordination.client import task_job

    project = scsql_db.project()
    orch = scsql_db.agent("boss", project, "orchestrator")
    dev = scsql_db.agent("hands", project, "developer")
    script = tmp_path / "task.py"
    script.write_text("import json, sys; t = json.load(sys.stdin); print(json.dumps({'echo': t['payload']}))\n")
    job = task_job(dev, [sys.executable, str(script)], lease=30)
    first_drain = threading.Event()
    inner = job.run

    def run(agent) -> int:
        done = inner(agent)
        first_drain.set()
        return done

    job.run = run
    stop = threading.Event()
    ran: list[int] = []

    def progress(name: str, n: int) -> None:
        ran.append(n)
        stop.set()

    t = threading.Thread(target=worker.serve, args=(dev, [job]),
                         kwargs={"poll_seconds": 3600, "stop": stop.is_set, "on_progress": progress})
    t.start()
    try:
        # The worker has drained an empty queue and now sleeps on LISTEN.
        assert first_drain.wait(30)
        task = Api(orch).call("enqueue_task", role="developer", payload={"do": "echo"})
        assert stop.wait(60), "the worker did not wake on the enqueue"
    finally:
        stop.set()
        with scsql_db.connect() as conn:  # wake it so it sees stop
            conn.execute("select pg_notify(%s, 'stop')", (job.channels[0],))
            conn.commit()
        t.join(30)
    assert ran == [1]
    with scsql_db.connect() as conn:
        row = conn.execute("select state, result from scsql.tasks_archive where task_id = %s",
                           (task["task_id"],)).fetchone()
    assert row == {"state": "done", "result": {"echo": {"do": "echo"}}}
