"""scsql backup and scsql restore on real embedded servers: write, checkpoint,
back up, write more, restore into an empty server (checking the manifest's
signature with the source's backup key), verify, and the counts are the
backup's; a tampered dump fails the restore (its signature, or its chains
when re-signed with the key); no private key is in the file."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tarfile
import time
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from scsql.core.keys import Keystore
from scsql.ops import backup

from ..helpers import one_error_line, scsql

TIMINGS: dict[str, float] = {}


def _timed(name: str, *args: str, env: dict[str, str]):
    started = time.perf_counter()
    proc = scsql(*args, env=env, timeout=300)
    TIMINGS[name] = round(time.perf_counter() - started, 2)
    return proc


def _write(env: dict[str, str], tag: str, n: int) -> None:
    """N tool calls (chained, signed) and one fact, as the default agent."""
    code = ("import sys\nfrom scsql.core.app import Context\nfrom scsql.core.config import Settings\n"
            "from scsql.api import Api\n"
            "api = Api(Context(Settings.load()).open_agent('default'))\n"
            f"for i in range({n}): api.call('record_tool_call', tool='{tag}-%d' % i)\n"
            f"api.call('remember', key='{tag}', value='marker {tag}', importance=3)\n")
    proc = scsql("psql", "-c", "select 1", env=env)  # the server runs
    assert proc.returncode == 0, proc.stderr
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    done = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _admin(data: Path, dbname: str = "scsql") -> str:
    pid = (data / "pg" / "postmaster.pid").read_text().splitlines()
    return make_conninfo(host=pid[4], port=pid[3], user="postgres", dbname=dbname)


PRIVILEGES = """
    with r(role) as (select unnest(array['scsql_agent', 'scsql_app', 'scsql_auditor', 'scsql_worker',
                                         'scsql_agent_default', 'public']))
    select r.role || ' table ' || c.oid::regclass::text || ' ' || p.priv as line
    from r, pg_class c, unnest(array['SELECT','INSERT','UPDATE','DELETE','TRUNCATE']) p(priv)
    where c.relnamespace::regnamespace::text like 'scsql%%' and has_table_privilege(r.role, c.oid, p.priv)
    union all
    select r.role || ' function ' || f.oid::regprocedure::text from r, pg_proc f
    where f.pronamespace::regnamespace::text like 'scsql%%' and has_function_privilege(r.role, f.oid, 'EXECUTE')
    union all
    select r.role || ' database ' || priv from r, unnest(array['TEMP', 'CREATE', 'CONNECT']) priv
    where has_database_privilege(r.role, current_database(), priv)
    union all
    select r.role || ' member of ' || m.roleid::regrole::text from r, pg_auth_members m
    where r.role <> 'public' and m.member = r.role::regrole
    union all
    select r.role || ' comment ' || coalesce(shobj_description(r.role::regrole, 'pg_authid'), '-') from r
    where r.role <> 'public'
    order by 1
"""


def _privileges(conninfo: str) -> list[str]:
    with psycopg.connect(conninfo) as conn:
        return [r[0] for r in conn.execute(PRIVILEGES).fetchall()]


def _count(conninfo: str, table: str) -> int:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(f"select count(*) from {table}").fetchone()[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A server with 20 signed tool calls, checkpointed, then backed up (uncompressed, so a
    private key in it would show), then 5 more calls."""
    root = tmp_path_factory.mktemp("backup")
    env = {"SCSQL_DATA_DIR": str(root / "src")}
    up = _timed("up", "up", env=env)
    assert up.returncode == 0, up.stderr
    started = time.perf_counter()
    _write(env, "before", 20)
    TIMINGS["write 20 calls"] = round(time.perf_counter() - started, 2)
    assert scsql("checkpoint", "--init", env=env).returncode == 0
    cp = _timed("checkpoint", "checkpoint", env=env)
    assert cp.returncode == 0, cp.stderr
    file = root / "scsql.backup"
    done = _timed("backup", "backup", "--compress", "0", str(file), env=env)
    assert done.returncode == 0, done.stderr
    _write(env, "after", 5)
    yield root, env, file
    scsql("down", env=env)


