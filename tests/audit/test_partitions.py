"""Daily partitions of tool_calls and outcomes, through the built-in
maintenance (a database without pg_partman) and through pg_partman (a
database with it), in the same run; retention never drops rows that no
checkpoint covers, and verification carries on from the checkpoint."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from scsql.audit import partitions
from scsql.core import keys
from scsql.audit.telemetry import TOOL_CALL_FIELDS
from scsql.audit.signing import sign_row
from scsql.audit.checkpoints import record_checkpoints
from scsql.core.errors import ScsqlError
from scsql.core.migrate import Migrator
from scsql.api import Api
from scsql.core.keys import Keystore
from scsql.audit.verify import verify

from ..conftest import ScsqlDb
from ..helpers import (SESSION, allow_old_rows, auditor_key, backdate_keys, old_day, partition_of, table_exists,
                      triggers_off, wait_for, write_at)


def _installed_day(db: ScsqlDb) -> dt.date:
    """The day (UTC) the schema was installed: the partition window is made
    around it, and a run that crosses midnight is a day past it."""
    with db.connect() as conn:
        return conn.execute("select (min(applied_at) at time zone 'UTC')::date as day"
                            " from scsql.schema_migrations").fetchone()["day"]


def _retention(db: ScsqlDb, keep: str | None, table: str = "scsql.tool_calls") -> None:
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention(%s, %s::interval)", (table, keep))


def _retention_refuses_then_drops(db: ScsqlDb, agent, old_partition_day: dt.datetime) -> None:
    """Rows in an old partition: dropping it is refused until a checkpoint covers them."""
    old = partition_of(db, "old-1")
    assert old != partition_of(db, "new-1")
    with db.connect() as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
        assert err.value.sqlstate == "SC120" and "seq 2" in err.value.diag.message_primary
    assert table_exists(db, old)
    key = auditor_key(db)
    record_checkpoints(db.admin, key)  # covers seq 1..3
    Api(agent).call("record_tool_call", tool="new-2")  # seq 4, after the checkpoint
    with db.connect() as conn:
        conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
    assert not table_exists(db, old)
    report = verify(db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    assert report.rows == 2  # seq 3 and 4: the rows still present
    with db.connect() as conn:
        chain = conn.execute("select chain_id from scsql.tool_calls where tool = 'new-2'").fetchone()["chain_id"]
        conn.execute("set role scsql_auditor")
        assert conn.execute("select ok from scsql.verify_chain(%s)", (chain,)).fetchone()["ok"]
    with db.connect() as conn:  # verification from the horizon still checks what follows it
        triggers_off(conn)
        conn.execute("update scsql.tool_calls set tool = 'edited' where seq = 4")
    breaks = verify(db.admin, workers=1, progress=False).breaks
    assert [(b.seq, b.kind) for b in breaks] == [(4, "hash-mismatch")]


def test_builtin_maintenance_creates_protects_and_retires_partitions(scsql_db):
    db = scsql_db
    status = partitions.status(db.admin)
    days = [r for r in status if r["parent"] == "scsql.tool_calls" and not r["is_default"]]
    installed = _installed_day(db)
    assert [r["lower_bound"].date() for r in days] == [installed + dt.timedelta(days=i) for i in range(-1, 8)]
    assert {r["managed_by"] for r in status} == {"built-in"}
    assert any(r["is_default"] for r in status if r["parent"] == "scsql.tool_calls")
    three_days_ago = old_day(db)
    project = db.project()
    a = db.agent("a", project)
    backdate_keys(db)
    actions = partitions.maintain(db.admin)  # protects the new partition; nothing to retire yet
    assert not [x for x in actions if x["action"] in ("dropped", "refused")]
    write_at(a, three_days_ago, "old-1")
    write_at(a, three_days_ago, "old-2")
    Api(a).call("record_tool_call", tool="new-1")
    old = partition_of(db, "old-1")
    with db.connect() as conn:  # the new partition is append-only and closed to agents like the others
        with pytest.raises(psycopg.Error) as err:
            conn.execute(f"truncate {old}")
        assert err.value.sqlstate == "SC100"
        conn.rollback()
        rls = conn.execute("select relrowsecurity and relforcerowsecurity as ok from pg_class where oid = %s::regclass",
                           (old,)).fetchone()["ok"]
        assert rls
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    refused = [x for x in partitions.maintain(db.admin) if x["action"] == "refused"]
    assert [(x["parent"], x["partition"]) for x in refused] == [("scsql.tool_calls", old)]
    _retention_refuses_then_drops(db, a, three_days_ago)
    assert [x for x in partitions.maintain(db.admin) if x["action"] in ("dropped", "refused")] == []


def test_retention_settings_are_validated(scsql_db):
    with scsql_db.connect() as conn:
        for args, code in ((("scsql.sessions", "2 days"), "SC121"), (("scsql.tool_calls", "1 hour"), "SC010")):
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql.set_partition_retention(%s, %s::interval)", args)
            conn.rollback()
            assert err.value.sqlstate == code
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql._retire_partition('scsql.tool_calls_default')")
        assert err.value.sqlstate == "SC121"


def test_a_retention_no_time_can_subtract_is_refused_and_metrics_keep_working(scsql_db):
    """now() - retention is computed by maintain_partitions and metrics: a
    retention of 178 million years (or infinity) was stored, and both then
    failed with 22008 timestamp out of range. It is refused (SC010), nothing
    changes, and 100 years is still accepted. (An infinite interval exists
    from PostgreSQL 17 on.)"""
    with scsql_db.connect() as conn:
        infinite = conn.execute("select current_setting('server_version_num')::int >= 170000 as yes").fetchone()["yes"]
        for keep in ("178000000 years",) + (("infinity",) if infinite else ()):
            with pytest.raises(psycopg.Error) as err:
                conn.execute("select scsql.set_partition_retention('scsql.tool_calls', %s::interval)", (keep,))
            conn.rollback()
            assert err.value.sqlstate == "SC010" and "36,500 days" in err.value.diag.message_primary
        assert conn.execute("select retention from scsql.partition_settings where parent = 'scsql.tool_calls'"
                            ).fetchone()["retention"] is None
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '36500 days')")
        conn.commit()
        conn.execute("set role scsql_admin")
        assert conn.execute("select count(*) as n from scsql.metrics()").fetchone()["n"] > 0
        conn.rollback()
    partitions.maintain(scsql_db.admin)


def test_retention_and_a_write_into_the_partition_do_not_race(scsql_db):
    """A row written into a partition by a transaction still open when
    retention checks the partition's coverage: retention waits for it and
    then sees it (refused, SC120), instead of checking without it and
    dropping it afterwards. The race is staged with two connections, and
    pg_locks shows retention really waited for the writer."""
    db = scsql_db
    three_days_ago = old_day(db)
    _retention(db, "2 days")
    a = db.agent("race", db.project())
    backdate_keys(db)
    write_at(a, three_days_ago, "old-1")
    Api(a).call("record_tool_call", tool="new-1")
    record_checkpoints(db.admin, auditor_key(db), progress=False)  # covers old-1 (seq 1) and new-1 (seq 2)
    old = partition_of(db, "old-1")
    outcome: dict = {}

    def retire() -> None:
        with db.connect() as conn:
            outcome["pid"] = conn.info.backend_pid
            try:
                conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
                conn.commit()
                outcome["result"] = "dropped"
            except psycopg.Error as exc:
                outcome["result"] = exc.sqlstate

    args = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "old-2"}, at=three_days_ago)
    retention = threading.Thread(target=retire)
    with a.transaction() as conn:  # seq 3, into the old partition, not committed yet
        conn.execute("select * from scsql.record_tool_call(p_tool => 'old-2', p_at => %s, p_key_id => %s, "
                     "p_signature => %s)", (three_days_ago, args["key_id"], args["signature"]))
        retention.start()
        waiting = []
        with db.connect(autocommit=True) as watcher:
            deadline = time.monotonic() + 30
            while not waiting and time.monotonic() < deadline:
                time.sleep(0.02)
                if "pid" in outcome:
                    waiting = watcher.execute(
                        "select relation::regclass::text as rel, mode from pg_locks where pid = %s and not granted",
                        (outcome["pid"],)).fetchall()
        assert waiting, "retention did not wait for the open write"  # the race really happened
        assert waiting[0]["mode"] == "AccessExclusiveLock"
        assert waiting[0]["rel"] in ("scsql.tool_calls", old)
    retention.join(30)
    assert outcome["result"] == "SC120"  # the row written meanwhile is not covered
    assert table_exists(db, old)
    assert verify(db.admin, workers=1, progress=False).ok
    # A snapshot older than the lock would miss such rows: retention runs only in READ COMMITTED.
    record_checkpoints(db.admin, auditor_key(db), progress=False)
    with db.connect() as conn:
        conn.execute("begin isolation level repeatable read")
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
        assert err.value.sqlstate == "SC122"
        conn.rollback()
        conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
        conn.commit()
    assert not table_exists(db, old)
    assert verify(db.admin, workers=1, progress=False).ok


# -- pg_partman ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=[4, 5], ids=["pg_partman-4.x", "pg_partman-5.x"])
def partman_db(request, server, template, tmp_path_factory):
    """A database where a superuser installed pg_partman (the newest version of
    the major the test is parametrized with) before the first migrate."""
    admin = server.conninfo("postgres")
    major = request.param
    versions = [v for v in partitions.partman_versions(admin) if v.split(".")[0] == str(major)]
    if not versions:
        reason = f"pg_partman {major}.x's extension files are not installed on this server (run .ci/partman.sh)"
        if str(major) in os.environ.get("SCSQL_REQUIRE_PARTMAN", "").split(","):
            pytest.fail(reason + "; SCSQL_REQUIRE_PARTMAN requires it")
        pytest.skip(reason)
    name = f"{SESSION}_partman{major}_{secrets.token_hex(2)}"
    janitor = server.janitor(name)
    janitor.init()
    db = ScsqlDb(server, name, Keystore(Path(tmp_path_factory.mktemp("partman-keys"))))
    try:
        assert partitions.enable_partman(db.admin, versions[-1]) == \
            f"pg_partman {versions[-1]} is installed in schema partman"
        other = [v for v in partitions.partman_versions(admin) if v.split(".")[0] != str(major)]
        if other:  # asking for another version of an installed pg_partman is refused, not ignored
            with pytest.raises(ScsqlError) as err:
                partitions.enable_partman(db.admin, other[-1])
            assert err.value.code == "SC010" and versions[-1] in err.value.message
        Migrator(db.admin).run()
        yield db
    finally:
        db.close()
        janitor.drop()


def test_partman_creates_the_partitions_and_scsql_protects_them(partman_db):
    db = partman_db
    status = partitions.status(db.admin)
    with db.connect() as conn:
        version = conn.execute("select extversion from pg_extension where extname = 'pg_partman'").fetchone()["extversion"]
        major = int(version.split(".")[0])
        config = conn.execute("select parent_table, retention, partition_type from partman.part_config "
                              "order by 1").fetchall()
    assert {r["managed_by"] for r in status} == {f"pg_partman {version}"}
    assert [c["parent_table"] for c in config] == ["scsql.outcomes", "scsql.tool_calls"]
    assert all(c["retention"] is None for c in config)  # retention stays with scsql
    assert {c["partition_type"] for c in config} == {"native" if major < 5 else "range"}
    installed = _installed_day(db)
    days = {r["lower_bound"].date() for r in status if r["parent"] == "scsql.tool_calls" and not r["is_default"]}
    assert {installed - dt.timedelta(days=1), installed, installed + dt.timedelta(days=7)} <= days

    allow_old_rows(db)
    project = db.project()
    a = db.agent("pm", project)
    backdate_keys(db)
    # Retention drops only partitions whose range expired: one three days old, made by pg_partman.
    expired_day = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    with db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("select partman.create_partition_time('scsql.tool_calls', array[%s::timestamptz])", (expired_day,))
    write_at(a, expired_day, "old-1")
    write_at(a, expired_day, "old-2")
    Api(a).call("record_tool_call", tool="new-1")
    old = partition_of(db, "old-1")
    assert not old.endswith("_default") and old in {r["partition"] for r in partitions.status(db.admin)}
    actions = partitions.maintain(db.admin)
    assert {x["action"] for x in actions} == {"partman-maintenance"}
    with db.connect() as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute(f"truncate {old}")
        assert err.value.sqlstate == "SC100"
        conn.rollback()
        with pytest.raises(psycopg.Error) as err:
            conn.execute(f"delete from {old}")
        assert err.value.sqlstate == "SC100"
    _retention(db, "2 days")
    _retention_refuses_then_drops(db, a, expired_day)
    assert {x["action"] for x in partitions.maintain(db.admin)} == {"partman-maintenance"}  # partman copes with the drop


def test_worker_runs_partition_maintenance_and_cli_reports_it(scsql_db, monkeypatch, capsys):
    from scsql import cli

    db = scsql_db
    project = db.project()
    a = db.agent("w", project)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', null, 12)")
    far = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=12)
    assert far not in {r["lower_bound"].date() for r in partitions.status(db.admin) if not r["is_default"]}
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_AGENT_DSN", db.app)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(db.keystore.directory))
    assert cli.main(["worker", "--agent", a.name, "--once", "--job", "partitions"]) == 0
    assert far in {r["lower_bound"].date() for r in partitions.status(db.admin)
                   if r["parent"] == "scsql.tool_calls" and not r["is_default"]}
    capsys.readouterr()
    assert cli.main(["partitions", "status"]) == 0
    out = capsys.readouterr().out
    assert f"{far:%Y-%m-%d}" in out and "built-in" in out
    assert cli.main(["partitions", "retention", "scsql.outcomes", "30 days"]) == 0
    assert cli.main(["partitions", "maintain"]) == 0
    with db.connect() as conn:
        assert conn.execute("select retention from scsql.partition_settings where parent = 'scsql.outcomes'"
                            ).fetchone()["retention"] == dt.timedelta(days=30)


# -- pg_partman's background worker ------------------------------------------------------
# A server that preloads pg_partman_bgw (.ci/pg15.sh: every 2 s, as postgres)
# runs pg_partman's maintenance every pg_partman_bgw.interval seconds in each
# database pg_partman_bgw.dbname names: its main process starts one worker per
# database, waits until it sees it running, then until it ends. A worker that
# has already ended when the main process first looks is taken for one that
# never started: the main process raises "Could not start dynamic pg_partman
# background process", exits, and the server restarts it 10 minutes later
# (pg_partman 4.7 and 5.x alike). In a database without pg_partman the worker
# ends within milliseconds (it finds no extension and returns), so a database
# named while it is empty (for the whole CI run, minutes before this test) lets
# a moment of scheduling delay stop maintenance for as long as the test waits.
# So the fixture names its database only while pg_partman and scsql's tables
# are installed there (each run then takes tens of milliseconds), takes the
# name out before clearing it, and keeps the database (a worker started for a
# database dropped meanwhile fails at once, with the same effect).
BGW_DB = "scsql_partman_bgw"


def _clear_bgw_db(conninfo: str) -> None:
    """Removes what the test installs, and what this run's agent roles hold there (so they can be dropped).
    The worker is told to leave scsql's tables alone first; a run of it still under way may
    deadlock with the drop, which then tries again."""
    from scsql.core.config import role_for

    with psycopg.connect(conninfo, autocommit=True) as conn:
        if conn.execute("select to_regclass('partman.part_config') is not null").fetchone()[0]:
            conn.execute("update partman.part_config set automatic_maintenance = 'off'")
        for attempt in range(5):
            try:
                with conn.transaction():
                    for (role,) in conn.execute("select rolname from pg_roles where rolname like %s",
                                                (role_for(SESSION) + "%",)).fetchall():
                        conn.execute(f'drop owned by "{role}"')
                    conn.execute("drop schema if exists scsql, scsql_caller, partman cascade")
                    conn.execute("drop extension if exists vector, btree_gist cascade")
                return
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise


def _bgw_databases(conn: psycopg.Connection) -> list[str]:
    """The databases pg_partman_bgw.dbname names."""
    setting = conn.execute("select current_setting('pg_partman_bgw.dbname', true)").fetchone()[0]
    return [n.strip() for n in (setting or "").split(",") if n.strip()]


def _set_bgw_databases(conn: psycopg.Connection, names: list[str]) -> None:
    """pg_partman_bgw.dbname := NAMES (ALTER SYSTEM; none: back to postgresql.conf's
    value), and a reload: pg_partman's main process reads it before its next run."""
    if names:
        conn.execute(sql.SQL("alter system set pg_partman_bgw.dbname = {}").format(sql.Literal(",".join(names))))
    else:
        conn.execute("alter system reset pg_partman_bgw.dbname")
    conn.execute("select pg_reload_conf()")


