"""The history of memory: every change to working memory and the knowledge
base is a chained row attributed to the acting agent, shown by
memory_history and `scsql memory history`, written from psql as from the
Python layer, and covered by scsql verify (tampering is found)."""

from __future__ import annotations

import hashlib

import psycopg
import pytest
from psycopg.rows import dict_row

from scsql import cli
from scsql.api import Api

from ..helpers import mcp_env, tamper


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def two(scsql_db):
    project = scsql_db.project()
    return scsql_db, scsql_db.agent("ha", project), scsql_db.agent("hb", project)


def test_every_kind_of_change_is_recorded_with_its_agent_and_hashes(two):
    db, a, b = two
    q(a, "select * from scsql.remember('build', 'make build')")
    q(b, "select * from scsql.remember('build', 'make all')")
    q(a, "select scsql.forget('build')")
    note = q(b, "select * from scsql.index_text('notes/deploy.md', '# Deploy' || chr(10) || chr(10) || 'Run make deploy.')")[0]
    q(b, "select * from scsql.index_text('notes/deploy.md', '# Deploy' || chr(10) || chr(10) || 'Run make release.')")
    chunk = q(a, "select chunk_hash from scsql.kb_chunks limit 1")[0]["chunk_hash"]
    q(a, "select scsql.forget_chunk(%s)", chunk)
    q(a, "select scsql.forget_source('notes/deploy.md')")
    path = q(b, """select * from scsql.summarize_session('{"done": ["history"]}')""")[0]["path"]

    fact = q(a, "select * from scsql.memory_history('build')")
    assert [(r["op"], r["agent"]) for r in fact] == [("forget", a.name), ("supersede", b.name), ("remember", a.name)]
    assert fact[1]["old_hash"] == h("make build") and fact[1]["new_hash"] == h("make all")
    assert fact[0]["old_hash"] == h("make all") and fact[0]["value"] is None  # a forgotten value is not kept
    src = q(b, "select * from scsql.memory_history('notes/deploy.md')")
    assert [(r["op"], r["agent"]) for r in src] == [("forget_source", a.name), ("forget_chunk", a.name),
                                                    ("index", b.name), ("index", b.name)]
    assert src[3]["new_hash"] == note["content_hash"] == src[2]["old_hash"] and src[0]["old_hash"] == src[2]["new_hash"]
    assert src[1]["related"] == "notes/deploy.md" and src[1]["chunk_hash"] == chunk
    by_chunk = q(b, "select * from scsql.memory_history(%s)", chunk.upper())
    assert [(r["op"], r["kind"], r["chunk_hash"]) for r in by_chunk] == [("forget_chunk", "chunk", chunk)]
    assert [r["op"] for r in q(a, "select * from scsql.memory_history(%s)", path)] == ["summary"]
    with db.connect() as conn:  # in the agents' chains, with the unsigned marker
        rows = conn.execute("select m.signature, a.name from scsql.memory_changes m "
                            "join scsql.agents a on a.agent_id = m.author_id").fetchall()
    assert len(rows) == 8 and all(r["signature"][:32] == bytes(32) for r in rows)
    assert len({r["signature"] for r in rows}) == 8


def test_archive_moves_are_recorded(scsql_db):
    agent = scsql_db.agent("arch", scsql_db.project())
    for i in range(101):
        q(agent, "select * from scsql.remember(%s, %s, 1)", f"k{i:03}", f"value {i} of topic{i} in area{i}")
    hist = q(agent, "select * from scsql.memory_history('k000')")
    assert [r["op"] for r in hist] == ["archive", "remember"] and hist[0]["reason"] == "working memory was full"
    q(agent, "select * from scsql.remember('k000', 'value 0 again, fresh', 5)")
    assert q(agent, "select * from scsql.memory_history('k000')")[0]["op"] == "unarchive"


def test_writes_from_psql_keep_working_and_are_recorded(scsql_db):
    """An agent logged in with its own role, no Python layer, no key."""
    agent = scsql_db.agent("psql", scsql_db.project())
    with psycopg.connect(scsql_db.login(agent.name), row_factory=dict_row, autocommit=True) as conn:
        assert conn.execute("select * from scsql.remember('shell', 'bash')").fetchone()["stored"] == "memory"
        conn.execute("select * from scsql.remember('shell', 'zsh')")
        hist = conn.execute("select op, agent, value from scsql.memory_history('shell')").fetchall()
    assert hist == [{"op": "supersede", "agent": agent.name, "value": "zsh"},
                    {"op": "remember", "agent": agent.name, "value": "bash"}]


