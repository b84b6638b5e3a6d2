"""What verification trusts, attacked by a DBA (superuser, user triggers off):
the horizon, whole chains, the project and author of rows, the clock
tolerance, and the rows retention keeps around those it retires. Each attack
is found by scsql verify and by scsql.verify_chain, at the right chain."""

from __future__ import annotations

import datetime as dt
import json

import psycopg
import pytest
from psycopg.types.json import Jsonb

from scsql import cli
from scsql.core import keys
from scsql.audit.checkpoints import export_checkpoints, record_checkpoints
from scsql.api import Api
from scsql.audit.encoding import CheckpointHead, checkpoint_payload
from scsql.audit.verify import verify

from ..helpers import (  # noqa: F401 - trail is a fixture
    VerifierCannot,
    auditor_key,
    backdate_keys,
    moved,
    old_day,
    partition_of,
    sql_cannot,
    tamper,
    trail,
    triggers_off,
    write_at,
)


READS_NO_FILE = "it reads the checkpoints in the database, not an exported file"


def _breaks(db, **kw) -> list[tuple[int, int, str]]:
    return [(b.chain_id, b.seq, b.kind) for b in verify(db.admin, workers=1, progress=False, **kw).breaks]


def _checkpoint(db, tmp_path):
    """An auditor key, a checkpoint of every chain, and its export (kept outside the database)."""
    key = auditor_key(db)
    record_checkpoints(db.admin, key, progress=False)
    export = tmp_path / "outside" / "checkpoints.jsonl"
    export_checkpoints(db.admin, export)
    return key, export


# -- the horizon -------------------------------------------------------------------


def test_moving_the_horizon_to_the_head_is_found(trail, verifier):
    db, a, b, ca, cb = trail
    tamper(db, f"update scsql.tool_calls set output_tokens = 1 where chain_id = {ca} and seq = 3",
           f"update scsql.chains set horizon_seq = head_seq, horizon_hash = head_hash where chain_id = {ca}")
    assert verifier.breaks(db) == [(ca, 6, "horizon-unanchored")]


def _breaks_below_a_checkpointed_moved_horizon(trail, verifier, tmp_path, edit: str):
    """Checkpoints and exports every chain, then, as a DBA, makes EDIT on chain A ({chain} stands
    for its id) and moves its horizon to its head. Returns the breaks found without the export
    and with it."""
    db, _a, _b, ca, _cb = trail
    _key, export = _checkpoint(db, tmp_path)
    tamper(db, edit.format(chain=ca),
           f"update scsql.chains set horizon_seq = head_seq, horizon_hash = head_hash where chain_id = {ca}")
    return verifier.breaks(db), verifier.breaks(db, **verifier.exported(export))


def test_a_horizon_at_a_checkpointed_head_still_leaves_every_row_checked(trail, verifier, tmp_path):
    """Anchoring the horizon at a signed head is not enough to hide an edit:
    every row still present is verified, whatever the horizon says."""
    ca = trail[3]
    found = _breaks_below_a_checkpointed_moved_horizon(
        trail, verifier, tmp_path, "update scsql.tool_calls set output_tokens = 1 where chain_id = {chain} and seq = 3")
    assert found == ([(ca, 3, "hash-mismatch")], [(ca, 3, "hash-mismatch")])


def test_a_row_removed_below_a_moved_horizon_is_a_gap(trail, verifier, tmp_path):
    ca = trail[3]
    found = _breaks_below_a_checkpointed_moved_horizon(
        trail, verifier, tmp_path, "delete from scsql.tool_calls where chain_id = {chain} and seq = 2")
    assert found == ([(ca, 3, "seq-gap")], [(ca, 3, "seq-gap")])


# -- whole chains, and breaks in checkpoint data under the right chain -------------------


def test_a_deleted_chain_is_missing_against_checkpoints(trail, verifier, tmp_path):
    db, a, b, ca, cb = trail
    _key, export = _checkpoint(db, tmp_path)
    tamper(db, f"delete from scsql.tool_calls where chain_id = {cb}", f"delete from scsql.chains where chain_id = {cb}")
    assert verifier.breaks(db, **verifier.exported(export)) == [(cb, 3, "chain-missing")]
    assert verifier.breaks(db) == [(cb, 3, "chain-missing")]  # the database's own checkpoint names it too
    # Without the database's checkpoints, the export alone still knows the chain.
    tamper(db, "delete from scsql.checkpoint_segments", "delete from scsql.checkpoint_heads",
           "delete from scsql.checkpoints")
    assert verifier.breaks(db) == []
    if verifier.reads_files:
        assert verifier.breaks(db, checkpoint_files=[export]) == [(cb, 3, "chain-missing")]


