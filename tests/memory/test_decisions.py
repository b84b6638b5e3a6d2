"""Decisions and open loops are first-class: decide (superseded decisions
stay as history), decisions(query), open_loop, close_loop, open_loops;
session summaries feed them; recall_context shows the open loops and the
latest decisions; each project sees only its own; each is an MCP tool."""

from __future__ import annotations

import json
import threading

import pytest

from scsql.core.errors import ScsqlError

from ..helpers import statement_lock_waiters, wait_for


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


def raises(code, agent, sql, *args):
    with pytest.raises(ScsqlError) as err:
        q(agent, sql, *args)
    assert err.value.code == code, sql
    return err.value


@pytest.fixture
def agent(scsql_db):
    return scsql_db.agent("decider", scsql_db.project())


def test_decide_supersede_and_the_history_stays(agent):
    [d1] = q(agent, "select * from scsql.decide('Use PostgreSQL 18', 'pgvector and pg_partman run there; MySQL was rejected')")
    [d2] = q(agent, "select * from scsql.decide('Queue tasks in SQL', 'SKIP LOCKED claims without a broker')")
    [d3] = q(agent, "select * from scsql.decide('Use PostgreSQL 17', 'the managed host offers 17 only', %s)", d1["decision_id"])
    assert d3["supersedes"] == d1["decision_id"]
    current = q(agent, "select * from scsql.decisions()")
    assert [d["decision_id"] for d in current] == [d3["decision_id"], d2["decision_id"]]
    assert {d["status"] for d in current} == {"current"} and current[0]["decided_by"] == agent.name
    history = {d["decision_id"]: d for d in q(agent, "select * from scsql.decisions(p_include_superseded => true)")}
    assert history[d1["decision_id"]]["status"] == "superseded"
    assert history[d1["decision_id"]]["superseded_by"] == d3["decision_id"]
    assert history[d1["decision_id"]]["rationale"].startswith("pgvector and pg_partman")
    # A query finds by terms of title or rationale, best match first.
    assert [d["title"] for d in q(agent, "select * from scsql.decisions('managed postgresql host')")] == ["Use PostgreSQL 17"]
    assert [d["title"] for d in q(agent, "select * from scsql.decisions('skip locked broker')")] == ["Queue tasks in SQL"]
    assert q(agent, "select * from scsql.decisions('the and of')") == []
    # A superseded decision is superseded once; an unknown one cannot be.
    e = raises("SC237", agent, "select * from scsql.decide('Use PostgreSQL 16', 'older', %s)", d1["decision_id"])
    assert str(d3["decision_id"]) in e.message
    raises("SC236", agent, "select * from scsql.decide('x', 'y', 999999)")
    for title, why in [("", "r"), ("two\nlines", "r"), ("t" * 201, "r"), ("t", ""), ("t", "r" * 4001)]:
        raises("SC235", agent, "select * from scsql.decide(%s, %s)", title, why)
    raises("SC205", agent, "select * from scsql.decisions('')")
    raises("SC010", agent, "select * from scsql.decisions(p_limit => 0)")
    assert len(q(agent, "select * from scsql.decisions(p_include_superseded => true)")) == 3  # nothing else stored