def test_agents_cannot_write_or_rewrite_history(scsql_db):
    agent = scsql_db.agent("rw", scsql_db.project())
    q(agent, "select * from scsql.remember('a', 'b')")
    for stmt in ("update scsql.memory_changes set reason = 'x'", "delete from scsql.memory_changes",
                 "insert into scsql.fact_versions (project_id, key, value, value_hash, importance, created_at, "
                 "created_by, superseded_by, reason) values (1, 'k', 'v', 'h', 1, now(), 1, 1, 'r')",
                 "select * from scsql._memory_change(1, 'forget', 'fact', 'a')"):
        with pytest.raises(Exception) as e:
            q(agent, stmt)
        assert "permission denied" in str(e.value)


def test_verify_covers_memory_changes_and_finds_tampering(scsql_db, verifier):
    project = scsql_db.project()
    agent = scsql_db.agent("ver", project)
    Api(agent).call("record_tool_call", tool="t1")
    for v in ("one", "two", "three"):
        q(agent, "select * from scsql.remember('k', %s)", v)
    Api(agent).call("record_tool_call", tool="t2")
    report = verifier.run(scsql_db)
    assert report.ok and report.rows == 5  # two tool calls, a remember, two supersessions: one chain
    with scsql_db.connect() as conn:
        chain, seq = conn.execute("select chain_id, seq from scsql.memory_changes where op = 'supersede' "
                                  "order by seq limit 1").fetchone().values()
    tamper(scsql_db, f"update scsql.memory_changes set new_hash = repeat('0', 64) where chain_id = {chain} and seq = {seq}")
    assert verifier.breaks(scsql_db) == [(chain, seq, "hash-mismatch")]


def test_a_signed_table_row_with_the_unsigned_marker_fails_python_verification(scsql_db):
    """The marker is accepted in scsql.memory_changes only."""
    from scsql.audit.verify import verify

    agent = scsql_db.agent("mark", scsql_db.project())
    Api(agent).call("record_tool_call", tool="t1")
    with scsql_db.connect() as conn:
        chain, seq, sig = conn.execute("select chain_id, seq, signature from scsql.tool_calls").fetchone().values()
    tamper(scsql_db, f"update scsql.tool_calls set signature = '\\x{'00' * 32}{sig[32:].hex()}'::bytea, "
                     f"row_hash = sha256(prev_hash || '\\x00'::bytea) where chain_id = {chain}")
    report = verify(scsql_db.admin, workers=1, progress=False, full=True)
    assert [(b.seq, b.kind) for b in report.breaks][:1] in ([(seq, "hash-mismatch")], [(seq, "signature")])


