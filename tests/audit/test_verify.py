"""Attacks staged for real (as a superuser, with triggers disabled where the
attack needs it) and found by verification at the right chain, seq and kind."""

from __future__ import annotations

import datetime as dt
import json
import os
import re

import psycopg
import pytest
from psycopg.types.json import Jsonb

from scsql import cli
from scsql.audit.telemetry import TOOL_CALL_FIELDS
from scsql.audit.encoding import encode_fields, payload, row_bytes, row_hash
from scsql.api import Api
from scsql.core.keys import generate, public_bytes
from scsql.audit.verify import verify

from ..helpers import VerifierCannot, mcp_env, sql_cannot, sql_verify, tamper, trail, triggers_off  # noqa: F401 - trail is a fixture


def _first_break(db, **kw):
    report = verify(db.admin, workers=1, progress=False, **kw)
    assert not report.ok
    return report.breaks[0], report


def test_untouched_trail_verifies(trail, verifier):
    db, a, b, ca, cb = trail
    report = verifier.run(db)
    assert report.ok and report.rows == 9 and report.chains == 2


def test_edited_row_is_a_hash_mismatch_at_its_seq(trail, verifier):
    db, a, b, ca, cb = trail
    tamper(db, f"update scsql.tool_calls set output_tokens = 1 where chain_id = {ca} and seq = 3")
    assert verifier.breaks(db) == [(ca, 3, "hash-mismatch")]  # B's chain is intact


def test_deleted_row_is_found_at_the_next_seq(trail, verifier):
    db, a, b, ca, cb = trail
    tamper(db, f"delete from scsql.tool_calls where chain_id = {ca} and seq = 2")
    assert verifier.breaks(db) == [(ca, 3, "seq-gap")]


_COPIES = {
    "scsql.tool_calls": "insert into scsql.tool_calls select project_id, tool_call_id + 1000, at, session_id, tool, "
                        "model, origin, input_tokens, output_tokens, latency_ms, status, input_preview, output_preview, "
                        "cost_usd, author_id, key_id, chain_id, seq, prev_hash, row_hash, signature "
                        "from scsql.tool_calls where chain_id = {chain} and seq = 3",
    "scsql.sessions": "insert into scsql.sessions (project_id, client, title, at, author_id, key_id, chain_id, seq, "
                      "prev_hash, row_hash, signature) select project_id, 'copy', tool, at, author_id, key_id, chain_id, "
                      "seq, prev_hash, row_hash, signature from scsql.tool_calls where chain_id = {chain} and seq = 3",
}


@pytest.mark.parametrize("table", list(_COPIES))
def test_a_second_row_at_a_seq_is_a_fork_whichever_is_read_first(trail, verifier, table):
    """A row stored again at a seq of its chain, in the same table (read after
    the original) or in another one (read before it), is a fork, not the
    hash-mismatch of whichever of the two a verifier happens to read first."""
    db, a, b, ca, cb = trail
    tamper(db, _COPIES[table].format(chain=ca))
    assert verifier.breaks(db) == [(ca, 3, "fork")]


def test_swapped_contents_are_found(trail, verifier):
    db, a, b, ca, cb = trail
    tamper(db, f"""
        with x as (select seq, tool, input_preview, output_preview, input_tokens, output_tokens
                   from scsql.tool_calls where chain_id = {ca} and seq in (2, 4))
        update scsql.tool_calls t set tool = y.tool, input_preview = y.input_preview, output_preview = y.output_preview,
               input_tokens = y.input_tokens, output_tokens = y.output_tokens
        from x y where t.chain_id = {ca} and t.seq in (2, 4) and y.seq = 6 - t.seq""")
    assert verifier.breaks(db) == [(ca, 2, "hash-mismatch")]


