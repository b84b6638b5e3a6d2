"""The task queue: enqueue by orchestrators, claims by role with leases and
fencing tokens, retries with backoff, the dead state, release, cancel, the
archive, statistics, wake-ups and the drain check."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from scsql import subsystems
from scsql.coordination import client
from scsql.core.errors import ScsqlError
from scsql.api import Api

from ..helpers import (admin_rows, claim, coordination_team, end_backoff, enqueue, expire_leases, login, mcp_env, one, rows, run_client,
                      wait_for)


@pytest.fixture
def team(scsql_db):
    _project, *agents = coordination_team(scsql_db)
    return (scsql_db, *agents)


def test_enqueue_claim_complete_moves_the_task_to_the_archive(team):
    db, orch, dev, _, _ = team
    tid = enqueue(orch, payload={"do": "x"}, acceptance_criteria="tests pass", complexity=2)
    [task] = claim(dev, lease=60)
    assert task["task_id"] == tid and task["lease_token"] == 1 and task["attempt"] == 1
    assert task["payload"] == {"do": "x"} and task["acceptance_criteria"] == "tests pass"
    assert task["lease_expires_at"] > dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=50)
    done = one(dev, "select * from scsql.complete_task(%s, %s, %s)", tid, 1, json.dumps({"ok": True}))
    assert done["state"] == "done" and done["task_id"] == tid
    assert admin_rows(db, "select count(*) as n from scsql.tasks")[0]["n"] == 0
    [arch] = admin_rows(db, "select state, result, fence, finished_by from scsql.tasks_archive")
    assert arch["state"] == "done" and arch["result"] == {"ok": True} and arch["fence"] == 1
    [stats] = rows(dev, "select * from scsql.queue_stats()")
    assert (stats["team_role"], stats["queued"], stats["claimed"], stats["done"]) == ("developer", 0, 0, 1)


def test_only_orchestrators_enqueue(team):
    _, _, dev, _, _ = team
    with pytest.raises(ScsqlError) as err:
        enqueue(dev)
    assert err.value.code == "SC300"


def test_claims_by_priority_then_age(team):
    _, orch, dev, _, _ = team
    a = enqueue(orch, priority=0)
    b = enqueue(orch, priority=5)
    c = enqueue(orch, priority=0)
    d = enqueue(orch, priority=-1)
    got = [claim(dev)[0]["task_id"] for _ in range(4)]
    assert got == [b, a, c, d]
    assert claim(dev) == []


def test_claim_n_and_complete_and_claim_is_one_call_per_task(team):
    _, orch, dev, _, _ = team
    ids = [enqueue(orch) for _ in range(5)]
    two = claim(dev, n=2)
    assert [t["task_id"] for t in two] == ids[:2]
    nxt = rows(dev, "select * from scsql.complete_and_claim(%s, %s, '{}'::jsonb)",
               two[0]["task_id"], two[0]["lease_token"])
    assert [t["task_id"] for t in nxt] == [ids[2]]
    # A refused completion claims nothing.
    with pytest.raises(ScsqlError) as err:
        rows(dev, "select * from scsql.complete_and_claim(%s, %s)", two[1]["task_id"], 99)
    assert err.value.code == "SC302"
    assert len(rows(dev, "select * from scsql.my_tasks()")) == 2


def test_a_worker_claims_only_its_own_roles_tasks(team):
    _, orch, dev, _, qa = team
    qa_task = enqueue(orch, role="qa")
    assert claim(dev) == []  # nothing for developers
    with pytest.raises(ScsqlError) as err:
        claim(dev, task=qa_task)
    assert err.value.code == "SC305"
    assert claim(qa, task=qa_task)[0]["task_id"] == qa_task


def test_a_worker_of_another_project_cannot_claim_or_see_the_task(team):
    db, orch, _, _, _ = team
    other = db.agent("other", db.project(), "developer")
    tid = enqueue(orch)
    assert claim(other) == []
    with pytest.raises(ScsqlError) as err:
        claim(other, task=tid)
    assert err.value.code == "SC301"
    with pytest.raises(ScsqlError) as err:
        one(other, "select * from scsql.complete_task(%s, 1)", tid)
    assert err.value.code == "SC301"
    assert rows(other, "select * from scsql.tasks") == []
    assert rows(other, "select * from scsql.queue_stats()") == []
    with pytest.raises(ScsqlError) as err:
        one(other, "update scsql.tasks set state = 'queued'")
    assert err.value.code == "42501"


def test_heartbeat_extends_and_wrong_tokens_are_refused(team):
    _, orch, dev, dev2, _ = team
    tid = enqueue(orch)
    [t] = claim(dev, lease=5)
    until = one(dev, "select scsql.heartbeat_task(%s, %s, 600) as u", tid, t["lease_token"])["u"]
    assert until > t["lease_expires_at"] + dt.timedelta(seconds=500)
    for agent, token in ((dev, t["lease_token"] + 1), (dev2, t["lease_token"])):
        with pytest.raises(ScsqlError) as err:
            one(agent, "select scsql.heartbeat_task(%s, %s)", tid, token)
        assert err.value.code == "SC302"


def test_fail_retries_with_exponential_backoff_then_dies_and_frees_files(team):
    db, orch, dev, _, _ = team
    tid = enqueue(orch, files=["src/a.py"], max_attempts=2)
    [t] = claim(dev)
    before = dt.datetime.now(dt.timezone.utc)
    r = one(dev, "select * from scsql.fail_task(%s, %s, 'boom')", tid, t["lease_token"])
    assert r["state"] == "queued" and r["attempts"] == 1
    assert dt.timedelta(seconds=0.5) < r["run_after"] - before < dt.timedelta(seconds=3)
    assert claim(dev) == []  # backing off
    [stats] = rows(dev, "select * from scsql.queue_stats()")
    assert stats["scheduled"] == 1
    end_backoff(db)  # let the backoff pass without sleeping
    [t2] = claim(dev)
    assert (t2["lease_token"], t2["attempt"]) == (2, 2)
    r = one(dev, "select * from scsql.fail_task(%s, %s, 'boom again')", tid, t2["lease_token"])
    assert r["state"] == "dead"
    [arch] = admin_rows(db, "select state, last_error from scsql.tasks_archive")
    assert arch == {"state": "dead", "last_error": "boom again"}
    assert admin_rows(db, "select count(*) as n from scsql.task_files")[0]["n"] == 0
    enqueue(orch, files=["src/a.py"])  # the file is free again


def test_backoff_doubles(team):
    db, orch, dev, _, _ = team
    tid = enqueue(orch, max_attempts=10)
    delays = []
    for _ in range(4):
        end_backoff(db)
        [t] = claim(dev)
        r = one(dev, "select *, run_after - clock_timestamp() as d from scsql.fail_task(%s, %s, 'x')",
                tid, t["lease_token"])
        delays.append(round(r["d"].total_seconds()))
    assert delays == [1, 2, 4, 8]


def test_release_requeues_without_charging_an_attempt_or_drops_the_task(team):
    db, orch, dev, dev2, _ = team
    tid = enqueue(orch, files=["docs"])
    [t] = claim(dev)
    r = one(dev, "select * from scsql.release_task(%s, %s)", tid, t["lease_token"])
    assert r == {"task_id": tid, "state": "queued"}
    with pytest.raises(ScsqlError) as err:  # requeued, the task keeps its files
        enqueue(orch, files=["docs/x.md"])
    assert err.value.code == "SC322"
    [t2] = claim(dev2)
    assert (t2["lease_token"], t2["attempt"]) == (2, 1)
    with pytest.raises(ScsqlError) as err:  # the first holder's token is fenced off
        one(dev, "select * from scsql.complete_task(%s, %s)", tid, t["lease_token"])
    assert err.value.code == "SC302"
    r = one(dev2, "select * from scsql.release_task(%s, %s, false)", tid, t2["lease_token"])
    assert r["state"] == "released"
    enqueue(orch, files=["docs/x.md"])  # released for good: the files are free


def test_cancel_by_orchestrator_frees_files_and_fences_the_holder(team):
    _, orch, dev, _, _ = team
    tid = enqueue(orch, files=["a"])
    [t] = claim(dev)
    with pytest.raises(ScsqlError) as err:
        one(dev, "select scsql.cancel_task(%s, 'no')", tid)
    assert err.value.code == "SC300"
    assert one(orch, "select scsql.cancel_task(%s, 'plan changed') as s", tid)["s"] == "cancelled"
    with pytest.raises(ScsqlError) as err:
        one(dev, "select * from scsql.complete_task(%s, %s)", tid, t["lease_token"])
    assert err.value.code == "SC304" and "cancelled" in err.value.message
    enqueue(orch, files=["a/b"])


def test_expired_lease_is_reclaimed_lazily_and_counted_as_claimable(team):
    db, orch, dev, dev2, _ = team
    tid = enqueue(orch)
    [t] = claim(dev, lease=60)
    assert one(dev2, "select scsql.claimable_for_me() as n")["n"] == 0
    expire_leases(db)
    assert one(dev2, "select scsql.claimable_for_me() as n")["n"] == 1
    [stats] = rows(dev2, "select * from scsql.queue_stats()")
    assert stats["expired"] == 1
    # An expired lease nobody reclaimed yet still completes...
    r = one(dev, "select scsql.heartbeat_task(%s, %s, 60) as u", tid, t["lease_token"])
    assert r["u"] > dt.datetime.now(dt.timezone.utc)
    expire_leases(db)
    # ...but once another worker claims, the old token is fenced off.
    [t2] = claim(dev2)
    assert t2["task_id"] == tid and t2["lease_token"] == 2


def test_maintenance_requeues_expired_leases_of_the_callers_project_only(team):
    db, orch, dev, _, _ = team
    other_orch = db.agent("oo", db.project(), "orchestrator")
    other_dev = db.agent("od", other_orch.whoami()["project"], "developer")
    mine, theirs = enqueue(orch), enqueue(other_orch)
    claim(dev)
    claim(other_dev)
    expire_leases(db)
    assert one(dev, "select * from scsql.queue_maintenance()") == {"requeued": 1, "dead": 0}
    with pytest.raises(ScsqlError) as err:
        one(dev, "select * from scsql.complete_task(%s, 1)", mine)
    assert err.value.code == "SC303"
    states = {r["task_id"]: r["state"] for r in admin_rows(db, "select task_id, state from scsql.tasks")}
    assert states == {mine: "queued", theirs: "claimed"}
    with db.connect() as conn:  # an administrator maintains every project
        assert conn.execute("select * from scsql.queue_maintenance()").fetchone() == {"requeued": 1, "dead": 0}


def test_expiry_on_the_last_attempt_kills_the_task(team):
    db, orch, dev, _, _ = team
    tid = enqueue(orch, max_attempts=1, files=["x"])
    claim(dev)
    expire_leases(db)
    assert one(dev, "select * from scsql.queue_maintenance()") == {"requeued": 0, "dead": 1}
    [arch] = admin_rows(db, "select task_id, state, last_error from scsql.tasks_archive")
    assert arch["task_id"] == tid and arch["state"] == "dead" and "expired" in arch["last_error"]


def test_run_after_holds_a_task_back(team):
    _, orch, dev, _, _ = team
    enqueue(orch, run_after=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1))
    assert claim(dev) == []
    assert one(dev, "select scsql.claimable_for_me() as n")["n"] == 0


@pytest.mark.parametrize(("kw", "code"), [
    ({"priority": 10**7}, "SC010"),
    ({"complexity": 6}, "SC010"),
    ({"max_attempts": 0}, "SC010"),
    ({"role": "astronaut"}, "SC008"),
    ({"files": ["../etc/passwd"]}, "SC321"),
    ({"files": ["ok.txt", ""]}, "SC320"),
])
def test_bad_enqueue_leaves_nothing(team, kw, code):
    db, orch, _, _, _ = team
    with pytest.raises(ScsqlError) as err:
        enqueue(orch, **kw)
    assert err.value.code == code
    assert admin_rows(db, "select (select count(*) from scsql.tasks) + (select count(*) from scsql.task_files) as n")[0]["n"] == 0


@pytest.mark.parametrize(("args", "code"), [((0, 300), "SC010"), ((101, 300), "SC010"), ((1, 0), "SC010")])
def test_bad_claim_arguments(team, args, code):
    _, _, dev, _, _ = team
    with pytest.raises(ScsqlError) as err:
        claim(dev, *args)
    assert err.value.code == code


def test_enqueue_notifies_the_roles_channel_on_commit(team):
    db, orch, dev, _, qa = team
    channel = client.my_channel(dev)
    assert channel == client.my_channel(dev) and channel != client.my_channel(qa)
    assert len(channel.encode()) <= 63
    with psycopg.connect(db.app, autocommit=True) as listener:
        listener.execute(f'listen "{channel}"')
        enqueue(orch, role="qa")
        enqueue(orch)
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=2, stop_after=1)]
    assert got == [(channel, "task")]


def _waiting_in_sql(db) -> list[dict]:
    """Sessions inside scsql.wait_for_task, sleeping between their polls for work."""
    return admin_rows(db, "select pid, backend_xid, xact_start from pg_stat_activity "
                          "where datname = current_database() and state = 'active' and wait_event = 'PgSleep' "
                          "and query like '%%wait_for_task%%'")


def _in_listener_wait(monkeypatch) -> threading.Event:
    """An event set when a client claim, having found nothing after its LISTEN,
    starts waiting for a notification (or its poll interval)."""
    waiting = threading.Event()
    wait = client.Listener.wait

    def observed(self, timeout: float) -> bool:
        waiting.set()
        return wait(self, timeout)

    monkeypatch.setattr(client.Listener, "wait", observed)
    return waiting


def test_sql_wait_for_task_waits_for_work_between_transactions(team):
    """From psql, waiting is CALL scsql.wait_for_task outside a transaction,
    then claim_task: the procedure commits between its polls, so the waiting
    session never holds a transaction id and its transaction is always young."""
    db, orch, dev, _, _ = team
    got = []

    def waiter():
        with login(db, dev.name) as conn:  # the agent's own login, autocommit: as in psql
            got.append(conn.execute("call scsql.wait_for_task(20)").fetchone())
            got.append(conn.execute("select * from scsql.claim_task()").fetchall())

    t = threading.Thread(target=waiter)
    t.start()
    [first] = wait_for(lambda: _waiting_in_sql(db))  # it found nothing and waits
    # Across its polls the transaction is a new one each time, and none has an xid.
    [later] = wait_for(lambda: [s for s in _waiting_in_sql(db) if s["xact_start"] > first["xact_start"]])
    assert later["pid"] == first["pid"] and first["backend_xid"] is None and later["backend_xid"] is None
    tid = enqueue(orch)
    t.join(20)
    assert not t.is_alive()
    assert got[0] == {"claimable": 1} and [x["task_id"] for x in got[1]] == [tid]


def test_sql_wait_for_task_returns_at_once_with_work_and_refuses_bad_input(team):
    db, orch, dev, _, _ = team
    with login(db, dev.name) as conn:
        assert conn.execute("call scsql.wait_for_task(0)").fetchone() == {"claimable": 0}
        enqueue(orch)
        assert conn.execute("call scsql.wait_for_task(600)").fetchone() == {"claimable": 1}
        for bad in ("601", "-1", "null"):
            with pytest.raises(psycopg.Error) as err:
                conn.execute(f"call scsql.wait_for_task({bad})")
            assert err.value.sqlstate == "SC010"
        [t] = conn.execute("select * from scsql.claim_task()").fetchall()
        # Waiting commits, so a transaction block refuses it.
        with pytest.raises(psycopg.Error) as err, conn.transaction():
            conn.execute("call scsql.wait_for_task(1)")
        assert err.value.sqlstate == "2D000"
    assert t["lease_token"] == 1


def test_client_claim_wakes_on_notify_not_on_the_poll(team, monkeypatch):
    """The poll interval is far longer than the test allows, so only the
    NOTIFY of the enqueue can wake the waiting claim in time."""
    db, orch, dev, _, _ = team
    waiting = _in_listener_wait(monkeypatch)
    result = {}

    def waiter():
        result["tasks"] = client.claim(dev, wait_seconds=60, poll_seconds=60)
        result["at"] = time.monotonic()

    t = threading.Thread(target=waiter)
    t.start()
    assert waiting.wait(20)  # the claim found nothing and waits on LISTEN
    # ... outside any transaction: every session of the database but this one is idle between transactions.
    wait_for(lambda: admin_rows(db, "select count(*) as n from pg_stat_activity where datname = current_database() "
                                    "and pid <> pg_backend_pid() and xact_start is not null")[0]["n"] == 0, timeout=5)
    tid = enqueue(orch)
    t.join(20)
    assert not t.is_alive()
    assert [x["task_id"] for x in result["tasks"]] == [tid]


def test_claim_task_tool_waits_through_the_adapter(team, monkeypatch):
    _, orch, dev, _, _ = team
    api = Api(dev)
    assert api.call("claim_task", wait_seconds=0) == []
    waiting = _in_listener_wait(monkeypatch)
    # The enqueue comes once the tool's claim found nothing and waits on LISTEN.
    later = threading.Thread(target=lambda: waiting.wait(20) and enqueue(orch, payload={"n": 1}))
    later.start()
    got = api.call("claim_task", wait_seconds=20, lease_seconds=60)
    later.join()
    assert len(got) == 1 and got[0]["payload"] == {"n": 1} and got[0]["lease_token"] == 1
    done = api.call("complete_task", task=got[0]["task_id"], token=got[0]["lease_token"], result={"ok": 1})
    assert done["state"] == "done"
    with pytest.raises(ScsqlError) as err:
        api.call("claim_task", wait_seconds=601)
    assert err.value.code == "SC010"


def test_run_task_completes_on_success_and_fails_otherwise(team):
    """client.run_task (scsql queue run, scsql worker -- CMD): the task as JSON on stdin,
    exit 0 completes it with stdout as the result, anything else fails it with stderr."""
    db, orch, dev, _, _ = team
    ok = enqueue(orch, payload={"n": 2}, priority=1)
    bad = enqueue(orch)
    echo = [sys.executable, "-c", "import json, os, sys; t = json.load(sys.stdin); "
            "print(json.dumps({'twice': t['payload']['n'] * 2, 'id': int(os.environ['SCSQL_TASK_ID'])}))"]
    [t] = client.claim_once(dev, 1, 60)
    assert t["task_id"] == ok and client.run_task(dev, t, echo, 60) is True
    [t] = client.claim_once(dev, 1, 60)
    fail = [sys.executable, "-c", "import sys; sys.exit('it broke')"]
    assert t["task_id"] == bad and client.run_task(dev, t, fail, 60) is False
    archived = {r["task_id"]: r for r in admin_rows(db, "select task_id, state, result from scsql.tasks_archive")}
    assert archived[ok]["state"] == "done" and archived[ok]["result"] == {"twice": 4, "id": ok}
    [failed] = admin_rows(db, "select state, last_error from scsql.tasks where task_id = %s", bad)
    assert failed == {"state": "queued", "last_error": "it broke"}  # retried later, with the reason


def test_queue_tools_are_offered(team):
    _, _, dev, _, _ = team
    names = set(Api(dev).functions)
    assert {"enqueue_task", "claim_task", "heartbeat_task", "complete_task", "fail_task", "release_task",
            "queue_stats", "complete_and_claim", "claimable_for_me", "claim_task_by_id"} <= names
    assert not {n for n in names if n.startswith("_")}
    assert "wait_for_task" not in names  # a procedure, for psql: the claim_task tool waits on LISTEN
    claim_args = Api(dev).functions["claim_task"].arg_model().model_json_schema()["properties"]
    assert set(claim_args) == {"n", "lease_seconds", "wait_seconds"}


def _stop_check(db, agent) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scsql", "hook", "stop-check", "--agent", agent.name],
                          env=mcp_env(db), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_stop_check_blocks_while_work_remains(team):
    db, orch, dev, _, _ = team
    assert _stop_check(db, dev).returncode == 0
    tid = enqueue(orch)
    proc = _stop_check(db, dev)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "1 task(s) remain claimable" in proc.stderr
    [t] = claim(dev)
    proc = _stop_check(db, dev)
    assert proc.returncode == 2 and "holds 1 task lease" in proc.stderr
    one(dev, "select * from scsql.complete_task(%s, %s)", tid, t["lease_token"])
    assert _stop_check(db, dev).returncode == 0


def test_worker_job_requeues_expired_leases(team):
    from scsql.core import worker

    db, orch, dev, _, _ = team
    enqueue(orch)
    claim(dev)
    expire_leases(db)
    jobs = [j for j in subsystems.jobs() if j.name == "queue-maintenance"]
    assert worker.drain(dev, jobs) == 1
    assert one(dev, "select scsql.claimable_for_me() as n")["n"] == 1


def test_bench_queue_runs_and_prints_ratios(scsql_db, server):
    """The benchmark works end to end beside procrastinate (in the test
    extras) and pgbench; pgqueuer's columns have figures when it is installed,
    and otherwise the bench says it is not (its numbers are not judged here)."""
    env = {k: v for k, v in mcp_env(scsql_db).items()}
    env["SCSQL_DSN"] = server.conninfo("postgres")
    proc = subprocess.run([sys.executable, "-m", "scsql", "bench", "queue", "--seconds", "0.3", "--workers", "1,2",
                           "--tasks-per-second-guess", "100", "--pgbench-scale", "1", "--rounds", "2"],
                          env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "enqueue, 1 client" in proc.stdout and "median of 2 round(s)" in proc.stdout
    header = next(ln.split("  ") for ln in proc.stdout.splitlines() if ln.lstrip().startswith("workers"))
    header = [h.strip() for h in header if h.strip()]
    assert header == ["workers", "scsql", "procrastinate", "pgqueuer", "pgbench -N",
                      "scsql/procrastinate", "scsql/pgqueuer", "scsql/pgbench"]
    rows_ = [dict(zip(header, ln.split(), strict=True)) for ln in proc.stdout.splitlines() if ln.strip()[:1].isdigit()]
    assert [r["workers"] for r in rows_] == ["1", "2"]
    for r in rows_:
        for system in ("scsql", "procrastinate", "scsql/procrastinate", "pgbench -N", "scsql/pgbench"):
            assert r[system] != "-" and float(r[system].rstrip("x")) > 0, (system, proc.stdout)
    pgqueuer = importlib.util.find_spec("pgqueuer") is not None
    assert all((r["pgqueuer"] != "-") == pgqueuer for r in rows_), proc.stdout
    assert ("pgqueuer is not installed" in proc.stderr) != pgqueuer, proc.stderr


def test_coordination_tools_over_mcp(team):
    """An orchestrator and a developer, each its own MCP server process."""
    db, orch, dev, _, _ = team

    async def orchestrate(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        task = await client.call_tool("enqueue_task", {"role": "developer", "payload": {"do": "it"},
                                                       "exclusive_files": ["src/app.py"]})
        sent = await client.call_tool("broadcast", {"type": "ASSIGN", "to_agent": dev.name,
                                                    "task": json.loads(task.content[0].text)["task_id"]})
        return tools, task, sent

    tools, task, sent = run_client(db, orch.name, orchestrate)
    assert {"enqueue_task", "claim_task", "heartbeat_task", "complete_task", "fail_task", "release_task",
            "queue_stats", "broadcast", "replay_messages", "ack_message", "explain_message"} <= set(tools)
    assert not {"at", "key_id", "signature"} & set(tools["broadcast"].input_schema["properties"])
    assert not task.is_error and not sent.is_error, (task.content, sent.content)
    tid = json.loads(task.content[0].text)["task_id"]

    async def work(client):
        [msg] = json.loads((await client.call_tool("replay_messages", {})).content[0].text)
        await client.call_tool("ack_message", {"message": msg["message_id"]})
        claimed = json.loads((await client.call_tool("claim_task", {"wait_seconds": 5})).content[0].text)
        beat = await client.call_tool("heartbeat_task", {"task": tid, "token": claimed[0]["lease_token"]})
        done = await client.call_tool("complete_task", {"task": tid, "token": claimed[0]["lease_token"],
                                                        "result": {"ok": True}})
        late = await client.call_tool("complete_task", {"task": tid, "token": claimed[0]["lease_token"]})
        stats = json.loads((await client.call_tool("queue_stats", {})).content[0].text)
        return msg, claimed, beat, done, late, stats

    msg, claimed, beat, done, late, stats = run_client(db, dev.name, work)
    assert msg["type"] == "ASSIGN" and msg["task_id"] == tid and msg["provenance"] == "orchestrator"
    assert claimed[0]["task_id"] == tid and not beat.is_error and not done.is_error
    assert late.is_error and "SC304" in late.content[0].text
    assert stats[0]["done"] == 1
