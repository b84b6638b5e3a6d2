"""File ownership holds at the edit, through the installed hooks: an Edit or
Write of a file another agent's task owns is denied however the path is
spelled (a linked directory, a linked file, a linked spelling of the root, a
NUL, an input that is otherwise unusable), and a shell command that changes
one is found after the fact: a violation outcome of the call, and a message
to the owner. A hook reads only its own session's transcript."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from ..helpers import claim, enqueue, rows, wait_for
from ..hooks.test_capture_integrity import _event, _tool, installed  # noqa: F401 - the fixture

OWNED = "src/owned.py"


@pytest.fixture
def owned(installed, scsql_db):  # noqa: F811
    """A task of another developer (alice) that owns src/owned.py, claimed by her."""
    orch = scsql_db.agent("orch", installed.project, team_role="orchestrator")
    alice = scsql_db.agent("alice", installed.project, team_role="developer")
    task = enqueue(orch, "developer", files=[OWNED])
    claim(alice, task=task)
    return installed, task, alice


def _decision(installed, tool: str, tool_input: dict, **extra) -> str:  # noqa: F811
    ev = _event("PreToolUse", uuid.uuid4().hex, installed.repo, tool_name=tool, tool_use_id="t" + uuid.uuid4().hex,
                tool_input=tool_input, **extra)
    answers = [a for a in installed.fire(ev) if a]
    out = [a["hookSpecificOutput"] for a in answers if "permissionDecision" in a.get("hookSpecificOutput", {})]
    return out[0]["permissionDecision"] if out else "allow"


def test_an_edit_through_any_spelling_of_an_owned_file_is_denied(owned, tmp_path):
    installed, task, alice = owned
    repo = installed.repo
    (repo / "linked").symlink_to(repo / "src")                   # a linked directory inside the root
    (repo / "alias.py").symlink_to(repo / "src" / "owned.py")     # a linked file
    (tmp_path / "rootlink").symlink_to(repo)                      # the root by a linked spelling
    spellings = [str(repo / OWNED), str(repo / "linked" / "owned.py"), str(repo / "alias.py"),
                 str(tmp_path / "rootlink" / OWNED), str(repo / "src" / "." / "owned.py")]
    for path in spellings:
        assert _decision(installed, "Edit", {"file_path": path, "old_string": "1", "new_string": "2"}) == "deny", path
        assert _decision(installed, "Write", {"file_path": path, "content": "x"}) == "deny", path
    # Not owned: another file, and a link that leads out of the project.
    (tmp_path / "outside.py").write_text("")
    (repo / "out.py").symlink_to(tmp_path / "outside.py")
    assert _decision(installed, "Edit", {"file_path": str(repo / "src" / "free.py"), "old_string": "a",
                                         "new_string": "b"}) == "allow"
    assert _decision(installed, "Write", {"file_path": str(repo / "out.py"), "content": "x"}) == "allow"


def test_an_edit_whose_input_is_otherwise_unusable_is_still_checked(owned):
    installed, task, alice = owned
    path = str(installed.repo / OWNED)
    assert _decision(installed, "Write", {"file_path": path + "\x00.bak", "content": "x"}) == "deny"
    assert _decision(installed, "Write", {"file_path": path, "content": "a \ud800 lone surrogate"}) == "deny"
    big = {"file_path": path, "content": "word " * 2_000_000}  # 10 MB: over the hook's transport bound
    assert _decision(installed, "Write", big) == "deny"
    assert _decision(installed, "Edit", {"file_path": path, "old_string": "\x00", "new_string": "\udc00"}) == "deny"


def test_a_shell_edit_of_an_owned_file_is_a_violation_told_to_its_owner(owned):
    installed, task, alice = owned
    sid = uuid.uuid4().hex
    command = f"sed -i 's/1/2/' {installed.repo / OWNED}"
    pre = _event("PreToolUse", sid, installed.repo, tool_name="Bash", tool_use_id="b1", tool_input={"command": command})
    assert not any(a and "permissionDecision" in json.dumps(a) for a in installed.fire(pre))
    subprocess.run(command, shell=True, check=True)  # what the Bash tool runs
    installed.fire(_tool(sid, installed.repo, "Bash", {"command": command}, {"stdout": ""}, tool_use_id="b1"))
    found = wait_for(lambda: rows(installed.agent, "select * from scsql.outcomes where kind = 'violation'"), 30)
    [v] = found
    [call] = rows(installed.agent, "select tool_call_id from scsql.tool_calls where tool_use_id = 'b1'")
    assert v["tool_call_id"] == call["tool_call_id"] and v["task_ref"] == f"task:{task}"
    assert OWNED in v["summary"] and "alice" in v["summary"] and v["signal"] == "file-ownership"
    told = wait_for(lambda: rows(alice, "select * from scsql.replay_messages(10)"), 30)
    assert any(m["type"] == "STATUS" and m["payload"]["violation"] == "file-ownership"
               and m["payload"]["paths"] == [OWNED] for m in told), told
    # A shell command that changes nothing owned is no violation.
    installed.fire(_event("PreToolUse", sid, installed.repo, tool_name="Bash", tool_use_id="b2",
                          tool_input={"command": "ls"}))
    installed.fire(_tool(sid, installed.repo, "Bash", {"command": "ls"}, {"stdout": ""}, tool_use_id="b2"))
    wait_for(lambda: rows(installed.agent, "select 1 from scsql.tool_calls where tool_use_id = 'b2'"), 30)
    assert len(rows(installed.agent, "select 1 from scsql.outcomes where kind = 'violation'")) == 1


def _transcript(path: Path, sid: str, text: str) -> None:
    lines = [{"type": "user", "uuid": f"u{sid}", "sessionId": sid, "timestamp": "2026-11-01T10:00:00Z",
              "message": {"role": "user", "content": text}},
             {"type": "assistant", "uuid": f"a{sid}", "parentUuid": f"u{sid}", "sessionId": sid,
              "timestamp": "2026-11-01T10:00:05Z",
              "message": {"role": "assistant", "content": [{"type": "text", "text": f"Noted: {text}"}]}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_hook_reads_only_its_own_sessions_transcript(installed, tmp_path):  # noqa: F811
    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    theirs = tmp_path / f"{other}.jsonl"
    _transcript(theirs, other, "the quartermaster password rotation plan")
    installed.fire(_event("SessionStart", mine, installed.repo, source="startup"))
    installed.fire(_event("SessionEnd", mine, installed.repo, reason="other", transcript_path=str(theirs)))
    own = tmp_path / f"{mine}.jsonl"
    _transcript(own, mine, "the lighthouse keeper schedule")
    installed.fire(_event("SessionEnd", mine, installed.repo, reason="other", transcript_path=str(own)))
    paths = wait_for(lambda: rows(installed.agent, "select path from scsql.kb_sources where path like 'claude/%%'"), 30)
    assert paths and all(mine in p["path"] for p in paths), paths
    hits = rows(installed.agent, "select content from scsql.kb_chunks")
    assert any("lighthouse" in h["content"] for h in hits) and not any("quartermaster" in h["content"] for h in hits)
