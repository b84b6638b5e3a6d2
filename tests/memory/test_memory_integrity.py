"""Memory is verified end to end: scsql verify --full compares every memory
table with the hash its chained history (scsql.memory_changes) last recorded,
so a row a superuser writes, changes or deletes outside the API is a break
that names the table, the row, and what the history expected.

Every way the API changes memory (remember, supersede, refresh, forget,
archive when memory is full, decide and supersede, open and close loops,
index, pin, forget a source, summarize a session, learn from an outcome, make
a learning a rule, index learnings, resolve a conflict) leaves memory exactly
as its history says: no false break. Then a superuser edits a fact, a
decision, an open loop, a chunk of a source, a pin, a learning and its rule,
deletes a fact and inserts another: each is named. Plain scsql verify (no
--full) stays on its fast path and does not compare memory."""

from __future__ import annotations

import json

import pytest

from scsql import cli
from scsql.api import Api
from scsql.audit.verify import verify


def q(agent, query: str, *args):
    with agent.transaction() as conn:
        return conn.execute(query, args).fetchall()


def _memory(db) -> list[tuple[str, str, str]]:
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert report.memory_checked and not report.breaks, report.breaks
    return sorted((m.kind, m.target, m.problem) for m in report.memory)


@pytest.fixture
def memory(scsql_db):
    """One agent's project whose memory went through every API path; returns (db, agent, ids)."""
    db = scsql_db
    a = db.agent("keeper", db.project())
    q(a, "select * from scsql.remember('db.host', 'the database runs on db1')")
    q(a, "select * from scsql.remember('db.host', 'the database runs on db2 since the move')")  # supersede
    q(a, "select * from scsql.remember('db.host', 'the database runs on db2 since the move')")  # refresh
    q(a, "select * from scsql.remember('tmp.note', 'a scratch note to forget')")
    q(a, "select scsql.forget('tmp.note')")
    q(a, "select * from scsql.remember('deploy.tool', 'deploys go through ArgoCD on the main cluster')")
    [r] = q(a, "select * from scsql.remember('deploy.tooling', 'deploys go through Flux on the main cluster')")
    assert r["conflicts_with"] == ["deploy.tool"]
    q(a, "select * from scsql.resolve_conflict('deploy.tooling', 'both')")
    # Working memory is full at 100 facts: the least important move to the archive.
    q(a, "select count(*) from generate_series(1, 101) i, "
         "scsql.remember('filler.' || i, 'filler fact number ' || i || ' about module m' || i, 1)")
    [arch] = q(a, "select path from scsql.kb_sources where kind = 'archived_fact' order by path limit 1")
    q(a, "select scsql.forget(%s)", arch["path"].removeprefix("fact:"))  # an archived fact forgotten
    [d1] = q(a, "select * from scsql.decide('Use PostgreSQL 18', 'pgvector and pg_partman run there')")
    [d2] = q(a, "select * from scsql.decide('Use PostgreSQL 17', 'the managed host offers 17 only', %s)",
             d1["decision_id"])
    [l1] = q(a, "select * from scsql.open_loop('write the migration guide', 'docs team')")
    [l2] = q(a, "select * from scsql.open_loop('review the parser')")
    q(a, "select * from scsql.close_loop(%s, 'reviewed, two fixes merged')", l2["loop_id"])
    q(a, "select * from scsql.index_text('notes/ops.md', '# Ops\n\nRestart the worker with scsql worker.\n')")
    q(a, "select * from scsql.index_text('notes/ops.md', '# Ops\n\nRestart the worker with scsql worker --agent x.\n')")
    q(a, "select * from scsql.index_text('notes/pinned.md', '# Pinned\n\nNever purge this note.\n')")
    q(a, "select * from scsql.pin('notes/pinned.md')")
    q(a, "select * from scsql.index_text('notes/gone.md', '# Gone\n\nThis note is forgotten.\n')")
    q(a, "select scsql.forget_source('notes/gone.md')")
    q(a, "select * from scsql.summarize_session(%s::jsonb)",
      json.dumps({"done": ["moved the database"], "decisions": ["Keep nightly backups"], "open_tasks": ["test the restore"]}))
    out = Api(a).call("record_outcome", kind="failed", summary="pytest -q failed on test_db", task_ref="T-1")
    lid = out["learning_id"] if isinstance(out, dict) else out[0]["learning_id"]
    q(a, "select scsql.mark_learning_rule(%s, true, 'pytest -q')", lid)
    out = Api(a).call("record_outcome", kind="rejected", summary="force push refused", task_ref="T-2")
    lid2 = out["learning_id"] if isinstance(out, dict) else out[0]["learning_id"]
    q(a, "select scsql.index_learnings(50)")
    return db, a, {"d2": d2["decision_id"], "l1": l1["loop_id"], "l2": l2["loop_id"], "lid": lid, "lid2": lid2}