@sql_cannot("it checks no auditor signature: the checkpoint rows left in the database count for it as they are")
def test_a_break_in_checkpoint_data_names_the_chain_it_concerns(trail, verifier, tmp_path):
    db, a, b, ca, cb = trail
    assert ca < cb
    _key, export = _checkpoint(db, tmp_path)
    tamper(db, f"delete from scsql.checkpoint_heads where chain_id = {cb}")
    assert verifier.breaks(db) == [(cb, 0, "checkpoint-signature")]
    assert [(c, k) for c, _s, k in verifier.breaks(db, checkpoint_files=[export])] == [(cb, "checkpoint-signature")]


# -- project and author -------------------------------------------------------------


def test_a_row_moved_to_another_project_is_found(trail, verifier, tmp_path):
    db, a, b, ca, cb = trail
    other = db.project()
    with db.connect() as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (other,)).fetchone()["project_id"]
    tamper(db, *moved("scsql.outcomes", f"chain_id = {ca}", pid))
    assert verifier.breaks(db) == [(ca, 6, "wrong-project")]


def test_a_row_given_another_author_fails_the_sql_verification(trail, verifier):
    db, a, b, ca, cb = trail
    with db.connect() as conn:
        b_id = conn.execute("select agent_id from scsql.agents where name = %s", (b.name,)).fetchone()["agent_id"]
    tamper(db, f"update scsql.tool_calls set author_id = {b_id} where chain_id = {ca} and seq = 2")
    assert verifier.breaks(db) == [(ca, 2, "wrong-author")]


def test_a_chain_moved_to_another_project_with_its_agent_is_found_against_checkpoints(trail, verifier, tmp_path):
    """Rows, chain and agent moved together stay consistent among themselves;
    the checkpoints the auditor signed still say where the chain was."""
    db, a, b, ca, cb = trail
    _key, export = _checkpoint(db, tmp_path)
    other = db.project()
    with db.connect() as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (other,)).fetchone()["project_id"]
    tamper(db, f"update scsql.agents set project_id = {pid} where name = '{a.name}'",
           *moved("scsql.chains", f"chain_id = {ca}", pid), *moved("scsql.tool_calls", f"chain_id = {ca}", pid),
           *moved("scsql.outcomes", f"chain_id = {ca}", pid))
    assert verifier.breaks(db) == [(ca, 0, "chain-identity")]
    tamper(db, "delete from scsql.checkpoint_segments", "delete from scsql.checkpoint_heads",
           "delete from scsql.checkpoints")
    if verifier.reads_files:
        assert verifier.breaks(db, checkpoint_files=[export]) == [(ca, 0, "chain-identity")]
    # The chain alone moved (its agent did not): found without any checkpoint.
    tamper(db, f"update scsql.agents set project_id = (select project_id from scsql.agents where name = '{b.name}') "
                f"where name = '{a.name}'")
    assert verifier.breaks(db) == [(ca, 0, "chain-identity")]


@sql_cannot(READS_NO_FILE, raises=VerifierCannot)
def test_exported_checkpoints_name_each_chains_agent_and_old_lines_stay_readable(trail, verifier, tmp_path):
    db, a, b, ca, cb = trail
    _key, export = _checkpoint(db, tmp_path)
    [line] = [json.loads(x) for x in export.read_text().splitlines()]
    with db.connect() as conn:
        agents = {r["chain_id"]: r["agent_id"] for r in conn.execute("select chain_id, agent_id from scsql.chains")}
    assert {h["chain_id"]: h["agent_id"] for h in line["heads"]} == agents
    assert all(h["segments"][-1]["last_seq"] == h["seq"] and h["from_seq"] == 0 for h in line["heads"])
    # A format-2 line, as earlier versions exported it, is still verified and used.
    at = dt.datetime.fromisoformat(line["at"])
    heads = [(h["chain_id"], h["seq"], bytes.fromhex(h["row_hash"])) for h in line["heads"]]
    old = dict(line, checkpoint_id=999, heads=[{"chain_id": c, "seq": s, "row_hash": h.hex()} for c, s, h in heads],
               signature=_key.sign(checkpoint_payload(line["project_id"], at, line["key_id"], heads, version=2)).hex())
    old_file = tmp_path / "old.jsonl"
    old_file.write_text(json.dumps(old) + "\n")
    assert verifier.breaks(db, checkpoint_files=[old_file]) == []
    tamper(db, f"delete from scsql.outcomes where chain_id = {ca}",
           f"update scsql.chains c set head_seq = 5, head_hash = t.row_hash from scsql.tool_calls t "
           f"where c.chain_id = {ca} and t.project_id = c.project_id and t.chain_id = {ca} and t.seq = 5",
           "delete from scsql.checkpoint_segments", "delete from scsql.checkpoint_heads",
           "delete from scsql.checkpoints")
    assert verifier.breaks(db, checkpoint_files=[old_file]) == [(ca, 6, "checkpoint-mismatch")]


