"""A recorded Claude Code session replayed through the hook commands exactly
as ``scsql install claude`` wrote them into the settings file: SessionStart,
five prompts, fifty tool calls (some failing, some editing a file another
agent's task owns), PreCompact and SessionEnd. Then the chain verifies, the
owned-file edits were denied, the failures became learnings, the summary and
the conversation are searchable, and the next SessionStart injects them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scsql.core.db import Agent, Database

from ..conftest import SESSION
from ..helpers import enqueue, rows, scsql
from ..hook_transport_helpers import HookEnv, wait_for
from ..recorded_session import record

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def installed(scsql_db, tmp_path):
    """A repository with scsql installed for a new agent, and another agent's
    queued task owning src/owned.py."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    home, user = tmp_path / "data", tmp_path / "user"
    user.mkdir()
    project = scsql_db.project()
    name = f"{SESSION}_e2e"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(user), "PYTHONPATH": str(ROOT),
           "SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
           "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(home)}
    done = subprocess.run([sys.executable, "-m", "scsql", "install", "claude", "--agent", name, "--project", project,
                           "--project-dir", str(repo), "--scope", "local"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    orch = scsql_db.agent("orch", project, team_role="orchestrator")
    task = enqueue(orch, "developer", files=["src/owned.py"])
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    db = Database(scsql_db.app, max_size=2).open()
    scsql_db._pools.append(db)
    agent = Agent(db, name, scsql_db.keystore.load(name))
    hooks = HookEnv(str(home), name, env, scsql_db.admin, None)
    try:
        yield repo, settings["hooks"], env, agent, task, orch
    finally:
        hooks.stop_server()


def _commands(hooks: dict, event: dict) -> list[str]:
    """The commands Claude Code runs for EVENT: every handler of a group whose matcher matches."""
    subject = event.get("tool_name") or event.get("source") or ""
    out = []
    for group in hooks.get(event["hook_event_name"], []):
        matcher = group.get("matcher") or "*"
        if matcher == "*" or re.fullmatch(matcher, subject):
            out += [h["command"] for h in group["hooks"] if h.get("type") == "command"]
    return out


def _fire(hooks: dict, env: dict, event: dict) -> list[dict | None]:
    commands = _commands(hooks, event)
    assert commands, f"no hook installed for {event['hook_event_name']}"
    answers = []
    for command in commands:
        done = subprocess.run(command, shell=True, input=json.dumps(event), env={**env, "CLAUDE_PROJECT_DIR": event["cwd"]},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (event["hook_event_name"], done.stderr)
        answers.append(json.loads(done.stdout) if done.stdout.strip() else None)
    return answers


def test_a_recorded_session_through_the_installed_hooks(installed, tmp_path, scsql_db):
    repo, hooks, env, agent, task, orch = installed
    rec = record(tmp_path, repo / "src" / "owned.py")
    denied = []
    for event in rec.events:
        answers = _fire(hooks, env, event)
        if event["hook_event_name"] == "PreToolUse":
            decision = [a["hookSpecificOutput"] for a in answers if a and "permissionDecision" in a.get("hookSpecificOutput", {})]
            if decision and decision[0]["permissionDecision"] == "deny":
                denied.append(event["tool_use_id"])
                assert f"task {task}" in decision[0]["permissionDecisionReason"]
                assert orch.name in decision[0]["permissionDecisionReason"]
        assert not any(a and "systemMessage" in a and "degraded" in a["systemMessage"] for a in answers), answers

    # The owned-file edits, and only they, were denied.
    assert denied == rec.owned_edits

    # Every executed call is one chained, signed row, and the chain verifies.
    calls = rows(agent, "select tool_use_id, status from scsql.tool_calls where tool_use_id is not null")
    assert len(calls) == 45 and {c["tool_use_id"] for c in calls if c["status"] == "error"} == set(rec.failures)
    assert len(rows(agent, "select 1 from scsql.prompts")) == 5
    assert len(rows(agent, "select 1 from scsql.sessions")) == 1
    verified = scsql("verify", env={k: v for k, v in env.items() if k != "PYTHONPATH"})
    assert verified.returncode == 0, verified.stderr + verified.stdout

    # The failures became learnings.
    learned = rows(agent, "select tool from scsql.learnings where kind = 'failure'")
    assert len(learned) == len(rec.failures) and {x["tool"] for x in learned} == {"Bash"}

    # The summary and the conversation are searchable.
    hits = rows(agent, "select source_path from scsql.search('exponential backoff rate-limits', 5, null, null, null, 'bm25')")
    assert any(h["source_path"].startswith("claude/sessions/") for h in hits), hits

    # The next session starts with them.
    nxt = {**rec.events[0], "session_id": "next-session", "source": "startup"}
    answers = [a for a in _fire(hooks, env, nxt) if a]
    context = answers[0]["hookSpecificOutput"]["additionalContext"]
    assert "Add retry with exponential backoff" in context
    assert "pytest -q tests/test_client.py" in context
    wait_for(lambda: len(rows(agent, "select 1 from scsql.sessions")) == 2, 10, "the second session")
