"""A recorded Claude Code session, as the events its hooks receive and the
transcript it leaves: SessionStart, five prompts, fifty tool calls (some
failing, some editing a file another agent's task owns), PreCompact and
SessionEnd. Synthetic and deterministic; no real user data."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROMPTS = [
    "Add retry with exponential backoff to the HTTP client in src/net/client.py",
    "The flaky test in tests/test_client.py fails on CI; find out why",
    "Rename fetch_all to fetch_pages everywhere",
    "Update the changelog for the retry work",
    "Run the whole test suite and fix what fails",
]


@dataclass
class Recorded:
    session_id: str
    cwd: Path
    transcript: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    owned_edits: list[str] = field(default_factory=list)   # tool_use_ids of edits of the owned file
    failures: list[str] = field(default_factory=list)      # tool_use_ids of failed calls


def _calls(cwd: Path, owned: Path) -> list[tuple[str, dict[str, Any], dict[str, Any] | None, str | None]]:
    """Fifty (tool, input, response, error) tuples spread over the prompts."""
    out = []
    for i in range(50):
        kind = i % 10
        if kind in (0, 1, 2):
            f = cwd / "src" / "net" / f"mod{i}.py"
            out.append(("Read", {"file_path": str(f)}, {"type": "text", "file": {"filePath": str(f), "content": f"# module {i}\n"}}, None))
        elif kind == 3:
            f = cwd / "src" / "net" / "client.py"
            out.append(("Edit", {"file_path": str(f), "old_string": f"retries = {i}", "new_string": f"retries = {i + 1}"},
                        {"filePath": str(f), "structuredPatch": []}, None))
        elif kind == 4:
            out.append(("Bash", {"command": f"pytest -q tests/test_client.py -k case{i}", "description": "run one test"},
                        None, f"Exit code 1\nFAILED tests/test_client.py::test_case{i} - AssertionError: timeout"))
        elif kind == 5:
            out.append(("Bash", {"command": "git status --short", "description": "status"},
                        {"stdout": " M src/net/client.py\n", "stderr": "", "interrupted": False}, None))
        elif kind == 6:
            out.append(("Grep", {"pattern": "fetch_all", "path": str(cwd)}, {"numFiles": 2, "filenames": ["a.py", "b.py"]}, None))
        elif kind == 7:
            out.append(("Write", {"file_path": str(owned), "content": f"owned content {i}\n"}, {"type": "create"}, None))
        elif kind == 8:
            out.append(("TodoWrite", {"todos": [{"content": "add retry", "status": "completed", "activeForm": "Adding retry"},
                                                 {"content": f"fix flaky test {i}", "status": "in_progress", "activeForm": "Fixing"}]},
                        {"oldTodos": [], "newTodos": []}, None))
        else:
            out.append(("Bash", {"command": "python -m build", "description": "build"},
                        {"stdout": "Successfully built\n", "stderr": "", "interrupted": False}, None))
    return out


def record(tmp: Path, owned: Path, model: str = "claude-sonnet-4-5") -> Recorded:
    cwd = tmp / "repo"
    sid = str(uuid.UUID(int=0x5C5A1))
    transcript = tmp / "transcript.jsonl"
    rec = Recorded(sid, cwd, transcript)
    base = {"session_id": sid, "transcript_path": str(transcript), "cwd": str(cwd), "permission_mode": "default"}
    t0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
    lines: list[dict[str, Any]] = []
    parent = None

    def line(kind: str, content: Any, at: dt.datetime) -> None:
        nonlocal parent
        u = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{len(lines)}"))
        lines.append({"type": kind, "uuid": u, "parentUuid": parent, "sessionId": sid, "timestamp": at.isoformat().replace("+00:00", "Z"),
                      "cwd": str(cwd), "gitBranch": "main", "message": {"role": kind, "content": content}})
        parent = u

    rec.events.append({**base, "hook_event_name": "SessionStart", "source": "startup", "model": model})
    calls = _calls(cwd, owned)
    per_prompt = len(calls) // len(PROMPTS)
    at = t0
    for p, prompt in enumerate(PROMPTS):
        at += dt.timedelta(minutes=1)
        rec.events.append({**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
        line("user", prompt, at)
        line("assistant", [{"type": "text", "text": f"I'll start with step {p + 1}. We decided to use exponential backoff because the server rate-limits bursts."}], at)
        for tool, tin, tout, err in calls[p * per_prompt:(p + 1) * per_prompt]:
            at += dt.timedelta(seconds=7)
            tid = f"toolu_{uuid.uuid5(uuid.NAMESPACE_URL, f'{sid}/{len(rec.events)}').hex[:24]}"
            pre = {**base, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tin, "tool_use_id": tid}
            rec.events.append(pre)
            line("assistant", [{"type": "tool_use", "id": tid, "name": tool, "input": tin}], at)
            if tool in ("Write", "Edit") and tin.get("file_path") == str(owned):
                rec.owned_edits.append(tid)
                continue  # denied: Claude Code runs no tool and no PostToolUse
            if err is None:
                rec.events.append({**base, "hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": tin,
                                   "tool_response": tout, "tool_use_id": tid, "duration_ms": 120})
                line("user", [{"type": "tool_result", "tool_use_id": tid, "content": json.dumps(tout)[:500], "is_error": False}], at)
            else:
                rec.failures.append(tid)
                rec.events.append({**base, "hook_event_name": "PostToolUseFailure", "tool_name": tool, "tool_input": tin,
                                   "error": err, "tool_use_id": tid, "duration_ms": 900})
                line("user", [{"type": "tool_result", "tool_use_id": tid, "content": err, "is_error": True}], at)
    rec.events.append({**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": ""})
    rec.events.append({**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return rec