# -- the clock tolerance --------------------------------------------------------------


def test_an_agent_cannot_widen_the_clock_tolerance(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("clock", project)
    Api(a).call("record_tool_call", tool="now")
    backdate_keys(scsql_db)  # only the clock stands between a backdated row and the chain
    backdated = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    with pytest.raises(psycopg.Error) as err, psycopg.connect(scsql_db.login(a.name)) as conn:
        conn.execute("set scsql.clock_skew = '100 years'")
        from scsql.audit.telemetry import TOOL_CALL_FIELDS
        from scsql.audit.signing import sign_row

        args = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "backdated"}, at=backdated)
        conn.execute("select * from scsql.record_tool_call(p_tool => 'backdated', p_at => %s, p_key_id => %s, "
                     "p_signature => %s)", (backdated, args["key_id"], args["signature"]))
    assert err.value.sqlstate == "SC103"
    with pytest.raises(psycopg.Error) as err, psycopg.connect(scsql_db.login(a.name)) as conn:
        conn.execute("select scsql.set_clock_skew('100 years')")
    assert err.value.sqlstate == "42501"
    with scsql_db.connect() as conn:  # administrators set it, within bounds
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select scsql.set_clock_skew('100 years')")
        assert err.value.sqlstate == "SC010"
        conn.rollback()
        assert conn.execute("select scsql.set_clock_skew('3 days') as s").fetchone()["s"] == dt.timedelta(days=3)
        conn.commit()
    from scsql.audit.telemetry import TOOL_CALL_FIELDS
    from scsql.audit.signing import sign_row

    args = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": "backdated"}, at=backdated)
    with a.transaction() as conn:
        conn.execute("select * from scsql.record_tool_call(p_tool => 'backdated', p_at => %s, p_key_id => %s, "
                     "p_signature => %s)", (backdated, args["key_id"], args["signature"]))


# -- retention: every row still present is verified -----------------------------------------


@pytest.fixture
def retired(scsql_db, tmp_path):
    """Agent A's chain: a session (seq 1, never retired), two tool calls three
    days old (seq 2, 3), a tool call and an outcome of today (seq 4, 5), all
    checkpointed and exported, then a tool call after the checkpoint (seq 6);
    the old partition is then retired."""
    db = scsql_db
    three_days_ago = old_day(db)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    project = db.project()
    a = db.agent("ret", project)
    backdate_keys(db)
    api = Api(a)
    api.call("start_session", client="test", title="kept forever")
    write_at(a, three_days_ago, "old-1")
    write_at(a, three_days_ago, "old-2")
    api.call("record_tool_call", tool="new-1")
    api.call("record_outcome", kind="accepted", summary="kept", task_ref="T-1")
    old = partition_of(db, "old-1")
    with db.connect() as conn:
        with pytest.raises(psycopg.Error) as err:  # no checkpoint covers the old rows yet
            conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
        assert err.value.sqlstate == "SC120"
    _key, export = _checkpoint(db, tmp_path)
    api.call("record_tool_call", tool="after")
    with db.connect() as conn:
        chain = conn.execute("select chain_id from scsql.chains").fetchone()["chain_id"]
    with db.connect() as conn:  # Citus: the drop is DDL, which may not follow a read of every shard
        conn.execute("select scsql._retire_partition(%s::regclass)", (old,))
    return db, a, chain, export


