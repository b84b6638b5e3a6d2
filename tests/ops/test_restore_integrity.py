"""One bad row never breaks disaster recovery, and a backup is what its operator signed.

(a) An agent records, from its own psql login, an outcome whose signature is
garbage. scsql checkpoint quarantines its chain. Until an administrator
acknowledges the quarantine, scsql verify exits 1; once acknowledged, it
reports the row as excused (with the quarantine), verifies the chain past it
and exits 0 (3 with --strict). A backup then restores into a fresh database
and verifies: the quarantined chain and its bad row are reported and kept as
evidence. An acknowledgement excuses its own row only: a second bad row is a
break, and a quarantine of its own. A backup taken while a quarantine is
still open restores too (disaster recovery cannot wait for an
acknowledgement), and says so.

(b) The manifest is signed with the operator's backup key and checked on
restore with a key the operator gives: a superuser who edits a fact and a
decision in the dump and fixes the manifest's sha256 is refused (SC061),
signed with another key too; re-signed with the backup key itself, the
restore compares memory with its chained history and names the fact and the
decision (SC016). An unsigned backup is refused unless --accept-unsigned.

(d) Every member of the backup file is mode 0600, and scsql backup with a login
that is not an administrator's is one SC063 line, not a traceback."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import psycopg
import pytest

from scsql import cli
from scsql.api import Api
from scsql.audit.checkpoints import run_checkpoint
from scsql.core import keys
from scsql.core.keys import Keystore
from scsql.ops import backup

from ..helpers import SESSION, auditor_key, one_error_line, scsql, serial


@pytest.fixture
def fresh(server):
    """Makes empty databases (fresh restore targets) on the test server; drops them after."""
    made = []

    def make() -> str:
        name = f"{SESSION}_{next(serial)}"
        janitor = server.janitor(name)
        janitor.init()
        made.append(janitor)
        return server.conninfo(name)

    yield make
    for janitor in made:
        janitor.drop()


def _forge_outcome(db, agent, summary: str) -> int:
    """The agent, logged in with its own role (as with psql), records a failed outcome whose
    signature is 64 random bytes (the database cannot check Ed25519); returns its seq."""
    with psycopg.connect(db.login(agent.name)) as conn:
        key_id = conn.execute("select key_id from scsql.whoami()").fetchone()[0]
        return conn.execute(
            "select seq from scsql.record_outcome(p_kind => 'failed', p_summary => %s, p_task_ref => 'T-9', "
            "p_at => %s, p_key_id => %s, p_signature => %s)",
            (summary, dt.datetime.now(dt.UTC), key_id, os.urandom(64))).fetchone()[0]


def _verify(monkeypatch, capsys, conninfo: str, *args: str) -> tuple[int, str]:
    """scsql verify ARGS against CONNINFO: (exit status, stderr)."""
    monkeypatch.setenv("SCSQL_DSN", conninfo)
    capsys.readouterr()
    status = cli.main(["verify", *args])
    return status, capsys.readouterr().err


def _acknowledge(conninfo: str, note: str) -> list[int]:
    with psycopg.connect(conninfo) as conn:
        ids = [r[0] for r in conn.execute("select quarantine_id from scsql.chain_quarantines(true)").fetchall()]
        for qid in ids:
            conn.execute("select scsql.acknowledge_quarantine(%s, %s)", (qid, note))
    return ids


@pytest.fixture
def quarantined(scsql_db):
    """Agent A's chain: two signed tool calls, the forged outcome (seq 3, and its learning's
    memory change, seq 4), a signed call after it; a bystander B; scsql checkpoint has run
    and quarantined A's chain. Returns (db, a, chain of A, seq of the forged row, auditor key)."""
    db = scsql_db
    project = db.project()
    a, b = db.agent("forger", project), db.agent("bystander", project)
    for i in range(2):
        Api(a).call("record_tool_call", tool=f"before-{i}")
    bad = _forge_outcome(db, a, "tests pass, ship it")
    Api(a).call("record_tool_call", tool="after")
    Api(b).call("record_tool_call", tool="b")
    Api(b).call("remember", key="db.host", value="the database runs on db1")
    key = auditor_key(db)
    run = run_checkpoint(db.admin, key, progress=False)
    [(_qid, brk, signed)] = run.quarantined
    assert (brk.seq, brk.kind, signed) == (bad, "signature", bad - 1) and not run.ok
    return db, a, brk.chain_id, bad, key


