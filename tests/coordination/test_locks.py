"""No lock one project can take delays another project.

Each test stages a hostile agent of one project with its own psql login,
shows in pg_locks that its locks are really held, and requires the writes of
another project to complete within BOUND seconds, a bound generous enough
for a loaded machine (they take milliseconds when nothing waits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from scsql.audit.telemetry import OUTCOME_FIELDS
from scsql.audit.signing import sign_row
from scsql.audit.cli import export_learnings
from scsql.core.migrate import LOCK_KEY, Migrator
from scsql.api import Api

from ..helpers import ON_CITUS, claim, enqueue, one_server_only

BOUND = 15.0

# The advisory keys scsql took before its per-project locks became rows of
# scsql.project_locks: learnings (shared by outcomes, exclusive by exports),
# working memory, and the migrators' lock.
LEARNINGS_KEY = 1396921302
ADVISORY = ("select p.oid::regprocedure::text as f from pg_catalog.pg_proc p "
            "where p.pronamespace = 'pg_catalog'::regnamespace and p.proname ~ '^pg_(try_)?advisory_' order by 1")


def bounded(what: str, fn: Callable[[], Any], bound: float = BOUND) -> tuple[float, Any]:
    """Run fn in a thread; fail when it does not finish within ``bound`` seconds."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001
            out["error"] = exc

    start = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound)
    elapsed = time.monotonic() - start
    if t.is_alive():
        out["late"] = t
        raise TimeoutError(f"{what} did not complete within {bound} s")
    if "error" in out:
        raise out["error"]
    return elapsed, out.get("result")


def _project_id(db, name: str) -> int:
    with db.connect() as conn:
        return conn.execute("select project_id from scsql.projects where name = %s", (name,)).fetchone()["project_id"]


def test_a_project_is_made_with_its_lock_rows_and_channel_key(scsql_db):
    """create_project makes them in its own transaction (no trigger on the
    projects table, which Citus would fire on every replica): the first
    transactions of a new project never wait on each other's insert of them."""
    name = scsql_db.project()
    with scsql_db.connect() as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (name,)).fetchone()["project_id"]
        locks = conn.execute("select name from scsql.project_locks where project_id = %s order by 1", (pid,)).fetchall()
        keys = conn.execute("select count(*) as n from scsql.channel_keys where project_id = %s", (pid,)).fetchone()["n"]
        triggers = conn.execute("select tgname from pg_trigger where tgrelid = 'scsql.projects'::regclass "
                                "and not tgisinternal").fetchall()
    assert [r["name"] for r in locks] == ["learnings", "memory_facts"] and keys == 1
    assert triggers == []


def test_no_scsql_function_takes_an_advisory_lock(scsql_db):
    """Per-project locks are rows agents cannot touch; advisory keys are a
    space any session with EXECUTE can take."""
    with scsql_db.connect() as conn:
        found = conn.execute("select p.oid::regprocedure::text as f from pg_proc p "
                             "where p.pronamespace = 'scsql'::regnamespace and p.prosrc ~* 'advisory' "
                             "and p.prosrc ~* 'pg_(try_)?advisory_'").fetchall()
    assert found == []


@one_server_only("re-migrating a Citus database is scsql migrate --citus, whose source and distribution "
                 "the template's own migration ran")