def test_rows_kept_around_retired_ones_are_verified(retired, verifier):
    db, a, chain, export = retired
    report = verifier.run(db, **verifier.exported(export))
    assert report.ok and report.rows == 4  # seq 1, 4, 5, 6: every row still present
    for table, seq in (("sessions", 1), ("tool_calls", 4), ("outcomes", 5)):
        column = {"sessions": "title", "tool_calls": "tool", "outcomes": "summary"}[table]
        tamper(db, f"update scsql.{table} set {column} = {column} || ' (edited)' where chain_id = {chain} and seq = {seq}")
        # an outcome's summary is hashed through its digest: a changed text no longer matches it
        kind = "content-mismatch" if table == "outcomes" else "hash-mismatch"
        assert verifier.breaks(db, **verifier.exported(export)) == [(chain, seq, kind)], table
        tamper(db, f"update scsql.{table} set {column} = replace({column}, ' (edited)', '') "
                    f"where chain_id = {chain} and seq = {seq}")
    assert verifier.breaks(db) == []


def test_only_rows_of_retired_partitions_may_be_missing(retired, verifier):
    db, a, chain, export = retired
    # The session (its table is never retired) and a row of today cannot vanish like retired rows.
    tamper(db, f"delete from scsql.sessions where chain_id = {chain} and seq = 1")
    assert verifier.breaks(db, **verifier.exported(export)) == [(chain, 4, "seq-gap")]


def test_only_todays_row_removed_is_a_gap(retired, verifier):
    db, a, chain, export = retired
    tamper(db, f"delete from scsql.tool_calls where chain_id = {chain} and seq = 4")
    assert verifier.breaks(db, **verifier.exported(export)) == [(chain, 5, "seq-gap")]


def test_a_row_after_retired_ones_links_to_the_signed_hash(retired, verifier):
    """The row after the retired run must name, as its prev_hash, the hash the
    checkpoint signed for the last retired row."""
    db, a, chain, export = retired
    tamper(db, f"update scsql.tool_calls set prev_hash = sha256(prev_hash) where chain_id = {chain} and seq = 4")
    assert verifier.breaks(db, **verifier.exported(export)) == [(chain, 4, "prev-mismatch")]


def test_checkpoint_after_retention_covers_only_new_rows_and_cli_verifies(retired, tmp_path, monkeypatch, capsys):
    db, a, chain, export = retired
    key = auditor_key(db)
    record_checkpoints(db.admin, key, progress=False)
    assert export_checkpoints(db.admin, export) == 1
    newest = json.loads(export.read_text().splitlines()[-1])
    assert [(h["from_seq"], h["seq"], [g["last_seq"] for g in h["segments"]]) for h in newest["heads"]] == [(5, 6, [6])]
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    capsys.readouterr()
    assert cli.main(["verify", "--checkpoints", str(export)]) == 0
    assert "4 rows in 1 chains" in capsys.readouterr().out


