"""Attacks on the audit trail's availability and on retention's word.

An agent that appends a row with a garbage signature to its own chain (the
database cannot check Ed25519) must not stop checkpoints of every other
chain: its chain is quarantined, its verified prefix is still signed, and
retention keeps its rows after that prefix. A superuser who drops a
partition of checkpointed rows by hand must not pass for retention: only
partitions retention retired, under a retention in force and expired, may
be missing, and any other missing partition is a break that names its rows."""

from __future__ import annotations

import datetime as dt
import json
import os

import psycopg
import pytest

from scsql import cli
from scsql.audit.checkpoints import export_checkpoints, record_checkpoints
from scsql.api import Api
from scsql.audit.verify import verify

from ..helpers import (auditor_key, backdate_keys, old_day, one_server_only, partition_of, table_exists, tamper,
                      write_at)


def _breaks(db, **kw) -> list[tuple[int, int, str]]:
    return [(b.chain_id, b.seq, b.kind) for b in verify(db.admin, workers=1, progress=False, **kw).breaks]


def _chain_of(db, agent) -> int:
    with db.connect() as conn:
        return conn.execute("select c.chain_id from scsql.chains c join scsql.agents a using (agent_id) "
                            "where a.name = %s", (agent.name,)).fetchone()["chain_id"]


def _forge(db, agent, at: dt.datetime, tool: str = "forged") -> None:
    """The agent, logged in with its own role (psql would do the same), records a
    tool call whose signature is 64 random bytes: the database accepts it."""
    with psycopg.connect(db.login(agent.name)) as conn:
        key_id = conn.execute("select key_id from scsql.whoami()").fetchone()[0]
        conn.execute("select * from scsql.record_tool_call(p_tool => %s, p_at => %s, p_key_id => %s, "
                     "p_signature => %s)", (tool, at, key_id, os.urandom(64)))


def _heads(db) -> dict[int, int]:
    """chain_id -> the newest seq a checkpoint signed."""
    with db.connect() as conn:
        return {r["chain_id"]: r["seq"] for r in conn.execute(
            "select chain_id, max(seq) as seq from scsql.checkpoint_heads group by 1").fetchall()}


def _retire(db, partition: str) -> str:
    with db.connect() as conn:
        try:
            conn.execute("select scsql._retire_partition(%s::regclass)", (partition,))
        except psycopg.Error as exc:
            return exc.sqlstate
    return "dropped"


# -- (i) one forged row ---------------------------------------------------------------


def test_a_forged_row_quarantines_its_chain_and_every_other_chain_is_still_checkpointed(
        scsql_db, monkeypatch, capsys):
    db = scsql_db
    old = old_day(db)
    older = old_day(db, days=4)
    a = db.agent("forger", db.project())
    c = db.agent("bystander", db.project())  # another project
    backdate_keys(db)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    write_at(c, older, "c-old")      # C: seq 1, four days old
    Api(c).call("record_tool_call", tool="c-new")  # C: seq 2
    write_at(a, old, "a-old-1")      # A: seq 1, three days old
    write_at(a, old, "a-old-2")      # A: seq 2
    _forge(db, a, old)                # A: seq 3, in the same old partition, signed with garbage
    Api(a).call("record_tool_call", tool="a-new")  # A: seq 4, properly signed, after the forgery
    ca, cc = _chain_of(db, a), _chain_of(db, c)
    assert _breaks(db) == [(ca, 3, "signature")]

    key = auditor_key(db)
    record_checkpoints(db.admin, key, progress=False)  # earlier versions refused every chain here (SC132)
    assert _heads(db) == {ca: 2, cc: 2}  # A's verified prefix, and all of C
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        [q] = conn.execute("select * from scsql.chain_quarantines()").fetchall()
    assert (q["chain_id"], q["from_seq"], q["anchored_seq"], q["kind"]) == (ca, 3, 2, "signature")
    assert q["agent"] == a.name and q["found_by"] and q["found_at"] and q["acknowledged_at"] is None
    assert q["checkpoint_id"] is not None
    assert _chain_heads(db) == {ca: (3, True), cc: (None, None)}

    # Again: nothing new to sign for A, the same quarantine, C's new rows signed.
    from scsql.audit.checkpoints import run_checkpoint

    Api(c).call("record_tool_call", tool="c-newer")
    run = run_checkpoint(db.admin, key, progress=False)
    assert [(qid, b.chain_id, b.seq, signed) for qid, b, signed in run.quarantined] == \
        [(q["quarantine_id"], ca, 3, None)]
    assert not run.ok and _heads(db) == {ca: 2, cc: 3}
    assert len(_sql_quarantines(db)) == 1

    # Retention drops C's old partition but keeps A's: it holds A's rows after the signed prefix.
    a_old, c_old = partition_of(db, "a-old-1"), partition_of(db, "c-old")
    actions = _maintain(db)
    assert [(r["action"], r["partition"]) for r in actions] == [("dropped", c_old), ("refused", a_old)]
    assert "quarantined" in actions[1]["detail"] and f"chain {ca} from seq 3" in actions[1]["detail"]
    assert not table_exists(db, c_old) and table_exists(db, a_old)
    assert _retire(db, a_old) == "SC123"
    assert _breaks(db) == [(ca, 3, "signature")]  # C stays clean after its retirement

    _check_quarantine_reported(db, ca, a.name, monkeypatch, capsys)
    _check_acknowledged(db, a, ca, cc, q, key, a_old, capsys)