def test_agents_may_not_take_advisory_locks(scsql_db):
    """Advisory keys form one space every role may lock by default; in scsql's
    database no agent may take any, so none can hold the migrators' key."""
    a = scsql_db.agent("a", scsql_db.project())
    with psycopg.connect(scsql_db.login(a.name), autocommit=True, row_factory=dict_row) as conn:
        functions = [r["f"] for r in conn.execute(ADVISORY).fetchall()]
        assert len(functions) >= 20
        allowed = [f for f in functions
                   if conn.execute("select has_function_privilege(%s, 'execute') as ok", (f,)).fetchone()["ok"]]
        assert allowed == []
        for call in (f"select pg_advisory_lock({LOCK_KEY[0]}, {LOCK_KEY[1]})",
                     f"select pg_try_advisory_lock({LOCK_KEY[0]}, {LOCK_KEY[1]})",
                     "select pg_advisory_lock_shared(1)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(call)
        # scsql migrate does not wait on that session.
        elapsed, report = bounded("scsql migrate", lambda: Migrator(scsql_db.admin).run())
        assert not report.waited


def test_hostile_locks_of_one_project_do_not_delay_another(scsql_db, tmp_path):
    db = scsql_db
    hostile_project, victim_project = db.project(), db.project()
    hostile = db.agent("hostile", hostile_project, "orchestrator")
    orch = db.agent("orch", victim_project, "orchestrator")
    dev = db.agent("dev", victim_project, "developer")
    victim_id = _project_id(db, victim_project)

    # A server where the bootstrap could not revoke the advisory functions
    # from PUBLIC (no superuser): agents can then take any advisory key.
    with db.connect(autocommit=True) as admin:
        for f in [r["f"] for r in admin.execute(ADVISORY).fetchall()]:
            admin.execute(f"grant execute on function {f} to public")

    keys = psycopg.connect(db.login(hostile.name), autocommit=True, row_factory=dict_row)
    tables = psycopg.connect(db.login(hostile.name), row_factory=dict_row)
    own = hostile.db.pool.getconn()
    try:
        # 1. Every advisory key scsql ever used, for the victim project, held
        #    exclusively (which also blocks shared holders).
        keys.execute("select pg_advisory_lock(%s, %s)", (LEARNINGS_KEY, victim_id))
        keys.execute("select pg_advisory_lock(hashtextextended('scsql.memory_facts', %s))", (victim_id,))
        keys.execute("select pg_advisory_lock(%s, %s)", LOCK_KEY)
        held = keys.execute("select count(*) as n from pg_locks where pid = pg_backend_pid() "
                            "and locktype = 'advisory' and granted").fetchone()["n"]
        assert held == 3

        # 2. An open transaction holding ACCESS SHARE on every table the agent
        #    may read (and, through the parents, on their partitions).
        readable = [r["t"] for r in tables.execute(
            "select c.oid::regclass::text as t from pg_class c where c.relnamespace = 'scsql'::regnamespace "
            "and c.relkind in ('r', 'p') and has_table_privilege(c.oid, 'select') order by 1").fetchall()]
        assert {"scsql.tool_calls", "scsql.outcomes", "scsql.learnings", "scsql.memory_facts",
                "scsql.tasks", "scsql.projects"} <= set(readable)
        for t in readable:
            tables.execute(f"lock table only {t} in access share mode")
            tables.execute(f"select count(*) from {t}")
        locked = tables.execute(
            "select count(*) as n from pg_locks where pid = pg_backend_pid() and mode = 'AccessShareLock' "
            "and granted and relation = any(%s::regclass[])", (readable,)).fetchone()["n"]
        assert locked == len(readable)

        # 3. The hostile project's own locks, held in an open transaction: an
        #    outcome that made a learning, a remembered fact, a learnings export
        #    (not on Citus, where a read as the agent may not follow, in one
        #    transaction, the owner's writes to the project's shards: README).
        own.execute(f"set local role {hostile.role}")
        if not ON_CITUS:
            own.execute("select * from scsql.learnings_export(0, 10)")
        args = sign_row(hostile, "scsql.outcomes", OUTCOME_FIELDS, {"kind": "failed", "summary": "s", "task_ref": "T"})
        own.execute("select * from scsql.record_outcome(p_kind => %s, p_summary => %s, p_task_ref => %s, "
                    "p_at => %s, p_key_id => %s, p_signature => %s)",
                    (args["kind"], args["summary"], args["task_ref"], args["at"], args["key_id"], args["signature"]))
        own.execute("select * from scsql.remember('k', 'v', 3)")

        # The victim project's writes complete at once.
        dev_api, orch_api = Api(dev), Api(orch)
        calls = [
            ("record_tool_call", lambda: dev_api.call("record_tool_call", tool="t")),
            ("record_outcome with a learning",
             lambda: dev_api.call("record_outcome", kind="failed", summary="broke", task_ref="T")),
            ("remember", lambda: dev_api.call("remember", key="k", value="v")),
            ("forget", lambda: dev_api.call("forget", key="k")),
            ("learnings export", lambda: export_learnings(dev, tmp_path)),
            ("enqueue_task", lambda: enqueue(orch, payload={"n": 1})),
            ("claim_task", lambda: claim(dev)),
            ("broadcast", lambda: orch_api.call("broadcast", type="STATUS", to_role="developer", payload={"n": 1})),
        ]
        for what, call in calls:
            bounded(what, call)
        assert export_learnings(dev, tmp_path) == {"failure": 0, "experiment": 0}  # the first export had it
    finally:
        own.rollback()
        hostile.db.pool.putconn(own)
        tables.close()
        keys.close()


def _future_partition(db, parent: str) -> str:
    with db.connect() as conn:
        return conn.execute("select partition from scsql.partition_status() where parent = %s and not is_default "
                            "order by lower_bound desc limit 1", (parent,)).fetchone()["partition"]


def test_partition_maintenance_gives_up_on_a_reader_and_tries_again(scsql_db):
    """A reader's open transaction on tool_calls makes maintenance's DDL wait;
    every writer would queue behind that wait. Maintenance gives up after its
    lock_timeout (deferred), the writes of another project go through, and the
    next run, once the reader is gone, creates the partition."""
    db = scsql_db
    reader = db.agent("reader", db.project())
    writer = db.agent("writer", db.project())
    missing = _future_partition(db, "scsql.tool_calls")
    with db.connect() as conn:
        conn.execute(f"drop table {missing}")
        conn.commit()

    tables = psycopg.connect(db.login(reader.name), row_factory=dict_row)
    try:
        tables.execute("select count(*) from scsql.tool_calls")
        assert tables.execute("select count(*) as n from pg_locks where pid = pg_backend_pid() and granted "
                              "and relation = 'scsql.tool_calls'::regclass").fetchone()["n"] == 1
        result: dict[str, Any] = {}

        def maintain() -> None:
            with db.connect() as conn:
                result["pid"] = conn.info.backend_pid
                result["rows"] = conn.execute("select * from scsql.maintain_partitions()").fetchall()
                conn.commit()

        m = threading.Thread(target=maintain, daemon=True)
        m.start()
        # Maintenance really waits on the reader...
        with db.connect(autocommit=True) as watch:
            deadline = time.monotonic() + BOUND
            waited = False
            while not waited and m.is_alive() and time.monotonic() < deadline:
                if "pid" in result:
                    waited = watch.execute(
                        "select count(*) as n from pg_locks where pid = %s and not granted "
                        "and mode = 'AccessExclusiveLock'", (result["pid"],)).fetchone()["n"] > 0
                time.sleep(0.005)
        # ...and another project's write, behind it, still completes.
        bounded("record_tool_call of another project", lambda: Api(writer).call("record_tool_call", tool="t"))
        m.join(BOUND)
        assert not m.is_alive(), "maintenance did not give up on the lock"
        assert waited, "maintenance never waited on the reader"
        deferred = [r for r in result["rows"] if r["parent"] == "scsql.tool_calls"]
        assert [r["action"] for r in deferred] == ["deferred"], deferred
        assert "lock" in deferred[0]["detail"]
    finally:
        tables.close()
    with db.connect() as conn:
        rows = conn.execute("select * from scsql.maintain_partitions()").fetchall()
        conn.commit()
    assert any(r["action"] == "created" and r["parent"] == "scsql.tool_calls" for r in rows), rows
    assert _future_partition(db, "scsql.tool_calls") == missing


@one_server_only("re-migrating a Citus database is scsql migrate --citus, whose source and distribution "
                 "the template's own migration ran")
def test_migrate_waits_for_a_reader_without_queueing_other_projects_writes(scsql_db):
    """scsql migrate re-creates policies and triggers (ACCESS EXCLUSIVE) on
    every table; an agent's open transaction on one makes it wait, and every
    writer would queue behind it. Each of its waits is bounded by a
    lock_timeout and retried, so another project's writes go through; it
    completes once the reader is gone, or gives up with SC024 naming it."""
    db = scsql_db
    reader = db.agent("reader", db.project())
    writer = db.agent("writer", db.project())
    tables = psycopg.connect(db.login(reader.name), row_factory=dict_row)
    try:
        tables.execute("select count(*) from scsql.tool_calls")
        reader_pid = tables.info.backend_pid
        result: dict[str, Any] = {}
        lines: list[str] = []

        def migrate() -> None:
            try:
                result["report"] = Migrator(db.admin, lock_wait=120).run(progress=lines.append)
            except BaseException as exc:  # noqa: BLE001
                result["error"] = exc

        m = threading.Thread(target=migrate, daemon=True)
        m.start()
        deadline = time.monotonic() + BOUND * 4
        while not any("trying again" in ln for ln in lines) and m.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(f"pid {reader_pid}" in ln for ln in lines), lines  # it really waited on the reader
        bounded("record_tool_call of another project", lambda: Api(writer).call("record_tool_call", tool="t"))
        assert m.is_alive()  # still trying
        tables.commit()
        m.join(BOUND * 4)
        assert not m.is_alive() and "error" not in result, result
        assert result["report"].api_files > 0

        # With the reader back and a short patience, one clear error.
        tables.execute("select count(*) from scsql.tool_calls")
        with pytest.raises(Exception) as err:
            Migrator(db.admin, lock_wait=3).run()
        assert getattr(err.value, "code", None) == "SC024" and f"pid {reader_pid}" in str(err.value), err.value
    finally:
        tables.close()