def test_checkpoints_that_sign_different_hashes_for_a_retired_row_are_a_mismatch(retired, verifier, tmp_path):
    """The row after a retired run links to the hash the checkpoints signed for
    its last row; when two of them sign different hashes, neither is picked."""
    db, a, chain, export = retired
    # In the database, a second segment end under a copied signature that does not cover it.
    tamper(db, "insert into scsql.checkpoints (project_id, at, key_id, signature) "
                "select project_id, at, key_id, signature from scsql.checkpoints",
                "insert into scsql.checkpoint_segments (project_id, checkpoint_id, chain_id, first_seq, last_seq, row_hash, part) "
                "select project_id, (select max(checkpoint_id) from scsql.checkpoints), chain_id, first_seq, last_seq, "
                f"sha256(row_hash), part from scsql.checkpoint_segments where chain_id = {chain} and last_seq = 3")
    # scsql.verify_chain reads checkpoints without their signatures (no Ed25519 in PostgreSQL) and takes the
    # second end at its word; scsql verify counts only checkpoints whose auditor signature verifies.
    assert verifier.breaks(db) == {"sql": [(chain, 4, "checkpoint-mismatch")],
                                   "python": [(chain, 0, "checkpoint-signature")]}[verifier.name]
    tamper(db, "delete from scsql.checkpoint_segments where checkpoint_id = (select max(checkpoint_id) from scsql.checkpoints)",
           "delete from scsql.checkpoints where checkpoint_id = (select max(checkpoint_id) from scsql.checkpoints)")
    assert verifier.breaks(db, **verifier.exported(export)) == []
    # Validly signed (scsql verify checks the auditor's signatures): an exported line that disagrees.
    key = auditor_key(db)
    with db.connect() as conn:
        key_id = conn.execute("select max(key_id) as k from scsql.auditor_keys").fetchone()["k"]
    [line] = [json.loads(x) for x in export.read_text().splitlines()]
    for h in line["heads"]:
        for g in h["segments"]:
            if g["last_seq"] == 3:
                g["row_hash"] = "00" * 32
    heads = [CheckpointHead(h["chain_id"], h["seq"], bytes.fromhex(h["row_hash"]), h["agent_id"], h["from_seq"],
                            tuple((g["last_seq"], bytes.fromhex(g["row_hash"]), g["part"]) for g in h["segments"]))
             for h in line["heads"]]
    at = dt.datetime.fromisoformat(line["at"])
    forged = dict(line, checkpoint_id=999, key_id=key_id, public_key=keys.public_bytes(key).hex(),
                  signature=key.sign(checkpoint_payload(line["project_id"], at, key_id, heads)).hex())
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(forged) + "\n")
    if verifier.reads_files:
        assert verifier.breaks(db, checkpoint_files=[export, other]) == [(chain, 4, "checkpoint-mismatch")]
    # The same checkpoint, validly signed, in the database: both verifiers refuse to pick either hash.
    with db.connect() as conn:
        triggers_off(conn)
        cp = conn.execute("insert into scsql.checkpoints (project_id, at, key_id, signature) values (%s, %s, %s, %s) "
                          "returning checkpoint_id", (line["project_id"], at, key_id,
                                                      bytes.fromhex(forged["signature"]))).fetchone()["checkpoint_id"]
        for h in heads:
            conn.execute("insert into scsql.checkpoint_heads (project_id, checkpoint_id, chain_id, seq, row_hash, "
                         "agent_id, from_seq) values (%s, %s, %s, %s, %s, %s, %s)",
                         (line["project_id"], cp, h.chain_id, h.seq, h.row_hash, h.agent_id, h.from_seq))
            first = h.from_seq + 1
            for last, row_hash, part in h.segments:
                conn.execute("insert into scsql.checkpoint_segments (project_id, checkpoint_id, chain_id, first_seq, "
                             "last_seq, row_hash, part) values (%s, %s, %s, %s, %s, %s, %s)",
                             (line["project_id"], cp, h.chain_id, first, last, row_hash, part))
                first = last + 1
    assert verifier.breaks(db) == [(chain, 4, "checkpoint-mismatch")]


def test_verification_can_start_from_a_checkpoint_whose_row_retention_retired(scsql_db, verifier):
    """The row a starting checkpoint names may be missing when retention took it."""
    db = scsql_db
    day = old_day(db)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    a = db.agent("start", db.project())
    backdate_keys(db)
    Api(a).call("start_session", client="test", title="kept forever")  # seq 1
    write_at(a, day, "old-2")
    write_at(a, day, "old-3")
    key = auditor_key(db)
    record_checkpoints(db.admin, key, progress=False)  # its head: seq 3, three days old
    with db.connect() as conn:
        cp = conn.execute("select max(checkpoint_id) as id from scsql.checkpoints").fetchone()["id"]
    Api(a).call("record_tool_call", tool="new-4")
    record_checkpoints(db.admin, key, progress=False)
    with db.connect() as conn:
        chain = conn.execute("select chain_id from scsql.chains").fetchone()["chain_id"]
    with db.connect() as conn:  # Citus: the drop is DDL, which may not follow a read of every shard
        conn.execute("select scsql._retire_partition(%s::regclass)", (partition_of(db, "old-2"),))
    assert verifier.breaks(db) == []
    assert verifier.breaks(db, from_checkpoint=cp) == []
    tamper(db, f"update scsql.tool_calls set prev_hash = sha256(prev_hash) where chain_id = {chain} and seq = 4")
    assert verifier.breaks(db, from_checkpoint=cp) == [(chain, 4, "prev-mismatch")]