@pytest.fixture(scope="module")
def restored(source):
    root, _env, file = source
    env = {"SCSQL_DATA_DIR": str(root / "dst")}
    done = _timed("restore (start a new server, pg_restore, verify)", "restore", "--json", "--key",
                  str(root / "src" / "keys" / "backup.key"), str(file), env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    TIMINGS["  pg_restore"] = report["restore_seconds"]
    TIMINGS["  verify"] = report["verify_seconds"]
    yield env, report
    scsql("down", env=env)
    print("\nbackup and restore timings (s):", json.dumps(TIMINGS, indent=1))


def test_restore_holds_what_was_backed_up_and_verifies(source, restored):
    root, src_env, file = source
    env, report = restored
    with_manifest = backup.read_tar(file, root, trusted=None, check=False)[0]
    # 20 tool calls and the row of memory history the fact's remember chained.
    assert report["chains"] == 1 and report["checkpoints"] == 1 and report["rows"] == 21
    src, dst = _admin(root / "src"), _admin(root / "dst")
    assert _count(src, "scsql.tool_calls") == 25  # written after the backup: not in it
    assert _count(dst, "scsql.tool_calls") == 20
    for table, n in with_manifest["counts"].items():  # every table as backed up
        assert _count(dst, table) == n, table
    assert with_manifest["counts"]["scsql.tool_calls"] == 20
    assert _privileges(dst) == _privileges(src)  # roles, memberships, grants, no TEMP on the database
    ver = _timed("scsql verify on the restored server", "verify", "--full", env=env)
    assert ver.returncode == 0 and "ok: 21 rows in 1 chains" in ver.stdout, ver.stdout + ver.stderr
    st = scsql("status", env=env)
    assert st.returncode == 0 and "default (default, orchestrator)" in st.stdout, st.stderr


def test_restore_refuses_a_server_that_is_not_empty(source, restored):
    _root, _src, file = source
    env, _ = restored
    key = str(_root / "src" / "keys" / "backup.key")
    line = one_error_line(scsql("restore", "--key", key, str(file), env=env), "SC014")
    assert "already holds schema scsql" in line


def test_no_private_key_is_in_the_backup(source):
    root, _env, file = source
    data = file.read_bytes()
    keyfiles = sorted((root / "src" / "keys").glob("*.key"))
    assert {k.name for k in keyfiles} == {"default.key", "auditor.key", "backup.key"}
    for path in keyfiles:
        pem = path.read_bytes()
        key = serialization.load_pem_private_key(pem, None)
        raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
        body = b"".join(pem.splitlines()[1:-1])
        for form in (raw, raw.hex().encode(), base64.b64encode(raw), body, base64.b64decode(body)):
            assert form not in data, path.name


def test_a_tampered_dump_fails_the_restore(source, restored, tmp_path):
    """An attacker who controls the file changes one signed row in the dump and the sha256 in the
    manifest: the manifest's signature no longer verifies (SC061), nothing is restored. Re-signed
    with the backup key itself (whoever holds it, or a source tampered before the backup), the
    restore into an empty database finds the row's hash broken (SC016)."""
    root, _src, file = source
    dst_env, _ = restored
    manifest, dump = backup.read_tar(file, tmp_path, trusted=None, check=False)
    data = dump.read_bytes()
    row = b"before-7\t\\N\tmodel\t"  # the tool call's row (tool, no model, origin), not its figures in usage_days
    assert data.count(row) == 1
    data = data.replace(row, b"bexore-7" + row[8:])
    dump.write_bytes(data)
    manifest["dump"]["sha256"] = hashlib.sha256(data).hexdigest()
    keyfile = str(root / "src" / "keys" / "backup.key")
    unsigned = tmp_path / "edited.backup"
    backup.write_tar(unsigned, manifest, dump)  # the manifest edited: its old signature cannot follow
    with psycopg.connect(_admin(root / "dst", "postgres"), autocommit=True) as conn:
        conn.execute("create database tampered")
    env = {"SCSQL_DSN": _admin(root / "dst", "tampered")}  # an external server: an empty database on it
    one_error_line(scsql("restore", "--key", keyfile, str(unsigned), env=env), "SC060")
    with tarfile.open(file) as tar:  # the original signature kept beside the edited manifest
        sig = tar.extractfile(backup.SIGNATURE).read()
    resigned = tmp_path / "old-signature.backup"
    _tar_with_signature(resigned, manifest, dump, sig)
    line = one_error_line(scsql("restore", "--key", keyfile, str(resigned), env=env), "SC061")
    assert "does not verify with the trusted backup key" in line
    bad = tmp_path / "tampered.backup"
    backup.write_tar(bad, manifest, dump, Keystore(root / "src" / "keys").load("backup"))
    started = time.perf_counter()
    proc = scsql("restore", "--key", keyfile, str(bad), env=env, timeout=300)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]  # after the progress lines
    assert line.startswith("scsql: error SC016"), proc.stderr
    TIMINGS["tampered restore (refused)"] = round(time.perf_counter() - started, 2)
    assert "chain 1 seq 8" in line and "hash-mismatch" in line, line
    assert conninfo_to_dict(env["SCSQL_DSN"])["dbname"] == "tampered"


def test_a_damaged_file_is_refused_before_anything_starts(source, tmp_path):
    _root, _src, file = source
    damaged = tmp_path / "damaged.backup"
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the dump: its sha256 no longer matches
    damaged.write_bytes(bytes(data))
    env = {"SCSQL_DATA_DIR": str(tmp_path / "never")}
    keyfile = str(_root / "src" / "keys" / "backup.key")
    one_error_line(scsql("restore", "--key", keyfile, str(damaged), env=env), "SC015")
    (tmp_path / "not-a-backup").write_text("hello")
    one_error_line(scsql("restore", str(tmp_path / "not-a-backup"), env=env), "SC015")
    # No key to check the signature with (a new data directory's keystore is empty): nothing starts.
    one_error_line(scsql("restore", str(file), env=env), "SC062")
    one_error_line(scsql("restore", "--key", "00" * 31, str(file), env=env), "SC062")
    assert not (tmp_path / "never" / "pg").exists()
    one_error_line(scsql("backup", str(file), env={"SCSQL_DATA_DIR": str(_root / "src")}), "SC018")


def _tar_with_signature(path: Path, manifest: dict, dump: Path, sig: bytes) -> None:
    """A backup file holding MANIFEST, the signature SIG (made for another manifest) and DUMP."""
    import io

    data = json.dumps(manifest, indent=1, sort_keys=True, default=str).encode()
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, blob in ((backup.MANIFEST, data), (backup.SIGNATURE, sig)):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
        tar.add(dump, arcname=backup.DUMP)