@sql_cannot("it checks no Ed25519 signature (PostgreSQL has no verifier of its own): the chain is intact")
def test_row_signed_by_b_while_inserting_as_a_fails_its_signature(trail, verifier):
    db, a, b, ca, cb = trail
    at = dt.datetime.now(dt.UTC)
    values = {"tool": "forged", "status": "ok", "origin": "model", "input_tokens": 0, "output_tokens": 0}
    data = payload("scsql.tool_calls", a.name, 1, at, [f.kind for f in TOOL_CALL_FIELDS],
                   [values.get(f.name) for f in TOOL_CALL_FIELDS])
    with a.transaction() as conn:  # A inserts; the signature is B's
        row = conn.execute(
            "select * from scsql.record_tool_call(p_tool => 'forged', p_at => %s, p_key_id => 1, p_signature => %s)",
            (at, b.key.sign(data))).fetchone()
    assert sql_verify(db, ca)["ok"]  # the chain itself is intact: only signatures catch this
    found = verifier.run(db).findings
    assert [(f.chain, f.seq, f.kind) for f in found] == [(ca, row["seq"], "signature")]
    assert a.name in found[0].detail
    assert _first_break(db)[0].table == "scsql.tool_calls"


def test_replayed_row_appended_with_valid_links_is_a_replay(trail, verifier):
    """A superuser copies A's signed row to the end of A's chain with correct
    links and hashes and moves the head: the signature is A's and verifies, so
    only the repeated signature gives the copy away."""
    db, a, b, ca, cb = trail
    with db.connect() as conn:
        src = conn.execute("select * from scsql.tool_calls where chain_id = %s and seq = 2", (ca,)).fetchone()
        head = conn.execute("select head_seq, head_hash from scsql.chains where chain_id = %s", (ca,)).fetchone()
        fields = conn.execute("select part, column_name, kind from scsql._chain_fields('scsql.tool_calls') "
                              "order by part desc, ordinal").fetchall()
        new_id = conn.execute("select max(tool_call_id) + 1000 as id from scsql.tool_calls").fetchone()["id"]
    copy = dict(src, tool_call_id=new_id, seq=head["head_seq"] + 1, prev_hash=bytes(head["head_hash"]))
    stamped = [f for f in fields if f["part"] == "stamped"]
    signed = [f for f in fields if f["part"] == "signed"]
    # A digested field the row carries the digest of is encoded by it (scsql._enc, DIGESTED FIELDS).
    digested = [src.get(f["column_name"] + "_sha256") for f in signed]
    data = payload("scsql.tool_calls", a.name, src["key_id"], src["at"],
                   [f["kind"] if d is None else "digest" for f, d in zip(signed, digested)],
                   [src[f["column_name"]] if d is None else bytes(d) for f, d in zip(signed, digested)])
    canonical = row_bytes(ca, copy["seq"], encode_fields([f["kind"] for f in stamped], [copy[f["column_name"]] for f in stamped]), data)
    copy["row_hash"] = row_hash(copy["prev_hash"], canonical, bytes(src["signature"]))
    cols = list(copy)
    with db.connect() as conn:
        triggers_off(conn)
        conn.execute(f"insert into scsql.tool_calls ({', '.join(cols)}) values ({', '.join(['%s'] * len(cols))})",
                     [copy[c] for c in cols])
        conn.execute("update scsql.chains set prev_head_hash = head_hash, head_seq = %s, head_hash = %s "
                     "where chain_id = %s", (copy["seq"], copy["row_hash"], ca))
    found = verifier.run(db).findings  # links and hashes are all right: only the repeated signature tells
    assert [(f.chain, f.seq, f.kind) for f in found] == [(ca, copy["seq"], "replay")]
    assert "seq 2" in found[0].detail
    if verifier.name == "python":
        assert _first_break(db)[0].table == "scsql.tool_calls"
        brk, _ = _first_break(db, full=True)
        assert (brk.seq, brk.kind) == (copy["seq"], "replay")


@sql_cannot("it checks no signature, so it takes no public keys to check them with", raises=VerifierCannot)
def test_wrong_public_key_fails_at_the_first_row(trail, verifier):
    db, a, b, ca, cb = trail
    assert verifier.breaks(db, key_override={a.name: public_bytes(generate())}) == [(ca, 1, "signature")]


@sql_cannot("it checks no signature, so neither which key had to make it")
def test_a_key_made_valid_only_after_the_rows_it_signed_is_a_wrong_key(trail, verifier):
    db, a, b, ca, cb = trail
    tamper(db, "update scsql.agent_keys set valid_from = now() + interval '1 day' "
               f"where agent_id = (select agent_id from scsql.agents where name = '{a.name}')")
    assert verifier.breaks(db) == [(ca, 1, "wrong-key")]