def test_memory_history_command(scsql_db, monkeypatch, capsys):
    agent = scsql_db.agent("cmd", scsql_db.project())
    q(agent, "select * from scsql.remember('deploy.target', 'staging')")
    q(agent, "select * from scsql.remember('deploy.target', 'production')")
    for k, v in mcp_env(scsql_db).items():
        monkeypatch.setenv(k, v)
    assert cli.main(["memory", "history", "deploy.target", "--agent", agent.name]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "supersede fact deploy.target" in out[0] and agent.name in out[0] and out[1].strip() == "production"
    assert "remember fact deploy.target" in out[2] and out[3].strip() == "staging"


def test_files_learnings_purges_pins_decisions_and_loops_are_recorded(scsql_db, verifier):
    """Each of these changes writes one history row, attributed to the acting
    agent, and the chain still verifies."""
    project = scsql_db.project()
    a, w = scsql_db.agent("hx", project), scsql_db.agent("hw", project)
    for path, text in (("src/a.py", "def a():\n    return 1\n"), ("src/b.py", "def b():\n    return 2\n")):
        q(a, "select * from scsql.index_text(%s, %s, 'file')", path, text)
    q(a, "select * from scsql.index_text('src/a.py', 'def a():\n    return 3\n', 'file')")
    manifest = [{"path": "src/a.py", "content_hash": h("def a():\n    return 3\n")}]
    q(a, "select * from scsql.index('src', %s::jsonb)", __import__("json").dumps(manifest))
    assert [(r["op"], r["reason"], r["agent"]) for r in q(a, "select * from scsql.memory_history('src/b.py')")] == [
        ("remove", "file no longer in the tree", a.name), ("index", "file added", a.name)]
    assert [r["reason"] for r in q(a, "select * from scsql.memory_history('src/a.py')")] == ["file changed", "file added"]

    # A learning derived from a failed outcome, then indexed into the knowledge
    # base (by the client right after the call, else by the worker's agent).
    Api(a).call("record_outcome", kind="failed", summary="pytest -q failed on test_db", task_ref="T-1")
    lid = q(a, "select learning_id from scsql.learnings() limit 1")[0]["learning_id"]
    q(w, "select scsql.index_learnings() as n")
    hist = q(a, "select * from scsql.memory_history(%s)", f"learning:{lid}")
    assert [(r["op"], r["kind"], r["reason"]) for r in hist] == [("index", "source", "learning added"),
                                                                 ("learn", "learning", "failure learning of a failed outcome (internal)")]
    assert hist[1]["agent"] == a.name and hist[0]["agent"] in (a.name, w.name)
    assert hist[1]["new_hash"] == h("pytest -q failed on test_db") and hist[1]["related"].startswith("outcome:")
    # Changed: made a rule that denies matching calls, then a plain lesson again.
    q(a, "select scsql.mark_learning_rule(%s, true, 'pytest')", lid)
    q(a, "select scsql.mark_learning_rule(%s, false)", lid)
    hist = q(a, "select * from scsql.memory_history(%s)", f"learning:{lid}")
    assert [(r["op"], r["reason"]) for r in hist][:2] == [("unrule", "a plain lesson again"),
                                                          ("rule", "denies matching calls (pattern pytest)")]

    # Pin and unpin (a pin that changes nothing writes nothing).
    q(a, "select * from scsql.pin('src/a.py')")
    q(a, "select * from scsql.pin('src/a.py')")
    q(a, "select * from scsql.pin('src/a.py', false)")
    assert [r["op"] for r in q(a, "select * from scsql.memory_history('src/a.py')")][:3] == ["unpin", "pin", "index"]

    # The worker's purge of what expired: an external source and a fact past its TTL.
    q(a, "select * from scsql.index_text('https://example.org/page', 'an external page', 'url')")
    q(a, "select * from scsql.remember('tmp.port', '5433', 2, interval '1 hour')")
    with scsql_db.connect() as conn:
        conn.execute("update scsql.kb_sources set updated_at = now() - interval '30 days' where path = 'https://example.org/page'")
        conn.execute("update scsql.memory_facts set expires_at = now() - interval '1 minute' where key = 'tmp.port'")
    assert q(w, "select scsql.purge_expired() as n")[0]["n"] == 2
    page = q(a, "select * from scsql.memory_history('https://example.org/page')")
    assert (page[0]["op"], page[0]["agent"], page[0]["old_hash"]) == ("purge", w.name, h("an external page"))
    assert "not indexed again within" in page[0]["reason"]
    fact = q(a, "select * from scsql.memory_history('tmp.port')")
    assert (fact[0]["op"], fact[0]["old_hash"]) == ("purge", h("5433")) and fact[0]["reason"].startswith("TTL ended")

    # Decisions, superseded; open loops, closed.
    [d1] = q(a, "select * from scsql.decide('Use PostgreSQL 18', 'pgvector runs there')")
    [d2] = q(w, "select * from scsql.decide('Use PostgreSQL 17', 'the host offers 17', %s)", d1["decision_id"])
    old = q(a, "select * from scsql.memory_history(%s)", f"decision:{d1['decision_id']}")
    d1_, d2_ = f"decision:{d1['decision_id']}", f"decision:{d2['decision_id']}"
    assert [(r["op"], r["agent"], r["target"], r["related"]) for r in old] == [  # the one that superseded it is related
        ("supersede", w.name, d1_, d2_), ("decide", w.name, d2_, d1_), ("decide", a.name, d1_, None)]
    assert old[0]["old_hash"] == old[2]["new_hash"] == h("Use PostgreSQL 18\n\npgvector runs there")
    new = q(a, "select * from scsql.memory_history(%s)", d2_)
    assert [(r["op"], r["target"]) for r in new] == [("supersede", d1_), ("decide", d2_)]
    assert new[1]["new_hash"] == h("Use PostgreSQL 17\n\nthe host offers 17") and new[1]["reason"] == "Use PostgreSQL 17"
    [loop] = q(a, "select * from scsql.open_loop('Document PITR', 'qa')")
    q(a, "select * from scsql.open_loop('Document PITR')")  # the same open loop: no change
    q(w, "select * from scsql.close_loop(%s, 'written in docs/pitr.md')", loop["loop_id"])
    hist = q(a, "select * from scsql.memory_history(%s)", f"loop:{loop['loop_id']}")
    assert [(r["op"], r["agent"]) for r in hist] == [("close_loop", w.name), ("open_loop", a.name)]
    assert hist[0]["old_hash"] == hist[1]["new_hash"] == h("Document PITR")
    assert hist[0]["new_hash"] == h("written in docs/pitr.md") and hist[1]["reason"] == "owner qa"

    report = verifier.run(scsql_db)
    assert report.ok, report
