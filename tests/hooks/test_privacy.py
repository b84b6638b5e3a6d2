"""Text inside <private>...</private> is never stored anywhere, and Claude
Code's own wrappers never come back as memory: sent through the installed
hooks (a prompt, a tool call's input and output, a failure's error, the
session's transcript at SessionEnd), with the database reachable and with it
down (the spool), then looked for in every text column of the database, the
spool and the hook server's log."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg

from ..helpers import rows, wait_for
from .test_capture_integrity import _event, _stop_server, _tool, installed  # noqa: F401 - the fixture

SECRET = "quokka-7731-marmalade"  # a word found nowhere else


def _everywhere(db) -> list[str]:
    """Every text, varchar and jsonb value of scsql's tables that holds SECRET, as table.column."""
    found = []
    with psycopg.connect(db.admin) as conn:
        cols = conn.execute(
            "select c.relname, a.attname from pg_attribute a join pg_class c on c.oid = a.attrelid "
            "join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'scsql' and c.relkind = 'r' "
            "and not c.relispartition and a.attnum > 0 and not a.attisdropped "
            "and a.atttypid in ('text'::regtype, 'varchar'::regtype, 'jsonb'::regtype)").fetchall()
        for table, column in cols:
            hit = conn.execute(f'select count(*) from scsql."{table}" where "{column}"::text like %s',
                               (f"%{SECRET}%",)).fetchone()[0]
            if hit:
                found.append(f"{table}.{column}")
    return found


def _files_holding(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


def test_private_text_is_stored_nowhere(installed, tmp_path):  # noqa: F811
    sid = uuid.uuid4().hex
    repo = installed.repo
    private = f"<private>my token is {SECRET}</private>"
    installed.fire(_event("SessionStart", sid, repo, source="startup"))
    installed.fire(_event("UserPromptSubmit", sid, repo, prompt=f"deploy it {private} now"))
    installed.fire(_tool(sid, repo, "Bash", {"command": f"echo {private}"}, {"stdout": f"out {private}"}))
    installed.fire(_tool(sid, repo, "Bash", {"command": "false"}, f"failed: {private} <PRIVATE>also {SECRET}",
                         failed=True))
    # The same while the database is down: the hooks spool what they cannot write.
    _stop_server(installed.home, installed.agent.name)
    down = {**installed.env, "SCSQL_AGENT_DSN": "host=/nonexistent dbname=x user=nobody"}
    spooled_env = installed.env
    installed.env = down
    try:
        installed.fire(_tool(sid, repo, "Write", {"file_path": str(repo / "a.txt"), "content": private}))
    finally:
        installed.env = spooled_env
    assert not _files_holding(installed.home), _files_holding(installed.home)   # spool, logs, markers
    _stop_server(installed.home, installed.agent.name)
    transcript = tmp_path / f"{sid}.jsonl"
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": "2026-11-20T10:00:00Z",
         "message": {"role": "user", "content": f"remember the plan {private}"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": sid, "timestamp": "2026-11-20T10:00:02Z",
         "message": {"role": "assistant", "model": "claude-sonnet-4-5", "content": [
             {"type": "text", "text": f"Noted. <system-reminder>injected context {SECRET}</system-reminder> ok"},
             {"type": "tool_use", "id": "toolu_t1", "name": "Bash", "input": {"command": f"echo {private}"}}]}},
        {"type": "user", "uuid": "r1", "parentUuid": "a1", "sessionId": sid, "timestamp": "2026-11-20T10:00:03Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_t1",
                                                  "content": f"printed {private}"}]}},
    ]
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    installed.fire(_event("SessionEnd", sid, repo, reason="other", transcript_path=str(transcript)))
    wait_for(lambda: rows(installed.agent, "select 1 from scsql.kb_sources where path like %s",
                          f"claude/sessions/{sid}/%"), 60)
    wait_for(lambda: rows(installed.agent, "select 1 from scsql.tool_calls where tool = 'Write'"), 60)
    assert _everywhere(installed.db) == []
    assert not _files_holding(installed.home), _files_holding(installed.home)
    stored = rows(installed.agent, "select text from scsql.prompts")
    assert stored and "[private]" in stored[0]["text"]
    notes = " ".join(r["content"] for r in rows(installed.agent, "select content from scsql.kb_chunks"))
    assert "injected context" not in notes and "system-reminder" not in notes  # Claude Code's wrapper is gone