def test_open_loops_open_once_close_once_and_stay_as_history(agent):
    [a] = q(agent, "select * from scsql.open_loop('Flaky test in test_queue_races', 'qa')")
    [b] = q(agent, "select * from scsql.open_loop('Document PITR with pgBackRest')")
    [again] = q(agent, "select * from scsql.open_loop('Flaky test in test_queue_races', 'someone else')")
    assert (again["loop_id"], again["created"], again["owner"]) == (a["loop_id"], False, "qa")
    assert [l["loop_id"] for l in q(agent, "select * from scsql.open_loops()")] == [b["loop_id"], a["loop_id"]]
    assert [l["loop_id"] for l in q(agent, "select * from scsql.open_loops('qa')")] == [a["loop_id"]]
    [c] = q(agent, "select * from scsql.close_loop(%s, 'fixed by waiting on the lock, not sleeping')", a["loop_id"])
    assert c["closed_at"] is not None
    assert [l["loop_id"] for l in q(agent, "select * from scsql.open_loops()")] == [b["loop_id"]]
    raises("SC240", agent, "select * from scsql.close_loop(%s, 'again')", a["loop_id"])
    raises("SC239", agent, "select * from scsql.close_loop(999999, 'nothing')")
    for text, owner in [("", None), ("x" * 2001, None), ("ok", "two\nlines"), ("ok", "")]:
        raises("SC238", agent, "select * from scsql.open_loop(%s, %s)", text, owner)
    raises("SC238", agent, "select * from scsql.close_loop(%s, '')", b["loop_id"])
    # The closed loop stays as history; the same text may open again.
    [reopened] = q(agent, "select * from scsql.open_loop('Flaky test in test_queue_races')")
    assert reopened["created"] and reopened["loop_id"] != a["loop_id"]
    rows = q(agent, "select loop_id, resolution from scsql.open_loops where loop_id = %s", a["loop_id"])
    assert rows == [{"loop_id": a["loop_id"], "resolution": "fixed by waiting on the lock, not sleeping"}]


def test_concurrent_closes_of_one_loop_one_wins(scsql_db, agent):
    [loop] = q(agent, "select * from scsql.open_loop('Release 1.0')")
    other = scsql_db.agent("closer", scsql_db.project())  # another project: cannot see it
    raises("SC239", other, "select * from scsql.close_loop(%s, 'not mine')", loop["loop_id"])
    second = []
    with agent.transaction() as conn:
        conn.execute("select * from scsql.close_loop(%s, 'shipped')", (loop["loop_id"],))

        def close_again():
            try:
                q(agent, "select * from scsql.close_loop(%s, 'shipped too')", loop["loop_id"])
                second.append("closed")
            except ScsqlError as e:
                second.append(e.code)

        t = threading.Thread(target=close_again)
        t.start()
        # (on Citus the row lock is taken on the worker holding the loop: counted there too)
        wait_for(lambda: statement_lock_waiters(scsql_db, "%close_loop%") >= 1 or not t.is_alive())
        assert t.is_alive(), "the second close did not wait for the first"
    t.join(20)
    assert second == ["SC240"]
    assert q(agent, "select resolution from scsql.open_loops")[0]["resolution"] == "shipped"


def test_session_summaries_feed_decisions_and_loops_and_recall_shows_them(scsql_db, agent):
    summary = {"done": ["wrote the ledger"], "decisions": ["Ledger migrations run before every deploy"],
               "open_tasks": ["Add a rollback test for the ledger", "Ask ops about backups"]}
    [s] = q(agent, "select * from scsql.summarize_session(%s)", json.dumps(summary))
    q(agent, "select * from scsql.summarize_session(%s)", json.dumps(summary))  # repeated: nothing doubles
    decisions = q(agent, "select * from scsql.decisions()")
    assert [d["title"] for d in decisions] == ["Ledger migrations run before every deploy"]
    assert decisions[0]["source_path"] == s["path"] and s["path"] in decisions[0]["rationale"]
    loops = q(agent, "select * from scsql.open_loops()")
    assert sorted(l["text"] for l in loops) == ["Add a rollback test for the ledger", "Ask ops about backups"]
    assert {l["owner"] for l in loops} == {agent.name} and {l["source_path"] for l in loops} == {s["path"]}
    [d] = q(agent, "select * from scsql.decide('Ledger migrations run in CI', 'deploys no longer migrate', %s)",
            decisions[0]["decision_id"])
    q(agent, "select * from scsql.close_loop(%s, 'asked: nightly pg_dump')",
      next(l["loop_id"] for l in loops if l["text"] == "Ask ops about backups"))
    rows = q(agent, "select * from scsql.recall_context()")
    sections = [r["section"] for r in rows]
    assert sections == sorted(sections, key=["fact", "open_loop", "decision", "session", "broadcast"].index)
    assert [r["content"] for r in rows if r["section"] == "open_loop"] == [
        f"open loop {next(l['loop_id'] for l in loops if l['text'].startswith('Add'))} (owner {agent.name}): "
        "Add a rollback test for the ledger"]
    recalled = [r for r in rows if r["section"] == "decision"]
    assert [r["source_path"] for r in recalled] == [f"decision:{d['decision_id']}"]  # the superseded one is history
    assert recalled[0]["content"].startswith(f"decision {d['decision_id']}: Ledger migrations run in CI")
    # Another project sees none of it.
    other = scsql_db.agent("decider_other", scsql_db.project())
    assert q(other, "select * from scsql.decisions(p_include_superseded => true)") == []
    assert q(other, "select * from scsql.open_loops()") == []
    assert q(other, "select count(*) as n from scsql.decisions")[0]["n"] == 0
    assert q(other, "select count(*) as n from scsql.open_loops")[0]["n"] == 0