def test_checkpoint_after_earlier_retention_dropped_the_newest_rows_of_an_idle_chain(scsql_db, verifier):
    """Upgrade: retention of earlier versions dropped the partition holding
    the newest rows of a chain that wrote nothing since, and moved its horizon
    to its head (a format-2 checkpoint's). scsql checkpoint signs the chain
    from its head on, verification stays clean, and the chain carries on."""
    db = scsql_db
    day = old_day(db)
    a = db.agent("idle", db.project())
    backdate_keys(db)
    Api(a).call("start_session", client="test", title="kept forever")  # seq 1
    write_at(a, day, "old-2")
    write_at(a, day, "old-3")  # the head
    key = auditor_key(db)
    with db.connect() as conn:  # a format-2 checkpoint, as earlier versions signed it
        c = conn.execute("select chain_id, project_id, head_seq, head_hash from scsql.chains").fetchone()
        key_id = conn.execute("select max(key_id) as k from scsql.auditor_keys").fetchone()["k"]
        at = dt.datetime.now(dt.UTC)
        heads = [(c["chain_id"], c["head_seq"], c["head_hash"])]
        cp = conn.execute("select scsql.record_checkpoint(%s::bigint, %s::timestamptz, %s::integer, %s::bytea, "
                          "%s::jsonb) as id",
                          (c["project_id"], at, key_id,
                           key.sign(checkpoint_payload(c["project_id"], at, key_id, heads, version=2)),
                           Jsonb([{"chain_id": c["chain_id"], "seq": c["head_seq"],
                                   "row_hash": bytes(c["head_hash"]).hex()}]))).fetchone()["id"]
    chain = c["chain_id"]
    # Retention of earlier versions: the horizon moved to that checkpoint's head, the partition dropped.
    tamper(db, f"update scsql.chains set horizon_seq = head_seq, horizon_hash = head_hash, horizon_checkpoint = {cp} "
                f"where chain_id = {chain}",
            f"drop table {partition_of(db, 'old-2')}")
    assert verifier.breaks(db) == []
    record_checkpoints(db.admin, key, progress=False)
    with db.connect() as conn:
        head = conn.execute("select seq, from_seq from scsql.checkpoint_heads where chain_id = %s "
                            "order by checkpoint_id desc limit 1", (chain,)).fetchone()
    assert (head["seq"], head["from_seq"]) == (3, 3)  # nothing left to describe up to the head
    assert verifier.breaks(db) == []
    Api(a).call("record_tool_call", tool="new-4")  # the chain carries on
    record_checkpoints(db.admin, key, progress=False)
    report = verifier.run(db)
    assert report.ok and report.rows == 2


# -- a signed segment is kept whole: its rows cannot be deleted by moving the others ------------


@pytest.fixture
def segment(scsql_db, tmp_path):
    """Agent A's chain: a session (seq 1), five tool calls three days old in
    one dated partition (seq 2..6: one signed segment), a tool call of today
    (seq 7), all checkpointed and exported."""
    db = scsql_db
    day = old_day(db).replace(hour=12)
    a = db.agent("seg", db.project())
    backdate_keys(db)
    api = Api(a)
    api.call("start_session", client="test", title="kept forever")
    for i in range(2, 7):
        write_at(a, day, f"old-{i}")
    api.call("record_tool_call", tool="new-7")
    _key, export = _checkpoint(db, tmp_path)
    with db.connect() as conn:
        chain = conn.execute("select chain_id from scsql.chains").fetchone()["chain_id"]
        segments = conn.execute("select first_seq, last_seq from scsql.checkpoint_segments order by last_seq").fetchall()
    assert [(g["first_seq"], g["last_seq"]) for g in segments] == [(1, 1), (2, 6), (7, 7)]
    return db, chain, partition_of(db, "old-2"), day, export


def test_a_row_deleted_from_a_segment_moved_to_the_default_partition_is_found(segment, verifier):
    """A DBA detaches the partition of a signed segment, deletes one row and
    moves the others into the default partition: the segment's partition is
    gone, but its rows are not."""
    db, chain, old, day, export = segment
    tamper(db, f"alter table scsql.tool_calls detach partition {old}",
           f"delete from {old} where seq = 4",
           f"insert into scsql.tool_calls_default select * from {old}",
           f"drop table {old}")
    assert verifier.breaks(db, **verifier.exported(export)) == [(chain, 2, "retired-row-present")]
    assert verifier.breaks(db) == [(chain, 2, "retired-row-present")]


def test_a_row_deleted_from_a_segment_reattached_with_other_bounds_is_found(segment, verifier):
    db, chain, old, day, export = segment
    lo = dt.datetime.combine(day.date(), dt.time(), dt.UTC)
    tamper(db, f"alter table scsql.tool_calls detach partition {old}",
           f"delete from {old} where seq = 4",
           f"alter table scsql.tool_calls attach partition {old} "
           f"for values from ('{lo - dt.timedelta(hours=1)}') to ('{lo + dt.timedelta(days=1)}')")
    assert verifier.breaks(db, **verifier.exported(export)) == [(chain, 2, "retired-row-present")]


