"""The chain: linear per agent under concurrency, signed, append-only, author
stamped from the role, and reusable by any table."""

from __future__ import annotations

import threading

import psycopg
import pytest

from scsql.core import roles
from scsql.core.errors import ScsqlError
from scsql.api import Api
from scsql.audit.verify import verify

from ..helpers import ON_CITUS, moved, sql_verify, statement_lock_waiters, tamper, wait_for


def _chain_rows(db, agent_name: str) -> list[dict]:
    with db.connect() as conn:
        return conn.execute("""
            select t.tbl, t.seq, t.prev_hash, t.row_hash, t.chain_id from (
              select 'sessions' as tbl, seq, prev_hash, row_hash, chain_id, author_id from scsql.sessions
              union all select 'tool_calls', seq, prev_hash, row_hash, chain_id, author_id from scsql.tool_calls
              union all select 'outcomes', seq, prev_hash, row_hash, chain_id, author_id from scsql.outcomes) t
            join scsql.agents a on a.agent_id = t.author_id where a.name = %s order by t.seq
        """, (agent_name,)).fetchall()


def test_one_chain_per_agent_spans_every_chained_table(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    b = scsql_db.agent("b", project)
    api_a, api_b = Api(a), Api(b)
    s = api_a.call("start_session", client="claude-code", title="fix the parser")
    t1 = api_a.call("record_tool_call", tool="Read", session_id=s["session_id"], input_tokens=10, output_tokens=300)
    api_b.call("record_tool_call", tool="Bash", status="error")
    o = api_a.call("record_outcome", kind="failed", summary="tests fail", tool_call_id=t1["tool_call_id"], signal="test")
    rows = _chain_rows(scsql_db, a.name)
    assert [r["tbl"] for r in rows] == ["sessions", "tool_calls", "outcomes"]
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert len({r["chain_id"] for r in rows}) == 1 and o["chain_id"] == rows[0]["chain_id"]
    assert bytes(rows[0]["prev_hash"]) == bytes(32)
    for prev, row in zip(rows, rows[1:]):
        assert bytes(row["prev_hash"]) == bytes(prev["row_hash"])
    b_rows = _chain_rows(scsql_db, b.name)
    assert [r["seq"] for r in b_rows] == [1] and b_rows[0]["chain_id"] != rows[0]["chain_id"]
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_auditor")
        for chain in {rows[0]["chain_id"], b_rows[0]["chain_id"]}:
            r = conn.execute("select * from scsql.verify_chain(%s)", (chain,)).fetchone()
            assert r["ok"] and r["broken_seq"] is None, r
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    # and a's two memory history rows: the failure learning added, then indexed
    assert report.rows == 4 + 2 and report.chains == 2


@pytest.mark.skipif(not ON_CITUS, reason="counts the commands Citus sends to the workers (.ci/citus.sh)")
def test_a_chain_is_verified_on_its_project_shard_once_it_is_located(scsql_db):
    """On Citus verify_chain reads every shard once, to find the projects
    that hold anything of the chain (one query the workers answer whole),
    then reads the chain there only: a few commands, however many rows the
    chain has and tables it spans (it read each table, and the checkpoints,
    from every shard). A row of the chain written into another project is
    still found, as a row of the wrong project."""
    project, other = scsql_db.project(), scsql_db.project()
    api = Api(scsql_db.agent("located", project))
    s = api.call("start_session", client="claude-code", title="verify where it is")
    for i in range(40):
        t = api.call("record_tool_call", tool="Read", session_id=s["session_id"])
        if i % 10 == 0:
            api.call("record_outcome", kind="failed", summary=f"try {i}", tool_call_id=t["tool_call_id"], signal="test")
    chain = t["chain_id"]
    with scsql_db.connect() as conn:
        shards = conn.execute("select count(*) as n from pg_dist_shard where logicalrelid = 'scsql.chains'::regclass"
                              ).fetchone()["n"]
        sent = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary)
                                if (d.message_primary or "").startswith("issuing ") else None)
        with conn.transaction():
            conn.execute("set local role scsql_auditor")
            conn.execute("set local citus.log_remote_commands = on")
            r = conn.execute("select * from scsql.verify_chain(%s)", (chain,)).fetchone()
        assert r["ok"] and r["rows_checked"] >= 45, r
    # It read the chain's row, 9 tables and the checkpoints 5 times, each on every shard: 15 times the shards.
    assert len(sent) <= shards + 12, (len(sent), shards, sent)
    # A row of the chain moved into another project (as a superuser could): found there.
    with scsql_db.connect() as conn:
        pid = conn.execute("select project_id from scsql.projects where name = %s", (other,)).fetchone()["project_id"]
        seq = conn.execute("select max(seq) as s from scsql.outcomes where chain_id = %s", (chain,)).fetchone()["s"]
    tamper(scsql_db, *moved("scsql.outcomes", f"chain_id = {chain} and seq = {seq}", pid))
    r = sql_verify(scsql_db, chain)
    assert not r["ok"] and (r["broken_seq"], r["kind"]) == (seq, "wrong-project"), r