@sql_cannot("it reads the checkpoints in the database, not an exported file", raises=VerifierCannot)
def test_truncated_tail_is_found_against_the_exported_checkpoint(trail, verifier, tmp_path, monkeypatch, capsys):
    db, a, b, ca, cb = trail
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    export = tmp_path / "outside" / "checkpoints.jsonl"
    assert cli.main(["checkpoint", "--init"]) == 0
    assert oct(os.stat(tmp_path / "keys" / "auditor.key").st_mode & 0o777) == "0o600"
    assert cli.main(["checkpoint", "--export", str(export)]) == 0
    lines = [json.loads(x) for x in export.read_text().splitlines()]
    assert len(lines) == 1 and {h["chain_id"]: h["seq"] for h in lines[0]["heads"]} == {ca: 6, cb: 3}
    assert cli.main(["verify", "--checkpoints", str(export)]) == 0
    # A superuser removes A's newest two rows, rewinds the head and removes the checkpoints from the database.
    tamper(db,
           f"delete from scsql.outcomes where chain_id = {ca}",
           f"delete from scsql.tool_calls where chain_id = {ca} and seq = 5",
           f"update scsql.chains c set head_seq = 4, head_hash = t.row_hash from scsql.tool_calls t "
           f"where c.chain_id = {ca} and t.project_id = c.project_id and t.chain_id = {ca} and t.seq = 4",
           "delete from scsql.checkpoint_segments", "delete from scsql.checkpoint_heads",
           "delete from scsql.checkpoints")
    assert verifier.run(db).ok  # the database alone no longer knows
    assert verifier.breaks(db, checkpoint_files=[export]) == [(ca, 5, "checkpoint-mismatch")]
    capsys.readouterr()
    assert cli.main(["verify", "--checkpoints", str(export)]) == 1
    err = capsys.readouterr().err
    assert f"chain {ca} seq 5" in err and "checkpoint-mismatch" in err


def test_verify_command_names_the_break_and_exits_non_zero(trail, monkeypatch, capsys):
    db, a, b, ca, cb = trail
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    assert cli.main(["verify"]) == 0
    out = capsys.readouterr()
    assert "ok: 9 rows in 2 chains" in out.out and out.err == ""  # no progress bar in a pipe
    tamper(db, f"update scsql.tool_calls set tool = 'rm -rf' where chain_id = {cb} and seq = 2")
    assert cli.main(["verify", "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert f"chain {cb} seq 2 (scsql.tool_calls): hash-mismatch" in err


@sql_cannot("it reads the checkpoints in the database, not an exported file, and checks no auditor signature",
            raises=VerifierCannot)
def test_tampered_checkpoint_file_is_refused(trail, verifier, tmp_path, monkeypatch):
    db, a, b, ca, cb = trail
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    export = tmp_path / "cp.jsonl"
    assert cli.main(["checkpoint", "--init"]) == 0
    assert cli.main(["checkpoint", "--export", str(export)]) == 0
    cp = json.loads(export.read_text())
    cp["heads"][0]["seq"] += 1
    export.write_text(json.dumps(cp) + "\n")
    assert [kind for _c, _s, kind in verifier.breaks(db, checkpoint_files=[export])][:1] == ["checkpoint-signature"]


def test_verification_can_start_from_a_checkpoint(trail, verifier, tmp_path, monkeypatch):
    db, a, b, ca, cb = trail
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    assert cli.main(["checkpoint", "--init"]) == 0
    assert cli.main(["checkpoint"]) == 0
    api = Api(a)
    api.call("record_tool_call", tool="after")  # seq 7
    with db.connect() as conn:
        cp = conn.execute("select max(checkpoint_id) as id from scsql.checkpoints").fetchone()["id"]
    tamper(db, f"update scsql.tool_calls set tool = 'x' where chain_id = {ca} and seq = 2")
    assert verifier.breaks(db)[0][:2] == (ca, 2)
    report = verifier.run(db, from_checkpoint=cp)
    assert report.ok, report.breaks  # rows after the checkpoint are intact
    if verifier.name == "sql":  # it counts the rows it checked, not those it read before the start
        with db.connect() as conn:
            conn.execute("set role scsql_auditor")
            r = conn.execute("select * from scsql.verify_chain(%s, %s)", (ca, cp)).fetchone()
            assert r["ok"] and r["rows_checked"] == 2  # the checkpoint's head (seq 6) and seq 7
    tamper(db, f"update scsql.outcomes set signal = 'x' where chain_id = {ca} and seq = 6")  # summary is hashed by its digest
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "hash-mismatch")]  # the start row itself is checked
    tamper(db, f"update scsql.outcomes set row_hash = sha256(row_hash) where chain_id = {ca} and seq = 6")
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "checkpoint-mismatch")]


