"""The real Claude Code CLI, offline (its API is a scripted server on
127.0.0.1: tests/claude_api.py), in a git repository where `scsql install
claude` wrote the committed, portable project configuration: its hooks
capture the prompt and every tool call, deny an edit of a file another
agent's task owns, its MCP server stores a fact, the transcript's usage is
priced, and the next session starts with what the first one left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from scsql.core.db import Agent, Database

from ..claude_api import ClaudeApi, Say, Tool, claude_cli, run_claude
from ..conftest import SESSION
from ..helpers import enqueue, rows, serial, wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(claude_cli() is None and not os.environ.get("SCSQL_REQUIRE_CLAUDE"),
                                reason="the Claude Code CLI is not installed (npm install -g @anthropic-ai/claude-code; "
                                       ".ci/run installs it and requires it)")


@pytest.fixture
def project(scsql_db, tmp_path, request):
    """A repository where scsql install claude (with the options the test
    gives as the fixture's parameter) wrote the committed configuration."""
    repo, user, data, bindir = tmp_path / "repo", tmp_path / "user", tmp_path / "data", tmp_path / "bin"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "owned.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    user.mkdir()
    bindir.mkdir()
    scsql_bin = bindir / "scsql"  # the scsql a user installed on PATH: this checkout's
    scsql_bin.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m scsql \"$@\"\n")
    scsql_bin.chmod(0o755)
    name = f"{SESSION}_cc{next(serial)}"
    admin_env = {"PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(user), "SCSQL_DSN": scsql_db.admin,
                 "SCSQL_AGENT_DSN": scsql_db.app, "SCSQL_KEYSTORE": str(scsql_db.keystore.directory),
                 "SCSQL_DATA_DIR": str(data), "SCSQL_EMBED": "none"}
    proj = scsql_db.project()
    done = subprocess.run(["scsql", "install", "claude", "--agent", name, "--project", proj,
                           *getattr(request, "param", ())], cwd=repo,
                          env=admin_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (repo / ".claude" / "settings.local.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    orch = scsql_db.agent("orch", proj, team_role="orchestrator")
    task = enqueue(orch, "developer", files=["src/owned.py"])
    db = Database(scsql_db.app, max_size=2).open()
    scsql_db._pools.append(db)
    agent = Agent(db, name, scsql_db.keystore.load(name))
    # Claude Code's own environment holds nothing of scsql's: the committed files and the
    # checkout's .claude/scsql.local.json say everything.
    env = {"PATH": admin_env["PATH"], "HOME": str(user), "SCSQL_EMBED": "none"}
    yield repo, env, agent, task, data
    subprocess.run(["pkill", "-f", f"--agent {name}"], check=False)


def test_a_real_session_is_captured_denied_priced_and_recalled(project):
    repo, env, agent, task, data = project
    first = ClaudeApi([
        Tool("Bash", command="echo hello > note.txt", description="write a note"),
        Tool("Read", file_path=str(repo / "src" / "owned.py")),
        Tool("Edit", file_path=str(repo / "src" / "owned.py"), old_string="x = 1", new_string="x = 2"),
        Tool("WaitForMcpServers"),
        Tool("mcp__scsql__remember", key="build", value="make test runs the whole suite", importance=4),
        Say("Done."),
    ])
    with first:
        result = run_claude(repo, "Write the note and remember how we build.", first, env,
                            allowed="Bash Read Edit WaitForMcpServers mcp__scsql__remember")
    sid = result["session_id"]
    assert (repo / "note.txt").read_text() == "hello\n"
    assert (repo / "src" / "owned.py").read_text() == "x = 1\n"                       # the edit was denied
    assert f"owned exclusively by task {task}" in first.seen()                          # and the model was told why
    calls = wait_for(lambda: rows(agent, "select tool, status, input_preview from scsql.tool_calls "
                                         "where tool = 'Bash'"), 60)
    assert "echo hello" in calls[0]["input_preview"] and calls[0]["status"] == "ok"
    prompts = rows(agent, "select text from scsql.prompts")
    assert [p["text"] for p in prompts] == ["Write the note and remember how we build."]
    facts = rows(agent, "select content from scsql.recall_context(400)")
    assert any("make test runs the whole suite" in f["content"] for f in facts), facts
    # What the session cost, from its transcript: the model's messages, each once.
    priced = wait_for(lambda: rows(agent, "select * from scsql.cost_report(now() - interval '1 day', 'session')"), 60)
    assert sum(r["model_messages"] for r in priced) >= 3 and sum(r["cost_usd"] for r in priced) > 0
    assert rows(agent, "select 1 from scsql.sessions where external_id = %s", sid)

    second = ClaudeApi([Say("It is make test.")])
    with second:
        run_claude(repo, "How do we build this project?", second, env, allowed="Bash")
    assert "make test runs the whole suite" in json.dumps(second.requests[0])          # SessionStart's context


@pytest.mark.parametrize("project", [("--distill",)], indirect=True)
def test_a_real_session_is_distilled_by_claude_and_recalled_in_the_next(project, scsql_db):
    """scsql install claude --distill: the session's prompt and tool call are
    recorded by the hooks and queued for distillation at SessionEnd; scsql
    worker, acting as the distiller, runs claude -p against the scripted
    endpoint, whose answer (the JSON the distiller asks for) is stored signed
    by the distiller, citing the session's rows, and recalled by the next
    session; the private part of the prompt is nowhere."""
    repo, env, agent, task, data = project
    secret = "swordfish-9-staging"
    with agent.transaction() as conn:
        loop = conn.execute("select loop_id from scsql.open_loop('Write the release script')").fetchone()["loop_id"]
    first = ClaudeApi([Tool("Bash", command="echo 'make release' > RELEASING", description="note how we release"),
                       Say("Noted: we release with make release.")])
    with first:
        result = run_claude(repo, f"We release with make release from now on; the release script is written. "
                                  f"<private>the staging password is {secret}</private>", first, env, allowed="Bash")
    sid = result["session_id"]
    [job] = wait_for(lambda: rows(agent, "select * from scsql.distill_jobs"), 60)
    assert job["state"] == "queued" and job["segment"] == 1
    refs = {"prompt": rows(agent, "select prompt_id from scsql.prompts")[0]["prompt_id"],
            "tool_call": rows(agent, "select tool_call_id from scsql.tool_calls where tool = 'Bash'")[0]["tool_call_id"]}
    answer = {"facts": [{"key": "release", "value": "We release with make release", "importance": 4,
                         "cites": [f"prompt:{refs['prompt']}", f"tool_call:{refs['tool_call']}"]}],
              "decisions": [{"title": "Release with make release", "rationale": "the user said so",
                             "cites": [f"prompt:{refs['prompt']}"]}],
              "loops_closed": [{"loop_id": loop, "resolution": "the release script is written",
                                "cites": [f"prompt:{refs['prompt']}"]}],
              "summary": {"text": "Settled how we release.", "cites": [f"prompt:{refs['prompt']}"]}}
    distiller = f"{agent.name[:38]}_distiller"
    model = ClaudeApi([], replies={"durable memory records": json.dumps(answer)})
    worker_env = {**env, "SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
                  "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(data),
                  "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-test-key",
                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
    with model:
        done = subprocess.run(["scsql", "worker", "--agent", distiller, "--job", "distill", "--once"], cwd=repo,
                              env=worker_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [job] = rows(agent, "select * from scsql.distill_jobs")
    assert (job["state"], job["written"], job["refusals"]) == ("done", 4, []), job
    assert job["input_tokens"] > 0 and job["output_tokens"] > 0                      # what claude -p reported
    [asked] = model.requests                                                          # one request, no tools
    assert "make release" in json.dumps(asked) and not asked["tools"] and secret not in json.dumps(asked)
    # Stored by the distiller, citing the session's rows; the distiller's own run is no session.
    items = rows(agent, "select i.kind, i.action, a.name, i.cites from scsql.distill_items i "
                        "join scsql.agents a on a.agent_id = i.author_id order by i.item_id")
    assert [(i["kind"], i["action"], i["name"]) for i in items] == [
        ("fact", "remembered", distiller), ("decision", "decided", distiller), ("loop_closed", "closed", distiller),
        ("summary", "summarized", distiller)]
    assert [r["cited_id"] for r in rows(agent, "select cited_id from scsql.distill_citations where cited = 'tool_call'")] \
        == [refs["tool_call"]]
    assert [s["external_id"] for s in rows(agent, "select external_id from scsql.sessions")] == [sid]
    from scsql.audit.verify import verify

    assert verify(scsql_db.admin, workers=1, progress=False, full=True).breaks == []
    # The private text is nowhere: not in any table, not in the spool or the logs.
    with scsql_db.connect() as conn:
        tables = [r["t"] for r in conn.execute("select c.oid::regclass::text as t from pg_class c where "
                                                "c.relnamespace = 'scsql'::regnamespace and c.relkind in ('r', 'p') "
                                                "and not c.relispartition")]
        for t in tables:
            assert not conn.execute(f"select 1 from {t} x where x::text like %s limit 1", (f"%{secret}%",)).fetchall(), t
    for path in data.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path

    second = ClaudeApi([Say("We release with make release.")])
    with second:
        run_claude(repo, "How do we release?", second, env, allowed="Bash")
    context = json.dumps(second.requests[0])
    assert "[fact, distilled] release: We release with make release" in context and "Release with make release" in context
    assert "Write the release script" not in context                                  # the loop is closed
