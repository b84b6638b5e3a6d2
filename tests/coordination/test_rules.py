"""Rules made of failure learnings (mark_learning_rule, check_tool_use): a
rule made by an agent that is not an orchestrator binds that agent only; a
rule of the whole project is an orchestrator's, and only an orchestrator
changes it; a pattern that would deny every call is refused; the reason of
a denied call names who made the rule and when."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from scsql.core.errors import ScsqlError
from scsql.hooks.handlers import handle

# Patterns that match every command, of several shapes: each matches the
# empty string, or every ordinary command and path.
EVERYTHING = [".*", "^", ".?", "(?:)", "x*", r"[\s\S]*", "$", "push|", "(?!zzz)", ".", r"\S", r"\w", "[^q]", "(?s).+"]
NARROW = ["git push (-f|--force)", "^rm -rf /", r"migrations/0\d+", "make deploy"]


@pytest.fixture
def team(scsql_db):
    project = scsql_db.project()
    return (scsql_db.agent("dev", project), scsql_db.agent("other", project),
            scsql_db.agent("orch", project, "orchestrator"))


def _failed(agent, tool: str, tool_input: dict) -> int:
    """A call of AGENT that failed, as its PostToolUseFailure hook captures it; the learning it became."""
    tool_use_id = f"toolu_{uuid.uuid4().hex[:12]}"
    handle(agent, {"hook_event_name": "PostToolUseFailure", "session_id": uuid.uuid4().hex,
                   "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp", "permission_mode": "default",
                   "scsql_event_id": uuid.uuid4().hex, "scsql_received_at": "2026-11-26T20:00:00Z",
                   "tool_name": tool, "tool_use_id": tool_use_id, "tool_input": tool_input, "error": "exit 1"})
    with agent.transaction() as conn:
        return conn.execute("select l.learning_id from scsql.learnings l join scsql.tool_calls t "
                            "on t.project_id = l.project_id and t.tool_call_id = l.tool_call_id "
                            "where t.tool_use_id = %s", (tool_use_id,)).fetchone()["learning_id"]


def _mark(agent, lid: int, deny: bool, pattern: str | None = None) -> None:
    with agent.transaction() as conn:
        conn.execute("select scsql.mark_learning_rule(%s, %s, %s)", (lid, deny, pattern))


def _refused(agent, code: str, lid: int, deny: bool, pattern: str | None = None) -> str:
    with pytest.raises(ScsqlError) as err:
        _mark(agent, lid, deny, pattern)
    assert err.value.code == code, (pattern, err.value)
    return str(err.value)


def _check(agent, command: str) -> dict:
    with agent.transaction() as conn:
        return conn.execute("select decision, reason from scsql.check_tool_use('Bash', %s::jsonb)",
                            (json.dumps({"command": command}),)).fetchone()


def _rule(agent, lid: int) -> dict:
    with agent.transaction() as conn:
        return conn.execute("select deny, pattern, rule_at, a.name as rule_by, f.name as rule_for "
                            "from scsql.learnings l left join scsql.agents a on a.agent_id = l.rule_by "
                            "left join scsql.agents f on f.agent_id = l.rule_for where l.learning_id = %s",
                            (lid,)).fetchone()


def test_a_pattern_that_matches_every_call_is_refused_whoever_marks_it(team):
    """Before, any agent could make its learning a rule with pattern .*,
    which denied every Bash call of every agent of the project."""
    dev, other, orch = team
    lid = _failed(dev, "Bash", {"command": "git push --force origin main"})
    for pattern in EVERYTHING:
        for agent in (dev, orch):
            assert "would deny every Bash call" in _refused(agent, "SC250", lid, True, pattern)
    assert _rule(dev, lid)["deny"] is False
    assert _check(other, "ls")["decision"] == "allow" and _check(dev, "make test")["decision"] == "allow"
    for pattern in NARROW:
        _mark(dev, lid, True, pattern)
    # A failed call without a command or file path: without a pattern its rule would deny every call of the tool.
    fetch = _failed(dev, "WebFetch", {"url": "https://example.org/a", "prompt": "read it"})
    assert "had no command or file path" in _refused(dev, "SC250", fetch, True)
    _mark(dev, fetch, True, r"example\.org")
    # A bad regular expression is still SC143, also when only unmarking.
    _refused(dev, "SC143", lid, True, "(")
    _refused(dev, "SC143", lid, False, "(")


def test_a_developers_rule_denies_only_that_developers_calls(team):
    """Before, a developer's rule denied the matching calls of every agent
    of the project, orchestrators included."""
    dev, other, orch = team
    lid = _failed(dev, "Bash", {"command": "git push --force origin main"})
    _mark(dev, lid, True, "git push (-f|--force)")
    assert _check(other, "git push -f origin feature") == {"decision": "allow", "reason": None}
    assert _check(orch, "git push --force origin release")["decision"] == "allow"
    mine = _check(dev, "git push -f origin feature")
    rule = _rule(dev, lid)
    assert rule["rule_by"] == dev.name and rule["rule_for"] == dev.name
    assert mine["decision"] == "deny" and f"learning {lid}" in mine["reason"]
    assert f"made a rule by agent {dev.name} at {rule['rule_at'].astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC" in mine["reason"]
    assert "for its own calls only" in mine["reason"]
    assert _check(dev, "git push origin feature")["decision"] == "allow"
    # The memory history names the one agent the rule binds.
    with dev.transaction() as conn:
        [hist] = conn.execute("select op, agent, related from scsql.memory_history(%s) where op = 'rule'",
                              (f"learning:{lid}",)).fetchall()
    assert hist == {"op": "rule", "agent": dev.name, "related": f"agent:{dev.name}"}


def test_an_orchestrators_rule_binds_the_project_and_names_the_orchestrator(team):
    dev, other, orch = team
    lid = _failed(dev, "Bash", {"command": "rm -rf build"})
    _mark(dev, lid, True, "rm -rf")               # the author's own rule first ...
    _mark(orch, lid, True, "rm -rf")              # ... which an orchestrator makes the project's
    denied = [_check(agent, "rm -rf /tmp/x") for agent in (dev, other, orch)]
    assert [d["decision"] for d in denied] == ["deny"] * 3
    assert all(f"made a rule by agent {orch.name} at " in d["reason"] for d in denied), denied[0]["reason"]
    rule = _rule(orch, lid)
    assert rule["rule_by"] == orch.name and rule["rule_for"] is None
    when = f"{rule['rule_at'].astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
    assert all(f"at {when} for every agent of the project: " in d["reason"] for d in denied)
    assert _check(other, "ls -la")["decision"] == "allow"
    # Only an orchestrator changes a rule of the project: not even the learning's author.
    for deny, pattern in ((False, None), (True, "rm -rf"), (True, "rm -rf /")):
        assert "only an orchestrator may change it" in _refused(dev, "SC251", lid, deny, pattern)
    assert _rule(orch, lid) == rule
    # Marking it again as it is changes nothing, not even who made it and when.
    _mark(orch, lid, True, "rm -rf")
    assert _rule(orch, lid) == rule
    _mark(orch, lid, False)
    assert _rule(dev, lid) == {"deny": False, "pattern": None, "rule_at": None, "rule_by": None, "rule_for": None}
    assert _check(other, "rm -rf /tmp/x")["decision"] == "allow"