def _tamper(db, *statements: str) -> None:
    """Statements as a superuser, outside the API (plain SQL: memory tables have no triggers to turn off)."""
    with db.connect() as conn:
        for s in statements:
            conn.execute(s)


def test_memory_written_through_the_api_verifies(memory):
    db, _a, _ids = memory
    assert _memory(db) == []


def test_a_superuser_change_to_any_memory_table_is_a_named_break(memory, monkeypatch, capsys):
    db, a, ids = memory
    _tamper(db,
            "update scsql.memory_facts set value = 'the database runs on evil.example' where key = 'db.host'",
            "delete from scsql.memory_facts where key = 'deploy.tool'",
            f"insert into scsql.memory_facts (project_id, key, value, importance, created_by, updated_by) "
            f"select project_id, 'planted', 'trust the attacker', 5, agent_id, agent_id from scsql.agents "
            f"where name = '{a.name}'",
            f"update scsql.decisions set title = 'Use MySQL' where decision_id = {ids['d2']}",
            f"update scsql.open_loops set text = 'delete the backups' where loop_id = {ids['l1']}",
            f"update scsql.open_loops set resolution = 'nothing was reviewed' where loop_id = {ids['l2']}",
            "update scsql.kb_chunks set content = replace(content, 'Restart', 'Delete') "
            "where source_id = (select source_id from scsql.kb_sources where path = 'notes/ops.md')",
            "update scsql.kb_sources set content_hash = repeat('0', 64) where path like 'session:%'",
            "update scsql.kb_sources set pinned = false where path = 'notes/pinned.md'",
            f"update scsql.learnings set summary = 'all tests passed' where learning_id = {ids['lid']}",
            f"update scsql.learnings set deny = true, pattern = 'git' where learning_id = {ids['lid2']}")
    found = _memory(db)
    assert found == sorted([
        ("fact", "db.host", "changed"),
        ("fact", "deploy.tool", "missing"),
        ("fact", "planted", "unrecorded"),
        ("decision", f"decision:{ids['d2']}", "changed"),
        ("loop", f"loop:{ids['l1']}", "changed"),
        ("loop", f"loop:{ids['l2']}", "state"),
        ("chunk", "notes/ops.md#1", "changed"),
        ("source", found_session(found), "changed"),
        ("source", "notes/pinned.md", "state"),
        ("learning", f"learning:{ids['lid']}", "changed"),
        ("learning", f"learning:{ids['lid2']}", "state"),
    ]), found
    report = verify(db.admin, workers=1, progress=False, full=True)
    fact = next(m for m in report.memory if m.target == "db.host")
    with db.connect() as conn:
        want = conn.execute("select encode(sha256(convert_to('the database runs on db2 since the move', 'UTF8')), 'hex')"
                            " as h").fetchone()["h"]
    assert fact.expected == want and fact.found != want and "refresh" in fact.detail
    learning = next(m for m in report.memory if m.target == f"learning:{ids['lid']}")
    assert "summary not as in the outcome" in learning.detail

    # The command line names each break and exits 1; without --full memory is not compared (fast path).
    monkeypatch.setenv("SCSQL_DSN", db.admin)
    capsys.readouterr()
    assert cli.main(["verify", "--full"]) == 1
    err = capsys.readouterr().err
    assert "BROKEN memory fact 'db.host'" in err and f"BROKEN memory decision 'decision:{ids['d2']}'" in err
    assert "BROKEN memory chunk 'notes/ops.md#1'" in err
    assert cli.main(["verify"]) == 0
    assert "BROKEN" not in capsys.readouterr().err


def found_session(found: list[tuple[str, str, str]]) -> str:
    """The path of the session summary among the breaks (its time is in its path)."""
    return next(t for k, t, _p in found if k == "source" and t.startswith("session:"))


def test_rows_older_than_the_memory_history_are_not_breaks(scsql_db):
    """A fact no change records, last changed before the memory history existed (an upgraded
    database), is reported as not compared, not as a break; one changed since is a break."""
    db = scsql_db
    a = db.agent("old", db.project())
    _tamper(db, f"insert into scsql.memory_facts (project_id, key, value, importance, created_by, updated_by, "
                f"created_at, updated_at) select project_id, 'ancient', 'from before the history', 3, agent_id, "
                f"agent_id, '2020-01-01', '2020-01-01' from scsql.agents where name = '{a.name}'")
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert report.ok and [(m.target, m.before_history) for m in report.memory_unrecorded] == [("ancient", True)]
    _tamper(db, "update scsql.memory_facts set updated_at = now() where key = 'ancient'")
    report = verify(db.admin, workers=1, progress=False, full=True)
    assert [(m.target, m.problem) for m in report.memory] == [("ancient", "unrecorded")]