def test_missing_rows_must_end_where_the_next_row_links_to_a_signed_hash(scsql_db):
    """Rows missing inside a retired segment, with the rest of it present, end
    at no signed hash: the row after them would link to nothing checked."""
    from scsql.audit.verify import ChainFacts, _Gaps

    retired = "scsql.tool_calls@2020-01-01T00:00:00Z"
    gaps = _Gaps(ChainFacts(segments=[(2, 6, retired, b"\x06" * 32)]), set(), 0, None, {retired: None})
    assert gaps.gap(2, 6) == (None, b"\x06" * 32, False)
    assert gaps.gap(3, 4)[0][0] == "seq-gap"
    legacy = _Gaps(ChainFacts(), set(), 10, b"\x0a" * 32)  # retention of earlier versions, up to seq 10
    assert legacy.gap(3, 4) == (None, None, True) and legacy.gap(3, 10) == (None, b"\x0a" * 32, True)
    with scsql_db.connect() as conn:
        gap = "select ok from scsql._chain_gap(%s, %s, '{2}', '{6}', '{true}', 0)"
        assert conn.execute(gap, (2, 6)).fetchone()["ok"]
        assert not conn.execute(gap, (3, 4)).fetchone()["ok"]
        assert conn.execute("select ok from scsql._chain_gap(3, 4, '{}', '{}', '{}', 10)").fetchone()["ok"]


# -- record_checkpoint and set_clock_skew: bad input gets a scsql error and leaves nothing ----------


def _heads_and_segments(db, chain: int) -> dict:
    """Valid format-3 arguments of scsql.record_checkpoint for every chain of CHAIN's project, with a
    segment per row (the signature is not the database's to check: any 64 bytes do). p_heads is a
    list of heads as the function takes them, hashes in hex."""
    with db.connect() as conn:
        project_id = conn.execute("select project_id from scsql.chains where chain_id = %s", (chain,)).fetchone()["project_id"]
        heads = conn.execute("select chain_id, agent_id, head_seq, head_hash from scsql.chains "
                             "where project_id = %s order by chain_id", (project_id,)).fetchall()
        key_id = conn.execute("select max(key_id) as k from scsql.auditor_keys").fetchone()["k"]
        segs = {h["chain_id"]: [{"last_seq": seq, "row_hash": bytes(r["row_hash"]).hex(), "part": r["part"]}
                                for seq in range(1, h["head_seq"] + 1)
                                for r in [conn.execute("select * from scsql._chain_row_at(%s, %s)",
                                                       (h["chain_id"], seq)).fetchone()]]
                for h in heads}
    return {"p_project_id": project_id, "p_at": dt.datetime.now(dt.UTC), "p_key_id": key_id,
            "p_signature": b"\x01" * 64,
            "p_heads": [{"chain_id": h["chain_id"], "seq": h["head_seq"], "row_hash": bytes(h["head_hash"]).hex(),
                         "agent_id": h["agent_id"], "from_seq": 0, "segments": segs[h["chain_id"]]} for h in heads]}


_RECORD = ("select scsql.record_checkpoint(p_project_id => %(p_project_id)s::bigint, p_at => %(p_at)s::timestamptz, "
           "p_key_id => %(p_key_id)s::integer, p_signature => %(p_signature)s::bytea, p_heads => %(p_heads)s::jsonb) as id")