def test_the_new_functions_are_mcp_tools(agent):
    from scsql.api import Api
    from scsql.mcp_server import build

    tools = {t.name: t for t in build(Api(agent), all_tools=True).tools.listed}
    for name in ("decide", "decisions", "open_loop", "close_loop", "open_loops", "pin"):
        assert name in tools, name
    assert set(tools["decide"].input_schema["required"]) == {"title", "rationale"}
    assert tools["recall_context"].input_schema["properties"]["use_weight"]["default"] == 0.2
    assert "ttl" in tools["remember"].input_schema["properties"]
    assert "set_memory_lifecycle" not in tools  # administrators only


def test_text_too_long_once_redacted_is_refused_with_the_same_codes(agent):
    """decide, open_loop and close_loop check text as every memory write does
    (scsql._check_text) and leave the limit on what is stored, redacted, to
    the tables' constraints: each secret here grows by five characters."""
    key = "AKIAABCDEFGHIJKLMNOP "                      # 21 characters; [REDACTED:aws_access_key] is 25
    e = raises("SC235", agent, "select * from scsql.decide(%s, 'why')", "Rotate " + key * 9)
    assert "200 characters" in e.message
    raises("SC235", agent, "select * from scsql.decide('Rotate keys', %s)", key * 190)
    e = raises("SC238", agent, "select * from scsql.open_loop(%s)", key * 95)
    assert "2,000 characters" in e.message
    [loop] = q(agent, "select * from scsql.open_loop('Rotate the keys')")
    raises("SC238", agent, "select * from scsql.close_loop(%s, %s)", loop["loop_id"], key * 190)
    e = raises("SC235", agent, "select * from scsql.decide(%s, 'why')", "t" * 201)   # before redaction: the text rule
    assert "201 characters" in e.message
    assert q(agent, "select count(*) as n from scsql.decisions")[0]["n"] == 0
    assert q(agent, "select closed_at from scsql.open_loops")[0]["closed_at"] is None


def test_a_session_summary_whose_secrets_grow_when_redacted_still_feeds_decisions_and_loops(agent):
    """summarize_session cuts a decision to a 200-character title and an open
    task to 2,000 characters; it cuts the redacted text, so a summary item
    that grows when its secrets are redacted is stored, cut, and not refused
    with the codes of decide and open_loop (SC235, SC238), which
    summarize_session's caller never called."""
    url = "postgres://app:pw@db/x "                     # 23 characters; the password's marker adds 20
    summary = {"decisions": ["Connect with " + url * 9], "open_tasks": ["Rotate " + url * 86]}
    assert len(summary["decisions"][0]) <= 220 and len(summary["open_tasks"][0]) <= 2000
    [s] = q(agent, "select * from scsql.summarize_session(%s)", json.dumps(summary))
    [d] = q(agent, "select * from scsql.decisions()")
    assert len(d["title"]) == 200 and d["title"].endswith("...") and "pw@" not in d["title"]
    assert d["source_path"] == s["path"] and "[REDACTED:url_password]" in d["rationale"]
    [loop] = q(agent, "select * from scsql.open_loops()")
    assert 1950 < len(loop["text"]) <= 2000 and "pw@" not in loop["text"] and loop["source_path"] == s["path"]