def _maintenance_runs(conninfo: str, entry: str) -> int:
    """How many calls of pg_partman's ENTRY (the function or procedure its background
    worker calls once per run) have ended in the database: PostgreSQL's function
    statistics (track_functions, which the fixture sets for BGW_DB), which a worker
    reports when it exits, after its run committed."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return conn.execute("select coalesce(sum(calls), 0) from pg_stat_user_functions "
                            "where schemaname = 'partman' and funcname = %s", (entry,)).fetchone()[0]


def _bgw_patience(interval: int) -> float:
    """How long to wait for the worker's next run before calling it stopped:
    two of its intervals plus a minute for a loaded machine. A worker that runs
    is waited for only until it has run."""
    return 60.0 + 2 * interval


def _await_bgw_run(db: ScsqlDb, entry: str, after: int, interval: int, what: str) -> int:
    """Waits until pg_partman's background worker has ended more than AFTER runs in
    the database (its count so far), and returns the count. Fails, saying what to
    look for in the server log, when the worker does not run."""

    def ran() -> int:
        runs = _maintenance_runs(db.admin, entry)
        return runs if runs > after else 0

    started = time.monotonic()
    try:
        return wait_for(ran, timeout=_bgw_patience(interval), every=0.1)
    except AssertionError:
        waited = time.monotonic() - started
    pytest.fail(f"pg_partman's background worker ran no maintenance in database {db.name} for {waited:.0f} s "
                f"{what} (pg_partman_bgw.interval {interval} s). Its main process stops for 10 minutes after "
                "'Could not start dynamic pg_partman background process' (see the server log)")


@pytest.fixture
def bgw_db(server, tmp_path):
    """The database pg_partman's background worker maintains, with pg_partman
    (the newest version the server has) and scsql installed, its partitioned
    tables set up with pg_partman by the migration, and the database named in
    pg_partman_bgw.dbname. Yields the database, the worker's interval
    (seconds), the name of what the worker calls once per run, and how many
    runs had ended there before it was named."""
    with psycopg.connect(server.conninfo("postgres"), autocommit=True) as conn:
        libraries = conn.execute("show shared_preload_libraries").fetchone()[0]
        if "pg_partman_bgw" not in [x.strip() for x in libraries.split(",")]:
            pytest.skip("this server does not load pg_partman_bgw (shared_preload_libraries); .ci/pg15.sh's does")
        interval = int(conn.execute("select current_setting('pg_partman_bgw.interval')").fetchone()[0])
        if interval > 60:
            pytest.skip(f"pg_partman's background worker runs every {interval} s here; .ci/pg15.sh's every 2 s")
        others = [n for n in _bgw_databases(conn) if n != BGW_DB]
        if BGW_DB in _bgw_databases(conn):  # left by an interrupted run
            _set_bgw_databases(conn, others)
        if not conn.execute("select 1 from pg_database where datname = %s", (BGW_DB,)).fetchone():
            conn.execute(sql.SQL("create database {} template template0").format(sql.Identifier(BGW_DB)))
        conn.execute(sql.SQL("alter database {} set track_functions = 'pl'").format(sql.Identifier(BGW_DB)))
    db = ScsqlDb(server, BGW_DB, Keystore(tmp_path / "keys"))
    _clear_bgw_db(db.admin)
    named = False
    try:
        version = partitions.partman_versions(db.admin)[-1]
        partitions.enable_partman(db.admin, version)
        entry = "run_maintenance" if int(version.split(".")[0]) < 5 else "run_maintenance_proc"
        Migrator(db.admin).run()
        runs = _maintenance_runs(db.admin, entry)
        with psycopg.connect(server.conninfo("postgres"), autocommit=True) as conn:
            _set_bgw_databases(conn, [*others, BGW_DB])
        named = True
        yield db, interval, entry, runs
    finally:
        if named:
            with psycopg.connect(server.conninfo("postgres"), autocommit=True) as conn:
                _set_bgw_databases(conn, others)
        db.close()
        _clear_bgw_db(db.admin)


def test_partman_background_worker_creates_partitions_ahead_unasked(bgw_db):
    """An agent writes a tool call and an outcome, and premake is raised in
    pg_partman's part_config: the background worker's next run_maintenance
    creates the partitions up to the new horizon for both of scsql's
    partitioned tables. Nothing in this test calls maintenance (neither
    scsql's nor pg_partman's). pg_partman 4.x (infinite_time_partitions off,
    as scsql's create_parent leaves it) makes partitions ahead of the newest
    row only, so the rows come first. The test waits for the worker's record
    of its runs (first one in the newly named database: the worker runs), not
    for a time: once a run that began after premake was raised has ended, the
    partitions must be there."""
    db, interval, entry, runs = bgw_db
    _await_bgw_run(db, entry, runs, interval, f"after {db.name} was named in pg_partman_bgw.dbname")
    agent = db.agent("bgw", db.project())
    Api(agent).call("record_tool_call", tool="edit")
    Api(agent).call("record_outcome", kind="accepted", summary="done", task_ref="T-1")
    today = dt.datetime.now(dt.UTC).date()

    def days(parent: str) -> set[dt.date]:
        return {r["lower_bound"].date() for r in partitions.status(db.admin)
                if r["parent"] == parent and not r["is_default"]}

    parents = ["scsql.outcomes", "scsql.tool_calls"]
    with db.connect(autocommit=True) as conn:
        config = {r["parent_table"]: r["premake"] for r in conn.execute(
            "select parent_table, premake from partman.part_config order by 1").fetchall()}
        assert sorted(config) == parents  # the migration set both up with pg_partman
        premake = max(config.values()) + 3
        horizon = today + dt.timedelta(days=premake)
        assert all(horizon not in days(p) for p in parents)
        conn.execute("update partman.part_config set premake = %s", (premake,))
    started = time.monotonic()
    # A run under way when premake was raised may have read the old value; the one after it began later.
    runs = _maintenance_runs(db.admin, entry)
    _await_bgw_run(db, entry, runs + 1, interval, "after premake was raised")
    missing = {p: horizon for p in parents if horizon not in days(p)}
    assert not missing, f"pg_partman's background worker ran maintenance but made no partition of {missing}"
    print(f"\npg_partman's background worker (interval {interval} s) made the partitions of {horizon} "
          f"for {', '.join(parents)} within {time.monotonic() - started:.1f} s")
    assert {r["managed_by"] for r in partitions.status(db.admin)} == {
        f"pg_partman {partitions.partman_versions(db.admin)[-1]}"}