def test_an_acknowledged_quarantine_verifies_and_only_its_own_row_is_excused(quarantined, monkeypatch, capsys):
    db, a, chain, bad, key = quarantined
    status, err = _verify(monkeypatch, capsys, db.admin)
    assert status == 1 and f"BROKEN chain {chain} seq {bad} (scsql.outcomes): signature" in err
    _acknowledge(db.admin, "agent key rotated, outcome disowned")
    status, err = _verify(monkeypatch, capsys, db.admin, "--full")
    assert status == 0, err
    assert f"EXCUSED chain {chain} seq {bad} (scsql.outcomes): signature" in err and "BROKEN" not in err
    assert "acknowledged" in err and "agent key rotated, outcome disowned" in err and f"QUARANTINED chain {chain}" in err
    assert _verify(monkeypatch, capsys, db.admin, "--strict")[0] == 3
    # scsql checkpoint now verifies the chain past the excused row and signs it whole.
    assert run_checkpoint(db.admin, key, progress=False).ok
    assert _verify(monkeypatch, capsys, db.admin)[0] == 0

    # A second bad row is not excused by the first acknowledgement: a break, then a quarantine of its own.
    again = _forge_outcome(db, a, "another forged verdict")
    status, err = _verify(monkeypatch, capsys, db.admin)
    assert status == 1 and f"BROKEN chain {chain} seq {again} (scsql.outcomes): signature" in err
    run = run_checkpoint(db.admin, key, progress=False)
    assert [(b.chain_id, b.seq) for _q, b, _s in run.quarantined] == [(chain, again)] and not run.ok
    assert _verify(monkeypatch, capsys, db.admin)[0] == 1
    assert len(_acknowledge(db.admin, "the second one too")) == 1
    assert _verify(monkeypatch, capsys, db.admin, "--full")[0] == 0