def test_open_loops_close_themselves_when_their_work_is_reported_done(agent):
    """A loop opened from a TODO list closes when a later summary's TODO list
    has the item completed; a finished task's subject closes the loop of that
    text too (close_loops_done, as the TaskCompleted hook calls it)."""
    from psycopg.types.json import Jsonb

    from scsql.hooks.handlers import handle

    dev = agent
    with dev.transaction() as conn:
        conn.execute("select * from scsql.summarize_session(%s)",
                     (Jsonb({"open_tasks": ["Fix the flaky queue test (in progress)", "Write the migration"]}),))
        opened = conn.execute("select loop_id, text from scsql.open_loops()").fetchall()
        assert {r["text"] for r in opened} == {"Fix the flaky queue test (in progress)", "Write the migration"}
        conn.execute("select * from scsql.summarize_session(%s)",
                     (Jsonb({"done": ["completed: Fix the flaky queue test"], "open_tasks": ["Write the migration"]}),))
        assert [r["text"] for r in conn.execute("select text from scsql.open_loops()").fetchall()] == [
            "Write the migration"]
    handle(dev, {"hook_event_name": "TaskCompleted", "session_id": "s", "task_id": "7",
                 "task_subject": "write the  migration"})
    with dev.transaction() as conn:
        assert conn.execute("select count(*) as n from scsql.open_loops()").fetchone()["n"] == 0
    closed = [r for o in opened for r in q(dev, "select * from scsql.memory_history(%s)", f"loop:{o['loop_id']}")
              if r["op"] == "close_loop"]
    assert len(closed) == 2 and any("session summary" in c["reason"] for c in closed), closed


def test_a_loop_nobody_touches_leaves_session_start_unless_pinned(scsql_db, agent):
    """recall_context (the context a session starts with) leaves out an open
    loop nobody touched for the project's loop_stale_after (30 days by
    default); a pinned loop stays, a loop opened again is touched; all stay
    open and listed until closed."""
    ids = {t: q(agent, "select * from scsql.open_loop(%s)", t)[0]["loop_id"]
           for t in ("Old question about the cache", "Old but pinned: rotate the keys", "New: flaky CI job")}
    with scsql_db.connect() as conn:
        conn.execute("update scsql.open_loops set opened_at = now() - interval '40 days' where loop_id = any(%s)",
                     ([ids["Old question about the cache"], ids["Old but pinned: rotate the keys"]],))
        project = conn.execute("select p.name from scsql.projects p join scsql.agents a using (project_id) "
                               "where a.name = %s", (agent.name,)).fetchone()["name"]

    def shown() -> set[str]:
        rows = q(agent, "select key from scsql.recall_context(100000) where section = 'open_loop'")
        return {t for t, i in ids.items() if str(i) in {r["key"] for r in rows}}

    assert shown() == {"New: flaky CI job"}  # both 40 days untouched: out
    [pinned] = q(agent, "select * from scsql.pin_loop(%s)", ids["Old but pinned: rotate the keys"])
    assert pinned["pinned"] is True
    assert shown() == {"Old but pinned: rotate the keys", "New: flaky CI job"}
    assert len(q(agent, "select * from scsql.open_loops()")) == 3  # still open
    raises("SC239", agent, "select * from scsql.pin_loop(999999)")
    raises("SC010", agent, "select * from scsql.pin_loop(null)")
    with scsql_db.connect() as conn:
        conn.execute("select * from scsql.set_memory_lifecycle(%s, p_loop_stale_after => '60 days')", (project,))
    assert shown() == set(ids)
    with scsql_db.connect() as conn:
        conn.execute("select * from scsql.set_memory_lifecycle(%s, p_loop_stale_after => '30 days')", (project,))
    assert "Old question about the cache" not in shown()
    q(agent, "select * from scsql.open_loop('Old question about the cache')")  # asked again: touched
    assert "Old question about the cache" in shown()
