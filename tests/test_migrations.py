"""Migrations: fresh install equals the upgrade path, the runner is safe to
race and to re-run, changed files are refused, and the psql script a DBA runs
builds the same database."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest

from scsql.core.errors import ScsqlError
from scsql.core.migrate import Migrator, Source

from .helpers import schema_dump

REPO = Path(__file__).resolve().parent.parent


def test_fresh_install_equals_step_by_step_upgrade(server, empty_db, template):
    """One database migrated a version at a time (as successive releases
    would), the other built at the current version in one go: same schema."""
    source = Source(REPO)
    versions = [m.version for m in source.migrations()]
    for v in versions[:-1]:
        report = Migrator(empty_db, source).run(target=v)
        assert report.applied == [m.name for m in source.migrations() if m.version == v]
        assert report.api_files == 0  # sql/ and policies/ belong to the head only
    final = Migrator(empty_db, source).run()
    assert final.applied == [source.migrations()[-1].name]
    upgraded = schema_dump(server, empty_db)
    fresh = schema_dump(server, server.conninfo(template))
    assert "create table scsql.agents" in upgraded.lower()
    assert upgraded == fresh


def test_rerunning_migrate_changes_nothing(server, scsql_db):
    before = schema_dump(server, scsql_db.admin)
    report = Migrator(scsql_db.admin).run()
    assert report.applied == []
    assert report.api_files > 0
    assert schema_dump(server, scsql_db.admin) == before


def test_changed_migration_is_refused_and_nothing_applied(server, scsql_db, tmp_path):
    shutil.copytree(REPO / "migrations", tmp_path / "migrations")
    shutil.copytree(REPO / "sql", tmp_path / "sql")
    shutil.copytree(REPO / "policies", tmp_path / "policies")
    first = sorted((tmp_path / "migrations").glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\ncreate table scsql.sneaky (id int);\n")
    before = schema_dump(server, scsql_db.admin)
    with pytest.raises(ScsqlError) as err:
        Migrator(scsql_db.admin, Source(tmp_path)).run()
    assert err.value.code == "SC022"
    assert first.name in err.value.message
    assert schema_dump(server, scsql_db.admin) == before


def test_database_from_a_newer_scsql_is_refused(scsql_db):
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_owner")
        conn.execute("insert into scsql.schema_migrations (version, name, checksum) values (9999, '9999_future.sql', 'x')")
    with pytest.raises(ScsqlError) as err:
        Migrator(scsql_db.admin).run()
    assert err.value.code == "SC023"


def test_two_migrators_racing_apply_each_migration_once(empty_db):
    barrier = threading.Barrier(2)
    results, failures = [], []

    def migrate():
        barrier.wait()
        try:
            results.append(Migrator(empty_db).run())
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    # Hold the lock first so both migrators really contend for it.
    with psycopg.connect(empty_db, autocommit=True) as holder:
        holder.execute("select pg_advisory_lock(1396921201, 1)")
        threads = [threading.Thread(target=migrate) for _ in range(2)]
        for t in threads:
            t.start()
        _wait_for_lock_waiters(holder, 2)
        holder.execute("select pg_advisory_unlock(1396921201, 1)")
        for t in threads:
            t.join(60)
    assert failures == []
    assert all(r.waited for r in results)
    applied = sorted(name for r in results for name in r.applied)
    expected = sorted(m.name for m in Source().migrations())
    assert applied == expected  # each applied by exactly one of the two
    with psycopg.connect(empty_db) as conn:
        count = conn.execute("select count(*), count(distinct version) from scsql.schema_migrations").fetchone()
    assert count == (len(expected), len(expected))


def _wait_for_lock_waiters(conn, n: int) -> None:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        waiting = conn.execute(
            "select count(*) from pg_locks where locktype = 'advisory' and not granted "
            "and database = (select oid from pg_database where datname = current_database())"
        ).fetchone()[0]
        if waiting >= n:
            return
        time.sleep(0.02)
    raise AssertionError("the migrators never waited on the advisory lock")


def test_printed_script_builds_the_same_database_with_plain_psql(server, empty_db, template):
    script = Migrator("").script()
    for _ in range(2):  # and running it again is harmless
        proc = subprocess.run(
            [server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", empty_db, "-f", "-"],
            input=script, capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr
    assert schema_dump(server, empty_db) == schema_dump(server, server.conninfo(template))
    with psycopg.connect(empty_db) as conn:
        rows = conn.execute("select name, checksum from scsql.schema_migrations order by version").fetchall()
    assert rows == [(m.name, m.checksum) for m in Source().migrations()]


def test_printed_script_refuses_a_changed_migration(server, scsql_db, tmp_path):
    shutil.copytree(REPO, tmp_path / "repo", ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__"))
    first = sorted((tmp_path / "repo" / "migrations").glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    script = Migrator("", Source(tmp_path / "repo")).script()
    proc = subprocess.run(
        [server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", scsql_db.admin, "-f", "-"],
        input=script, capture_output=True, text=True,
    )
    assert proc.returncode != 0
    assert "different checksum" in proc.stderr


def test_a_grant_removed_from_policies_is_taken_back(server, scsql_db):
    """Grants are re-applied exactly: one made by hand (or by an older
    policies/ file) disappears on the next migrate."""
    with psycopg.connect(scsql_db.admin, autocommit=True) as conn:
        conn.execute("grant execute on function scsql.register_agent(text, text, text, bytea) to scsql_agent")
        conn.execute("grant delete on scsql.projects to scsql_agent")
    Migrator(scsql_db.admin).run()
    with psycopg.connect(scsql_db.admin) as conn:
        held = conn.execute(
            "select has_function_privilege('scsql_agent', 'scsql.register_agent(text, text, text, bytea)', 'execute'), "
            "has_table_privilege('scsql_agent', 'scsql.projects', 'delete')").fetchone()
    assert held == (False, False)