def test_a_backup_with_an_acknowledged_quarantine_restores_into_a_fresh_database(
        quarantined, fresh, tmp_path, monkeypatch, capsys):
    """Issue 3 end to end, through the command line: acknowledge, back up, restore, verify."""
    db, _a, chain, bad, _key = quarantined
    _acknowledge(db.admin, "agent revoked")
    keystore = {"SCSQL_KEYSTORE": str(tmp_path / "ks")}
    file = tmp_path / "scsql.backup"
    done = scsql("backup", str(file), env={"SCSQL_DSN": db.admin, **keystore})
    assert done.returncode == 0, done.stderr
    public = scsql("backup", "--public-key", env=keystore).stdout.strip()
    assert f"signed with backup key {public}" in done.stdout

    target = fresh()
    done = scsql("restore", "--key", public, str(file), env={"SCSQL_DSN": target}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"restored and verified {file} (signed by backup key {public})" in done.stdout
    assert f"EXCUSED chain {chain} seq {bad} (scsql.outcomes): signature" in done.stderr
    assert f"QUARANTINED chain {chain} " in done.stderr and "agent revoked" in done.stderr
    with psycopg.connect(target) as conn:  # the bad row is kept, as evidence
        assert conn.execute("select count(*) from scsql.outcomes where summary = 'tests pass, ship it'").fetchone()[0] == 1
    status, err = _verify(monkeypatch, capsys, target, "--full")
    assert status == 0 and f"EXCUSED chain {chain} seq {bad}" in err and "BROKEN" not in err, err
    assert _verify(monkeypatch, capsys, target, "--strict")[0] == 3


def test_a_backup_taken_while_a_quarantine_is_open_still_restores(quarantined, fresh, tmp_path, monkeypatch, capsys):
    db, _a, chain, bad, _key = quarantined
    key = keys.generate()
    file = tmp_path / "open.backup"
    backup.backup(db.admin, file, key)
    target = fresh()
    done = backup.restore(target, file, trusted=keys.public_bytes(key))
    assert [q["acknowledged_at"] for q in done["quarantines"]] == [None]
    assert len(done["excused"]) == 1 and done["excused"][0].startswith(f"chain {chain} seq {bad} ")
    assert "open" in done["excused"][0]
    status, err = _verify(monkeypatch, capsys, target)  # until someone deals with it
    assert status == 1 and f"BROKEN chain {chain} seq {bad}" in err
    _acknowledge(target, "dealt with after the restore")
    assert _verify(monkeypatch, capsys, target)[0] == 0


# -- (b) the signed manifest ------------------------------------------------------------


@pytest.fixture
def signed_backup(scsql_db, tmp_path):
    """A backup (uncompressed dump) of a project holding a fact and a decision, signed with a
    backup key in a keystore of its own; returns (file, keystore)."""
    db = scsql_db
    a = db.agent("writer", db.project())
    Api(a).call("remember", key="db.host", value="restore-marker-fact-AAAA")
    with a.transaction() as conn:
        conn.execute("select * from scsql.decide('Keep nightly backups', 'restore-marker-rationale-AAAA')")
    store = Keystore(tmp_path / "ks")
    file = tmp_path / "signed.backup"
    backup.backup(db.admin, file, backup.backup_key(store), compress=0)
    return file, store


def _edited(file: Path, into: Path) -> tuple[dict, Path]:
    """The backup's manifest and dump with the fact's value and the decision's rationale changed in
    the dump (as a superuser would change them in the database), and the manifest's sha256 fixed."""
    manifest, dump = backup.read_tar(file, into, trusted=None, check=False)
    data = dump.read_bytes()
    for marker in (b"restore-marker-fact-AAAA", b"restore-marker-rationale-AAAA"):
        assert data.count(marker) == 1, marker
        data = data.replace(marker, marker[:-4] + b"EVIL")
    dump.write_bytes(data)
    manifest["dump"]["sha256"] = hashlib.sha256(data).hexdigest()
    return manifest, dump


def test_a_dump_edited_after_signing_is_refused(signed_backup, fresh, tmp_path):
    file, store = signed_backup
    trusted = keys.public_bytes(store.load("backup"))
    manifest, dump = _edited(file, tmp_path)
    with tarfile.open(file) as tar:
        old_signature = tar.extractfile(backup.SIGNATURE).read()
    edited = tmp_path / "edited.backup"
    backup.write_tar(edited, manifest, dump)
    with tarfile.open(edited, "a") as tar:  # the old signature beside the edited manifest
        info = tarfile.TarInfo(backup.SIGNATURE)
        info.size = len(old_signature)
        tar.addfile(info, io.BytesIO(old_signature))
    target = fresh()
    env = {"SCSQL_DSN": target}
    line = one_error_line(scsql("restore", "--key", trusted.hex(), str(edited), env=env), "SC061")
    assert "does not verify with the trusted backup key" in line
    # Signed with the attacker's own key, whose public key the file names: not the trusted key.
    forged = tmp_path / "forged.backup"
    backup.write_tar(forged, manifest, dump, keys.generate())
    line = one_error_line(scsql("restore", "--key", trusted.hex(), str(forged), env=env), "SC061")
    assert "not the trusted" in line
    # The keystore's backup.key is the default key; a file whose signature it does not make is refused too.
    env_ks = {"SCSQL_DSN": target, "SCSQL_KEYSTORE": str(store.directory)}
    one_error_line(scsql("restore", str(forged), env=env_ks), "SC061")
    with psycopg.connect(target) as conn:  # nothing was restored
        assert conn.execute("select count(*) from pg_namespace where nspname = 'scsql'").fetchone()[0] == 0

    # Re-signed with the backup key itself: the restore compares memory with its chained history.
    resigned = tmp_path / "resigned.backup"
    backup.write_tar(resigned, manifest, dump, store.load("backup"))
    proc = scsql("restore", str(resigned), env=env_ks, timeout=300)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("scsql: error SC016"), proc.stderr
    assert "memory fact 'db.host'" in line and "memory decision 'decision:" in line and "changed" in line, line


def test_an_unsigned_backup_needs_accept_unsigned(signed_backup, fresh, tmp_path):
    file, _store = signed_backup
    manifest, dump = backup.read_tar(file, tmp_path, trusted=None, check=False)
    manifest["format"] = backup.UNSIGNED_FORMAT  # as scsql wrote backups before it signed them
    old = tmp_path / "old.backup"
    backup.write_tar(old, manifest, dump)
    target = fresh()
    one_error_line(scsql("restore", str(old), env={"SCSQL_DSN": target}), "SC060")
    done = scsql("restore", "--accept-unsigned", "--json", str(old), env={"SCSQL_DSN": target}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["signed_by"] is None


# -- (d) the file's members, and who may write it --------------------------------------


def test_every_member_is_0600_and_a_non_administrator_gets_one_error_line(signed_backup, scsql_db, tmp_path):
    file, _store = signed_backup
    with tarfile.open(file) as tar:
        assert {m.name: m.mode for m in tar.getmembers()} == {
            backup.MANIFEST: 0o600, backup.SIGNATURE: 0o600, backup.DUMP: 0o600}
    db = scsql_db
    agent = db.agent("nosy", db.project())
    for login in (db.app, db.login(agent.name)):
        proc = scsql("backup", str(tmp_path / "never.backup"),
                     env={"SCSQL_DSN": login, "SCSQL_KEYSTORE": str(tmp_path / "ks2")})
        line = one_error_line(proc, "SC063")
        assert "administrator" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "never.backup").exists()
