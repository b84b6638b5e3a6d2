"""Races staged for real: many workers on real connections claiming at once,
a lease that expires while its worker is still busy, and a worker process
killed mid-task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter

import pytest

from scsql.core.errors import ScsqlError

from ..helpers import (
    InFlight,
    admin_rows,
    claim,
    enqueue,
    expire_leases,
    login,
    mcp_env,
    one,
    race_behind_lock,
    register,
    statement_lock_waiters,
    wait_for,
)


def _race(db, n_workers: int, n_tasks: int):
    """n_workers real connections claim and complete until the queue is empty.

    Every worker first blocks on a table lock an administrator holds; the
    lock is released only once all of them wait on it, so all of them start
    claiming in the same instant."""
    project = db.project()
    orch = db.agent("orch", project, "orchestrator")
    devs = [register(db, f"w{i}", project) for i in range(10)]
    with orch.transaction() as conn:
        conn.execute("select scsql.enqueue_task('developer', jsonb_build_object('i', i)) "
                     "from generate_series(1, %s) i", (n_tasks,))

    conns = [login(db, devs[i % len(devs)]) for i in range(n_workers)]
    claimed: list[list[tuple[int, int]]] = [[] for _ in range(n_workers)]
    errors: list[Exception] = []
    in_flight = InFlight()

    def work(i: int) -> None:
        conn = conns[i]
        try:
            with in_flight:
                task = conn.execute("select task_id, lease_token from scsql.claim_task()").fetchone()
            while task is not None:
                claimed[i].append((task["task_id"], task["lease_token"]))
                with in_flight:
                    task = conn.execute(
                        "select task_id, lease_token from scsql.complete_and_claim(%s, %s, %s::jsonb)",
                        (task["task_id"], task["lease_token"], f'{{"worker": {i}}}')).fetchone()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    # Every worker waits behind the lock; its release lets them all claim at once.
    all_waited = race_behind_lock(db, "scsql.tasks", [lambda i=i: work(i) for i in range(n_workers)],
                                  timeout=60, join=180)
    for c in conns:
        c.close()
    assert errors == []
    assert all_waited == n_workers  # the race really happened: all were blocked together
    return claimed, in_flight.peak


def _check_each_task_claimed_exactly_once(db, claimed, n_tasks):
    flat = [tid for per in claimed for tid, _ in per]
    assert len(flat) == n_tasks
    assert len(set(flat)) == n_tasks
    assert all(token == 1 for per in claimed for _, token in per)  # nobody claimed a task twice
    assert admin_rows(db, "select count(*) as n from scsql.tasks")[0]["n"] == 0
    arch = admin_rows(db, "select count(*) as n, count(distinct task_id) as d, max(fence) as f, "
                          "count(*) filter (where state = 'done') as done from scsql.tasks_archive")[0]
    assert arch == {"n": n_tasks, "d": n_tasks, "f": 1, "done": n_tasks}
    # Each task's result was written by the worker that claimed it.
    owner = {tid: i for i, per in enumerate(claimed) for tid, _ in per}
    results = admin_rows(db, "select task_id, (result->>'worker')::int as w from scsql.tasks_archive")
    assert all(owner[r["task_id"]] == r["w"] for r in results)


def test_50_workers_race_for_100_tasks(scsql_db):
    claimed, peak = _race(scsql_db, 50, 100)
    _check_each_task_claimed_exactly_once(scsql_db, claimed, 100)
    assert peak >= 25  # claims overlapped from the client's side too
    assert sum(1 for per in claimed if per) >= 20  # the work spread over many workers


@pytest.mark.slow
def test_200_workers_race_for_10000_tasks(scsql_db):
    claimed, peak = _race(scsql_db, 200, 10_000)
    _check_each_task_claimed_exactly_once(scsql_db, claimed, 10_000)
    assert peak >= 100
    busy = Counter(len(per) for per in claimed)
    assert sum(n for k, n in busy.items() if k > 0) >= 100


def test_expired_lease_is_reclaimed_and_the_late_completion_is_refused(scsql_db):
    db = scsql_db
    project = db.project()
    orch = db.agent("orch", project, "orchestrator")
    slow, fast = db.agent("slow", project), db.agent("fast", project)
    tid = enqueue(orch, files=["src/x.py"])
    [t1] = claim(slow)
    expire_leases(db)  # slow is still working; its lease runs out

    # fast claims in a transaction it keeps open; slow's completion meets the
    # row fast holds and must wait for fast's outcome.
    with login(db, fast.name, autocommit=False) as fconn:
        [t2] = fconn.execute("select * from scsql.claim_task(p_lease_seconds => 60)").fetchall()
        assert (t2["task_id"], t2["lease_token"]) == (tid, 2)
        outcome = {}

        def late_complete():
            try:
                one(slow, "select * from scsql.complete_task(%s, %s, '{\"by\": \"slow\"}')", tid, t1["lease_token"])
                outcome["ok"] = True
            except ScsqlError as exc:
                outcome["err"] = exc

        th = threading.Thread(target=late_complete)
        th.start()
        wait_for(lambda: statement_lock_waiters(db, "%complete_task%") == 1)
        fconn.commit()
        th.join(30)
    assert "err" in outcome and outcome["err"].code == "SC302"
    assert "nothing was applied" in outcome["err"].message
    with pytest.raises(ScsqlError) as err:
        one(slow, "select scsql.heartbeat_task(%s, %s)", tid, t1["lease_token"])
    assert err.value.code == "SC302"
    one(fast, "select * from scsql.complete_task(%s, %s, '{\"by\": \"fast\"}')", tid, 2)
    [arch] = admin_rows(db, "select result, fence, finished_by = (select agent_id from scsql.agents where name = %s) "
                            "as by_fast from scsql.tasks_archive", fast.name)
    assert arch == {"result": {"by": "fast"}, "fence": 2, "by_fast": True}


def test_worker_process_killed_mid_task_gives_the_task_back_after_its_lease(scsql_db):
    db = scsql_db
    project = db.project()
    orch = db.agent("orch", project, "orchestrator")
    dying = db.agent("dying", project)
    heir = db.agent("heir", project)
    tid = enqueue(orch, payload={"work": "long"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "scsql", "queue", "run", "--agent", dying.name, "--lease", "2", "--", "sleep", "60"],
        env=mcp_env(db), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        first = wait_for(lambda: admin_rows(db, "select lease_expires_at from scsql.tasks where state = 'claimed'"),
                         timeout=60)[0]["lease_expires_at"]
        # The worker is alive and heartbeating: its lease moves forward.
        wait_for(lambda: admin_rows(db, "select lease_expires_at from scsql.tasks")[0]["lease_expires_at"] > first,
                 timeout=10)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert claim(heir) == []  # the lease still runs
    got = wait_for(lambda: claim(heir, lease=60), timeout=10, every=0.2)
    assert got[0]["task_id"] == tid and got[0]["lease_token"] == 2 and got[0]["attempt"] == 2
