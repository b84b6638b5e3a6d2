"""Capture through the hook handlers, against the real database: what each
event writes and answers, exclusive files enforced before an edit, failures
turned into learnings and lessons, rules that deny, and replays that add
nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from scsql.api import Api
from scsql.core.errors import ScsqlError
from scsql.hooks import handlers, storable
from scsql.hooks.handlers import Reply, capture, handle


def _ev(name: str, sid: str, **fields) -> dict:
    return {"hook_event_name": name, "session_id": sid, "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp",
            "permission_mode": "default", "scsql_event_id": uuid.uuid4().hex,
            "scsql_received_at": "2026-11-26T20:00:00Z", **fields}


def _count(agent, sql: str, *args) -> int:
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchone()["n"]


@pytest.fixture
def team(scsql_db):
    project = scsql_db.project()
    with scsql_db.connect() as conn:
        conn.execute("update scsql.projects set root_path = '/repo' where name = %s", (project,))
    return (scsql_db, scsql_db.agent("dev", project), scsql_db.agent("other", project),
            scsql_db.agent("orch", project, "orchestrator"))


def test_session_start_opens_one_session_and_compact_or_resume_reuse_it(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    r = handle(dev, _ev("SessionStart", sid, source="startup", model="claude-opus-4"))
    assert isinstance(r, Reply) and r.exit == 0 and r.stderr is None
    for source in ("compact", "resume", "clear"):
        assert handle(dev, _ev("SessionStart", sid, source=source)).exit == 0
    with dev.transaction() as conn:
        rows = conn.execute("select external_id, source, model, client, cwd from scsql.sessions").fetchall()
    assert rows == [{"external_id": sid, "source": "startup", "model": "claude-opus-4", "client": "claude-code",
                     "cwd": "/tmp"}]


def test_session_start_injects_facts_tasks_and_messages_with_citations(team):
    _, dev, _, orch = team
    with dev.transaction() as conn:
        conn.execute("select scsql.remember('deploy', 'deploys go through make release', 5)")
    with orch.transaction() as conn:
        conn.execute("select * from scsql.enqueue_task('developer', '{\"do\": \"fix the parser\"}')")
    Api(orch).call("broadcast", type="STATUS", to_role="developer", payload={"note": "freeze at 18:00"})
    r = handle(dev, _ev("SessionStart", uuid.uuid4().hex, source="startup"))
    out = r.output["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    text = out["additionalContext"]
    assert "deploys go through make release" in text and "[fact:deploy]" in text
    assert "1 task(s) of your team role are waiting" in text
    assert "freeze at 18:00" in text and "[message:" in text
    assert len(text) <= handlers.CONTEXT_TOKENS * 4


def test_prompt_is_stored_redacted_chained_and_recall_injects_only_relevant_hits(team, monkeypatch):
    _, dev, _, _ = team
    with dev.transaction() as conn:
        conn.execute("select * from scsql.index_text('docs/release.md', %s)",
                     ("The release checklist: bump the version, tag it, run make publish-wheels.",))
    sid = uuid.uuid4().hex
    handle(dev, _ev("SessionStart", sid, source="startup"))
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    r = handle(dev, _ev("UserPromptSubmit", sid, prompt=f"how do I publish-wheels for the release? key {secret}"))
    assert "docs/release.md" in r.output["hookSpecificOutput"]["additionalContext"]
    with dev.transaction() as conn:
        stored = conn.execute("select text, session_id from scsql.prompts").fetchall()
    assert len(stored) == 1 and secret not in stored[0]["text"] and "[REDACTED:" in stored[0]["text"]
    assert stored[0]["session_id"] is not None
    # Nothing relevant: nothing injected.
    assert handle(dev, _ev("UserPromptSubmit", sid, prompt="zebra quokka marmalade")).output is None
    # Configured off: stored, nothing injected.
    monkeypatch.setenv("SCSQL_HOOK_RECALL", "0")
    assert handle(dev, _ev("UserPromptSubmit", sid, prompt="publish-wheels release checklist")).output is None
    assert _count(dev, "select count(*) as n from scsql.prompts") == 3


def test_post_tool_use_is_one_signed_row_with_previews_and_files(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    handle(dev, _ev("SessionStart", sid, source="startup"))
    big = "x" * 10000
    assert handle(dev, _ev("PostToolUse", sid, tool_name="Write", tool_use_id="toolu_1", duration_ms=12,
                           tool_input={"file_path": "/repo/src/a.py", "content": big},
                           tool_response={"success": True})) == Reply()
    capture(dev, [_ev("PostToolUse", sid, tool_name="mcp__scsql-dev__search", tool_use_id="toolu_2",
                      tool_input={"query": "x"}, tool_response="[]")])
    with dev.transaction() as conn:
        rows = conn.execute("select tool, status, latency_ms, files, scsql_tool, tool_use_id, input_key, "
                            "length(input_preview) as n, input_preview, session_id from scsql.tool_calls "
                            "order by tool_call_id").fetchall()
    assert [r["tool"] for r in rows] == ["Write", "mcp__scsql-dev__search"]
    w, s = rows
    assert (w["status"], w["latency_ms"], w["files"], w["tool_use_id"], w["input_key"]) == \
        ("ok", 12, ["/repo/src/a.py"], "toolu_1", "/repo/src/a.py")
    assert w["n"] <= 4000 and "characters cut]" in w["input_preview"]
    assert w["scsql_tool"] is None and s["scsql_tool"] is True
    assert w["session_id"] == s["session_id"] is not None


def test_replaying_the_same_events_adds_nothing(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    events = [_ev("SessionStart", sid, source="startup"),
              _ev("UserPromptSubmit", sid, prompt="hello"),
              _ev("PostToolUse", sid, tool_name="Bash", tool_use_id="toolu_9", tool_input={"command": "ls"},
                  tool_response={"stdout": "a"}),
              _ev("PostToolUseFailure", sid, tool_name="Bash", tool_use_id="toolu_10",
                  tool_input={"command": "make test"}, error="exit 2")]
    capture(dev, events)
    counts = [_count(dev, f"select count(*) as n from scsql.{t}")
              for t in ("sessions", "prompts", "tool_calls", "outcomes", "learnings")]
    assert counts == [1, 1, 2, 1, 1]
    capture(dev, events)
    handlers._SESSIONS.clear()
    capture(dev, events)
    assert [_count(dev, f"select count(*) as n from scsql.{t}")
            for t in ("sessions", "prompts", "tool_calls", "outcomes", "learnings")] == counts


def test_the_captured_chain_verifies(team, verifier):
    db, dev, _, _ = team
    sid = uuid.uuid4().hex
    capture(dev, [_ev("SessionStart", sid, source="startup"), _ev("UserPromptSubmit", sid, prompt="go"),
                  _ev("PostToolUse", sid, tool_name="Read", tool_use_id="t1", tool_input={"file_path": "/repo/x"},
                      tool_response="ok"),
                  _ev("PostToolUseFailure", sid, tool_name="Bash", tool_use_id="t2",
                      tool_input={"command": "false"}, error="exit 1")])
    report = verifier.run(db)
    assert report.breaks == [] and report.rows >= 5


def _failed_bash_learning(agent, tool_use_id: str, command: str, error: str) -> dict:
    """A Bash call of AGENT that failed, as its PostToolUseFailure hook captures it, and the
    learning it became (the only learning of the project so far)."""
    handle(agent, _ev("PostToolUseFailure", uuid.uuid4().hex, tool_name="Bash", tool_use_id=tool_use_id,
                      tool_input={"command": command}, error=error))
    with agent.transaction() as conn:
        return conn.execute("select learning_id, tool, input_key, summary from scsql.learnings").fetchone()


def test_failure_becomes_a_learning_and_a_lesson_before_the_same_call(team):
    _, dev, other, _ = team
    learning = _failed_bash_learning(dev, "toolu_f", "pytest -x tests/test_db.py", "ModuleNotFoundError: psycopg")
    assert learning["tool"] == "Bash" and learning["input_key"] == "pytest -x tests/test_db.py"
    assert "ModuleNotFoundError" in learning["summary"]
    # The same command, by another agent of the project: the lesson comes first, cited.
    r = handle(other, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Bash", tool_use_id="toolu_g",
                          tool_input={"command": "pytest -x tests/test_db.py"}))
    ctx = r.output["hookSpecificOutput"]
    assert ctx["hookEventName"] == "PreToolUse" and "permissionDecision" not in ctx
    assert f"learning {learning['learning_id']}" in ctx["additionalContext"]
    # Another command: nothing.
    assert handle(other, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Bash",
                             tool_input={"command": "ls"})).output is None


def test_a_learning_marked_as_a_rule_denies_the_call(team):
    _, dev, other, _ = team
    lid = _failed_bash_learning(dev, "toolu_r", "git push --force origin main", "rejected")["learning_id"]
    with pytest.raises(ScsqlError) as e:
        with other.transaction() as conn:
            conn.execute("select scsql.mark_learning_rule(%s, true)", (lid,))
    assert e.value.code == "SC144"
    with pytest.raises(ScsqlError) as e:
        with dev.transaction() as conn:
            conn.execute("select scsql.mark_learning_rule(%s, true, '(')", (lid,))
    assert e.value.code == "SC143"
    with dev.transaction() as conn:
        conn.execute("select scsql.mark_learning_rule(%s, true, 'git push (-f|--force)')", (lid,))
    # A developer's rule binds the developer only (sql/15_rules.sql); another agent's call goes through.
    r = handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Bash",
                        tool_input={"command": "git push -f origin feature"}))
    out = r.output["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and f"learning {lid}" in out["permissionDecisionReason"]
    assert handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Bash",
                           tool_input={"command": "git push origin feature"})).output is None
    other_try = handle(other, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Bash",
                                  tool_input={"command": "git push -f origin feature"})).output
    assert "permissionDecision" not in json.dumps(other_try or {})


def test_marking_a_rule_is_recorded_once_as_the_agent_that_marked_it(team):
    """The memory history names the agent that made a learning a rule (here
    an orchestrator, on another agent's learning), once per change; a mark
    that changes nothing records nothing. On Citus the learning's row lives
    on a worker, where a trigger could not tell who marked it."""
    _, dev, _, orch = team
    lid = _failed_bash_learning(dev, "toolu_h", "rm -rf build", "failed")["learning_id"]
    for deny in (True, True, False):
        with orch.transaction() as conn:
            conn.execute("select scsql.mark_learning_rule(%s, %s, 'rm -rf')", (lid, deny))
    with dev.transaction() as conn:
        hist = conn.execute("select op, agent, reason from scsql.memory_history(%s) where op in ('rule', 'unrule')",
                            (f"learning:{lid}",)).fetchall()
    assert [(r["op"], r["agent"], r["reason"]) for r in hist] == [
        ("unrule", orch.name, "a plain lesson again"), ("rule", orch.name, "denies matching calls (pattern rm -rf)")]


def test_edit_of_a_file_another_agents_task_owns_is_denied_and_own_task_allowed(team):
    _, dev, other, orch = team
    with orch.transaction() as conn:
        task = conn.execute("select task_id from scsql.enqueue_task('developer', '{}', 0, "
                            "array['src/parser'])").fetchone()["task_id"]
    edit = {"file_path": "/repo/src/parser/lex.py", "old_string": "a", "new_string": "b"}
    # Queued, claimed by nobody: denied, naming the task and the role it waits for.
    r = handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Edit", tool_input=edit))
    out = r.output["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and f"task {task}" in out["permissionDecisionReason"]
    with other.transaction() as conn:
        assert conn.execute("select task_id from scsql.claim_task(1)").fetchone()["task_id"] == task
    r = handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Write", tool_input={**edit, "content": "x"}))
    reason = r.output["hookSpecificOutput"]["permissionDecisionReason"]
    assert f"task {task}" in reason and other.name in reason
    # The holder edits its own files; files outside the task are free; reads are never denied.
    assert handle(other, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Edit", tool_input=edit)).output is None
    assert handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Edit",
                           tool_input={**edit, "file_path": "/repo/src/other.py"})).output is None
    assert handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Read",
                           tool_input={"file_path": "/repo/src/parser/lex.py"})).output is None
    assert handle(dev, _ev("PreToolUse", uuid.uuid4().hex, tool_name="Edit",
                           tool_input={**edit, "file_path": "/elsewhere/x.py"})).output is None


def test_stop_drain_check_honours_stop_hook_active(team):
    _, dev, _, orch = team
    sid = uuid.uuid4().hex
    assert handle(dev, _ev("Stop", sid, stop_hook_active=False)) == Reply()
    with orch.transaction() as conn:
        conn.execute("select * from scsql.enqueue_task('developer', '{}')")
    r = handle(dev, _ev("Stop", sid, stop_hook_active=False))
    # A decision is JSON with exit 0: exit 2 is never scsql's (any failure of the hook process is non-blocking).
    assert r.exit == 0 and r.output["decision"] == "block" and "claimable" in r.output["reason"]
    assert handle(dev, _ev("SubagentStop", sid, stop_hook_active=True)) == Reply()


def test_teammate_idle_claims_and_task_completed_completes(team):
    _, dev, _, orch = team
    sid = uuid.uuid4().hex
    assert handle(dev, _ev("TeammateIdle", sid, teammate_name="dev", team_name="t")) == Reply()
    with orch.transaction() as conn:
        task = conn.execute("select task_id from scsql.enqueue_task('developer', '{\"do\": \"x\"}')"
                            ).fetchone()["task_id"]
    r = handle(dev, _ev("TeammateIdle", sid, teammate_name="dev", team_name="t"))
    assert r.exit == 0 and r.output["decision"] == "block" and f"claimed task {task}" in r.output["reason"]
    assert _count(dev, "select count(*) as n from scsql.my_tasks()") == 1
    assert handle(dev, _ev("TaskCompleted", sid, task_id="1", task_subject=f"scsql task {task}")) == Reply()
    assert _count(dev, "select count(*) as n from scsql.my_tasks()") == 0
    with orch.transaction() as conn:
        assert conn.execute("select state from scsql.tasks_archive where task_id = %s", (task,)).fetchone() \
            == {"state": "done"}


def test_config_change_warns_when_scsql_hooks_are_gone(team, tmp_path):
    _, dev, _, _ = team
    f = tmp_path / "settings.json"
    f.write_text('{"hooks": {}}')
    r = handle(dev, {"hook_event_name": "ConfigChange", "session_id": "s", "source": "project_settings",
                     "file_path": str(f)})
    assert "removed or changed" in r.output["systemMessage"]


def test_malformed_events_are_a_clear_non_blocking_error(team):
    _, dev, _, _ = team
    assert handle(dev, {"hook_event_name": "Nope", "session_id": "s"}).exit == 1
    assert handle(dev, {"session_id": "s"}).exit == 1
    assert handle(dev, {"hook_event_name": "PreToolUse", "session_id": "s"}).exit == 1


def test_check_tool_use_validates(team):
    _, dev, _, _ = team
    with pytest.raises(ScsqlError) as e:
        with dev.transaction() as conn:
            conn.execute("select * from scsql.check_tool_use('Bash', '[]')")
    assert e.value.code == "SC145"


def test_two_session_starts_racing_open_one_session(team):
    """A second SessionStart for the same Claude session, while the first is
    uncommitted, waits for it and returns its session instead of a second."""
    import threading

    from scsql.audit.telemetry import SESSIONS

    from ..helpers import statement_lock_waiters, wait_for

    db, dev, _, _ = team
    sid = uuid.uuid4().hex
    event = _ev("SessionStart", sid, source="startup")
    got = {}
    with dev.transaction() as a:
        first = handlers._call(a, "open_session", SESSIONS.sign(dev, handlers._session_row(event, "startup")))

        def b() -> None:
            with dev.transaction() as conn:
                got.update(handlers._call(conn, "open_session",
                                          SESSIONS.sign(dev, handlers._session_row(event, "resume"))))

        th = threading.Thread(target=b)
        th.start()
        wait_for(lambda: statement_lock_waiters(db, "%open_session%") == 1)
    th.join(30)
    assert first["created"] is True
    assert got == {"session_id": first["session_id"], "created": False}
    assert _count(dev, "select count(*) as n from scsql.sessions") == 1


def test_imported_events_keep_their_original_time_and_are_marked(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    at = "2026-11-26T08:30:00+00:00"
    events = [{**_ev(name, sid, **fields), "scsql_imported": True, "scsql_received_at": at,
               "scsql_git_branch": "feature/x"}
              for name, fields in [("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": "hi"}),
                                   ("PostToolUse", {"tool_name": "Read", "tool_use_id": "toolu_i",
                                                    "tool_input": {"file_path": "/repo/a"}, "tool_response": "x"})]]
    capture(dev, events)
    with dev.transaction() as conn:
        s = conn.execute("select source, git_branch, occurred_at::text as t from scsql.sessions").fetchone()
        p = conn.execute("select imported, occurred_at::text as t from scsql.prompts").fetchone()
        t = conn.execute("select imported, occurred_at::text as t from scsql.tool_calls").fetchone()
    assert s == {"source": "import", "git_branch": "feature/x", "t": "2026-11-26 08:30:00+00"}
    assert p == t == {"imported": True, "t": "2026-11-26 08:30:00+00"}


# -- live capture and a later import of the same session ---------------------------


def _transcript(path, sid: str, t0) -> list[dict]:
    """A transcript of three prompts (one typed twice) and a tool call, and the
    live hook events of the same session, each received 700 ms after its line."""
    import datetime as dt
    import json

    def at(s: float) -> str:
        return (t0 + dt.timedelta(seconds=s)).isoformat().replace("+00:00", "Z")

    rows = [
        {"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": at(0), "cwd": "/tmp",
         "message": {"role": "user", "content": "  run the tests please  "}},
        {"type": "assistant", "uuid": "a1", "sessionId": sid, "timestamp": at(1), "message": {"role": "assistant",
         "content": [{"type": "tool_use", "id": "toolu_live_1", "name": "Bash", "input": {"command": "pytest -q"}}]}},
        {"type": "user", "uuid": "r1", "sessionId": sid, "timestamp": at(2), "message": {"role": "user",
         "content": [{"type": "tool_result", "tool_use_id": "toolu_live_1", "content": "3 passed"}]}},
        {"type": "user", "uuid": "u2", "sessionId": sid, "timestamp": at(3), "message": {"role": "user", "content": "yes"}},
        {"type": "user", "uuid": "u3", "sessionId": sid, "timestamp": at(10), "message": {"role": "user", "content": "yes"}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    live = [_ev("SessionStart", sid, source="startup", scsql_received_at=at(-1))]
    live += [_ev("UserPromptSubmit", sid, prompt=p, scsql_received_at=at(s + 0.7))
             for p, s in (("  run the tests please  ", 0), ("yes", 3), ("yes", 10))]
    live.append(_ev("PostToolUse", sid, tool_name="Bash", tool_use_id="toolu_live_1", tool_input={"command": "pytest -q"},
                    tool_response={"stdout": "3 passed"}, scsql_received_at=at(2.5)))
    return live


@pytest.mark.parametrize("live_first", [True, False], ids=["live-then-import", "import-then-live"])
def test_a_live_session_imported_later_stores_no_prompt_or_call_twice(team, tmp_path, live_first):
    import datetime as dt

    from scsql.hooks import importer

    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    f = tmp_path / f"{sid}.jsonl"
    live = _transcript(f, sid, dt.datetime.now(dt.UTC).replace(microsecond=0))
    steps = [lambda: capture(dev, live), lambda: importer.import_files(dev, [f], progress=False)]
    for step in steps if live_first else steps[::-1]:
        step()
    with dev.transaction() as conn:
        prompts = conn.execute("select text, imported from scsql.prompts order by prompt_id").fetchall()
        calls = conn.execute("select tool_use_id from scsql.tool_calls").fetchall()
    assert sorted(p["text"] for p in prompts) == ["run the tests please", "yes", "yes"]   # "yes" typed twice: twice
    assert {bool(p["imported"]) for p in prompts} == {not live_first}                   # the first path's rows
    assert [c["tool_use_id"] for c in calls] == ["toolu_live_1"]
    # Both again: nothing more.
    for step in steps:
        step()
    assert _count(dev, "select count(*) as n from scsql.prompts") == 3
    assert _count(dev, "select count(*) as n from scsql.tool_calls") == 1


# -- redaction before the length bound --------------------------------------------


def test_a_secret_across_the_prompt_bound_is_redacted_not_cut(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    secret = "ghp_" + "Zq8Rt2Lx9Vb4Nm7Kp3Wc6Hy1Jd5Fg0Ts8Eab"
    with dev.transaction() as conn:
        bound = storable.column_bounds(conn)[("prompts", "text")]   # the table's check constraint
    for start in (bound - 30, bound - 10, bound - 35):
        prompt = "a" * (start - 1) + " " + secret + " tail"          # the secret straddles the bound
        assert prompt.index(secret) < bound < prompt.index(secret) + len(secret)
        capture(dev, [_ev("UserPromptSubmit", sid, prompt=prompt)])
    with dev.transaction() as conn:
        stored = [r["text"] for r in conn.execute("select text from scsql.prompts").fetchall()]
    assert len(stored) == 3
    for text in stored:
        assert len(text) <= bound
        assert "ghp_" not in text and secret[4:16] not in text and secret[:12] not in text


def test_a_secret_across_a_preview_bound_is_not_kept_in_part(team):
    _, dev, _, _ = team
    sid = uuid.uuid4().hex
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    for pad in range(3960, 3990, 3):
        capture(dev, [_ev("PostToolUse", sid, tool_name="Bash", tool_use_id=f"toolu_pad_{pad}",
                          tool_input={"command": "echo"}, tool_response="b" * pad + " " + secret + " end")])
    with dev.transaction() as conn:
        previews = [r["output_preview"] for r in conn.execute("select output_preview from scsql.tool_calls").fetchall()]
    assert len(previews) == 10
    assert not any("AKIA" in p or "IOSFODNN" in p for p in previews)


PAST = ["what did we decide about the database last week?", "why did we switch to pgvector?",
        "did we ever benchmark citus?", "what was the reason for the 2 MiB limit", "remind me how we fixed the flaky test",
        "when did we drop Python 3.10?", "who was working on the importer yesterday?",
        "have we tried connection pooling before", "what were the open questions from last session",
        "we agreed on a naming scheme in March, what was it"]
PRESENT = ["add a test for the parser", "fix the bug in foo.py", "rename this variable to count",
           "how do I run the tests?", "where is the config loaded", "write a migration for the users table",
           "explain what this function returns", "make the build faster", "list the files in src/",
           "update the README with the new flag"]


def test_a_question_about_the_past_with_nothing_in_memory_is_told_so(team):
    """UserPromptSubmit: a prompt asking what happened before, when no memory
    passes the floor, gets "memory has nothing on this", so the model does
    not bluff; a task for now gets nothing; a past question memory can
    answer gets the hits instead."""
    _, dev, _, _ = team
    assert [p for p in PAST if not handlers.asks_about_the_past(p)] == []
    assert [p for p in PRESENT if handlers.asks_about_the_past(p)] == []
    sid = uuid.uuid4().hex
    handle(dev, _ev("SessionStart", sid, source="startup"))
    r = handle(dev, _ev("UserPromptSubmit", sid, prompt="why did we pick the zookeeper quorum size last month?"))
    assert r.output["hookSpecificOutput"]["additionalContext"] == handlers.NOTHING_ON_THIS
    r = handle(dev, _ev("UserPromptSubmit", sid, prompt="add a zookeeper health check to the compose file"))
    assert not r.output
    with dev.transaction() as conn:
        conn.execute("select * from scsql.index_text('docs/zookeeper.md', %s)",
                     ("The zookeeper quorum size is five: three lost a quorum during the March outage.",))
    r = handle(dev, _ev("UserPromptSubmit", sid, prompt="why did we pick the zookeeper quorum size last month?"))
    text = r.output["hookSpecificOutput"]["additionalContext"]
    assert "docs/zookeeper.md" in text and handlers.NOTHING_ON_THIS not in text