def test_the_row_a_starting_checkpoint_names_cannot_be_deleted(trail, verifier):
    """Verification from a checkpoint checks the row it names: deleting that
    row is found as verification of every row finds it, whether rows follow
    it or it was the newest."""
    from scsql.audit.checkpoints import record_checkpoints

    db, a, b, ca, cb = trail
    record_checkpoints(db.admin, _auditor_key(db), progress=False)  # A: seq 1..6
    Api(a).call("record_tool_call", tool="after")  # seq 7
    with db.connect() as conn:
        cp = conn.execute("select max(checkpoint_id) as id from scsql.checkpoints").fetchone()["id"]
    tamper(db, f"delete from scsql.outcomes where chain_id = {ca} and seq = 6")
    assert verifier.breaks(db) == [(ca, 7, "seq-gap")]
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 7, "seq-gap")]
    tamper(db, f"delete from scsql.tool_calls where chain_id = {ca} and seq = 7")
    assert verifier.breaks(db) == [(ca, 6, "checkpoint-mismatch")]
    assert verifier.breaks(db, from_checkpoint=cp) == [(ca, 6, "checkpoint-mismatch")]


def _auditor_key(db):
    from scsql.core import keys

    key = keys.generate()
    with db.connect() as conn:
        conn.execute("select scsql.register_auditor_key(%s)", (keys.public_bytes(key),))
        conn.commit()
    return key


def test_checkpoint_verifies_before_signing_and_signs_a_broken_chain_only_up_to_its_break(trail):
    from scsql.audit.checkpoints import run_checkpoint

    db, a, b, ca, cb = trail
    key = _auditor_key(db)
    at = dt.datetime.now(dt.UTC)
    data = payload("scsql.tool_calls", a.name, 1, at, [f.kind for f in TOOL_CALL_FIELDS],
                   [{"tool": "forged", "status": "ok", "origin": "model", "input_tokens": 0,
                     "output_tokens": 0}.get(f.name) for f in TOOL_CALL_FIELDS])
    with a.transaction() as conn:  # a row of A's chain signed with B's key
        conn.execute("select * from scsql.record_tool_call(p_tool => 'forged', p_at => %s, p_key_id => 1, "
                     "p_signature => %s)", (at, b.key.sign(data)))
    run = run_checkpoint(db.admin, key, progress=False)
    assert [(b.chain_id, b.seq, b.kind, signed) for _q, b, signed in run.quarantined] == [(ca, 7, "signature", 6)]
    with db.connect() as conn:
        heads = conn.execute("select chain_id, seq from scsql.checkpoint_heads order by chain_id").fetchall()
    assert [(h["chain_id"], h["seq"]) for h in heads] == [(ca, 6), (cb, 3)]  # not the row that fails