def test_concurrent_writers_of_one_agent_never_fork_or_skip(scsql_db):
    project = scsql_db.project()
    writers, per_writer = 12, 15
    a = scsql_db.agent("busy", project, pool_size=writers)
    api = Api(a)
    api.call("record_tool_call", tool="warmup")  # the chain exists; its head row can be held
    with scsql_db.connect() as conn:
        chain_id, project_id = conn.execute("select c.chain_id, c.project_id from scsql.chains c "
                                            "join scsql.agents g using (agent_id) where g.name = %s",
                                            (a.name,)).fetchone().values()
    errors: list[Exception] = []
    barrier = threading.Barrier(writers + 1)

    def write(i: int) -> None:
        barrier.wait()
        try:
            for j in range(per_writer):
                api.call("record_tool_call", tool=f"w{i}", input_preview=str(j))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with scsql_db.connect() as holder:
        # Hold the head row so every writer queues on it, then let them race.
        # (By project too: Citus locks rows only on the one shard it routes to.)
        holder.execute("select 1 from scsql.chains where project_id = %s and chain_id = %s for update",
                       (project_id, chain_id))
        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        barrier.wait()
        waiting = _wait_for_waiters(scsql_db, holder, writers // 2)
        holder.rollback()
        for t in threads:
            t.join(120)
    assert errors == []
    assert waiting >= writers // 2  # the writers really were blocked on the head row at once
    rows = _chain_rows(scsql_db, a.name)
    assert [r["seq"] for r in rows] == list(range(1, writers * per_writer + 2))  # no gap, no fork
    for prev, row in zip(rows, rows[1:]):
        assert bytes(row["prev_hash"]) == bytes(prev["row_hash"])
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks


def _wait_for_waiters(db, holder, n: int) -> int:
    # The first writer waits on the holder's transaction, the others queue
    # behind it for the head row's tuple lock.
    def waiting() -> int:
        w = statement_lock_waiters(db, "%record_tool_call%")
        return w if w >= n else 0

    return wait_for(waiting, timeout=60, message=f"{n} writers never waited together")


def test_rows_are_append_only_even_for_the_superuser(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("ao", project)
    api = Api(a)
    api.call("record_tool_call", tool="Read")
    api.call("record_outcome", kind="accepted", summary="ok", task_ref="T-1")
    with scsql_db.connect() as conn:
        # The partition holding the row (on Citus, tableoid names a shard of it).
        leaves = [r["p"] for r in conn.execute("select relid::regclass::text as p "
                                               "from pg_partition_tree('scsql.tool_calls') where isleaf")]
        partition = next(p for p in leaves if conn.execute(f"select count(*) as n from {p}").fetchone()["n"])
        for stmt in ("update scsql.tool_calls set tool = 'x'", "delete from scsql.tool_calls",
                     "truncate scsql.tool_calls", f"truncate {partition}", f"delete from {partition}",
                     "update scsql.outcomes set classification = 'public'", "truncate scsql.sessions",
                     "insert into scsql.tool_calls select * from scsql.tool_calls on conflict do nothing"):
            with pytest.raises(psycopg.Error) as err:
                conn.execute(stmt)
            conn.rollback()
            assert err.value.sqlstate in ("SC100", "SC001"), (stmt, err.value)
        # Nobody holds UPDATE, DELETE or TRUNCATE on chained tables or their partitions.
        held = conn.execute("""
            select c.oid::regclass::text as t, r as role from pg_class c, unnest(array['scsql_owner', 'scsql_agent',
              'scsql_auditor', 'scsql_admin', 'scsql_app']) r
            where c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p')
              and pg_partition_root(c.oid)::text in (select table_name from scsql.chained_tables)
              and (has_table_privilege(r, c.oid, 'UPDATE') or has_table_privilege(r, c.oid, 'DELETE')
                   or has_table_privilege(r, c.oid, 'TRUNCATE'))""").fetchall()
    assert held == []


def _direct_insert_granted(db, writer, named, policy: str, tool: str) -> tuple[dict, dict]:
    """Grants WRITER a direct INSERT into scsql.tool_calls under policy POLICY (as an administrator
    could by mistake). Returns the agent_id, project_id and chain_id of agent NAMED, and a tool call
    of TOOL that WRITER signed as scsql's client signs it."""
    from scsql.audit.telemetry import TOOL_CALL_FIELDS
    from scsql.audit.signing import sign_row

    with db.connect() as conn:
        ids = conn.execute("select a.agent_id, a.project_id, c.chain_id from scsql.agents a "
                           "join scsql.chains c using (agent_id) where a.name = %s", (named.name,)).fetchone()
        conn.execute(f"grant insert on scsql.tool_calls to {writer.role}")
        conn.execute(f"grant usage on sequence scsql.tool_calls_id_seq to {writer.role}")
        conn.execute(f"create policy {policy} on scsql.tool_calls for insert to {writer.role} with check (true)")
        conn.commit()
    return ids, sign_row(writer, "scsql.tool_calls", TOOL_CALL_FIELDS, {"tool": tool})


def test_author_and_chain_come_from_the_role_never_from_input(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("a", project)
    b = scsql_db.agent("b", project)
    Api(b).call("record_tool_call", tool="Read")
    api_a = Api(a)
    # The API has no author or chain argument.
    for forged in ({"author_id": 1}, {"agent": b.name}, {"chain_id": 1}, {"author": b.name}):
        with pytest.raises(ScsqlError) as err:
            api_a.call("record_tool_call", tool="Read", **forged)
        assert err.value.code == "SC010"
    # Even with direct INSERT granted by mistake, the trigger holds the line.
    ids, signed = _direct_insert_granted(scsql_db, a, b, "oops", "Read")
    base = ("insert into scsql.tool_calls (tool, origin, input_tokens, output_tokens, status, at, key_id, signature{}) "
            "values (%s, 'model', 0, 0, 'ok', %s, %s, %s{})")
    args = [signed["tool"], signed["at"], signed["key_id"], signed["signature"]]
    cases = [(", author_id", ", %s", [*args, ids["agent_id"]], "SC011"),
             (", chain_id", ", %s", [*args, ids["chain_id"]], "SC104"),
             (", seq", ", %s", [*args, 7], "SC104"),
             ("", "", [*args[:3], None], "SC101")]
    for col, ph, values, code in cases:
        with psycopg.connect(scsql_db.login(a.name)) as conn:
            with pytest.raises(psycopg.Error) as err:
                conn.execute(base.format(col, ph), values)
            assert err.value.sqlstate == code, (col, err.value)
    with psycopg.connect(scsql_db.login(a.name)) as conn:  # a well-formed row is stamped with A
        conn.execute(base.format("", ""), args)
    with scsql_db.connect() as conn:
        authors = conn.execute("select a.name from scsql.tool_calls t join scsql.agents a on a.agent_id = t.author_id "
                               "order by t.tool_call_id").fetchall()
    assert [r["name"] for r in authors] == [b.name, a.name]


def test_unsigned_or_stale_key_writes_are_refused(scsql_db):
    project = scsql_db.project()
    a = scsql_db.agent("keys", project)
    with pytest.raises(ScsqlError) as err, a.transaction() as conn:
        conn.execute("select * from scsql.record_tool_call('Read')")
    assert err.value.code == "SC101"
    api = Api(a)
    api.call("record_tool_call", tool="before rotation")
    roles.rotate_key(scsql_db.admin, scsql_db.keystore, a.name)
    with pytest.raises(ScsqlError) as err:  # this process still holds key 1
        api.call("record_tool_call", tool="stale")
    assert err.value.code == "SC102"
    a.key = scsql_db.keystore.load(a.name)
    api.call("record_tool_call", tool="after rotation")
    with scsql_db.connect() as conn:
        keys = [r["key_id"] for r in conn.execute("select key_id from scsql.tool_calls order by seq").fetchall()]
    assert keys == [1, 2]
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks  # old rows verify with the old key, new rows with the new one


def test_writes_that_name_their_own_author_project_and_chain_are_linked(scsql_db):
    """The insert trigger's common path takes writes that leave the chain
    columns unset; a write naming its own author, project and chain takes the
    slow path, which finds nothing wrong and links it the same way. A revoked
    agent, or a role that is not an agent, is refused there."""
    project = scsql_db.project()
    a = scsql_db.agent("own", project)
    Api(a).call("record_tool_call", tool="Read")
    me, signed = _direct_insert_granted(scsql_db, a, a, "own_insert", "Write")
    with psycopg.connect(scsql_db.login(a.name)) as conn:
        conn.execute("insert into scsql.tool_calls (tool, origin, input_tokens, output_tokens, status, at, key_id, "
                     "signature, author_id, project_id, chain_id) values (%s, 'model', 0, 0, 'ok', %s, %s, %s, %s, %s, %s)",
                     (signed["tool"], signed["at"], signed["key_id"], signed["signature"],
                      me["agent_id"], me["project_id"], me["chain_id"]))
    rows = _chain_rows(scsql_db, a.name)
    assert [r["seq"] for r in rows] == [1, 2]
    assert rows[1]["prev_hash"] == rows[0]["row_hash"] and rows[1]["chain_id"] == me["chain_id"]
    report = verify(scsql_db.admin, workers=1, progress=False)
    assert report.ok, report.breaks
    # A role that is not an agent, and a revoked agent, cannot write.
    with scsql_db.connect() as conn:
        conn.execute("set role scsql_owner")
        with pytest.raises(psycopg.Error) as err:
            conn.execute("insert into scsql.tool_calls (tool, origin, input_tokens, output_tokens, status, at, key_id, "
                         "signature) values ('x', 'model', 0, 0, 'ok', now(), 1, %s)", (bytes(64),))
        assert err.value.sqlstate == "SC001"
    roles.revoke_agent(scsql_db.admin, a.name)
    with pytest.raises(ScsqlError) as exc:
        Api(a).call("record_tool_call", tool="after revocation")
    assert exc.value.code == "SC002"
    assert len(_chain_rows(scsql_db, a.name)) == 2


def test_rows_signed_through_libsodium_match_the_openssl_signature(scsql_db):
    """Writers sign with libsodium; Ed25519 is deterministic, so the signature
    is the one the agent's key (an OpenSSL key object) makes over the payload
    the specification describes."""
    from scsql.audit import encoding
    from scsql.audit.signing import sign_row
    from scsql.audit.telemetry import TOOL_CALL_FIELDS

    project = scsql_db.project()
    a = scsql_db.agent("sodium", project)
    args = {"tool": "Read", "model": "m", "input_tokens": 3, "input_preview": "x" * 5000, "session_id": None}
    signed = sign_row(a, "scsql.tool_calls", TOOL_CALL_FIELDS, args)
    plain = [f for f in TOOL_CALL_FIELDS if not f.appended]  # the appended ones are absent, so encode nothing
    assert all(f.name not in signed for f in TOOL_CALL_FIELDS if f.appended)
    # A digested field is signed by the sha256 of its text (scsql._enc, DIGESTED FIELDS).
    values = [encoding.text_digest(signed[f.name]) if f.digested and signed[f.name] is not None else signed[f.name]
              for f in plain]
    # Nothing is shortened on the way: the database refuses what is too long.
    assert signed["input_preview"] == "x" * 5000 and signed["origin"] == "model" and signed["status"] == "ok"
    kinds = ["digest" if f.digested and v is not None else f.kind for f, v in zip(plain, values)]
    data = encoding.payload("scsql.tool_calls", a.name, signed["key_id"], signed["at"], kinds, values)
    assert signed["signature"] == a.key.sign(data)
    assert args == {"tool": "Read", "model": "m", "input_tokens": 3, "input_preview": "x" * 5000, "session_id": None}
    with pytest.raises(ScsqlError) as refused:
        Api(a).call("record_tool_call", tool="Read", input_preview="x" * 5000)
    assert refused.value.code == "SC010" and "input_preview" in refused.value.message