def test_record_checkpoint_refuses_malformed_input_with_scsql_codes(trail):
    db, a, b, ca, cb = trail
    key = auditor_key(db)
    good = _heads_and_segments(db, ca)
    heads = good["p_heads"]
    i_cb = [h["chain_id"] for h in heads].index(cb)

    def with_head(i: int, **change) -> dict:
        """GOOD with head I changed: a value None removes the key, "null" is JSON null."""
        out = [dict(h) for h in heads]
        out[i] = {k: (None if v == "null" else v) for k, v in {**out[i], **change}.items() if v is not None}
        return dict(good, p_heads=out)

    def with_segment(**change) -> dict:
        """GOOD with the first segment of chain CB changed: a value None removes the key, "null" is JSON null."""
        seg = {k: (None if v == "null" else v) for k, v in {**heads[i_cb]["segments"][0], **change}.items()
               if v is not None}
        return with_head(i_cb, segments=[seg] + heads[i_cb]["segments"][1:])

    cases = {
        "chain named twice": (dict(good, p_heads=heads + [heads[1]]), "SC010"),
        "segment named twice": (with_head(i_cb, segments=heads[i_cb]["segments"] + heads[i_cb]["segments"][:1]),
                                "SC010"),
        "segment without last_seq": (with_segment(last_seq="null"), "SC010"),
        "segment without hash": (with_segment(row_hash="null"), "SC010"),
        "segment without part": (with_segment(part="null"), "SC010"),
        "empty segment": (with_head(i_cb, segments=[{}] + heads[i_cb]["segments"][1:]), "SC010"),
        "null chain": (with_head(1, chain_id="null"), "SC010"),
        "unknown project": (dict(good, p_project_id=987654321), "SC010"),
        # The shape of the JSON itself.
        "heads not an array": (dict(good, p_heads=heads[0]), "SC010"),
        "no heads": (dict(good, p_heads=[]), "SC010"),
        "a head not an object": (dict(good, p_heads=heads + [[cb, 1]]), "SC010"),
        "an unknown key in a head": (with_head(0, signer="someone"), "SC010"),
        "an unknown key in a segment": (with_segment(extra=1), "SC010"),
        "chain_id as a string": (with_head(0, chain_id=str(heads[0]["chain_id"])), "SC010"),
        "seq a fraction": (with_head(0, seq=heads[0]["seq"] + 0.5), "SC010"),
        "seq negative": (with_head(0, seq=-1), "SC010"),
        "hash not hex": (with_head(0, row_hash="zz" * 32), "SC010"),
        "hash too short": (with_head(0, row_hash=heads[0]["row_hash"][:62]), "SC010"),
        "format 3 in one head only": (with_head(0, agent_id=None, from_seq=None, segments=None), "SC010"),
        "from_seq missing": (with_head(0, from_seq=None), "SC010"),
        "segments not an array": (with_head(i_cb, segments={"last_seq": 1}), "SC010"),
        "part not text": (with_segment(part=1), "SC010"),
        # Well formed, but not what the chain holds.
        "a hash not in the chain": (with_head(0, row_hash="00" * 32), "SC131"),
        "segments short of the head": (with_head(i_cb, segments=heads[i_cb]["segments"][:-1]), "SC131"),
    }
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        for name, (args, code) in cases.items():
            with pytest.raises(psycopg.Error) as err:
                conn.execute(_RECORD, dict(args, p_heads=Jsonb(args["p_heads"])))
            conn.rollback()
            assert err.value.sqlstate == code, (name, err.value.sqlstate, err.value.diag.message_primary)
        assert conn.execute("select count(*) as n from scsql.checkpoints").fetchone()["n"] == 0
        assert conn.execute("select count(*) as n from scsql.checkpoint_segments").fetchone()["n"] == 0
        # Well formed and signed, the same checkpoint is recorded and verifies.
        signed = [CheckpointHead(h["chain_id"], h["seq"], bytes.fromhex(h["row_hash"]), h["agent_id"], 0,
                                 tuple((g["last_seq"], bytes.fromhex(g["row_hash"]), g["part"]) for g in h["segments"]))
                  for h in heads]
        good["p_signature"] = key.sign(checkpoint_payload(good["p_project_id"], good["p_at"], good["p_key_id"], signed))
        cp = conn.execute(_RECORD, dict(good, p_heads=Jsonb(heads))).fetchone()["id"]
        # What scsql.checkpoints() returns is what record_checkpoint takes.
        [back] = conn.execute("select heads from scsql.checkpoints(%s)", (cp - 1,)).fetchall()
        assert back["heads"] == heads
        conn.commit()
    assert _breaks(db) == []


def test_set_clock_skew_restores_a_missing_settings_row(scsql_db):
    db = scsql_db
    tamper(db, "delete from scsql.chain_settings")
    with db.connect() as conn:
        assert conn.execute("select scsql.set_clock_skew('2 minutes') as s").fetchone()["s"] == dt.timedelta(minutes=2)
        conn.commit()
        assert conn.execute("select clock_skew from scsql.chain_settings").fetchone()["clock_skew"] == \
            dt.timedelta(minutes=2)
        assert conn.execute("select scsql._chain_clock_skew() as s").fetchone()["s"] == dt.timedelta(minutes=2)