def _check_quarantine_reported(db, ca: int, agent: str, monkeypatch, capsys) -> None:
    """scsql verify and scsql status show the quarantine."""
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    capsys.readouterr()
    assert cli.main(["verify"]) == 1
    err = capsys.readouterr().err
    assert f"BROKEN chain {ca} seq 3" in err and f"QUARANTINED chain {ca} " in err and "from seq 3" in err
    assert cli.main(["verify", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [(x["chain_id"], x["from_seq"], x["kind"]) for x in out["quarantines"]] == [(ca, 3, "signature")]
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "quarantine  1 chain(s)" in out and f"chain {ca} " in out and agent in out


def _check_acknowledged(db, a, ca: int, cc: int, q: dict, key, a_old: str, capsys) -> None:
    """An administrator acknowledges it: status is quiet, verify names the chain and its excused row and exits 0
    (3 with --strict), retention still keeps it."""
    from scsql.audit.checkpoints import run_checkpoint

    with db.connect() as conn:
        with pytest.raises(psycopg.Error) as exc:
            conn.execute("select scsql.acknowledge_quarantine(%s, '')", (q["quarantine_id"],))
        assert exc.value.sqlstate == "SC010"
        conn.rollback()
        conn.execute("select scsql.acknowledge_quarantine(%s, 'agent revoked, rows exported')", (q["quarantine_id"],))
        conn.commit()
        with pytest.raises(psycopg.Error) as exc:
            conn.execute("select scsql.acknowledge_quarantine(%s, 'again')", (q["quarantine_id"],))
        assert exc.value.sqlstate == "SC133"
    with pytest.raises(psycopg.Error) as exc, psycopg.connect(db.login(a.name)) as conn:
        conn.execute("select scsql.acknowledge_quarantine(%s, 'mine')", (q["quarantine_id"],))
    assert exc.value.sqlstate == "42501"  # not the agent's to clear
    assert _chain_heads(db) == {ca: (3, False), cc: (None, None)}
    capsys.readouterr()
    assert cli.main(["status"]) == 0
    assert "quarantine  -" in capsys.readouterr().out
    assert cli.main(["verify"]) == 0  # acknowledged: its row is excused, and named
    assert "agent revoked, rows exported" in capsys.readouterr().err
    assert cli.main(["verify", "--strict"]) == 3
    assert run_checkpoint(db.admin, key, progress=False).ok  # acknowledged: the run no longer fails
    assert _retire(db, a_old) == "SC123" and table_exists(db, a_old)


def _chain_heads(db) -> dict[int, tuple]:
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        return {r["chain_id"]: (r["quarantined_from"], r["quarantine_open"])
                for r in conn.execute("select * from scsql.chain_heads()").fetchall()}


def _sql_quarantines(db) -> list[dict]:
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        return conn.execute("select * from scsql.chain_quarantines(true)").fetchall()


def _maintain(db) -> list[dict]:
    with db.connect() as conn:
        return conn.execute("select * from scsql.maintain_partitions() where action in ('dropped', 'refused')"
                            ).fetchall()


# -- (ii) a checkpointed partition dropped by hand, retention off ------------------------------


def test_a_checkpointed_partition_dropped_by_a_superuser_is_a_break_naming_its_rows(scsql_db, verifier, tmp_path):
    db = scsql_db
    a = db.agent("dropped", db.project())
    b = db.agent("middle", db.project())
    Api(a).call("start_session", client="test", title="kept")  # A: seq 1 (sessions: never partitioned)
    for i in range(37):
        Api(a).call("record_tool_call", tool=f"today-{i}")  # A: seq 2..38, today's partition, the head among them
    Api(b).call("record_tool_call", tool="b-1")   # B: seq 1, today's partition
    Api(b).call("record_outcome", kind="accepted", summary="kept", task_ref="T-1")  # B: seq 2, outcomes
    ca, cb = _chain_of(db, a), _chain_of(db, b)
    record_checkpoints(db.admin, auditor_key(db), progress=False)
    export = tmp_path / "outside" / "cp.jsonl"
    export_checkpoints(db.admin, export)
    today = partition_of(db, "today-0")
    with db.connect() as conn:
        part = conn.execute("select part from scsql._chain_partitions() where relid = %s::regclass",
                            (today,)).fetchone()["part"]
        assert conn.execute("select retention from scsql.partition_settings where parent = 'scsql.tool_calls'"
                            ).fetchone()["retention"] is None  # retention is off (the default)
    tamper(db, f"drop table {today}")  # a superuser

    for kw in ({}, verifier.exported(export)):
        report = verifier.run(db, **kw)
        assert report.breaks == [(ca, 2, "partition-dropped"), (cb, 1, "partition-dropped")]
        detail = report.findings[0].detail
        assert f"seq 2 to 38 of chain {ca}" in detail and part in detail and "no retirement record" in detail
        assert f"seq 1 to 1 of chain {cb}" in report.findings[1].detail and part in report.findings[1].detail


def _two_old_rows_and_a_new_one_checkpointed(db, name: str) -> tuple[int, str]:
    """Agent NAME writes two rows three days old and one now, and the auditor
    signs them; returns its chain and the old rows' partition."""
    old = old_day(db)
    a = db.agent(name, db.project())
    backdate_keys(db)
    write_at(a, old, "old-1")
    write_at(a, old, "old-2")
    Api(a).call("record_tool_call", tool="new-1")
    record_checkpoints(db.admin, auditor_key(db), progress=False)
    return _chain_of(db, a), partition_of(db, "old-1")


# -- (iii) real retention verifies clean -----------------------------------------------------


def test_retention_on_and_expired_retires_and_records_it_and_verification_stays_clean(scsql_db, verifier):
    db = scsql_db
    chain, partition = _two_old_rows_and_a_new_one_checkpointed(db, "kept")
    assert _retire(db, partition) == "SC124"  # retention is off: nothing may go
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '5 days')")
    assert _retire(db, partition) == "SC124"  # on, but the range has not expired under it
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', '2 days')")
    assert [r["action"] for r in _maintain(db)] == ["dropped"]
    assert not table_exists(db, partition)
    with db.connect() as conn:
        conn.execute("set role scsql_auditor")
        [r] = conn.execute("select * from scsql.partition_retirements()").fetchall()
    assert r["ok"] and r["retention"] == dt.timedelta(days=2)
    assert r["chains"] == [{"chain_id": chain, "first_seq": 1, "last_seq": 2, "rows": 2}]
    assert verifier.breaks(db) == []


# -- (iv) retention switched on afterwards does not make a manual drop retention -------------------


def test_retention_switched_on_after_a_manual_drop_does_not_make_it_look_retired(scsql_db, verifier):
    db = scsql_db
    chain, partition = _two_old_rows_and_a_new_one_checkpointed(db, "late")
    dropped_at = dt.datetime.now(dt.UTC)
    tamper(db, f"drop table {partition}")  # retention is off
    assert verifier.breaks(db) == [(chain, 1, "partition-dropped")]
    # The superuser then turns retention on, runs maintenance, and adds a record dated at the drop.
    tamper(db, "update scsql.partition_settings set retention = '2 days', updated_at = now() - interval '1 day' "
                "where parent = 'scsql.tool_calls'")
    _maintain(db)
    assert verifier.breaks(db) == [(chain, 1, "partition-dropped")]
    with db.connect() as conn:
        part = conn.execute("select part from scsql.checkpoint_segments where first_seq = 1").fetchone()["part"]
    lo = dt.datetime.fromisoformat(part.split("@")[1].replace("Z", "+00:00"))
    tamper(db, "insert into scsql.partition_retirements (parent, part, lower_bound, upper_bound, retention, "
                "retention_set_at, retired_at) values ('scsql.tool_calls', "
                f"'{part}', '{lo}', '{lo + dt.timedelta(days=1)}', '2 days', '{dropped_at - dt.timedelta(days=1)}', "
                f"'{dropped_at}')")
    report = verifier.run(db)
    assert report.breaks == [(chain, 1, "partition-dropped")]
    assert "settings log does not show a retention of 2 days" in report.findings[0].detail


# -- upgrade: partitions retention of earlier versions dropped ---------------------------------


def _backfill(db) -> None:
    """The statement of migration 0112 that records partitions earlier retention dropped, run again."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent.parent / "migrations" / "0112_quarantine_and_retirements.sql").read_text()
    start = text.index("set local timezone = 'UTC';")
    end = text.index("reset timezone;") + len("reset timezone;")
    with db.connect() as conn:
        conn.execute(text[start:end])


@one_server_only("an upgrade from versions before 0112, which no Citus install predates "
                 "(its statement joins pg_catalog, which Citus refuses)")
@pytest.mark.parametrize("retention", ["2 days", None])
def test_upgrade_records_only_partitions_retention_could_have_dropped(scsql_db, verifier, retention):
    """Earlier versions dropped checkpointed partitions without a record. The
    upgrade records those of a table whose retention is on and under which
    their range has expired, and no partition that still exists; with
    retention off, nothing is recorded and the missing rows stay a break."""
    db = scsql_db
    days = {n: old_day(db, days=n) for n in (5, 4, 3)}
    a = db.agent("upgraded", db.project())
    backdate_keys(db)
    for n, at in days.items():
        write_at(a, at, f"day-{n}")  # seq 1 (five days old), 2, 3
    Api(a).call("record_tool_call", tool="today")  # seq 4
    chain = _chain_of(db, a)
    record_checkpoints(db.admin, auditor_key(db), progress=False)
    with db.connect() as conn:
        conn.execute("select scsql.set_partition_retention('scsql.tool_calls', %s::interval)", (retention,))
        kept = conn.execute("select part from scsql._chain_partitions() where relid = %s::regclass",
                            (partition_of(db, "day-5"),)).fetchone()["part"]
    gone = [partition_of(db, "day-4"), partition_of(db, "day-3")]
    tamper(db, *[f"drop table {p}" for p in gone])  # as retention of earlier versions did
    _backfill(db)
    with db.connect() as conn:
        records = conn.execute("select part, ok from scsql.partition_retirements() order by part").fetchall()
    if retention is None:
        assert records == []
        assert verifier.breaks(db) == [(chain, 2, "partition-dropped")]
        return
    assert len(records) == 2 and all(r["ok"] for r in records) and kept not in {r["part"] for r in records}
    assert verifier.breaks(db) == []