def test_signatures_are_checked_after_the_newest_verified_checkpoint_or_all_with_full(trail):
    """After a verified (format 2) checkpoint, verification recomputes every
    hash but checks only newer signatures; --full checks them all. Replacing
    A's public key shows the difference; an old-format checkpoint, which only
    vouches for the heads, shortens nothing."""
    from scsql.audit.checkpoints import record_checkpoints
    from scsql.audit.encoding import checkpoint_payload

    db, a, b, ca, cb = trail
    assert verify(db.admin, workers=1, progress=False).signatures == 9
    key = _auditor_key(db)
    record_checkpoints(db.admin, key, progress=False)  # A: seq 1..6, B: seq 1..3
    Api(a).call("record_tool_call", tool="after")  # A: seq 7
    report = verify(db.admin, workers=1, progress=False)
    assert report.ok and (report.rows, report.signatures, report.full) == (10, 1, False)
    full = verify(db.admin, workers=2, progress=False, full=True)
    assert full.ok and (full.rows, full.signatures, full.full) == (10, 10, True)
    tamper(db, f"update scsql.agent_keys set public_key = '\\x{public_bytes(generate()).hex()}' "
                f"where agent_id = (select agent_id from scsql.agents where name = '{a.name}')")
    brk = verify(db.admin, workers=1, progress=False).breaks
    assert [(x.chain_id, x.seq, x.kind) for x in brk] == [(ca, 7, "signature")]  # only the row after the checkpoint
    brk = verify(db.admin, workers=1, progress=False, full=True).breaks
    assert [(x.chain_id, x.seq, x.kind) for x in brk] == [(ca, 1, "signature")]
    # Hashes are still checked below the checkpoint.
    tamper(db, f"update scsql.tool_calls set tool = 'x' where chain_id = {cb} and seq = 2")
    brk = verify(db.admin, workers=1, progress=False).breaks
    assert (cb, 2, "hash-mismatch") in [(x.chain_id, x.seq, x.kind) for x in brk]
    # A format-1 checkpoint (heads only) does not stand for verified signatures.
    with db.connect() as conn:
        conn.execute("delete from scsql.checkpoint_segments")
        conn.execute("delete from scsql.checkpoint_heads")
        conn.execute("delete from scsql.checkpoints")
        conn.commit()  # Citus: no other role may read placements this role changed in the same transaction
        conn.execute("set role scsql_auditor")
        heads = conn.execute("select chain_id, head_seq, head_hash from scsql.checkpoint_heads_now() "
                             "where chain_id = %s", (ca,)).fetchall()
        key_id = conn.execute("select max(key_id) as k from scsql.auditor_keys()").fetchone()["k"]
        project = conn.execute("select project_id from scsql.chains where chain_id = %s", (ca,)).fetchone()["project_id"]
        at = dt.datetime.now(dt.UTC)
        h = [(r["chain_id"], r["head_seq"], bytes(r["head_hash"])) for r in heads]
        conn.execute("select scsql.record_checkpoint(%s, %s, %s, %s, %s)",
                     (project, at, key_id, key.sign(checkpoint_payload(project, at, key_id, h, version=1)),
                      Jsonb([{"chain_id": c, "seq": seq, "row_hash": row_hash.hex()} for c, seq, row_hash in h])))
        conn.commit()
    report = verify(db.admin, workers=1, progress=False)
    assert report.checkpoints == 1
    assert (ca, 1, "signature") in [(x.chain_id, x.seq, x.kind) for x in report.breaks]  # checked again


@sql_cannot("it verifies the chains scsql.chains (or a checkpoint) names; rows naming a chain with no head row "
            "are in none of them")
def test_processes_split_chains_in_ranges_that_also_read_rows_of_unknown_chains(trail, verifier):
    db, a, b, ca, cb = trail
    c = db.agent("c", db.project())
    Api(c).call("record_tool_call", tool="c1")
    for workers in (1, 2, 3):
        report = verifier.run(db, workers=workers)
        assert report.ok and (report.rows, report.chains) == (10, 3), (workers, report.breaks)
    # A row copied into a chain that has no head row, beyond every real chain id.
    tamper(db, f"insert into scsql.tool_calls select project_id, tool_call_id + 1000, at, session_id, tool, model, "
                f"origin, input_tokens, output_tokens, latency_ms, status, input_preview, output_preview, cost_usd, "
                f"author_id, key_id, 9223372036854775807, seq, prev_hash, row_hash, signature "
                f"from scsql.tool_calls where chain_id = {cb} and seq = 1")
    for workers in (1, 2, 3):
        brk = verifier.breaks(db, workers=workers)
        assert [(c, kind) for c, _seq, kind in brk] == [(9223372036854775807, "chain-unknown")], workers


def test_verify_command_says_which_signatures_it_checked(trail, tmp_path, monkeypatch, capsys):
    db, a, b, ca, cb = trail
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    monkeypatch.setenv("SCSQL_KEYSTORE", str(tmp_path / "keys"))
    assert cli.main(["checkpoint", "--init"]) == 0 and cli.main(["checkpoint"]) == 0
    Api(b).call("record_tool_call", tool="after")
    capsys.readouterr()
    assert cli.main(["verify"]) == 0
    assert "10 rows in 2 chains (signatures of the 1 rows after the newest verified checkpoints" in capsys.readouterr().out
    assert cli.main(["verify", "--full", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["ok"], out["rows"], out["signatures"], out["full"]) == (True, 10, 10, True)


def test_bench_chain_runs_and_prints_full_and_incremental_verification(scsql_db, server):
    """The benchmark works end to end (its numbers are not judged here): the
    full verification rate is the headline, the incremental one is apart."""
    import subprocess
    import sys

    env = mcp_env(scsql_db)
    env["SCSQL_DSN"] = server.conninfo("postgres")
    proc = subprocess.run([sys.executable, "-m", "scsql", "bench", "chain", "--agents", "2", "--seconds", "0.3",
                           "--rounds", "1", "--verify-rows", "400", "--workers", "2", "--breakdown"],
                          env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for label in ("plain inserts", "chained, signed", "through the registry", "verify (full)", "incremental verify"):
        assert label in out, out
    full = next(ln for ln in out.splitlines() if ln.startswith("verify (full)")).split()
    assert int(full[2]) >= 400 and "every hash and signature, ok" in out
    assert "load average" in out
    # The breakdown runs in a scratch database of its own: every variant wrote rows.
    breakdown = out.split("breakdown", 1)[1].splitlines()[1:]
    assert len(breakdown) == 6 and breakdown[0].split()[0] == "plain", out
    assert all(float(ln.split()[-3].replace(",", "")) > 0 for ln in breakdown), out
    scratch = sorted(set(re.findall(r"scratch database (scsql_bench_\w+)", proc.stderr)))
    assert len(scratch) == 2, proc.stderr
    with psycopg.connect(server.conninfo("postgres")) as conn:  # both dropped
        assert not conn.execute("select from pg_database where datname = any(%s)", (scratch,)).fetchall()


def _acknowledged_quarantine(db, chain: int, seq: int, kind: str) -> None:
    """A quarantine of CHAIN from SEQ, already acknowledged, written straight into the table
    (as scsql checkpoint and an administrator would, or as a superuser could forge it)."""
    with db.connect() as conn:
        conn.execute("insert into scsql.chain_quarantines (project_id, chain_id, from_seq, anchored_seq, kind, detail, "
                     "acknowledged_at, acknowledged_by, note) select project_id, chain_id, %s, %s, %s, 'staged', now(), "
                     "'admin', 'dealt with' from scsql.chains where chain_id = %s", (seq, seq - 1, kind, chain))


def test_an_acknowledgement_excuses_only_an_agents_kind_of_break_at_its_own_row(trail):
    """The row an acknowledged quarantine names is excused only for a break an agent can cause
    through the API (its signature here), and the chain is verified past it: an edit of a later
    row is still found. An edited row stays a hash-mismatch whatever acknowledgement names it."""
    db, a, b, ca, cb = trail
    at = dt.datetime.now(dt.UTC)
    values = {"tool": "forged", "status": "ok", "origin": "model", "input_tokens": 0, "output_tokens": 0}
    data = payload("scsql.tool_calls", a.name, 1, at, [f.kind for f in TOOL_CALL_FIELDS],
                   [values.get(f.name) for f in TOOL_CALL_FIELDS])
    with a.transaction() as conn:  # A stores a row signed with B's key: seq 7 of A's chain
        bad = conn.execute("select * from scsql.record_tool_call(p_tool => 'forged', p_at => %s, p_key_id => 1, "
                           "p_signature => %s)", (at, b.key.sign(data))).fetchone()["seq"]
    Api(a).call("record_tool_call", tool="after")  # seq 8, signed
    _acknowledged_quarantine(db, ca, bad, "signature")
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert report.ok and [(x.chain_id, x.seq, x.kind) for x in report.excused] == [(ca, bad, "signature")]
    assert "quarantine" in report.excused[0].detail and "dealt with" in report.excused[0].detail

    tamper(db, f"update scsql.tool_calls set tool = 'edited' where chain_id = {ca} and seq = {bad + 1}",
           f"update scsql.tool_calls set output_tokens = 1 where chain_id = {cb} and seq = 2")
    _acknowledged_quarantine(db, cb, 2, "hash-mismatch")
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert [(x.chain_id, x.seq, x.kind) for x in report.breaks] == [(ca, bad + 1, "hash-mismatch"),
                                                                    (cb, 2, "hash-mismatch")]
    assert [(x.chain_id, x.seq) for x in report.excused] == [(ca, bad)]
